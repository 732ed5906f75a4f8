//! TCP keep-alive, on by default as in Go since 1.13: every connection gort dials or accepts
//! probes an idle peer after 15 s, and again every 15 s (Go's `net.Dialer.KeepAlive` and
//! `ListenConfig.KeepAlive` defaults, `SetKeepAlivePeriod`'s idle time and interval).

use crate::TcpStream;
use std::io;
use std::os::fd::{AsRawFd, RawFd};
use std::time::Duration;

/// The keep-alive idle time and interval of a connection gort dials or accepts (Go's
/// `defaultTCPKeepAliveIdle` and `defaultTCPKeepAliveInterval`).
pub(crate) const DEFAULT_KEEPALIVE: Duration = Duration::from_secs(15);

impl TcpStream {
    /// Turns TCP keep-alive off (`None`) or on with `period` as both the idle time before
    /// the first probe and the interval between probes (`Some`; Go's `SetKeepAlive` and
    /// `SetKeepAlivePeriod`). Every connection that [`connect`](TcpStream::connect) dials or
    /// [`accept`](crate::TcpListener::accept) accepts starts with it on at 15 s, as in Go; a
    /// stream from [`from_std`](TcpStream::from_std) keeps the socket's own setting. The
    /// kernel counts in whole seconds: `period` is rounded up, to 1 s at least.
    ///
    /// # Errors
    ///
    /// The OS's (`InvalidInput` for a period above the kernel's bound, 32767 s on Linux).
    ///
    /// # Examples
    ///
    /// ```
    /// use gort::net::{TcpListener, TcpStream};
    /// use std::time::Duration;
    ///
    /// gort::Runtime::new().unwrap().block_on(async {
    ///     let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    ///     let conn = TcpStream::connect(listener.local_addr().unwrap()).await.unwrap();
    ///     assert_eq!(conn.keepalive().unwrap(), Some(Duration::from_secs(15))); // Go's default
    ///     conn.set_keepalive(Some(Duration::from_secs(60))).unwrap();
    ///     assert_eq!(conn.keepalive().unwrap(), Some(Duration::from_secs(60)));
    ///     conn.set_keepalive(None).unwrap();
    ///     assert_eq!(conn.keepalive().unwrap(), None);
    /// });
    /// ```
    pub fn set_keepalive(&self, period: Option<Duration>) -> io::Result<()> {
        set_keepalive(self.as_raw_fd(), period)
    }

    /// Whether TCP keep-alive is on, and if so its idle time before the first probe (what
    /// [`set_keepalive`](TcpStream::set_keepalive) sets, together with the interval).
    ///
    /// # Errors
    ///
    /// The OS's.
    ///
    /// # Examples
    ///
    /// ```
    /// use gort::net::{TcpListener, TcpStream};
    /// use std::time::Duration;
    ///
    /// gort::Runtime::new().unwrap().block_on(async {
    ///     let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    ///     let _client = TcpStream::connect(listener.local_addr().unwrap()).await.unwrap();
    ///     let (conn, _) = listener.accept().await.unwrap();
    ///     assert_eq!(conn.keepalive().unwrap(), Some(Duration::from_secs(15)));
    /// });
    /// ```
    pub fn keepalive(&self) -> io::Result<Option<Duration>> {
        let fd = self.as_raw_fd();
        if get_int(fd, libc::SOL_SOCKET, libc::SO_KEEPALIVE)? == 0 {
            return Ok(None);
        }
        let idle = get_int(fd, libc::IPPROTO_TCP, libc::TCP_KEEPIDLE)?;
        Ok(Some(Duration::from_secs(idle.max(0) as u64)))
    }
}

/// Sets keep-alive on `fd` as [`TcpStream::set_keepalive`] documents: the period first, then
/// `SO_KEEPALIVE`, so that a period the kernel refuses leaves the setting as it was.
pub(crate) fn set_keepalive(fd: RawFd, period: Option<Duration>) -> io::Result<()> {
    let Some(period) = period else {
        return set_int(fd, libc::SOL_SOCKET, libc::SO_KEEPALIVE, 0);
    };
    let secs = whole_seconds_up(period);
    set_int(fd, libc::IPPROTO_TCP, libc::TCP_KEEPIDLE, secs)?;
    set_int(fd, libc::IPPROTO_TCP, libc::TCP_KEEPINTVL, secs)?;
    set_int(fd, libc::SOL_SOCKET, libc::SO_KEEPALIVE, 1)
}

/// `d` in whole seconds, rounded up (Go's `roundDurationUp`), at least 1, saturating.
fn whole_seconds_up(d: Duration) -> libc::c_int {
    let secs = d.as_secs().saturating_add(u64::from(d.subsec_nanos() > 0));
    libc::c_int::try_from(secs.max(1)).unwrap_or(libc::c_int::MAX)
}

pub(crate) fn set_int(
    fd: RawFd,
    level: libc::c_int,
    name: libc::c_int,
    value: libc::c_int,
) -> io::Result<()> {
    let len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    let ptr = (&value as *const libc::c_int).cast();
    // SAFETY: `ptr` points to `value`, valid for reads of `len` bytes during the call; `fd`
    // is borrowed from a socket that the caller keeps open.
    if unsafe { libc::setsockopt(fd, level, name, ptr, len) } == -1 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

fn get_int(fd: RawFd, level: libc::c_int, name: libc::c_int) -> io::Result<libc::c_int> {
    let mut value: libc::c_int = 0;
    let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    let ptr = (&mut value as *mut libc::c_int).cast();
    // SAFETY: `ptr` points to `value` and `len` holds its size: the kernel writes at most
    // `len` bytes there and updates `len`; `fd` is borrowed from a socket the caller keeps open.
    if unsafe { libc::getsockopt(fd, level, name, ptr, &mut len) } == -1 {
        return Err(io::Error::last_os_error());
    }
    Ok(value)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn periods_round_up_to_whole_seconds() {
        assert_eq!(whole_seconds_up(Duration::ZERO), 1);
        assert_eq!(whole_seconds_up(Duration::from_millis(1)), 1);
        assert_eq!(whole_seconds_up(Duration::from_secs(15)), 15);
        assert_eq!(whole_seconds_up(Duration::from_millis(15_001)), 16);
        assert_eq!(whole_seconds_up(Duration::MAX), libc::c_int::MAX);
    }
}
