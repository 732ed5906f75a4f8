//! T3's tail, task by task: one task spawns K sleepers (each sleeps a duration in
//! [1 ms, 1000 ms] from its first poll), and the probe prints when the spawn loop ended, when
//! every 50,000th task first ran, and the tasks more than 100 ms late, grouped by the 100 ms
//! window their deadline fell in, with their mean lateness.
//! The diagnostic behind the global queue's two lanes (design/ARCHITECTURE.md, "The run
//! queues"): with one FIFO, sleepers that fired waited a second behind half a million new
//! tasks that had not started yet.
//!
//! ```sh
//! cargo run --release --example fanoutprobe            # K = 1,000,000
//! cargo run --release --example fanoutprobe -- 100000
//! ```

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering::Relaxed};
use std::sync::Arc;
use std::time::Duration;

use gort::time::{sleep_until, Instant};

/// Per task: µs from the start to its first poll, its sleep (µs), its lateness (µs).
struct Record {
    start: AtomicU64,
    sleep: u64,
    late: AtomicU64,
}

fn main() {
    let k: usize = std::env::args()
        .nth(1)
        .map_or(1_000_000, |s| s.parse().expect("usage: fanoutprobe [K]"));
    let recs: Arc<Vec<Record>> = Arc::new(
        (0..k as u64)
            .map(|i| Record {
                start: AtomicU64::new(0),
                // A fixed scatter over [1 ms, 1000 ms).
                sleep: 1_000 + i.wrapping_mul(2_654_435_761) % 999_000,
                late: AtomicU64::new(0),
            })
            .collect(),
    );
    let rt = gort::Runtime::new().expect("cannot start the runtime");
    let r = recs.clone();
    let spawn_loop = rt.block_on(async move {
        let left = Arc::new(AtomicUsize::new(k));
        let (tx, rx) = gort::chan::bounded::<()>(1);
        let t0 = Instant::now();
        for i in 0..k {
            let (r, left, tx) = (r.clone(), left.clone(), tx.clone());
            gort::spawn(async move {
                let now = Instant::now();
                let rec = &r[i];
                rec.start.store(us(now - t0), Relaxed);
                let due = now + Duration::from_micros(rec.sleep);
                sleep_until(due).await;
                rec.late.store(us(Instant::now() - due), Relaxed);
                if left.fetch_sub(1, Relaxed) == 1 {
                    let _ = tx.try_send(());
                }
            });
        }
        let spawn_loop = Instant::now() - t0;
        drop(tx);
        rx.recv().await.expect("the last sleeper signals");
        spawn_loop
    });
    println!("spawn loop: {} ms", spawn_loop.as_millis());
    println!("first poll of task i:");
    for i in (0..k).step_by(50_000) {
        println!("  i {i:>7}: {:>5} ms", recs[i].start.load(Relaxed) / 1000);
    }
    // Deadline window (100 ms) -> (count, total lateness).
    let mut late: BTreeMap<u64, (u64, u64)> = BTreeMap::new();
    for rec in recs.iter() {
        let l = rec.late.load(Relaxed);
        if l > 100_000 {
            let due = rec.start.load(Relaxed) + rec.sleep;
            let e = late.entry(due / 100_000).or_default();
            e.0 += 1;
            e.1 += l;
        }
    }
    let total: u64 = late.values().map(|e| e.0).sum();
    println!("{total} of {k} tasks more than 100 ms late; by deadline:");
    for (w, (n, sum)) in late {
        println!(
            "  due {:>5}-{:<5} ms: {n:>7} tasks, mean {} ms late",
            w * 100,
            w * 100 + 100,
            sum / n / 1000
        );
    }
}

fn us(d: Duration) -> u64 {
    d.as_micros() as u64
}
