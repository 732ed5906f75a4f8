//! What a socket's deadline costs in memory: its direction's timer and the timer's callback
//! in one allocation (Go's `pollDesc` holds its `rt`/`wt` in place), made by the first
//! deadline and re-armed by every later one with no allocation.

#[path = "../../time/tests/support/counting.rs"]
mod counting;

use counting::{ALLOCS, BYTES};
use gort::net::UdpSocket;
use gort::time::Instant;
use std::sync::atomic::Ordering::Relaxed;
use std::time::Duration;

const SOCKETS: usize = 200;

#[test]
fn a_first_deadline_costs_one_allocation_and_a_moved_one_none() {
    let rt = gort::Builder::new().procs(1).build().unwrap();
    rt.block_on(async {
        let mut socks = Vec::with_capacity(SOCKETS);
        for _ in 0..SOCKETS {
            socks.push(UdpSocket::bind("127.0.0.1:0").await.unwrap());
        }
        // Warm-up: the heap's vector and the poller's first timer arming.
        let warm = UdpSocket::bind("127.0.0.1:0").await.unwrap();
        warm.set_read_deadline(Some(Instant::now() + Duration::from_secs(3600)))
            .unwrap();

        let (allocs, bytes) = (ALLOCS.load(Relaxed), BYTES.load(Relaxed));
        let far = Instant::now() + Duration::from_secs(3600);
        for s in &socks {
            s.set_read_deadline(Some(far)).unwrap();
        }
        let new_allocs = ALLOCS.load(Relaxed) - allocs;
        let new_bytes = BYTES.load(Relaxed) - bytes;
        // One allocation per socket (two before: the timer and its callback apart); a few
        // strays from the runtime's other threads are tolerated, not a second per socket.
        assert!(
            new_allocs <= (SOCKETS + SOCKETS / 4) as isize,
            "{new_allocs} allocations for {SOCKETS} first deadlines"
        );
        assert!(
            new_bytes <= (SOCKETS * 160) as isize,
            "{new_bytes} bytes for {SOCKETS} first deadlines ({} each)",
            new_bytes / SOCKETS as isize
        );

        // Moving each deadline earlier re-arms its timer: nothing new.
        let (allocs, _) = (ALLOCS.load(Relaxed), BYTES.load(Relaxed));
        let near = Instant::now() + Duration::from_secs(1800);
        for s in &socks {
            s.set_read_deadline(Some(near)).unwrap();
        }
        let moved_allocs = ALLOCS.load(Relaxed) - allocs;
        assert!(
            moved_allocs <= (SOCKETS / 4) as isize,
            "{moved_allocs} allocations for {SOCKETS} moved deadlines"
        );
        drop(warm);
    });
}
