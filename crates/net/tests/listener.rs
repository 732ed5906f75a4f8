//! `TcpListener`'s accept queue: Go's backlog, so that a burst of connects does not stall.

use gort::net::TcpListener;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::Arc;
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

/// Go's `ln.Close()` from another goroutine to stop an accept loop, as the listener's docs
/// give it: the loop's task holds the listener, so another task ends the blocked accept with
/// a deadline of now; the accept fails with `TimedOut` and the loop ends.
#[test]
fn a_deadline_of_now_from_another_task_stops_an_accept_loop() {
    gort::Runtime::new().unwrap().block_on(async {
        let listener = Arc::new(TcpListener::bind("127.0.0.1:0").await.unwrap());
        let addr = listener.local_addr().unwrap();
        let accepted = Arc::new(AtomicUsize::new(0));
        let accept_loop = gort::spawn({
            let (listener, accepted) = (listener.clone(), accepted.clone());
            async move {
                loop {
                    match listener.accept().await {
                        Ok(_) => accepted.fetch_add(1, SeqCst),
                        Err(e) => return (accepted.load(SeqCst), e.kind()),
                    };
                }
            }
        });
        let _client = gort::net::TcpStream::connect(addr).await.unwrap();
        // The deadline comes after the loop took the connection: an accept whose deadline
        // has passed fails at once even with a connection queued (Go's prepareRead), so a
        // fixed sleep here let a loaded machine's late loop end with 0 accepted. Once it
        // counted the connection, the loop is in (or on its way back to) its next accept,
        // which the deadline ends either way.
        while accepted.load(SeqCst) == 0 {
            gort::time::sleep(Duration::from_millis(1)).await;
        }
        listener
            .set_deadline(Some(gort::time::Instant::now()))
            .unwrap();
        let ended = gort::time::timeout(Duration::from_secs(10), accept_loop).await;
        let (accepted, kind) = ended.expect("the accept loop did not stop").unwrap();
        assert_eq!((accepted, kind), (1, std::io::ErrorKind::TimedOut));
    });
}
