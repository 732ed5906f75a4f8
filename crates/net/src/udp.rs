//! UDP: Go's `UDPConn` on the netpoller.

use crate::fd::or_read_shut_down;
use crate::io::{Dir, Io};
use crate::resolve::{first_ok, resolve};
use gort_time::Instant;
use std::io;
use std::net::{SocketAddr, ToSocketAddrs};

/// A UDP socket (Go's `net.UDPConn`).
///
/// Every method takes `&self`; deadlines are Go's, as on [`TcpStream`](crate::TcpStream).
/// Dropping the socket closes it.
///
/// # Examples
///
/// ```
/// use gort::net::UdpSocket;
///
/// gort::Runtime::new().unwrap().block_on(async {
///     let a = UdpSocket::bind("127.0.0.1:0").await.unwrap();
///     let b = UdpSocket::bind("127.0.0.1:0").await.unwrap();
///     a.send_to(b"ping", b.local_addr().unwrap()).await.unwrap();
///     let mut buf = [0; 16];
///     let (n, from) = b.recv_from(&mut buf).await.unwrap();
///     assert_eq!((&buf[..n], from), (&b"ping"[..], a.local_addr().unwrap()));
/// });
/// ```
#[derive(Debug)]
pub struct UdpSocket {
    io: Io<mio::net::UdpSocket>,
}

impl UdpSocket {
    /// Binds a socket to `addr` (the first of its addresses that binds).
    ///
    /// # Errors
    ///
    /// When no address binds, or outside a gort runtime.
    pub async fn bind(addr: impl ToSocketAddrs + Send + 'static) -> io::Result<UdpSocket> {
        let addrs = resolve(addr).await?;
        first_ok(addrs, |a| async move {
            let io = Io::new(mio::net::UdpSocket::bind(a)?)?;
            Ok(UdpSocket { io })
        })
        .await
    }

    /// Sends `buf` as one datagram to `addr` (its first address). Cancel-safe.
    ///
    /// # Errors
    ///
    /// The OS's, or `TimedOut` past the write deadline.
    pub async fn send_to(
        &self,
        buf: &[u8],
        addr: impl ToSocketAddrs + Send + 'static,
    ) -> io::Result<usize> {
        let to = resolve(addr).await?;
        let Some(&to) = to.first() else {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "no address to send to",
            ));
        };
        self.io.op(Dir::Write, |s| s.send_to(buf, to)).await
    }

    /// Receives one datagram into `buf` (the excess of a longer one is lost, as in Go) and
    /// the address it came from. Cancel-safe. On a socket shut down for reading (through
    /// its descriptor), returns 0 bytes from the connected peer, as a blocking receive
    /// would.
    ///
    /// # Errors
    ///
    /// The OS's, or `TimedOut` past the read deadline.
    pub async fn recv_from(&self, buf: &mut [u8]) -> io::Result<(usize, SocketAddr)> {
        self.io
            .op(Dir::Read, |s| {
                or_read_shut_down(s.recv_from(buf), &self.io, || Ok((0, s.peer_addr()?)))
            })
            .await
    }

    /// Sets the socket's default peer (the first of `addr`'s addresses that it accepts):
    /// [`send`](Self::send) goes there and [`recv`](Self::recv) takes only its datagrams.
    ///
    /// # Errors
    ///
    /// The OS's.
    pub async fn connect(&self, addr: impl ToSocketAddrs + Send + 'static) -> io::Result<()> {
        let addrs = resolve(addr).await?;
        first_ok(addrs, |a| async move { self.io.source().connect(a) }).await
    }

    /// Sends `buf` to the connected peer. Cancel-safe.
    ///
    /// # Errors
    ///
    /// The OS's (not connected), or `TimedOut` past the write deadline.
    pub async fn send(&self, buf: &[u8]) -> io::Result<usize> {
        self.io.op(Dir::Write, |s| s.send(buf)).await
    }

    /// Receives one datagram from the connected peer into `buf` (the excess of a longer one
    /// is lost, as in Go). Cancel-safe. On a socket shut down for reading (through its
    /// descriptor), returns `Ok(0)`, as a blocking receive would.
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

    /// The local address.
    ///
    /// # Errors
    ///
    /// The OS's.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.io.source().local_addr()
    }

    /// The connected peer's address (Go's `RemoteAddr`).
    ///
    /// # Errors
    ///
    /// The OS's (`NotConnected` before [`connect`](Self::connect)).
    ///
    /// # Examples
    ///
    /// ```
    /// use gort::net::UdpSocket;
    ///
    /// gort::Runtime::new().unwrap().block_on(async {
    ///     let server = UdpSocket::bind("127.0.0.1:0").await.unwrap();
    ///     let client = UdpSocket::bind("127.0.0.1:0").await.unwrap();
    ///     assert!(client.peer_addr().is_err());
    ///     client.connect(server.local_addr().unwrap()).await.unwrap();
    ///     assert_eq!(client.peer_addr().unwrap(), server.local_addr().unwrap());
    /// });
    /// ```
    pub fn peer_addr(&self) -> io::Result<SocketAddr> {
        self.io.source().peer_addr()
    }

    /// Wraps a std socket, making it non-blocking: for a socket configured before it is
    /// bound (`SO_REUSEPORT`, multicast membership, e.g. with `socket2`).
    ///
    /// # Errors
    ///
    /// The OS's, or outside a gort runtime.
    ///
    /// # Examples
    ///
    /// ```
    /// use gort::net::UdpSocket;
    ///
    /// gort::Runtime::new().unwrap().block_on(async {
    ///     let std_socket = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    ///     std_socket.set_broadcast(true).unwrap();
    ///     let socket = UdpSocket::from_std(std_socket).unwrap();
    ///     socket.send_to(b"hi", socket.local_addr().unwrap()).await.unwrap();
    ///     let mut buf = [0; 2];
    ///     assert_eq!(socket.recv_from(&mut buf).await.unwrap().0, 2);
    /// });
    /// ```
    pub fn from_std(socket: std::net::UdpSocket) -> io::Result<UdpSocket> {
        socket.set_nonblocking(true)?;
        let io = Io::new(mio::net::UdpSocket::from_std(socket))?;
        Ok(UdpSocket { io })
    }

    /// The registered socket (for `AsRawFd` and `AsFd`).
    pub(crate) fn source(&self) -> &mio::net::UdpSocket {
        self.io.source()
    }

    deadline_methods!();
}
