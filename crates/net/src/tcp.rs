//! TCP: Go's `TCPListener` and `TCPConn` on the netpoller.

use crate::io::{Dir, Io};
use crate::keepalive::{set_keepalive, DEFAULT_KEEPALIVE};
use crate::resolve::{first_ok, resolve};
use crate::stream::{connected, Conn};
use gort_time::Instant;
use std::io;
use std::net::{SocketAddr, ToSocketAddrs};

/// A TCP socket server, listening for connections (Go's `net.TCPListener`).
///
/// Dropping it closes the socket. Go stops an accept loop by closing its listener from
/// another goroutine; while a task waits in [`accept`](Self::accept) the listener cannot be
/// dropped, so stop it with a deadline in the past instead (`set_deadline(Some(Instant::now()))`:
/// the pending accept fails with `TimedOut`), or select on `accept()` and a `context`'s
/// `done()`.
///
/// # Examples
///
/// ```
/// use gort::net::{TcpListener, TcpStream};
///
/// gort::Runtime::new().unwrap().block_on(async {
///     let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
///     let addr = listener.local_addr().unwrap();
///     let client = gort::spawn(async move { TcpStream::connect(addr).await.unwrap() });
///     let (_conn, peer) = listener.accept().await.unwrap();
///     assert_eq!(peer, client.await.unwrap().local_addr().unwrap());
/// });
/// ```
#[derive(Debug)]
pub struct TcpListener {
    io: Io<mio::net::TcpListener>,
}

impl TcpListener {
    /// Binds a listener to `addr` (the first of its addresses that binds). Host names are
    /// resolved on the blocking pool. As in Go, the accept queue is the longest the kernel
    /// allows (`net.core.somaxconn` on Linux), not std's 128, so that a burst of connects
    /// waits in the queue instead of stalling on a dropped handshake.
    ///
    /// # Errors
    ///
    /// When no address binds, or outside a gort runtime.
    pub async fn bind(addr: impl ToSocketAddrs + Send + 'static) -> io::Result<TcpListener> {
        let addrs = resolve(addr).await?;
        first_ok(addrs, |a| async move {
            let listener = mio::net::TcpListener::bind(a)?;
            raise_backlog(&listener)?;
            options_for_accepted(&listener);
            let io = Io::new(listener)?;
            Ok(TcpListener { io })
        })
        .await
    }

    /// Accepts a connection, waiting for one (Go's `Accept`). As in Go, the connection has
    /// `TCP_NODELAY` set and keep-alive on at 15 s ([`TcpStream::set_keepalive`]). Fails with
    /// [`io::ErrorKind::TimedOut`] once the deadline ([`set_deadline`](Self::set_deadline))
    /// has passed. Cancel-safe: dropping the future loses no connection.
    ///
    /// # Errors
    ///
    /// The OS's accept errors, or `TimedOut`. Out of file descriptors, that is `EMFILE`
    /// (`raw_os_error() == Some(libc::EMFILE)`) at once, as in Go, while the connection waits
    /// in the queue: sleep before retrying, as Go's `http.Server` does (5 ms, doubling up to
    /// 1 s). An error is returned only after a yield, so that even a loop that retries at
    /// once lets the other tasks of its P run (and close connections): a goroutine that
    /// retries is preempted, a task is not.
    ///
    /// ```
    /// use std::time::Duration;
    ///
    /// async fn serve(listener: gort::net::TcpListener) {
    ///     let mut backoff = Duration::ZERO;
    ///     loop {
    ///         match listener.accept().await {
    ///             Ok((conn, _peer)) => {
    ///                 backoff = Duration::ZERO;
    ///                 gort::spawn(async move { conn.write_all(b"hi").await });
    ///             }
    ///             Err(e) if e.kind() == std::io::ErrorKind::TimedOut => return, // shut down
    ///             Err(_) => {
    ///                 backoff = (backoff * 2).clamp(Duration::from_millis(5), Duration::from_secs(1));
    ///                 gort::time::sleep(backoff).await;
    ///             }
    ///         }
    ///     }
    /// }
    ///
    /// gort::Runtime::new().unwrap().block_on(async {
    ///     let listener = gort::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    ///     let addr = listener.local_addr().unwrap();
    ///     listener.set_deadline(Some(gort::time::Instant::now() + Duration::from_millis(50))).unwrap();
    ///     let server = gort::spawn(serve(listener));
    ///     let conn = gort::net::TcpStream::connect(addr).await.unwrap();
    ///     let mut hi = [0; 2];
    ///     conn.read_exact(&mut hi).await.unwrap();
    ///     server.await.unwrap();
    /// });
    /// ```
    pub async fn accept(&self) -> io::Result<(TcpStream, SocketAddr)> {
        let accepted = self.accept_now().await;
        if accepted.is_err() {
            gort_sched::yield_now().await;
        }
        accepted
    }

    /// One accept, its error returned at once.
    async fn accept_now(&self) -> io::Result<(TcpStream, SocketAddr)> {
        // TCP_NODELAY and keep-alive come with the socket: set on the listener.
        let (s, addr) = self.io.op(Dir::Read, |l| l.accept()).await?;
        Ok((TcpStream::from_io(Io::new(s)?), addr))
    }

    /// The address the listener is bound to.
    ///
    /// # Errors
    ///
    /// The OS's.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.io.source().local_addr()
    }

    /// Sets the deadline of [`accept`](Self::accept) (Go's `TCPListener.SetDeadline`):
    /// `None` clears it; one in the past makes pending and later accepts fail at once.
    /// This is how another task stops an accept loop that shares the listener (Go's
    /// `ln.Close()` from another goroutine): the listener closes only when its last owner
    /// drops it, so `set_deadline(Some(Instant::now()))` ends the blocked accept, with
    /// `TimedOut` where Go's `Accept` returns `net.ErrClosed`.
    ///
    /// # Errors
    ///
    /// On a thread of no gort runtime, for a deadline still to come (its timer needs one:
    /// enter the runtime with `Handle::enter`); the deadline is then left as it was.
    /// Clearing it or setting a passed one works from any thread.
    pub fn set_deadline(&self, deadline: Option<Instant>) -> io::Result<()> {
        self.io.set_deadline(Dir::Read, deadline)
    }

    /// The registered socket (for `AsRawFd` and `AsFd`).
    pub(crate) fn source(&self) -> &mio::net::TcpListener {
        self.io.source()
    }

    /// Wraps a std listener, making it non-blocking.
    ///
    /// # Errors
    ///
    /// The OS's, or outside a gort runtime.
    pub fn from_std(listener: std::net::TcpListener) -> io::Result<TcpListener> {
        listener.set_nonblocking(true)?;
        let listener = mio::net::TcpListener::from_std(listener);
        options_for_accepted(&listener);
        let io = Io::new(listener)?;
        Ok(TcpListener { io })
    }
}

/// Go's listen backlog: the kernel's cap (`net.core.somaxconn` on Linux, read once), at most
/// 65535 as older kernels keep it in 16 bits. mio binds with std's 128, which a burst of a few
/// hundred connects overflows: the kernel then drops their handshakes and each such connect
/// stalls for a one-second SYN retransmission.
fn listen_backlog() -> libc::c_int {
    static BACKLOG: std::sync::OnceLock<libc::c_int> = std::sync::OnceLock::new();
    *BACKLOG.get_or_init(|| {
        let kernel_cap = std::fs::read_to_string("/proc/sys/net/core/somaxconn")
            .ok()
            .and_then(|s| s.trim().parse::<libc::c_int>().ok())
            .filter(|&n| n > 0);
        kernel_cap.unwrap_or(libc::SOMAXCONN).min(65535)
    })
}

/// Listens again with [`listen_backlog`]: on a listening socket, `listen` only resizes its
/// accept queue.
fn raise_backlog(listener: &mio::net::TcpListener) -> io::Result<()> {
    use std::os::fd::AsRawFd;
    // SAFETY: `listen` takes a socket descriptor and an int; `listener` owns the descriptor
    // and keeps it open for the duration of the call.
    if unsafe { libc::listen(listener.as_raw_fd(), listen_backlog()) } == -1 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// A TCP connection (Go's `net.TCPConn`).
///
/// Every method takes `&self`: one task may read while another writes (share the stream in
/// an `Arc`), and several may write at once: as Go's `Write`, each
/// [`write_all`](Self::write_all) holds the stream's write lock, so their bytes never
/// interleave. Deadlines are Go's: a passed deadline fails pending and later operations in its
/// direction with [`io::ErrorKind::TimedOut`] without consuming or sending anything, until
/// it is moved or cleared. Dropping the stream closes the socket.
///
/// Go unblocks a goroutine's `Read` by closing the connection from another one; here the
/// blocked task holds the stream, so call [`shutdown(Shutdown::Both)`](Self::shutdown)
/// instead (the pending read returns `Ok(0)`, a pending write fails), or set a deadline in
/// the past (the pending operation fails with `TimedOut`).
///
/// # Examples
///
/// ```
/// use gort::net::{TcpListener, TcpStream};
/// use std::time::Duration;
///
/// gort::Runtime::new().unwrap().block_on(async {
///     let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
///     let addr = listener.local_addr().unwrap();
///     gort::spawn(async move {
///         let (conn, _) = listener.accept().await.unwrap();
///         conn.write_all(b"hello").await.unwrap();
///         let _ = conn.read(&mut [0; 1]).await; // keep it open until the client closes
///     });
///     let conn = TcpStream::connect(addr).await.unwrap();
///     let mut buf = [0; 5];
///     conn.read_exact(&mut buf).await.unwrap();
///     assert_eq!(&buf, b"hello");
///     // Nothing more comes: the read deadline ends the wait.
///     conn.set_read_deadline(Some(gort::time::Instant::now() + Duration::from_millis(10)))
///         .unwrap();
///     let err = conn.read(&mut buf).await.unwrap_err();
///     assert_eq!(err.kind(), std::io::ErrorKind::TimedOut);
/// });
/// ```
#[derive(Debug)]
pub struct TcpStream {
    conn: Conn<mio::net::TcpStream>,
}

impl_stream!(TcpStream, mio::net::TcpStream, SocketAddr);

impl TcpStream {
    /// Connects to `addr` (each of its addresses in turn until one accepts). Host names are
    /// resolved on the blocking pool. As Go's `net.Dial`, the connection has `TCP_NODELAY`
    /// set and keep-alive on at 15 s ([`set_keepalive`](Self::set_keepalive)).
    ///
    /// # Errors
    ///
    /// The last address's error, or outside a gort runtime.
    pub async fn connect(addr: impl ToSocketAddrs + Send + 'static) -> io::Result<TcpStream> {
        let addrs = resolve(addr).await?;
        first_ok(addrs, |a| async move {
            let mut io = dial(a).await?;
            // Go's `selfConnect` rule (tcpsock_posix.go): a dial to a local port nobody
            // listens on can be given that very port as its source by the kernel and
            // "connect" to itself (TCP's simultaneous open). Go closes such a socket and
            // dials again, twice at most; so does gort (`tests/go_tcpsock_test.rs`).
            for _ in 0..2 {
                if !is_self_connected(io.source(), a) {
                    break;
                }
                drop(io);
                io = dial(a).await?;
            }
            go_socket_options(io.source());
            Ok(TcpStream::from_io(io))
        })
        .await
    }

    stream_methods!(SocketAddr);

    /// Writes all of `buf`. As Go's `Write`, it holds the connection's write lock until the
    /// last byte is written: the bytes of two tasks' `write_all`s never interleave, even
    /// when the kernel takes each in several pieces; concurrent writers go in the order they
    /// called. (The `tokio-io`/`futures-io` `AsyncWrite` impls write once per poll and take
    /// no lock, as Tokio's do: two tasks running `AsyncWriteExt::write_all` on one stream
    /// may interleave.)
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
    /// Two tasks answer on one connection; each answer arrives whole:
    ///
    /// ```
    /// use gort::net::{TcpListener, TcpStream};
    /// use std::sync::Arc;
    ///
    /// gort::Runtime::new().unwrap().block_on(async {
    ///     let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    ///     let conn = Arc::new(TcpStream::connect(listener.local_addr().unwrap()).await.unwrap());
    ///     let (peer, _) = listener.accept().await.unwrap();
    ///     let big = |b: u8| vec![b; 1 << 20];
    ///     let writers: Vec<_> = [b'a', b'b']
    ///         .into_iter()
    ///         .map(|b| {
    ///             let conn = conn.clone();
    ///             gort::spawn(async move { conn.write_all(&big(b)).await.unwrap() })
    ///         })
    ///         .collect();
    ///     let mut all = vec![0; 2 << 20];
    ///     peer.read_exact(&mut all).await.unwrap();
    ///     for w in writers {
    ///         w.await.unwrap();
    ///     }
    ///     let (first, second) = all.split_at(1 << 20);
    ///     assert!(first.iter().all(|&b| b == first[0]));
    ///     assert!(second.iter().all(|&b| b == second[0]) && first[0] != second[0]);
    /// });
    /// ```
    pub async fn write_all(&self, buf: &[u8]) -> io::Result<()> {
        self.conn.write_all(buf).await
    }

    fn from_io(io: Io<mio::net::TcpStream>) -> TcpStream {
        TcpStream {
            conn: Conn::from_io(io),
        }
    }

    /// Sets `TCP_NODELAY`. As Go, gort sets it on every connection it connects or accepts.
    ///
    /// # Errors
    ///
    /// The OS's.
    pub fn set_nodelay(&self, nodelay: bool) -> io::Result<()> {
        self.source().set_nodelay(nodelay)
    }

    /// The registered socket (for `AsRawFd` and `AsFd`).
    pub(crate) fn source(&self) -> &mio::net::TcpStream {
        self.conn.source()
    }

    /// Wraps a connected std stream, making it non-blocking.
    ///
    /// # Errors
    ///
    /// The OS's, or outside a gort runtime.
    pub fn from_std(stream: std::net::TcpStream) -> io::Result<TcpStream> {
        stream.set_nonblocking(true)?;
        let conn = Conn::new(mio::net::TcpStream::from_std(stream))?;
        Ok(TcpStream { conn })
    }
}

/// What Go sets on every connection it dials: `TCP_NODELAY`, and keep-alive at 15 s
/// ([`TcpStream::set_keepalive`]). As in Go, a failure is ignored: it only costs latency, or
/// the detection of a dead peer.
fn go_socket_options(s: &mio::net::TcpStream) {
    use std::os::fd::AsRawFd;
    let _ = s.set_nodelay(true);
    let _ = set_keepalive(s.as_raw_fd(), Some(DEFAULT_KEEPALIVE));
}

/// What Go sets on every connection it accepts (`TCP_NODELAY`, keep-alive at 15 s), set once
/// on the listener: the kernel copies a listener's options into each socket it accepts
/// (Linux's `sk_clone_lock`, which also arms the accepted socket's keep-alive timer), where
/// Go sets them again on each with four more system calls. Ignored on failure, as in Go.
fn options_for_accepted(listener: &mio::net::TcpListener) {
    use std::os::fd::AsRawFd;
    let fd = listener.as_raw_fd();
    let _ = crate::keepalive::set_int(fd, libc::IPPROTO_TCP, libc::TCP_NODELAY, 1);
    let _ = set_keepalive(fd, Some(DEFAULT_KEEPALIVE));
}

/// A registered socket connected to `a`: a non-blocking connect completes when the socket
/// turns writable.
async fn dial(a: SocketAddr) -> io::Result<Io<mio::net::TcpStream>> {
    let io = Io::new(mio::net::TcpStream::connect(a)?)?;
    io.op(Dir::Write, connected).await?;
    Ok(io)
}

/// Whether `s`, connected to `peer`, is connected to itself: its local address is `peer`
/// (one `getsockname`; the peer is known, so no `getpeername`).
fn is_self_connected(s: &mio::net::TcpStream, peer: SocketAddr) -> bool {
    s.local_addr().is_ok_and(|l| l == peer)
}
