//! What the ported Tokio programs' tests share (`tokio_ports.rs`, `tokio_services.rs`):
//! a task run on a runtime of a given size that fails instead of hanging, and a listener.

use gort::net::TcpListener;
use std::net::SocketAddr;
use std::time::Duration;

/// Generous: only a hang should fail a test.
pub const PATIENCE: Duration = Duration::from_secs(60);

/// Runs `f` as a task on a runtime of `procs` Ps, failing instead of hanging.
pub fn run<F, Fut>(procs: usize, f: F)
where
    F: FnOnce() -> Fut,
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    let rt = gort::Builder::new().procs(procs).build().unwrap();
    let fut = f();
    rt.block_on(async move {
        gort::time::timeout(PATIENCE, gort::spawn(fut))
            .await
            .unwrap_or_else(|_| panic!("hung on {procs} Ps"))
            .unwrap();
    });
}

/// A listener on a free loopback port, and its address.
pub async fn listener() -> (TcpListener, SocketAddr) {
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    (l, addr)
}
