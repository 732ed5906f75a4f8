//! Loopback TCP helpers shared by the probe files: a connected pair, and a socket set to
//! reset its connection when closed.

use gort::net::{TcpListener, TcpStream};
use std::os::fd::AsRawFd;

/// A connected loopback pair: the dialed stream, then the accepted one.
pub async fn tcp_pair() -> (TcpStream, TcpStream) {
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let c = TcpStream::connect(l.local_addr().unwrap()).await.unwrap();
    let (s, _) = l.accept().await.unwrap();
    (c, s)
}

/// Sets `SO_LINGER` to 0 s, so that closing the socket sends a reset instead of a FIN (Go's
/// `SetLinger(0)`).
pub fn linger_zero(socket: &impl AsRawFd) {
    let linger = libc::linger {
        l_onoff: 1,
        l_linger: 0,
    };
    let len = std::mem::size_of::<libc::linger>() as libc::socklen_t;
    let opt = (&linger as *const libc::linger).cast();
    // SAFETY: `linger` is valid for reads of `len` bytes for the call; the fd is open.
    let rc = unsafe {
        libc::setsockopt(
            socket.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_LINGER,
            opt,
            len,
        )
    };
    assert_eq!(rc, 0, "setsockopt: {}", std::io::Error::last_os_error());
}
