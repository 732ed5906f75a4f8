//! Tick lateness of a 1 ms `Ticker`, tick by tick: the diagnostic behind T5's tails
//! (design/PERFORMANCE.md). Prints every tick received more than 300 µs late, then the
//! percentiles and which threads (Ms) received the ticks.
//!
//! ```sh
//! cargo run --release --example tickprobe          # idle runtime
//! cargo run --release --example tickprobe -- busy  # while two tasks spin, yielding every 50 µs
//! ```

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use gort::time::{Instant, Ticker};

const TICKS: usize = 2000;

fn main() {
    let busy = std::env::args().nth(1).as_deref() == Some("busy");
    let rt = gort::Runtime::new().expect("cannot start the runtime");
    let root = rt.spawn(async move {
        let stop = Arc::new(AtomicBool::new(false));
        if busy {
            for _ in 0..2 {
                let stop = stop.clone();
                gort::spawn(async move {
                    while !stop.load(Ordering::Relaxed) {
                        let end = std::time::Instant::now() + Duration::from_micros(50);
                        while std::time::Instant::now() < end {}
                        gort::yield_now().await;
                    }
                });
            }
        }
        let t0 = Instant::now();
        // The raw CLOCK_MONOTONIC reading, to find ticks in `perf sched record -k CLOCK_MONOTONIC`.
        println!("t0 = {:?}", std::time::Instant::from(t0));
        let ticker = Ticker::new(Duration::from_millis(1));
        let mut prev = t0;
        let mut lates = Vec::with_capacity(TICKS);
        let mut threads = BTreeMap::new();
        for i in 0..TICKS {
            let due = ticker.c().recv().await.expect("the ticker channel closed");
            let now = Instant::now();
            let late = now - due;
            if late > Duration::from_micros(300) {
                println!(
                    "tick {i}: due +{:?}, received +{:?}, late {late:?} ({:?} after the previous)",
                    due - t0,
                    now - t0,
                    now - prev
                );
            }
            prev = now;
            lates.push(late);
            let name = std::thread::current().name().unwrap_or("?").to_owned();
            *threads.entry(name).or_insert(0) += 1;
        }
        stop.store(true, Ordering::Relaxed);
        lates.sort();
        let at = |q: usize| lates[(lates.len() * q / 100).min(lates.len() - 1)];
        println!(
            "p50 {:?}  p90 {:?}  p99 {:?}  max {:?}  received on {threads:?}",
            at(50),
            at(90),
            at(99),
            lates[lates.len() - 1]
        );
    });
    rt.block_on(root).expect("the probe task panicked");
}
