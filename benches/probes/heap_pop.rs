//! Micro-benchmark of one large heap: adds 1M timers with random deadlines to one `Timers`,
//! then runs them all in one `check`. Prints the best of three rounds, per timer.
//!
//! `cargo run --release --example heap_pop` (numbers in design/PERFORMANCE.md).

use gort_timer::{Fire, Host, Nanos, Timer, Timers};
use std::sync::Arc;
use std::time::Instant;

struct NoHost;
impl Host for NoHost {
    fn wake_netpoller(&self, _: Nanos) {}
}

struct Nothing;
impl Fire for Nothing {
    fn fire(self: Arc<Self>, _: Nanos) {}
}

fn main() {
    let n = 1_000_000;
    let mut x: u64 = 88_172_645_463_325_252;
    let f: Arc<dyn Fire> = Arc::new(Nothing);
    let (mut add, mut pop) = (f64::MAX, f64::MAX);
    for _ in 0..3 {
        let ts = Timers::new(0);
        let timers: Vec<_> = (0..n)
            .map(|_| {
                let t = Timer::new();
                t.set_fire(f.clone());
                t
            })
            .collect();
        let t0 = Instant::now();
        for t in &timers {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            ts.add(t, 1 + (x % 1_000_000_000) as Nanos, 0, &NoHost);
        }
        add = add.min(t0.elapsed().as_secs_f64());
        let t1 = Instant::now();
        let ran = ts.check(Nanos::MAX - 1, true).ran;
        pop = pop.min(t1.elapsed().as_secs_f64());
        assert_eq!(ran, n);
    }
    let per = |s: f64| s * 1e9 / n as f64;
    println!(
        "1M-timer heap: add {:.1} ns/timer, run {:.1} ns/timer",
        per(add),
        per(pop)
    );
}
