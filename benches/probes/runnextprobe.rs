//! How long a task waits to start when the task that spawned or woke it computes without
//! yielding, on 2 Ps: 20 rounds of each, the task setting a flag its parent spins on (giving
//! up after 1 s). The diagnostic behind gort's stealable `runnext` (ARCHITECTURE.md, "Where a
//! runnable task goes"): before it, every round waited the full second; Go 1.19 waits at most
//! ~150 µs (its thieves take a running P's `runnext`).
//!
//! ```sh
//! cargo run --release --example runnextprobe          # 20 rounds
//! cargo run --release --example runnextprobe -- 100   # 100 rounds
//! ```

use std::sync::atomic::{AtomicBool, Ordering::SeqCst};
use std::sync::Arc;
use std::time::{Duration, Instant};

const PATIENCE: Duration = Duration::from_secs(1);

fn main() {
    let rounds: usize = std::env::args()
        .nth(1)
        .map_or(20, |s| s.parse().expect("usage: runnextprobe [ROUNDS]"));
    let rt = gort::Builder::new().procs(2).build().unwrap();
    let (spawned, woken) = rt.block_on(async move {
        gort::spawn(async move { (spawned(rounds).await, woken(rounds).await) })
            .await
            .unwrap()
    });
    report("spawned", spawned);
    report("woken", woken);
}

/// Each round spawns a task that sets a flag, then spins until it is set.
async fn spawned(rounds: usize) -> Vec<Duration> {
    let mut waits = Vec::with_capacity(rounds);
    for _ in 0..rounds {
        let flag = Arc::new(AtomicBool::new(false));
        let set = flag.clone();
        let h = gort::spawn(async move { set.store(true, SeqCst) });
        waits.push(spin_for(&flag));
        h.await.unwrap();
    }
    waits
}

/// Each round wakes (by a channel send) a task blocked on a receive that sets a flag, then
/// spins until it is set.
async fn woken(rounds: usize) -> Vec<Duration> {
    let mut waits = Vec::with_capacity(rounds);
    for _ in 0..rounds {
        let (tx, rx) = gort::chan::bounded::<()>(1);
        let flag = Arc::new(AtomicBool::new(false));
        let set = flag.clone();
        let h = gort::spawn(async move {
            rx.recv().await.unwrap();
            set.store(true, SeqCst);
        });
        // Let it block on the receive first.
        gort::time::sleep(Duration::from_millis(1)).await;
        tx.try_send(()).unwrap();
        waits.push(spin_for(&flag));
        h.await.unwrap();
    }
    waits
}

fn spin_for(flag: &AtomicBool) -> Duration {
    let start = Instant::now();
    while !flag.load(SeqCst) && start.elapsed() < PATIENCE {
        std::hint::spin_loop();
    }
    start.elapsed()
}

fn report(what: &str, mut waits: Vec<Duration>) {
    waits.sort();
    let stuck = waits.iter().filter(|w| **w >= PATIENCE).count();
    println!(
        "{what:8} rounds {:3}  median {:>10.1?}  worst {:>10.1?}  gave up {stuck}",
        waits.len(),
        waits[waits.len() / 2],
        waits[waits.len() - 1],
    );
}
