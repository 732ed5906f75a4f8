//! `TcpListener`'s accept queue: Go's backlog, so that a burst of connects does not stall.

use gort::net::TcpListener;
use std::net::SocketAddr;
use std::time::Duration;

/// The kernel's cap on any listen backlog (`net.core.somaxconn`), where it can be read.
fn somaxconn() -> Option<usize> {
    std::fs::read_to_string("/proc/sys/net/core/somaxconn")
        .ok()?
        .trim()
        .parse()
        .ok()
}

/// How many of `n` blocking connects complete before one stalls, with nobody accepting.
fn connects_before_a_stall(addr: SocketAddr, n: usize) -> usize {
    let mut open = Vec::new();
    for _ in 0..n {
        // A full accept queue drops the SYN: the connect waits for a retransmission (1 s).
        match std::net::TcpStream::connect_timeout(&addr, Duration::from_millis(1500)) {
            Ok(s) => open.push(s),
            Err(_) => break,
        }
    }
    open.len()
}

/// std's and mio's backlog of 128 overflows under a burst of a few hundred connects (each
/// one over it then stalls for a second); Go listens with the kernel's maximum.
#[test]
fn bind_queues_a_burst_of_connects_as_go_does() {
    let burst = 300;
    if somaxconn().is_some_and(|max| max <= burst) {
        return; // the kernel caps every backlog below the burst: nothing to tell apart
    }
    gort::Runtime::new().unwrap().block_on(async {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let queued = gort::spawn_blocking(move || connects_before_a_stall(addr, burst))
            .await
            .unwrap();
        assert_eq!(
            queued, burst,
            "the accept queue held only {queued} connects"
        );
        drop(listener);
    });
}
