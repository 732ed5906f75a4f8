//! The channel lock under contention from more threads than cores: N OS threads each alternate
//! `try_send` and `try_recv` on one channel (every call one lock acquisition), and the probe
//! prints the time per call and the slowest call. The diagnostic behind the channel's spin
//! lock (design/CHANNELS.md, "The lock"; PERFORMANCE-LOG.md, "A channel lock released by a
//! store"): a waiter whose lock holder was descheduled spins, yields, then naps, where a
//! parking lock puts it to sleep until the release.
//!
//! ```sh
//! cargo run --release -p gort-chan --example lockprobe              # 2, 4, 8, 16 threads
//! cargo run --release -p gort-chan --example lockprobe -- 8 1000000 # 8 threads, 1M calls each
//! ```

use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

fn main() {
    let mut args = std::env::args().skip(1);
    let threads: Vec<usize> = match args.next() {
        Some(n) => vec![n.parse().expect("usage: lockprobe [THREADS [CALLS]]")],
        None => vec![2, 4, 8, 16],
    };
    let calls: usize = args.next().map_or(200_000, |s| {
        s.parse().expect("usage: lockprobe [THREADS [CALLS]]")
    });
    for n in threads {
        let (per_call, slowest) = run(n, calls);
        println!(
            "threads {n:>2}: {:>7.1} ns per call, slowest call {:>8.1} µs",
            per_call,
            slowest.as_secs_f64() * 1e6
        );
    }
}

/// `n` threads, `calls` calls each; the wall time per call and the slowest call.
fn run(n: usize, calls: usize) -> (f64, Duration) {
    let (tx, rx) = gort::chan::bounded::<u64>(64);
    let (tx, rx) = (Arc::new(tx), Arc::new(rx));
    let start = Instant::now();
    let workers: Vec<_> = (0..n)
        .map(|_| {
            let (tx, rx) = (tx.clone(), rx.clone());
            thread::spawn(move || {
                let mut slowest = Duration::ZERO;
                for i in 0..calls {
                    let t = Instant::now();
                    if i % 2 == 0 {
                        let _ = tx.try_send(i as u64);
                    } else {
                        let _ = rx.try_recv();
                    }
                    slowest = slowest.max(t.elapsed());
                }
                slowest
            })
        })
        .collect();
    let slowest = workers
        .into_iter()
        .map(|w| w.join().unwrap())
        .max()
        .unwrap_or_default();
    let per_call = start.elapsed().as_nanos() as f64 / (n * calls) as f64;
    (per_call, slowest)
}
