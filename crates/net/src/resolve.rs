//! Address resolution: host names go to the blocking pool (a resolver may block for
//! seconds), never to an M that runs tasks; literal addresses are parsed in place, as Go's
//! resolver does without a lookup.

use std::any::Any;
use std::io;
use std::net::{SocketAddr, ToSocketAddrs};

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

/// `addr` when it is a socket address already, or a string holding one.
fn literal(addr: &dyn Any) -> Option<SocketAddr> {
    if let Some(a) = addr.downcast_ref::<SocketAddr>() {
        return Some(*a);
    }
    if let Some(s) = addr.downcast_ref::<&'static str>() {
        return s.parse().ok();
    }
    if let Some(s) = addr.downcast_ref::<String>() {
        return s.parse().ok();
    }
    None
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
