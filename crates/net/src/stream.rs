//! What every stream socket shares, TCP's and Unix's: [`Conn`], the registered socket with
//! its write lock, holding the operations ([`TcpStream`](crate::TcpStream) and
//! [`UnixStream`](crate::UnixStream) wrap one each and forward to it through
//! `stream_methods!`); [`Stream`], the sealed trait through which the split halves, the
//! I/O trait implementations and the descriptor-based impls reach either kind.

use crate::io::{Dir, Io};
use crate::write_lock::WriteLock;
use gort_time::Instant;
use mio::event::Source;
use std::io::{self, IoSlice, Read, Write};
use std::net::Shutdown;
use std::os::fd::AsRawFd;
#[cfg(any(feature = "tokio-io", feature = "futures-io"))]
use std::task::{Context, Poll};

/// A connected stream socket of mio's (`TcpStream`, `UnixStream`): its transfers, shutdown
/// and addresses, for [`Conn`].
pub trait StreamSource: Source + AsRawFd + std::fmt::Debug + Send + Sync + 'static {
    /// Its kind's address (`std::net::SocketAddr`, `std::os::unix::net::SocketAddr`).
    type Addr;
    /// Whether a read shorter than asked found the receive queue empty, so that the next
    /// read may wait for an edge without trying its syscall (`Half::drained_at`). True for
    /// TCP (whose reads stop short with bytes queued only at an urgent mark, which the
    /// poller reports: `Half::set_urgent`). False for a Unix stream: its reads stop after
    /// bytes that carried ancillary data (descriptors passed with `SCM_RIGHTS`, another
    /// writer's credentials with `SO_PASSCRED`) with the next bytes queued and no edge to
    /// come for them, and a `read(2)` cannot tell such a stop (a `recvmsg` can, by
    /// `MSG_CTRUNC`, but cost N6 9-15% per round trip over `recvfrom`): a reader so skipped
    /// hung (`tests/abuse_compat.rs`).
    const SHORT_READ_EMPTIES: bool;
    /// One read.
    fn read_some(&self, buf: &mut [u8]) -> io::Result<usize>;
    /// One `write`.
    fn write_some(&self, buf: &[u8]) -> io::Result<usize>;
    /// One gather write (a `sendmsg` with `MSG_NOSIGNAL`: never raises `SIGPIPE`).
    fn write_slices(&self, bufs: &[IoSlice<'_>]) -> io::Result<usize>;
    /// `shutdown(2)`.
    fn shutdown(&self, how: Shutdown) -> io::Result<()>;
    /// The local address.
    fn local_addr(&self) -> io::Result<Self::Addr>;
    /// The peer's address.
    fn peer_addr(&self) -> io::Result<Self::Addr>;
    /// The pending error (`SO_ERROR`).
    fn take_error(&self) -> io::Result<Option<io::Error>>;
}

macro_rules! impl_stream_source {
    ($t:ty, $addr:ty, $short_read_empties:expr) => {
        impl StreamSource for $t {
            type Addr = $addr;
            const SHORT_READ_EMPTIES: bool = $short_read_empties;
            fn read_some(&self, buf: &mut [u8]) -> io::Result<usize> {
                (&mut &*self).read(buf)
            }
            fn write_some(&self, buf: &[u8]) -> io::Result<usize> {
                (&mut &*self).write(buf)
            }
            fn write_slices(&self, bufs: &[IoSlice<'_>]) -> io::Result<usize> {
                send_slices(self.as_raw_fd(), bufs)
            }
            fn shutdown(&self, how: Shutdown) -> io::Result<()> {
                <$t>::shutdown(self, how)
            }
            fn local_addr(&self) -> io::Result<$addr> {
                <$t>::local_addr(self)
            }
            fn peer_addr(&self) -> io::Result<$addr> {
                <$t>::peer_addr(self)
            }
            fn take_error(&self) -> io::Result<Option<io::Error>> {
                <$t>::take_error(self)
            }
        }
    };
}

/// The most slices one `sendmsg` takes (Linux's `UIO_MAXIOV`; more fail with `EMSGSIZE`).
const IOV_MAX: usize = 1024;

/// One gather write of `bufs` to the stream socket `fd`: `sendmsg` with `MSG_NOSIGNAL`, so a
/// peer that closed the connection gives `EPIPE` and never a `SIGPIPE` (which ends a process
/// that keeps its default action: a CLI restoring it for `| head`, a library in a C host), as
/// std's `write` (a `send` with that flag) and Go (which ignores the signal for sockets).
/// std's `write_vectored` is a `writev`, which cannot take the flag (`tests/sigpipe.rs`).
/// At most [`IOV_MAX`] slices go, as with std's.
fn send_slices(fd: std::os::fd::RawFd, bufs: &[IoSlice<'_>]) -> io::Result<usize> {
    // SAFETY: an all-zero `msghdr` is valid (no address, no control data).
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    // `IoSlice` is ABI-compatible with `iovec` on Unix (std guarantees it); `sendmsg` only
    // reads the slices.
    msg.msg_iov = bufs.as_ptr().cast_mut().cast::<libc::iovec>();
    msg.msg_iovlen = bufs.len().min(IOV_MAX) as _;
    // SAFETY: `msg` points at `msg_iovlen` valid `iovec`s borrowed for the call; `fd` is the
    // caller's open socket.
    match unsafe { libc::sendmsg(fd, &msg, libc::MSG_NOSIGNAL) } {
        -1 => Err(io::Error::last_os_error()),
        n => Ok(n as usize),
    }
}

impl_stream_source!(mio::net::TcpStream, std::net::SocketAddr, true);
impl_stream_source!(mio::net::UnixStream, std::os::unix::net::SocketAddr, false);

/// A connected stream socket on the netpoller with Go's write lock: the operations of
/// [`TcpStream`](crate::TcpStream) and [`UnixStream`](crate::UnixStream).
#[derive(Debug)]
pub struct Conn<S: StreamSource> {
    io: Io<S>,
    /// Go's `fd.writeLock`: one `write`/`write_all` at a time.
    write_lock: WriteLock,
}

impl<S: StreamSource> Conn<S> {
    /// Registers a connected (or connecting) non-blocking socket.
    pub(crate) fn new(source: S) -> io::Result<Conn<S>> {
        Ok(Conn::from_io(Io::new(source)?))
    }

    pub(crate) fn from_io(io: Io<S>) -> Conn<S> {
        Conn {
            io,
            write_lock: WriteLock::default(),
        }
    }

    /// The registered socket (for tokio's reads into uninitialized room).
    #[cfg(feature = "tokio-io")]
    pub(crate) fn io(&self) -> &Io<S> {
        &self.io
    }

    /// The socket.
    pub(crate) fn source(&self) -> &S {
        self.io.source()
    }

    pub(crate) async fn read(&self, buf: &mut [u8]) -> io::Result<usize> {
        let len = buf.len();
        self.io
            .transfer(Dir::Read, len, S::SHORT_READ_EMPTIES, |s| s.read_some(buf))
            .await
    }

    pub(crate) async fn write(&self, buf: &[u8]) -> io::Result<usize> {
        let _turn = self.write_lock.lock().await;
        self.write_unlocked(buf).await
    }

    pub(crate) async fn write_all(&self, mut buf: &[u8]) -> io::Result<()> {
        let _turn = self.write_lock.lock().await;
        while !buf.is_empty() {
            match self.write_unlocked(buf).await? {
                0 => return Err(io::ErrorKind::WriteZero.into()),
                n => buf = &buf[n..],
            }
        }
        Ok(())
    }

    /// One write, under the write lock the caller holds.
    async fn write_unlocked(&self, buf: &[u8]) -> io::Result<usize> {
        let len = buf.len();
        self.io
            .transfer(Dir::Write, len, true, |s| s.write_some(buf))
            .await
    }

    pub(crate) async fn read_exact(&self, mut buf: &mut [u8]) -> io::Result<()> {
        while !buf.is_empty() {
            match self.read(buf).await? {
                0 => return Err(io::ErrorKind::UnexpectedEof.into()),
                n => buf = &mut buf[n..],
            }
        }
        Ok(())
    }

    pub(crate) fn shutdown(&self, how: Shutdown) -> io::Result<()> {
        self.source().shutdown(how)
    }

    pub(crate) fn set_read_deadline(&self, deadline: Option<Instant>) -> io::Result<()> {
        self.io.set_deadline(Dir::Read, deadline)
    }

    pub(crate) fn set_write_deadline(&self, deadline: Option<Instant>) -> io::Result<()> {
        self.io.set_deadline(Dir::Write, deadline)
    }

    pub(crate) fn local_addr(&self) -> io::Result<S::Addr> {
        self.source().local_addr()
    }

    pub(crate) fn peer_addr(&self) -> io::Result<S::Addr> {
        self.source().peer_addr()
    }

    /// futures-io's read (tokio's reads into uninitialized room: `compat.rs`).
    #[cfg(feature = "futures-io")]
    pub(crate) fn poll_read_some(
        &self,
        cx: &mut Context<'_>,
        buf: &mut [u8],
    ) -> Poll<io::Result<usize>> {
        let len = buf.len();
        self.io
            .poll_transfer(Dir::Read, cx, len, S::SHORT_READ_EMPTIES, &mut |s| {
                s.read_some(buf)
            })
    }

    /// One write without the write lock (the I/O traits take none, as Tokio's).
    #[cfg(any(feature = "tokio-io", feature = "futures-io"))]
    pub(crate) fn poll_write_some(
        &self,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        self.io
            .poll_transfer(Dir::Write, cx, buf.len(), true, &mut |s| s.write_some(buf))
    }

    /// One `writev` of `bufs`, waiting for room as [`Conn::write`] does.
    #[cfg(any(feature = "tokio-io", feature = "futures-io"))]
    pub(crate) fn poll_write_slices(
        &self,
        cx: &mut Context<'_>,
        bufs: &[IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        // What one `sendmsg` is asked for: the slices past `IOV_MAX` are not, so a write of
        // more slices than that, shorter than all of them, says nothing of the send buffer.
        // Counted in `len`, they made it look like a short write into a full buffer, and the
        // next write waited for a write edge that TCP never sends while its buffer has room
        // (tests/abuse_unix_io.rs).
        let bufs = &bufs[..bufs.len().min(IOV_MAX)];
        let len = bufs.iter().map(|b| b.len()).sum();
        self.io
            .poll_transfer(Dir::Write, cx, len, true, &mut |s| s.write_slices(bufs))
    }
}

/// Whether a non-blocking connect has completed: its error if it failed, `WouldBlock` while
/// it is in progress (mio's recipe).
pub(crate) fn connected<S: StreamSource>(s: &S) -> io::Result<()> {
    if let Some(e) = s.take_error()? {
        return Err(e);
    }
    match s.peer_addr() {
        Ok(_) => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::NotConnected => Err(io::ErrorKind::WouldBlock.into()),
        Err(e) => Err(e),
    }
}

mod sealed {
    pub trait Sealed {}
    impl Sealed for crate::TcpStream {}
    impl Sealed for crate::UnixStream {}
}

/// A stream socket, [`TcpStream`](crate::TcpStream) or [`UnixStream`](crate::UnixStream):
/// what the split halves ([`OwnedReadHalf`](crate::OwnedReadHalf),
/// [`ReadHalf`](crate::ReadHalf), ...) are generic over. Sealed: implemented by those two
/// only.
///
/// # Examples
///
/// ```
/// use gort::net::{OwnedReadHalf, Stream, UnixStream};
///
/// async fn first_byte<S: Stream>(reader: OwnedReadHalf<S>) -> std::io::Result<u8> {
///     let mut b = [0];
///     reader.read_exact(&mut b).await?;
///     Ok(b[0])
/// }
///
/// gort::Runtime::new().unwrap().block_on(async {
///     let (a, b) = UnixStream::pair().unwrap();
///     a.write_all(b"x").await.unwrap();
///     let (reader, _writer) = b.into_split();
///     assert_eq!(first_byte(reader).await.unwrap(), b'x');
/// });
/// ```
pub trait Stream: sealed::Sealed + std::fmt::Debug + Send + Sync + 'static {
    /// The stream's kind of address.
    type Addr;
    /// The socket kind underneath (not for use outside gort).
    #[doc(hidden)]
    type Source: StreamSource<Addr = Self::Addr>;
    /// The connection (not for use outside gort).
    #[doc(hidden)]
    fn conn(&self) -> &Conn<Self::Source>;
}

/// The public methods a stream type forwards to its `conn: Conn<_>` field, with the docs
/// both share; each type's own (`connect`, `write_all` with its example, `from_std`, the
/// splits) are written beside it.
macro_rules! stream_methods {
    ($addr:ty) => {
        /// Reads into `buf`, waiting for data; `Ok(0)` at end of stream, or at once for an
        /// empty `buf` (as Go's `Read`; the kernel would wait for data). Cancel-safe: a read
        /// dropped while it waits takes its waker back out of the socket.
        ///
        /// # Errors
        ///
        /// The OS's (a reset peer), or `TimedOut` past the read deadline.
        pub async fn read(&self, buf: &mut [u8]) -> io::Result<usize> {
            self.conn.read(buf).await
        }

        /// Writes some of `buf`, waiting for room. Cancel-safe. Waits for a `write_all` of
        /// another task to finish first, so as not to land inside it (see `write_all`).
        ///
        /// # Errors
        ///
        /// The OS's (a reset peer), or `TimedOut` past the write deadline.
        pub async fn write(&self, buf: &[u8]) -> io::Result<usize> {
            self.conn.write(buf).await
        }

        /// Fills `buf`. Not cancel-safe, unlike `read`: dropped midway (a `select!` arm that
        /// lost, a `gort::time::timeout`), the bytes it already read are consumed and gone.
        ///
        /// # Errors
        ///
        /// As `read`; `UnexpectedEof` if the stream ends first (as std's). An error midway (a
        /// read deadline that passed, a reset) loses the bytes read so far, and how many is
        /// not returned, as with std's and Tokio's `read_exact`. Where that count matters
        /// (Go's `n, err := io.ReadFull(conn, buf)`), loop on `read`, which returns each
        /// piece's.
        pub async fn read_exact(&self, buf: &mut [u8]) -> io::Result<()> {
            self.conn.read_exact(buf).await
        }

        /// Shuts down the read, write or both halves of the connection (`Shutdown::Write`
        /// is Go's `CloseWrite`: the peer reads end of stream).
        ///
        /// # Errors
        ///
        /// The OS's.
        pub fn shutdown(&self, how: std::net::Shutdown) -> io::Result<()> {
            self.conn.shutdown(how)
        }

        /// Sets both the read and the write deadline (Go's `SetDeadline`).
        ///
        /// # Errors
        ///
        /// On a thread of no gort runtime, for a deadline still to come (its timer needs one:
        /// enter the runtime with `Handle::enter`); the deadline is then left as it was.
        /// Clearing it or setting a passed one works from any thread.
        pub fn set_deadline(&self, deadline: Option<Instant>) -> io::Result<()> {
            self.conn.set_read_deadline(deadline)?;
            self.conn.set_write_deadline(deadline)
        }

        /// Sets the read deadline (Go's `SetReadDeadline`); it applies to a read already
        /// blocked too. `None` clears it.
        ///
        /// # Errors
        ///
        /// On a thread of no gort runtime, for a deadline still to come (its timer needs one:
        /// enter the runtime with `Handle::enter`); the deadline is then left as it was.
        /// Clearing it or setting a passed one works from any thread.
        pub fn set_read_deadline(&self, deadline: Option<Instant>) -> io::Result<()> {
            self.conn.set_read_deadline(deadline)
        }

        /// Sets the write deadline (Go's `SetWriteDeadline`). `None` clears it.
        ///
        /// # Errors
        ///
        /// On a thread of no gort runtime, for a deadline still to come (its timer needs one:
        /// enter the runtime with `Handle::enter`); the deadline is then left as it was.
        /// Clearing it or setting a passed one works from any thread.
        pub fn set_write_deadline(&self, deadline: Option<Instant>) -> io::Result<()> {
            self.conn.set_write_deadline(deadline)
        }

        /// The local address.
        ///
        /// # Errors
        ///
        /// The OS's.
        pub fn local_addr(&self) -> io::Result<$addr> {
            self.conn.local_addr()
        }

        /// The peer's address.
        ///
        /// # Errors
        ///
        /// The OS's (`NotConnected`).
        pub fn peer_addr(&self) -> io::Result<$addr> {
            self.conn.peer_addr()
        }
    };
}

/// `Stream` and `AsRawFd`/`AsFd` for a stream type with a `conn` field.
macro_rules! impl_stream {
    ($t:ty, $source:ty, $addr:ty) => {
        impl $crate::stream::Stream for $t {
            type Addr = $addr;
            type Source = $source;
            fn conn(&self) -> &$crate::stream::Conn<$source> {
                &self.conn
            }
        }
    };
}
