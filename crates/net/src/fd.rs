//! The sockets' file descriptors (Go's `SyscallConn`, tokio's `AsRawFd`/`AsFd`): for socket
//! options gort has no method for (keep-alive, buffer sizes, `SO_REUSEPORT` on a listener
//! built with `from_std`), set through `libc` or `socket2::SockRef`.
//!
//! The descriptor stays registered with the netpoller: changing its blocking mode or closing
//! it behind the socket's back breaks the socket, as it would in Go. The socket owns the
//! descriptor (as std's do); closed through `libc::close`, the kernel drops it from the
//! poller without a word, so an operation blocked on it waits until a deadline or the
//! socket's drop, and that drop closes the number again, by then maybe another socket's
//! (which it breaks; debug builds of std abort on the double close). Other sockets are not
//! disturbed. To end a blocked operation, set a passed deadline or shut the socket down.

use crate::io::{Dir, Io};
use crate::{TcpListener, TcpStream, UdpSocket, UnixDatagram, UnixListener, UnixStream};
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, RawFd};

macro_rules! impl_fd {
    ($t:ty) => {
        impl AsRawFd for $t {
            fn as_raw_fd(&self) -> RawFd {
                self.source().as_raw_fd()
            }
        }

        impl AsFd for $t {
            fn as_fd(&self) -> BorrowedFd<'_> {
                self.source().as_fd()
            }
        }
    };
}

impl_fd!(TcpListener);
impl_fd!(TcpStream);
impl_fd!(UdpSocket);
impl_fd!(UnixListener);
impl_fd!(UnixStream);
impl_fd!(UnixDatagram);

/// Whether `io`'s socket was shut down for reading, for an operation whose syscall said
/// `WouldBlock`: a Unix listener, a Unix datagram socket and a UDP socket say `EAGAIN` for
/// ever once shut down (a blocking call would return), after one hang-up edge, so waiting
/// would never end.
/// Only once the poller saw a hang-up (`Io::is_hung_up`, stored before its edge) does it
/// ask the kernel, with a `poll` that does not wait: `POLLRDHUP` is the shutdown; a hang-up
/// for an error is not, and leaves the operation waiting.
pub(crate) fn read_shut_down<S: mio::event::Source + std::os::fd::AsRawFd>(io: &Io<S>) -> bool {
    if !io.is_hung_up(Dir::Read) {
        return false;
    }
    let mut fd = libc::pollfd {
        fd: io.source().as_raw_fd(),
        events: libc::POLLRDHUP,
        revents: 0,
    };
    // SAFETY: `fd` is one valid `pollfd` for the call; its descriptor is the open socket
    // `io` owns; a timeout of 0 never blocks.
    let n = unsafe { libc::poll(&mut fd, 1, 0) };
    n == 1 && fd.revents & libc::POLLRDHUP != 0
}

/// `res`, or `shut()` in its place when `res` is a `WouldBlock` of a socket shut down for
/// reading ([`read_shut_down`]): what a blocking receive would have returned.
pub(crate) fn or_read_shut_down<T, S: mio::event::Source + AsRawFd>(
    res: io::Result<T>,
    io: &Io<S>,
    shut: impl FnOnce() -> io::Result<T>,
) -> io::Result<T> {
    match res {
        Err(e) if e.kind() == io::ErrorKind::WouldBlock && read_shut_down(io) => shut(),
        res => res,
    }
}
