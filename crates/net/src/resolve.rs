//! Address resolution: host names go to the blocking pool (a resolver may block for
//! seconds), never to an M that runs tasks; literal addresses are parsed in place, as Go's
//! resolver does without a lookup.

use std::any::Any;
use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6, ToSocketAddrs};

/// The addresses `addr` names, resolved off the Ps when it takes a lookup.
pub(crate) async fn resolve<A>(addr: A) -> io::Result<Vec<SocketAddr>>
where
    A: ToSocketAddrs + Send + 'static,
{
    if let Some(a) = literal(&addr) {
        return Ok(vec![a]);
    }
    match gort_sched::spawn_blocking(move || addr.to_socket_addrs().map(Iterator::collect)).await {
        Ok(res) => res,
        Err(e) => Err(io::Error::other(e.to_string())),
    }
}

/// `addr` when it is a socket address already, or a string or `(host, port)` pair holding a
/// literal IP: every form std's `ToSocketAddrs` parses without a lookup, so that a
/// `send_to(buf, ("127.0.0.1", port))` costs no trip to the blocking pool.
fn literal(addr: &dyn Any) -> Option<SocketAddr> {
    if let Some(a) = addr.downcast_ref::<SocketAddr>() {
        return Some(*a);
    }
    if let Some(a) = addr.downcast_ref::<SocketAddrV4>() {
        return Some((*a).into());
    }
    if let Some(a) = addr.downcast_ref::<SocketAddrV6>() {
        return Some((*a).into());
    }
    if let Some(&(ip, port)) = addr.downcast_ref::<(IpAddr, u16)>() {
        return Some(SocketAddr::new(ip, port));
    }
    if let Some(&(ip, port)) = addr.downcast_ref::<(Ipv4Addr, u16)>() {
        return Some(SocketAddr::new(ip.into(), port));
    }
    if let Some(&(ip, port)) = addr.downcast_ref::<(Ipv6Addr, u16)>() {
        return Some(SocketAddr::new(ip.into(), port));
    }
    if let Some(s) = addr.downcast_ref::<&'static str>() {
        return s.parse().ok();
    }
    if let Some(s) = addr.downcast_ref::<String>() {
        return s.parse().ok();
    }
    if let Some(&(host, port)) = addr.downcast_ref::<(&'static str, u16)>() {
        return literal_host(host, port);
    }
    if let Some((host, port)) = addr.downcast_ref::<(String, u16)>() {
        return literal_host(host, *port);
    }
    None
}

/// `(host, port)` when `host` is a literal IP (std's `(&str, u16)` parses it the same way).
fn literal_host(host: &str, port: u16) -> Option<SocketAddr> {
    host.parse::<IpAddr>()
        .ok()
        .map(|ip| SocketAddr::new(ip, port))
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_literal_form_parses_in_place() {
        let v4: SocketAddr = "127.0.0.1:80".parse().unwrap();
        let v6: SocketAddr = "[::1]:80".parse().unwrap();
        let (ip4, ip6) = (Ipv4Addr::LOCALHOST, Ipv6Addr::LOCALHOST);
        assert_eq!(literal(&v4), Some(v4));
        assert_eq!(literal(&SocketAddrV4::new(ip4, 80)), Some(v4));
        assert_eq!(literal(&SocketAddrV6::new(ip6, 80, 0, 0)), Some(v6));
        assert_eq!(literal(&(IpAddr::from(ip4), 80u16)), Some(v4));
        assert_eq!(literal(&(ip4, 80u16)), Some(v4));
        assert_eq!(literal(&(ip6, 80u16)), Some(v6));
        assert_eq!(literal(&"127.0.0.1:80"), Some(v4));
        assert_eq!(literal(&String::from("[::1]:80")), Some(v6));
        assert_eq!(literal(&("127.0.0.1", 80u16)), Some(v4));
        assert_eq!(literal(&(String::from("::1"), 80u16)), Some(v6));
    }

    #[test]
    fn a_host_name_is_left_to_the_lookup() {
        assert_eq!(literal(&"localhost:80"), None);
        assert_eq!(literal(&("localhost", 80u16)), None);
        assert_eq!(literal(&(String::from("example.com"), 80u16)), None);
    }
}
