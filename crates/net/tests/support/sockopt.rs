//! Integer socket options read and set through a socket's descriptor, for the tests that
//! check what gort sets (`keepalive.rs`) and what a program sets through `AsRawFd`
//! (`raw_fd.rs`).

use std::os::fd::RawFd;

/// The socket's integer option `name` at `level`, read with `getsockopt`.
pub fn get_opt(fd: RawFd, level: libc::c_int, name: libc::c_int) -> libc::c_int {
    let mut value: libc::c_int = -1;
    let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: `value` is valid for writes of `len` bytes during the call, and `len` says so.
    let rc = unsafe {
        libc::getsockopt(
            fd,
            level,
            name,
            (&mut value as *mut libc::c_int).cast(),
            &mut len,
        )
    };
    assert_eq!(rc, 0, "getsockopt: {}", std::io::Error::last_os_error());
    value
}

/// Sets the socket's integer option `name` at `level` with `setsockopt`.
#[allow(dead_code)] // not every test binary sets options
pub fn set_opt(fd: RawFd, level: libc::c_int, name: libc::c_int, value: libc::c_int) {
    let len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: `value` is valid for reads of `len` bytes for the call.
    let rc =
        unsafe { libc::setsockopt(fd, level, name, (&value as *const libc::c_int).cast(), len) };
    assert_eq!(rc, 0, "setsockopt: {}", std::io::Error::last_os_error());
}
