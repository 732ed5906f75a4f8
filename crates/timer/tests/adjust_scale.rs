//! go#41699: re-keying k modified-earlier timers costs O(k log n), not a heap scan.
//! Measured in sift steps (the heap's work counter) so that nothing depends on timing.
#![cfg(not(loom))]

mod common;

use common::quiet;
use gort_timer::*;

/// xorshift64*: a tiny deterministic generator.
struct Rng(u64);
impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d) % n
    }
}

const BASE: Nanos = 1_000_000_000;

/// Builds `n` timers keyed in [BASE, 2 BASE), modifies `k` of them earlier (one to `BASE/2`,
/// the rest to random points between `BASE/2` and their key), then runs the check at
/// `BASE/2`. Returns (entries examined by adjust + sift steps during the check, ran, time).
fn adjust_cost(n: usize, k: usize) -> (u64, usize, std::time::Duration) {
    let ts = Timers::new(0);
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let all: Vec<_> = (0..n)
        .map(|_| {
            let t = Timer::new();
            ts.add(&t, BASE + rng.below(BASE as u64) as Nanos, 0, &quiet());
            t
        })
        .collect();
    let now = BASE / 2;
    for (j, t) in all.iter().step_by(n / k).take(k).enumerate() {
        let key = t.when();
        let when = if j == 0 {
            now
        } else {
            now + 1 + rng.below((key - now - 1) as u64) as Nanos
        };
        assert!(modify(t, when, 0, &ts, &quiet()));
    }
    ts.verify();
    let before = ts.stats();
    let start = std::time::Instant::now();
    let c = ts.check(now, true);
    let took = start.elapsed();
    let after = ts.stats();
    ts.verify();
    assert_eq!(after.adjusted - before.adjusted, k as u64);
    assert!(
        all.iter()
            .filter(|t| t.status() == Status::ModifiedEarlier)
            .count()
            == 0
    );
    let work = (after.sift_steps - before.sift_steps) + k as u64;
    (work, c.ran, took)
}

fn log4(n: usize) -> u64 {
    (n as f64).log(4.0).ceil() as u64
}

#[test]
fn adjust_cost_grows_with_k_log_n_not_n() {
    let k = 400;
    let (small, ran_small, _) = adjust_cost(4_000, k);
    let (large, ran_large, _) = adjust_cost(40_000, k);
    assert_eq!((ran_small, ran_large), (1, 1));
    // Each of the k timers sifts at most the heap depth.
    assert!(large <= k as u64 * (log4(40_000) + 2), "work {large}");
    // Ten times the heap, same k: a scan would cost 10x; k log n costs a little more.
    assert!(
        large < small * 2,
        "work grew from {small} to {large} for 10x the heap"
    );
    assert!(
        large < 40_000 / 4,
        "work {large} is not far below a 40,000-entry scan"
    );
}

/// The brief's size: 10,000 modified-earlier timers in a 100,000-timer heap. Run with
/// `cargo test --release -p gort-timer --test adjust_scale -- --ignored --nocapture`.
#[test]
#[ignore = "large; prints its cost"]
fn ten_thousand_modified_in_a_hundred_thousand() {
    let (n, k) = (100_000, 10_000);
    let (work, ran, took) = adjust_cost(n, k);
    let bound = k as u64 * (log4(n) + 2);
    println!(
        "n={n} k={k}: adjust work {work} (bound k*(log4 n + 2) = {bound}; a scan alone \
         examines {n} entries before re-sifting), {took:?}"
    );
    assert_eq!(ran, 1);
    assert!(work <= bound);
    // Same k on a 10x smaller heap: the cost must not scale with n.
    let (work_small, _, took_small) = adjust_cost(n / 10, k);
    println!(
        "n={} k={k}: adjust work {work_small}, {took_small:?}",
        n / 10
    );
    assert!(work < work_small * 2);
}
