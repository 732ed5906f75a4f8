//! Unix domain stream sockets: Go's `UnixListener` and `UnixConn` (network `"unix"`) on the
//! netpoller, the same machinery as TCP's ([`Conn`], `Io`).

use crate::fd::read_shut_down;
use crate::io::{Backoff, Dir, Io};
use crate::stream::{connected, Conn};
use gort_time::Instant;
use std::io;
use std::os::unix::net::SocketAddr;
use std::path::Path;

/// A Unix domain socket server, listening for connections (Go's `net.UnixListener`, from
/// `net.Listen("unix", path)`).
///
/// Dropping it closes the socket but leaves its path in the file system (a name in the
/// abstract namespace, [`bind_addr`](Self::bind_addr), goes with the socket), as std's and
/// Tokio's listeners do (Go's removes it, unless `SetUnlinkOnClose(false)`): the path is a
/// name anyone may have replaced by then (another instance of the server, bound after a
/// restart), so removing it is for the program that knows it still owns it. A server
/// removes a stale path before it binds and, if it wants, its own after dropping the
/// listener: `std::fs::remove_file(path)`. Binding fails with `AddrInUse` while the path
/// exists.
///
/// Go stops an accept loop by closing its listener; here set a deadline in the past
/// ([`set_deadline`](Self::set_deadline)): the pending accept fails with `TimedOut`.
///
/// # Examples
///
/// ```
/// use gort::net::{UnixListener, UnixStream};
///
/// gort::Runtime::new().unwrap().block_on(async {
///     let dir = std::env::temp_dir().join(format!("gort-doc-listener-{}", std::process::id()));
///     std::fs::create_dir_all(&dir).unwrap();
///     let path = dir.join("echo.sock");
///     let _ = std::fs::remove_file(&path); // a stale socket of an earlier run
///     let listener = UnixListener::bind(&path).unwrap();
///     gort::spawn(async move {
///         let (conn, _) = listener.accept().await.unwrap();
///         let mut buf = [0; 4];
///         conn.read_exact(&mut buf).await.unwrap();
///         conn.write_all(&buf).await.unwrap();
///     });
///     let client = UnixStream::connect(&path).await.unwrap();
///     client.write_all(b"ping").await.unwrap();
///     let mut reply = [0; 4];
///     client.read_exact(&mut reply).await.unwrap();
///     assert_eq!(&reply, b"ping");
///     std::fs::remove_dir_all(&dir).unwrap();
/// });
/// ```
#[derive(Debug)]
pub struct UnixListener {
    io: Io<mio::net::UnixListener>,
}

impl UnixListener {
    /// Binds a listener to `path`, with the longest accept queue the kernel allows (as Go's).
    /// Not async: no name is resolved.
    ///
    /// # Errors
    ///
    /// The OS's (`AddrInUse` while `path` exists), or outside a gort runtime.
    pub fn bind(path: impl AsRef<Path>) -> io::Result<UnixListener> {
        UnixListener::bind_addr(&SocketAddr::from_pathname(path)?)
    }

    /// Binds a listener to `addr`: for a name in Linux's abstract namespace
    /// (`SocketAddrExt::from_abstract_name`), which needs no file and goes away with the
    /// socket (see [`UnixStream::connect_addr`] for an example).
    ///
    /// # Errors
    ///
    /// The OS's (`AddrInUse` while the name is bound), or outside a gort runtime.
    pub fn bind_addr(addr: &SocketAddr) -> io::Result<UnixListener> {
        // mio listens with a backlog of -1, which Linux caps at `net.core.somaxconn`.
        let listener = mio::net::UnixListener::bind_addr(addr)?;
        Ok(UnixListener {
            io: register_bound(listener, addr)?,
        })
    }

    /// Accepts a connection, waiting for one (Go's `Accept`), with the peer's address (mostly
    /// unnamed: clients seldom bind). Fails with [`io::ErrorKind::TimedOut`] once the
    /// deadline has passed. Cancel-safe: dropping the future loses no connection.
    ///
    /// # Errors
    ///
    /// The OS's accept errors (`EMFILE` at once, as [`TcpListener::accept`]'s, after a yield),
    /// `TimedOut`, or `InvalidInput` once the listener was shut down through its descriptor
    /// (`libc::shutdown`), as a TCP listener's accept fails then.
    ///
    /// [`TcpListener::accept`]: crate::TcpListener::accept
    pub async fn accept(&self) -> io::Result<(UnixStream, SocketAddr)> {
        let accepted = self.accept_now().await;
        if accepted.is_err() {
            gort_sched::yield_now().await; // why: TcpListener::accept
        }
        accepted
    }

    async fn accept_now(&self) -> io::Result<(UnixStream, SocketAddr)> {
        let (s, addr) = self
            .io
            .op(Dir::Read, |l| match l.accept() {
                // A Unix listener shut down (`libc::shutdown` through its descriptor) says
                // `EAGAIN` for ever, after one hang-up edge: waiting would never end. A TCP
                // listener's accept fails with `EINVAL` instead; so does this one.
                Err(e) if e.kind() == io::ErrorKind::WouldBlock && read_shut_down(&self.io) => {
                    Err(io::Error::new(
                        io::ErrorKind::InvalidInput,
                        "gort::net: accept on a Unix listener that was shut down",
                    ))
                }
                res => res,
            })
            .await?;
        Ok((UnixStream::register(s)?, addr))
    }

    /// The address the listener is bound to.
    ///
    /// # Errors
    ///
    /// The OS's.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.io.source().local_addr()
    }

    /// Sets the deadline of [`accept`](Self::accept) (Go's `UnixListener.SetDeadline`):
    /// `None` clears it; one in the past makes pending and later accepts fail at once.
    ///
    /// # Errors
    ///
    /// On a thread of no gort runtime, for a deadline still to come (its timer needs one:
    /// enter the runtime with `Handle::enter`); the deadline is then left as it was.
    /// Clearing it or setting a passed one works from any thread.
    pub fn set_deadline(&self, deadline: Option<Instant>) -> io::Result<()> {
        self.io.set_deadline(Dir::Read, deadline)
    }

    /// Wraps a std listener, making it non-blocking: for a socket handed over by systemd's
    /// socket activation or bound with other options first.
    ///
    /// # Errors
    ///
    /// The OS's, or outside a gort runtime.
    ///
    /// # Examples
    ///
    /// ```
    /// use gort::net::UnixListener;
    ///
    /// gort::Runtime::new().unwrap().block_on(async {
    ///     let dir = std::env::temp_dir().join(format!("gort-doc-from-std-{}", std::process::id()));
    ///     std::fs::create_dir_all(&dir).unwrap();
    ///     let std_listener = std::os::unix::net::UnixListener::bind(dir.join("s")).unwrap();
    ///     let listener = UnixListener::from_std(std_listener).unwrap();
    ///     let path = listener.local_addr().unwrap();
    ///     assert_eq!(path.as_pathname(), Some(dir.join("s").as_path()));
    ///     std::fs::remove_dir_all(&dir).unwrap();
    /// });
    /// ```
    pub fn from_std(listener: std::os::unix::net::UnixListener) -> io::Result<UnixListener> {
        listener.set_nonblocking(true)?;
        let io = Io::new(mio::net::UnixListener::from_std(listener))?;
        Ok(UnixListener { io })
    }

    /// The registered socket (for `AsRawFd` and `AsFd`).
    pub(crate) fn source(&self) -> &mio::net::UnixListener {
        self.io.source()
    }
}

/// A Unix domain stream connection (Go's `net.UnixConn`, from `net.Dial("unix", path)`).
///
/// The same as [`TcpStream`](crate::TcpStream) but for its addresses: every method takes
/// `&self`, `write_all`s of several tasks never interleave, deadlines are Go's (a passed one
/// fails pending and later operations of its direction with [`io::ErrorKind::TimedOut`],
/// consuming nothing, until moved or cleared), every future is cancel-safe, and dropping
/// the stream closes it (a task blocked on it is woken). [`into_split`](Self::into_split)
/// and [`split`](Self::split) give halves, and with the `tokio-io` or `futures-io` feature
/// the stream and its halves implement those crates' `AsyncRead`/`AsyncWrite`.
///
/// # Examples
///
/// ```
/// use gort::net::UnixStream;
/// use std::time::Duration;
///
/// gort::Runtime::new().unwrap().block_on(async {
///     let (a, b) = UnixStream::pair().unwrap();
///     a.write_all(b"hello").await.unwrap();
///     let mut buf = [0; 5];
///     b.read_exact(&mut buf).await.unwrap();
///     assert_eq!(&buf, b"hello");
///     // Nothing more comes: the read deadline ends the wait.
///     b.set_read_deadline(Some(gort::time::Instant::now() + Duration::from_millis(10)))
///         .unwrap();
///     let err = b.read(&mut buf).await.unwrap_err();
///     assert_eq!(err.kind(), std::io::ErrorKind::TimedOut);
/// });
/// ```
#[derive(Debug)]
pub struct UnixStream {
    conn: Conn<mio::net::UnixStream>,
}

impl_stream!(UnixStream, mio::net::UnixStream, SocketAddr);

impl UnixStream {
    /// Connects to the socket at `path` (Go's `net.Dial("unix", path)`).
    ///
    /// Never blocks an M. A Linux listener whose accept queue is full makes a non-blocking
    /// connect fail with `EAGAIN` (where a TCP connect's handshake waits) and sends no
    /// readiness when room appears, so the connect is tried again after a pause of 1 ms,
    /// doubling up to 64 ms, until the listener takes it, as long as it lasts: bound it
    /// with `gort::time::timeout` (Go and Tokio return the `EAGAIN` instead).
    ///
    /// # Errors
    ///
    /// The OS's (`NotFound` with no socket at `path`, `ConnectionRefused` with nobody
    /// listening there), or outside a gort runtime.
    ///
    /// # Examples
    ///
    /// ```
    /// use gort::net::UnixStream;
    ///
    /// gort::Runtime::new().unwrap().block_on(async {
    ///     let err = UnixStream::connect("/nonexistent/gort.sock").await.unwrap_err();
    ///     assert_eq!(err.kind(), std::io::ErrorKind::NotFound);
    /// });
    /// ```
    pub async fn connect(path: impl AsRef<Path>) -> io::Result<UnixStream> {
        UnixStream::connect_with(|| mio::net::UnixStream::connect(path.as_ref())).await
    }

    /// Connects to the socket at `addr`, as [`connect`](Self::connect) does: for an address
    /// in Linux's abstract namespace (`SocketAddrExt::from_abstract_name`), which names no
    /// file (Go's `"@name"` paths).
    ///
    /// # Errors
    ///
    /// As [`connect`](Self::connect)'s.
    ///
    /// # Examples
    ///
    /// ```
    /// # #[cfg(target_os = "linux")]
    /// # {
    /// use gort::net::{UnixListener, UnixStream};
    /// use std::os::linux::net::SocketAddrExt;
    /// use std::os::unix::net::SocketAddr;
    ///
    /// gort::Runtime::new().unwrap().block_on(async {
    ///     let name = format!("gort-doc-{}", std::process::id());
    ///     let addr = SocketAddr::from_abstract_name(name.as_bytes()).unwrap();
    ///     let listener = UnixListener::bind_addr(&addr).unwrap();
    ///     let client = UnixStream::connect_addr(&addr).await.unwrap();
    ///     let (server, _) = listener.accept().await.unwrap();
    ///     client.write_all(b"@").await.unwrap();
    ///     assert_eq!(server.read(&mut [0; 1]).await.unwrap(), 1);
    ///     // Nothing to remove: the name goes with the listener.
    /// });
    /// # }
    /// ```
    pub async fn connect_addr(addr: &SocketAddr) -> io::Result<UnixStream> {
        UnixStream::connect_with(|| mio::net::UnixStream::connect_addr(addr)).await
    }

    /// Runs `connect` (a new non-blocking socket's connect) again after pauses while the
    /// listener's queue is full.
    async fn connect_with(
        mut connect: impl FnMut() -> io::Result<mio::net::UnixStream>,
    ) -> io::Result<UnixStream> {
        let mut backoff = Backoff::new();
        loop {
            match connect() {
                Ok(s) => return UnixStream::connected(s).await,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    gort_time::sleep(backoff.next()).await;
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// Registers a socket whose connect was accepted or is in progress, and waits for it to
    /// complete (Linux completes a Unix connect at once; others may say `EINPROGRESS`).
    async fn connected(s: mio::net::UnixStream) -> io::Result<UnixStream> {
        let io = Io::new(s)?;
        io.op(Dir::Write, connected).await?;
        Ok(UnixStream {
            conn: Conn::from_io(io),
        })
    }

    /// Two streams connected to each other (`socketpair(2)`), both registered.
    ///
    /// # Errors
    ///
    /// The OS's, or outside a gort runtime.
    ///
    /// # Examples
    ///
    /// ```
    /// use gort::net::UnixStream;
    ///
    /// gort::Runtime::new().unwrap().block_on(async {
    ///     let (a, b) = UnixStream::pair().unwrap();
    ///     gort::spawn(async move { a.write_all(b"from a task").await.unwrap() });
    ///     let mut buf = [0; 11];
    ///     b.read_exact(&mut buf).await.unwrap();
    ///     assert_eq!(&buf, b"from a task");
    /// });
    /// ```
    pub fn pair() -> io::Result<(UnixStream, UnixStream)> {
        let (a, b) = mio::net::UnixStream::pair()?;
        Ok((UnixStream::register(a)?, UnixStream::register(b)?))
    }

    /// Registers a connected socket.
    fn register(s: mio::net::UnixStream) -> io::Result<UnixStream> {
        let conn = Conn::new(s)?;
        Ok(UnixStream { conn })
    }

    stream_methods!(SocketAddr);

    /// Writes all of `buf`, holding the stream's write lock until the last byte is written
    /// (as Go's `Write` and [`TcpStream::write_all`](crate::TcpStream::write_all)): two
    /// tasks' `write_all`s never interleave.
    ///
    /// # Errors
    ///
    /// As [`write`](Self::write); `WriteZero` if the socket takes nothing. On an error
    /// (a timeout included) a prefix of `buf` may have been sent, and how long it was is not
    /// returned, as with std's and Tokio's `write_all`. Where that count matters (Go's
    /// `n, err := conn.Write(b)`), loop on [`write`](Self::write), which returns each piece's.
    ///
    /// # Examples
    ///
    /// ```
    /// use gort::net::UnixStream;
    /// use std::sync::Arc;
    ///
    /// gort::Runtime::new().unwrap().block_on(async {
    ///     let (a, b) = UnixStream::pair().unwrap();
    ///     let a = Arc::new(a);
    ///     let writers: Vec<_> = [b'x', b'y']
    ///         .into_iter()
    ///         .map(|byte| {
    ///             let a = a.clone();
    ///             gort::spawn(async move { a.write_all(&vec![byte; 1 << 20]).await.unwrap() })
    ///         })
    ///         .collect();
    ///     let mut all = vec![0; 2 << 20];
    ///     b.read_exact(&mut all).await.unwrap();
    ///     for w in writers {
    ///         w.await.unwrap();
    ///     }
    ///     let (first, second) = all.split_at(1 << 20);
    ///     assert!(first.iter().all(|&c| c == first[0]) && second.iter().all(|&c| c == second[0]));
    /// });
    /// ```
    pub async fn write_all(&self, buf: &[u8]) -> io::Result<()> {
        self.conn.write_all(buf).await
    }

    /// Wraps a connected std stream, making it non-blocking.
    ///
    /// # Errors
    ///
    /// The OS's, or outside a gort runtime.
    ///
    /// # Examples
    ///
    /// ```
    /// use gort::net::UnixStream;
    ///
    /// gort::Runtime::new().unwrap().block_on(async {
    ///     let (a, b) = std::os::unix::net::UnixStream::pair().unwrap();
    ///     let (a, b) = (UnixStream::from_std(a).unwrap(), UnixStream::from_std(b).unwrap());
    ///     a.write_all(b"!").await.unwrap();
    ///     assert_eq!(b.read(&mut [0; 8]).await.unwrap(), 1);
    /// });
    /// ```
    pub fn from_std(stream: std::os::unix::net::UnixStream) -> io::Result<UnixStream> {
        stream.set_nonblocking(true)?;
        UnixStream::register(mio::net::UnixStream::from_std(stream))
    }

    /// The registered socket (for `AsRawFd` and `AsFd`).
    pub(crate) fn source(&self) -> &mio::net::UnixStream {
        self.conn.source()
    }
}

/// Registers a socket just bound to `addr` with the runtime's poller. If that fails (outside
/// a runtime, or in one shut down), the file the bind made is removed: the failed call made
/// it, and left behind it would fail the program's next bind of the path with `AddrInUse`.
pub(crate) fn register_bound<S: mio::event::Source>(
    socket: S,
    addr: &SocketAddr,
) -> io::Result<Io<S>> {
    Io::new(socket).inspect_err(|_| {
        if let Some(path) = addr.as_pathname() {
            let _ = std::fs::remove_file(path);
        }
    })
}
