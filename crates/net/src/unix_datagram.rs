//! Unix domain datagram sockets: Go's `UnixConn` for network `"unixgram"` on the netpoller.

use crate::fd::or_read_shut_down;
use crate::io::{Backoff, Dir, Io};
use gort_time::Instant;
use std::io;
use std::net::Shutdown;
use std::os::unix::net::SocketAddr;
use std::path::Path;

/// A Unix domain datagram socket (Go's `net.UnixConn` from `net.ListenUnixgram` or
/// `net.DialUnix("unixgram", ...)`): systemd's notify socket, syslog's `/dev/log`.
///
/// Every method takes `&self`; deadlines are Go's, as on [`UdpSocket`](crate::UdpSocket);
/// sends and receives are cancel-safe. Dropping the socket closes it but leaves a bound
/// path in the file system (see [`UnixListener`](crate::UnixListener) for why, and what to
/// do instead).
///
/// # Examples
///
/// ```
/// use gort::net::UnixDatagram;
///
/// gort::Runtime::new().unwrap().block_on(async {
///     let dir = std::env::temp_dir().join(format!("gort-doc-dgram-{}", std::process::id()));
///     std::fs::create_dir_all(&dir).unwrap();
///     let server = UnixDatagram::bind(dir.join("server")).unwrap();
///     let client = UnixDatagram::bind(dir.join("client")).unwrap();
///     client.send_to(b"ping", dir.join("server")).await.unwrap();
///     let mut buf = [0; 16];
///     let (n, from) = server.recv_from(&mut buf).await.unwrap();
///     assert_eq!(&buf[..n], b"ping");
///     server.send_to(b"pong", from.as_pathname().unwrap()).await.unwrap();
///     assert_eq!(client.recv(&mut buf).await.unwrap(), 4);
///     std::fs::remove_dir_all(&dir).unwrap();
/// });
/// ```
#[derive(Debug)]
pub struct UnixDatagram {
    io: Io<mio::net::UnixDatagram>,
}

impl UnixDatagram {
    /// Binds a socket to `path` (Go's `net.ListenUnixgram`).
    ///
    /// # Errors
    ///
    /// The OS's (`AddrInUse` while `path` exists), or outside a gort runtime.
    pub fn bind(path: impl AsRef<Path>) -> io::Result<UnixDatagram> {
        UnixDatagram::bind_addr(&SocketAddr::from_pathname(path)?)
    }

    /// Binds a socket to `addr`: for a name in Linux's abstract namespace
    /// (`SocketAddrExt::from_abstract_name`), which needs no file.
    ///
    /// # Errors
    ///
    /// The OS's (`AddrInUse` while the name is bound), or outside a gort runtime.
    ///
    /// # Examples
    ///
    /// ```
    /// # #[cfg(target_os = "linux")]
    /// # {
    /// use gort::net::UnixDatagram;
    /// use std::os::linux::net::SocketAddrExt;
    /// use std::os::unix::net::SocketAddr;
    ///
    /// gort::Runtime::new().unwrap().block_on(async {
    ///     let name = format!("gort-doc-dgram-{}", std::process::id());
    ///     let addr = SocketAddr::from_abstract_name(name.as_bytes()).unwrap();
    ///     let server = UnixDatagram::bind_addr(&addr).unwrap();
    ///     let local = server.local_addr().unwrap();
    ///     assert_eq!(local.as_abstract_name(), Some(name.as_bytes()));
    /// });
    /// # }
    /// ```
    pub fn bind_addr(addr: &SocketAddr) -> io::Result<UnixDatagram> {
        let socket = mio::net::UnixDatagram::bind_addr(addr)?;
        Ok(UnixDatagram {
            io: crate::unix::register_bound(socket, addr)?,
        })
    }

    /// A socket bound to no path: it can send (to a path, or after
    /// [`connect`](Self::connect)) but nobody can answer it by name.
    ///
    /// # Errors
    ///
    /// The OS's, or outside a gort runtime.
    ///
    /// # Examples
    ///
    /// ```
    /// use gort::net::UnixDatagram;
    ///
    /// gort::Runtime::new().unwrap().block_on(async {
    ///     let dir = std::env::temp_dir().join(format!("gort-doc-unbound-{}", std::process::id()));
    ///     std::fs::create_dir_all(&dir).unwrap();
    ///     let notify = UnixDatagram::bind(dir.join("notify")).unwrap(); // systemd's end
    ///     let service = UnixDatagram::unbound().unwrap();
    ///     service.connect(dir.join("notify")).unwrap();
    ///     service.send(b"READY=1").await.unwrap();
    ///     let mut buf = [0; 16];
    ///     let (n, from) = notify.recv_from(&mut buf).await.unwrap();
    ///     assert_eq!((&buf[..n], from.is_unnamed()), (&b"READY=1"[..], true));
    ///     std::fs::remove_dir_all(&dir).unwrap();
    /// });
    /// ```
    pub fn unbound() -> io::Result<UnixDatagram> {
        UnixDatagram::register(mio::net::UnixDatagram::unbound()?)
    }

    /// Two sockets connected to each other (`socketpair(2)`).
    ///
    /// # Errors
    ///
    /// The OS's, or outside a gort runtime.
    ///
    /// # Examples
    ///
    /// ```
    /// use gort::net::UnixDatagram;
    ///
    /// gort::Runtime::new().unwrap().block_on(async {
    ///     let (a, b) = UnixDatagram::pair().unwrap();
    ///     a.send(b"one").await.unwrap();
    ///     a.send(b"two").await.unwrap();
    ///     let mut buf = [0; 8];
    ///     assert_eq!(b.recv(&mut buf).await.unwrap(), 3); // message boundaries are kept
    ///     assert_eq!(b.recv(&mut buf).await.unwrap(), 3);
    /// });
    /// ```
    pub fn pair() -> io::Result<(UnixDatagram, UnixDatagram)> {
        let (a, b) = mio::net::UnixDatagram::pair()?;
        Ok((UnixDatagram::register(a)?, UnixDatagram::register(b)?))
    }

    fn register(socket: mio::net::UnixDatagram) -> io::Result<UnixDatagram> {
        Ok(UnixDatagram {
            io: Io::new(socket)?,
        })
    }

    /// Sets the socket's default peer: [`send`](Self::send) goes there and
    /// [`recv`](Self::recv) takes only its datagrams. Not async: a Unix datagram connect
    /// neither waits nor resolves a name.
    ///
    /// # Errors
    ///
    /// The OS's (`NotFound`, `ConnectionRefused` with no socket bound at `path`).
    pub fn connect(&self, path: impl AsRef<Path>) -> io::Result<()> {
        self.io.source().connect(path)
    }

    /// Sets the socket's default peer to `addr`, as [`connect`](Self::connect) does to a
    /// path: for an abstract name (Linux's `SocketAddrExt::from_abstract_name`), or the
    /// address a datagram came from ([`recv_from`](Self::recv_from)), such as an autobound
    /// sender's. std's `UnixDatagram::connect_addr`.
    ///
    /// # Errors
    ///
    /// The OS's (`ConnectionRefused` with no socket bound at `addr`).
    ///
    /// # Examples
    ///
    /// ```
    /// # #[cfg(target_os = "linux")]
    /// # {
    /// use gort::net::UnixDatagram;
    /// use std::os::linux::net::SocketAddrExt;
    /// use std::os::unix::net::SocketAddr;
    ///
    /// gort::Runtime::new().unwrap().block_on(async {
    ///     let name = format!("gort-doc-dgram-connect-{}", std::process::id());
    ///     let addr = SocketAddr::from_abstract_name(name.as_bytes()).unwrap();
    ///     let server = UnixDatagram::bind_addr(&addr).unwrap();
    ///     let client = UnixDatagram::unbound().unwrap();
    ///     client.connect_addr(&addr).unwrap();
    ///     client.send(b"@").await.unwrap();
    ///     assert_eq!(server.recv(&mut [0; 1]).await.unwrap(), 1);
    /// });
    /// # }
    /// ```
    pub fn connect_addr(&self, addr: &SocketAddr) -> io::Result<()> {
        with_std(self.io.source(), |s| s.connect_addr(addr))
    }

    /// Sends `buf` as one datagram to `addr`, as [`send_to`](Self::send_to) does to a path:
    /// to an abstract name, or back to the address a datagram came from (std's
    /// `UnixDatagram::send_to_addr`). Cancel-safe; waits for room as `send_to` does.
    ///
    /// # Errors
    ///
    /// As [`send_to`](Self::send_to)'s.
    ///
    /// # Examples
    ///
    /// ```
    /// use gort::net::UnixDatagram;
    ///
    /// gort::Runtime::new().unwrap().block_on(async {
    ///     let dir = std::env::temp_dir().join(format!("gort-doc-send-addr-{}", std::process::id()));
    ///     std::fs::create_dir_all(&dir).unwrap();
    ///     let server = UnixDatagram::bind(dir.join("s")).unwrap();
    ///     let client = UnixDatagram::bind(dir.join("c")).unwrap();
    ///     client.send_to(b"ping", dir.join("s")).await.unwrap();
    ///     let mut buf = [0; 4];
    ///     let (_, from) = server.recv_from(&mut buf).await.unwrap();
    ///     server.send_to_addr(b"pong", &from).await.unwrap(); // reply to the sender
    ///     assert_eq!(client.recv(&mut buf).await.unwrap(), 4);
    ///     std::fs::remove_dir_all(&dir).unwrap();
    /// });
    /// ```
    pub async fn send_to_addr(&self, buf: &[u8], addr: &SocketAddr) -> io::Result<usize> {
        self.send_with(|s| with_std(s, |s| s.send_to_addr(buf, addr)))
            .await
    }

    /// Sends `buf` as one datagram to the socket bound at `path`. Cancel-safe. While the
    /// receiver's queue is full it tries again after a pause (1 ms, doubling up to 64 ms,
    /// never past the write deadline): Linux signals no room to such a sender, and a write
    /// deadline set or moved meanwhile applies from the end of the pause.
    ///
    /// # Errors
    ///
    /// The OS's (`NotFound`, `ConnectionRefused` with nobody at `path`), or `TimedOut` past
    /// the write deadline.
    pub async fn send_to(&self, buf: &[u8], path: impl AsRef<Path>) -> io::Result<usize> {
        let path = path.as_ref();
        self.send_with(|s| s.send_to(buf, path)).await
    }

    /// Receives one datagram into `buf` (the excess of a longer one is lost, as in Go) and
    /// the address it came from (unnamed for an unbound sender). Cancel-safe.
    ///
    /// # Errors
    ///
    /// The OS's, or `TimedOut` past the read deadline.
    pub async fn recv_from(&self, buf: &mut [u8]) -> io::Result<(usize, SocketAddr)> {
        self.io
            .op(Dir::Read, |s| {
                or_read_shut_down(s.recv_from(buf), &self.io, || Ok((0, unnamed()?)))
            })
            .await
    }

    /// Sends `buf` to the connected peer. Cancel-safe. Waits for room in the peer's queue
    /// as [`send_to`](Self::send_to) does.
    ///
    /// # Errors
    ///
    /// The OS's (not connected), or `TimedOut` past the write deadline.
    pub async fn send(&self, buf: &[u8]) -> io::Result<usize> {
        self.send_with(|s| s.send(buf)).await
    }

    /// Runs the send `op` until it does not say `WouldBlock`, pausing between tries instead
    /// of waiting for readiness: a datagram send into a full queue gets no edge when room
    /// appears (unless its own datagrams are read), and a spurious one for every failed try
    /// (the kernel frees the datagram it had charged to the sender), so waiting for edges
    /// would spin (`design/NETPOLL.md`).
    async fn send_with(
        &self,
        mut op: impl FnMut(&mio::net::UnixDatagram) -> io::Result<usize>,
    ) -> io::Result<usize> {
        let mut backoff = Backoff::new();
        loop {
            // A send that succeeds at once waits for no readiness (`Io::op`'s budget check):
            // it spends its unit of the cooperative budget here.
            gort_coop::consume_budget().await;
            match self.io.try_once(Dir::Write, &mut op) {
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                res => return res,
            }
            self.io.pause(Dir::Write, backoff.next()).await?;
        }
    }

    /// Receives one datagram into `buf` (from the connected peer, once connected; the excess
    /// of a longer one is lost, as in Go). Cancel-safe.
    ///
    /// # Errors
    ///
    /// The OS's, or `TimedOut` past the read deadline.
    pub async fn recv(&self, buf: &mut [u8]) -> io::Result<usize> {
        self.io
            .op(Dir::Read, |s| {
                or_read_shut_down(s.recv(buf), &self.io, || Ok(0))
            })
            .await
    }

    /// Shuts down the receiving, sending or both directions: a pending `recv` then returns
    /// `Ok(0)` and a `send` fails (as std's).
    ///
    /// # Errors
    ///
    /// The OS's.
    pub fn shutdown(&self, how: Shutdown) -> io::Result<()> {
        self.io.source().shutdown(how)
    }

    /// The local address (unnamed when not bound to a path).
    ///
    /// # Errors
    ///
    /// The OS's.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.io.source().local_addr()
    }

    /// The connected peer's address.
    ///
    /// # Errors
    ///
    /// The OS's (`NotConnected` before [`connect`](Self::connect)).
    pub fn peer_addr(&self) -> io::Result<SocketAddr> {
        self.io.source().peer_addr()
    }

    /// Wraps a std socket, making it non-blocking.
    ///
    /// # Errors
    ///
    /// The OS's, or outside a gort runtime.
    ///
    /// # Examples
    ///
    /// ```
    /// use gort::net::UnixDatagram;
    ///
    /// gort::Runtime::new().unwrap().block_on(async {
    ///     let (a, b) = std::os::unix::net::UnixDatagram::pair().unwrap();
    ///     let b = UnixDatagram::from_std(b).unwrap();
    ///     a.send(b"hi").unwrap();
    ///     assert_eq!(b.recv(&mut [0; 4]).await.unwrap(), 2);
    /// });
    /// ```
    pub fn from_std(socket: std::os::unix::net::UnixDatagram) -> io::Result<UnixDatagram> {
        socket.set_nonblocking(true)?;
        UnixDatagram::register(mio::net::UnixDatagram::from_std(socket))
    }

    /// The registered socket (for `AsRawFd` and `AsFd`).
    pub(crate) fn source(&self) -> &mio::net::UnixDatagram {
        self.io.source()
    }

    deadline_methods!();
}

/// The unnamed address, what a receive gives with no sender (the kernel's empty address):
/// std makes one only from a socket's, so from an unbound socket made for this rare case.
fn unnamed() -> io::Result<SocketAddr> {
    std::os::unix::net::UnixDatagram::unbound()?.local_addr()
}

/// Runs `f` on a std view of `socket`'s fd, for the operations mio lacks (`connect_addr`,
/// `send_to_addr`). The fd is non-blocking, so the view's calls say `WouldBlock` as mio's.
fn with_std<R>(
    socket: &mio::net::UnixDatagram,
    f: impl FnOnce(&std::os::unix::net::UnixDatagram) -> R,
) -> R {
    use std::os::fd::{AsRawFd, FromRawFd};
    // SAFETY: the fd is open for as long as `socket` is borrowed, which outlives `view`;
    // `ManuallyDrop` keeps the view from closing the fd it does not own.
    let view = std::mem::ManuallyDrop::new(unsafe {
        std::os::unix::net::UnixDatagram::from_raw_fd(socket.as_raw_fd())
    });
    f(&view)
}
