//! The cost of one `gort::time::rate` call, ns per call (median of ROUNDS rounds of N calls),
//! in the shapes of Go's `x/time/rate` benchmarks:
//!
//! - `allow_n_refused`: `allow_n(now, 1)` at a fixed instant on an empty bucket of 1 token per
//!   second (Go's `BenchmarkAllowN`), on 1 thread and on 2 threads sharing the limiter (Go's
//!   `RunParallel` at GOMAXPROCS 2);
//! - `allow`: `allow()` that grants (a limit of 10^12 per second), clock read included;
//! - `wait_no_delay`: `wait().await` that never has to sleep, in `block_on` (Go's
//!   `BenchmarkWaitNNoDelay`).
//!
//! `cargo run --release --example rateprobe [-- ROUNDS [N]]` (design/PERFORMANCE-LOG.md).

use gort::time::rate::{every, Limit, Limiter};
use std::time::{Duration, Instant};

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// Wall ns per call of one thread, `f` run `n` times on each of `threads` threads at once.
fn per_call(threads: usize, n: u64, f: impl Fn() + Sync) -> f64 {
    let start = Instant::now();
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| (0..n).for_each(|_| f()));
        }
    });
    start.elapsed().as_nanos() as f64 / n as f64
}

fn main() {
    let mut args = std::env::args().skip(1);
    let rounds: usize = args.next().map_or(7, |a| a.parse().unwrap());
    let n: u64 = args.next().map_or(2_000_000, |a| a.parse().unwrap());
    let rt = gort::Runtime::new().unwrap();
    let mut results: Vec<(&str, Vec<f64>)> = Vec::new();
    let mut record = |name, ns| match results.iter_mut().find(|(k, _)| *k == name) {
        Some((_, v)) => v.push(ns),
        None => results.push((name, vec![ns])),
    };
    for _ in 0..rounds {
        let refused = Limiter::new(every(Duration::from_secs(1)), 1);
        let now = gort::time::Instant::now();
        let _ = refused.allow_n(now, 1);
        record(
            "allow_n_refused W=1",
            per_call(1, n, || assert!(!refused.allow_n(now, 1))),
        );
        // Wall time over calls per thread: what one call costs while the other thread
        // calls too (Go's RunParallel reports wall time over all calls instead: half this).
        record(
            "allow_n_refused W=2",
            per_call(2, n, || assert!(!refused.allow_n(now, 1))),
        );

        let granting = Limiter::new(Limit::per_second(1e12), u32::MAX);
        record("allow W=1", per_call(1, n, || assert!(granting.allow())));

        let wait = Limiter::new(Limit::per_second(1e12), u32::MAX);
        let ns = rt.block_on(async {
            let start = Instant::now();
            for _ in 0..n {
                wait.wait().await.unwrap();
            }
            start.elapsed().as_nanos() as f64 / n as f64
        });
        record("wait_no_delay W=1", ns);
    }
    for (name, v) in results {
        let shown: Vec<String> = v.iter().map(|x| format!("{x:.1}")).collect();
        println!(
            "{name:<22} median {:>6.1} ns/call  rounds [{}]",
            median(v.clone()),
            shown.join(" ")
        );
    }
}
