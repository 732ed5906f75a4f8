//! T8's rounds one by one: 2 x 1000 `after_func` timers due at the same instant, and for
//! each round which threads (Ms) ran how many callbacks, and when (µs after the deadline).
//! The diagnostic behind T8's tail in design/PERFORMANCE.md: a round whose callbacks stop on
//! one M for milliseconds while another M is awake points at the scheduler, not the heap.
//!
//! ```sh
//! cargo run --release --example simulprobe          # 30 rounds
//! cargo run --release --example simulprobe -- 100   # 100 rounds
//! ```
//!
//! Each line also gives the deadline as a raw `CLOCK_MONOTONIC` reading (the std `Instant`),
//! to find the round in `perf sched record -k CLOCK_MONOTONIC` output.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use gort::time::{after_func, Instant};

const PER_TASK: usize = 1000;
const TASKS: usize = 2;

fn main() {
    let rounds: usize = std::env::args()
        .nth(1)
        .map_or(30, |s| s.parse().expect("usage: simulprobe [ROUNDS]"));
    let rt = gort::Runtime::new().expect("cannot start the runtime");
    let root = rt.spawn(async move {
        let mut lasts = Vec::with_capacity(rounds);
        for round in 0..rounds {
            let due = Instant::now() + Duration::from_millis(50);
            // (thread name, µs after the deadline) per callback.
            let log = Arc::new(Mutex::new(Vec::with_capacity(TASKS * PER_TASK)));
            let left = Arc::new(AtomicUsize::new(TASKS * PER_TASK));
            let (done_tx, done_rx) = gort::chan::bounded::<()>(1);
            for _ in 0..TASKS {
                let (log, left, done_tx) = (log.clone(), left.clone(), done_tx.clone());
                gort::spawn(async move {
                    for _ in 0..PER_TASK {
                        let (log, left, done_tx) = (log.clone(), left.clone(), done_tx.clone());
                        after_func(due - Instant::now(), move || {
                            let late = (Instant::now() - due).as_micros() as u64;
                            let m = std::thread::current().name().unwrap_or("?").to_owned();
                            log.lock().unwrap().push((m, late));
                            if left.fetch_sub(1, Ordering::AcqRel) == 1 {
                                let _ = done_tx.try_send(());
                            }
                        });
                    }
                });
            }
            drop(done_tx);
            done_rx.recv().await.expect("the last callback signals");
            let log = log.lock().unwrap();
            let last = log.iter().map(|e| e.1).max().unwrap_or(0);
            lasts.push(last);
            // Per M: (callbacks, first, last).
            let mut per_m: BTreeMap<&str, (usize, u64, u64)> = BTreeMap::new();
            for (m, late) in log.iter() {
                let e = per_m.entry(m).or_insert((0, u64::MAX, 0));
                e.0 += 1;
                e.1 = e.1.min(*late);
                e.2 = e.2.max(*late);
            }
            println!(
                "round {round}: last {last} µs, due at {:?}, per M (callbacks, first µs, last µs): {per_m:?}",
                std::time::Instant::from(due)
            );
        }
        lasts.sort_unstable();
        let at = |q: usize| lasts[(lasts.len() * q / 100).min(lasts.len() - 1)];
        println!(
            "last callback after the deadline: p50 {} µs  p90 {} µs  max {} µs",
            at(50),
            at(90),
            lasts[lasts.len() - 1]
        );
    });
    rt.block_on(root).expect("the probe task panicked");
}
