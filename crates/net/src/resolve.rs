//! Address resolution: host names go to the blocking pool (a resolver may block for
//! seconds), never to an M that runs tasks; literal addresses are parsed in place, as Go's
//! resolver does without a lookup.

use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6};

/// What gort's sockets accept as an address (tokio's `ToSocketAddrs`): the types of std's
/// `ToSocketAddrs`, borrowed or owned, with no `'static` bound, so that
/// `TcpListener::bind(&config.addr)` compiles. Socket addresses and strings or `(host,
/// port)` pairs holding a literal IP are parsed in place; a host name is copied and looked up
/// on the blocking pool. The trait is sealed: its method is gort's own.
///
/// # Examples
///
/// ```
/// use gort::net::{TcpListener, UdpSocket};
/// use std::net::Ipv4Addr;
///
/// gort::Runtime::new().unwrap().block_on(async {
///     let configured = String::from("127.0.0.1:0");
///     let listener = TcpListener::bind(&configured).await.unwrap(); // a borrowed String
///     let socket = UdpSocket::bind((Ipv4Addr::LOCALHOST, 0)).await.unwrap();
///     let port = socket.local_addr().unwrap().port();
///     socket.send_to(b"hi", ("127.0.0.1", port)).await.unwrap(); // parsed, no lookup
///     let _local = TcpListener::bind("localhost:0").await.unwrap(); // looked up
///     drop(listener);
/// });
/// ```
pub trait ToSocketAddrs: sealed::Sealed {}

/// The method behind [`ToSocketAddrs`], out of users' reach.
pub(crate) mod sealed {
    use super::Lookup;

    pub trait Sealed {
        /// The addresses, or the host name lookup that gives them.
        fn lookup(&self) -> Lookup;
    }
}

/// An address parsed in place, or a host name to look up.
#[doc(hidden)]
pub enum Lookup {
    Ready(Vec<std::net::SocketAddr>),
    Host(String),
    HostPort(String, u16),
}

/// The addresses `addr` names, resolved off the Ps when it takes a lookup.
pub(crate) async fn resolve(addr: &(impl ToSocketAddrs + ?Sized)) -> io::Result<Vec<SocketAddr>> {
    let lookup = match addr.lookup() {
        Lookup::Ready(addrs) => return Ok(addrs),
        lookup => lookup,
    };
    match gort_sched::spawn_blocking(move || lookup.run()).await {
        Ok(res) => res,
        Err(e) => Err(io::Error::other(e.to_string())),
    }
}

impl Lookup {
    /// The addresses, with std's resolver for a host name (which may block).
    fn run(self) -> io::Result<Vec<SocketAddr>> {
        use std::net::ToSocketAddrs as _;
        match self {
            Lookup::Ready(addrs) => Ok(addrs),
            Lookup::Host(host) => host.to_socket_addrs().map(Iterator::collect),
            Lookup::HostPort(host, port) => (host.as_str(), port)
                .to_socket_addrs()
                .map(Iterator::collect),
        }
    }
}

/// A string holding `ip:port` parses in place; anything else is a host name.
fn lookup_str(s: &str) -> Lookup {
    match s.parse::<SocketAddr>() {
        Ok(a) => Lookup::Ready(vec![a]),
        Err(_) => Lookup::Host(s.to_owned()),
    }
}

/// A host holding a literal IP parses in place; anything else is a host name.
fn lookup_host_port(host: &str, port: u16) -> Lookup {
    match host.parse::<IpAddr>() {
        Ok(ip) => Lookup::Ready(vec![SocketAddr::new(ip, port)]),
        Err(_) => Lookup::HostPort(host.to_owned(), port),
    }
}

macro_rules! ready {
    ($($t:ty),*) => {$(
        impl ToSocketAddrs for $t {}
        impl sealed::Sealed for $t {
            fn lookup(&self) -> Lookup {
                Lookup::Ready(vec![SocketAddr::from(*self)])
            }
        }
    )*};
}

ready!(
    SocketAddr,
    SocketAddrV4,
    SocketAddrV6,
    (IpAddr, u16),
    (Ipv4Addr, u16),
    (Ipv6Addr, u16)
);

impl ToSocketAddrs for [SocketAddr] {}
impl sealed::Sealed for [SocketAddr] {
    fn lookup(&self) -> Lookup {
        Lookup::Ready(self.to_vec())
    }
}

impl ToSocketAddrs for str {}
impl sealed::Sealed for str {
    fn lookup(&self) -> Lookup {
        lookup_str(self)
    }
}

impl ToSocketAddrs for String {}
impl sealed::Sealed for String {
    fn lookup(&self) -> Lookup {
        lookup_str(self)
    }
}

impl ToSocketAddrs for (&str, u16) {}
impl sealed::Sealed for (&str, u16) {
    fn lookup(&self) -> Lookup {
        lookup_host_port(self.0, self.1)
    }
}

impl ToSocketAddrs for (String, u16) {}
impl sealed::Sealed for (String, u16) {
    fn lookup(&self) -> Lookup {
        lookup_host_port(&self.0, self.1)
    }
}

impl<T: ToSocketAddrs + ?Sized> ToSocketAddrs for &T {}
impl<T: ToSocketAddrs + ?Sized> sealed::Sealed for &T {
    fn lookup(&self) -> Lookup {
        (**self).lookup()
    }
}

/// Runs `f` on each address in turn until one succeeds; the last error otherwise.
pub(crate) async fn first_ok<T, F, Fut>(addrs: Vec<SocketAddr>, mut f: F) -> io::Result<T>
where
    F: FnMut(SocketAddr) -> Fut,
    Fut: std::future::Future<Output = io::Result<T>>,
{
    let mut last = None;
    for a in addrs {
        match f(a).await {
            Ok(v) => return Ok(v),
            Err(e) => last = Some(e),
        }
    }
    Err(last.unwrap_or_else(|| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            "could not resolve to any address",
        )
    }))
}
