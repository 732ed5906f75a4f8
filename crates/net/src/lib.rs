//! `gort::net`: TCP, UDP and Unix domain sockets on gort's netpoller, with Go's `net.Conn`
//! deadlines.
//!
//! Every socket is registered once, edge-triggered, with the `mio::Poll` that an idle M
//! blocks in; a task whose read would block leaves its waker in the socket's poll
//! descriptor (Go's `pollDesc`), and the M that polls wakes it when the socket turns ready.
//! Deadlines are timers in the per-P heaps, as in Go: setting one starts, moves or stops the
//! socket's timer (never an allocation after the first), and its firing wakes the blocked
//! task, which fails with [`std::io::ErrorKind::TimedOut`]. `design/NETPOLL.md` explains it.
//!
//! | Go                                   | gort                                           |
//! |--------------------------------------|------------------------------------------------|
//! | `net.Listen("tcp", a)`, `Accept`     | [`TcpListener::bind`], [`TcpListener::accept`] |
//! | `net.Dial("tcp", a)`, `Read`, `Write`| [`TcpStream::connect`], [`TcpStream::read`], [`TcpStream::write`] |
//! | `net.DialTimeout`, `Dialer.DialContext` | `gort::time::timeout(d, TcpStream::connect(a))`, or `select!` on it and a context's `done()` (a dial dropped midway closes its socket) |
//! | `SetDeadline`, `SetReadDeadline`     | [`TcpStream::set_deadline`], [`TcpStream::set_read_deadline`] |
//! | `net.ListenUDP`, `ReadFrom`, `WriteTo` | [`UdpSocket::bind`], [`UdpSocket::recv_from`], [`UdpSocket::send_to`] |
//! | `net.Listen("unix", path)`, `net.Dial("unix", path)` | [`UnixListener::bind`], [`UnixStream::connect`] (and [`UnixStream::pair`]: `syscall.Socketpair`); the same methods and deadlines as TCP's |
//! | `net.ListenUnixgram`, `DialUnix("unixgram", ..)` | [`UnixDatagram::bind`], [`UnixDatagram::unbound`] + [`UnixDatagram::connect`], [`UnixDatagram::send_to`], [`UnixDatagram::recv_from`] |
//! | `net.Listen("unix", "@name")` (Linux's abstract namespace) | [`UnixListener::bind_addr`], [`UnixStream::connect_addr`], [`UnixDatagram::bind_addr`], [`UnixDatagram::connect_addr`], [`UnixDatagram::send_to_addr`] with `SocketAddrExt::from_abstract_name` |
//! | `UnixListener.SetUnlinkOnClose` | none: a dropped listener leaves its path, as std's (remove it with `std::fs::remove_file`; [`UnixListener`] says why) |
//! | `ln.Close()`, `conn.Close()` from another goroutine, to end a blocked `Accept` or `Read` | a socket closes when its last owner drops it, so one a blocked task holds (in an `Arc`) stays open; end the wait instead: [`TcpListener::set_deadline`] with `Some(Instant::now())` fails a blocked accept with `TimedOut` (where Go's fails with `net.ErrClosed`), [`TcpStream::shutdown`] (`Shutdown::Both`) ends a blocked read with `Ok(0)` and later writes with `BrokenPipe`; or race the call against a context's `done()` in `select!` (dropping it) |
//! | `CloseWrite`                         | [`TcpStream::shutdown`] (`Shutdown::Write`), [`OwnedWriteHalf::close_write`], [`WriteHalf::close_write`] |
//! | `SetKeepAlive`, `SetKeepAlivePeriod` | [`TcpStream::set_keepalive`] (on at 15 s by default, as Go's) |
//! | `os.ErrDeadlineExceeded`             | `io::ErrorKind::TimedOut`                      |
//! | `io.Copy(dst, src)`                  | a read/write loop, or (features below) `tokio::io::copy`, `futures::io::copy` |
//!
//! A socket belongs to the runtime it was made in, whose poller watches it. Tasks of another
//! runtime may use it while that one lives (its readiness comes from its home poller, a
//! deadline runs on the caller's timers). Once its runtime is dropped, nothing polls it: its
//! operations fail at once with [`std::io::ErrorKind::NotConnected`] ("use of closed network
//! connection"), as one blocked at the drop does, and its fd stays open until the socket is
//! dropped (`tests/abuse_fds.rs`).
//!
//! An echo server that drops clients idle for 5 seconds (Go's idiom: a read deadline set
//! before every read):
//!
//! ```
//! use gort::net::{TcpListener, TcpStream};
//! use gort::time::Instant;
//! use std::time::Duration;
//!
//! async fn serve(conn: TcpStream) -> std::io::Result<()> {
//!     let mut buf = [0; 4096];
//!     loop {
//!         conn.set_read_deadline(Some(Instant::now() + Duration::from_secs(5)))?;
//!         match conn.read(&mut buf).await? {
//!             0 => return Ok(()),
//!             n => conn.write_all(&buf[..n]).await?,
//!         }
//!     }
//! }
//!
//! gort::Runtime::new().unwrap().block_on(async {
//!     let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
//!     let addr = listener.local_addr().unwrap();
//!     gort::spawn(async move {
//!         loop {
//!             let (conn, _) = listener.accept().await.unwrap();
//!             gort::spawn(serve(conn));
//!         }
//!     });
//!     let client = TcpStream::connect(addr).await.unwrap();
//!     client.write_all(b"ping").await.unwrap();
//!     let mut reply = [0; 4];
//!     client.read_exact(&mut reply).await.unwrap();
//!     assert_eq!(&reply, b"ping");
//! });
//! ```
//!
//! As in Go, every connection gort dials or accepts has `TCP_NODELAY` set and TCP keep-alive
//! on, probing an idle peer after 15 s ([`TcpStream::set_keepalive`] changes or stops it).
//! Each socket implements `AsRawFd` and `AsFd` (Go's `SyscallConn`), for the socket options
//! it has no method for: through `libc` or `socket2::SockRef::from(&stream)`:
//!
//! ```
//! use gort::net::{TcpListener, TcpStream};
//! use std::os::fd::AsRawFd;
//!
//! /// Sends a RST instead of a FIN when the connection is dropped (`SO_LINGER` of 0 s).
//! fn reset_on_close(conn: &TcpStream) -> std::io::Result<()> {
//!     let linger = libc::linger { l_onoff: 1, l_linger: 0 };
//!     let len = std::mem::size_of::<libc::linger>() as libc::socklen_t;
//!     let opt = (&linger as *const libc::linger).cast();
//!     // SAFETY: `linger` is valid for reads of `len` bytes for the call.
//!     let rc = unsafe {
//!         libc::setsockopt(conn.as_raw_fd(), libc::SOL_SOCKET, libc::SO_LINGER, opt, len)
//!     };
//!     if rc == 0 { Ok(()) } else { Err(std::io::Error::last_os_error()) }
//! }
//!
//! gort::Runtime::new().unwrap().block_on(async {
//!     let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
//!     let conn = TcpStream::connect(listener.local_addr().unwrap()).await.unwrap();
//!     reset_on_close(&conn).unwrap();
//! });
//! ```
//!
//! Cargo features `tokio-io` and `futures-io` implement tokio's and futures-io's
//! `AsyncRead`/`AsyncWrite` for [`TcpStream`] and `&TcpStream` ([`UnixStream`] and
//! `&UnixStream` too), and `AsyncRead` for
//! [`OwnedReadHalf`] and `AsyncWrite` for [`OwnedWriteHalf`] ([`TcpStream::into_split`]), for
//! a codec's reader and writer in different tasks; [`OwnedReadHalf::reunite`] puts the stream
//! back together. The borrowed halves of [`TcpStream::split`], [`ReadHalf`] and
//! [`WriteHalf`], implement them too. The halves are generic over the [`Stream`] they split,
//! `TcpStream` by default: `OwnedReadHalf<UnixStream>` is a Unix stream's.
//!
//! On a stream itself, the inherent `shutdown(how)` (std's signature) hides tokio's
//! `AsyncWriteExt::shutdown()`: tokio code's `stream.shutdown().await` does not compile here;
//! write `AsyncWriteExt::shutdown(&mut stream).await`, or `stream.shutdown(Shutdown::Write)`
//! (the same half-close, done at once). They differ on a connection the peer has reset: the
//! tokio adapter's `shutdown` and the futures-io adapter's `close` succeed, as Tokio's
//! `shutdown` does (`NotConnected` is no error there), where `shutdown(Shutdown::Write)`
//! reports `NotConnected`, as Go's `CloseWrite` does.

#![warn(missing_docs)]

#[cfg(any(feature = "tokio-io", feature = "futures-io"))]
mod compat;
#[doc(hidden)]
pub mod desc;
mod fd;
#[macro_use]
mod halves;
#[macro_use]
mod io;
mod keepalive;
mod resolve;
#[doc(hidden)]
pub mod signal;
mod split;
mod split_ref;
#[doc(hidden)]
#[macro_use]
pub mod stream;
mod tcp;
mod udp;
mod unix;
mod unix_datagram;
mod wakers;
#[doc(hidden)]
pub mod write_lock;

pub use split::{OwnedReadHalf, OwnedWriteHalf, ReuniteError};
pub use split_ref::{ReadHalf, WriteHalf};
pub use stream::Stream;
pub use tcp::{TcpListener, TcpStream};
pub use udp::UdpSocket;
pub use unix::{UnixListener, UnixStream};
pub use unix_datagram::UnixDatagram;

/// Unwind safety, as Tokio's sockets have (Tokio's `unwindsafe.rs`,
/// `tests/tokio_async_send_sync.rs`): a panic never leaves a socket half-updated. Its state
/// is its poll descriptor's atomics and locks, under which no user code runs (wakers are
/// woken after the lock is released), so a socket seen after a caught panic is consistent.
macro_rules! unwind_safe {
    ($($t:ty),*) => {
        $(
            impl std::panic::UnwindSafe for $t {}
            impl std::panic::RefUnwindSafe for $t {}
        )*
    };
}

unwind_safe!(
    TcpListener,
    TcpStream,
    UdpSocket,
    UnixListener,
    UnixStream,
    UnixDatagram
);
