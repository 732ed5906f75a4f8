//! The clock under load from several threads: readings extrapolated by the time-stamp counter
//! (x86_64 Linux, `clock/tsc.rs`) keep the promises of real ones.
#![cfg(not(loom))]

use gort_timer::{epoch, nanotime};
use std::time::{Duration, Instant};

/// Every reading, real or extrapolated, is at most std's `Instant` since the epoch (never
/// ahead of it), trails it by little, and never decreases on one thread. The threads sleep
/// now and then so that readings cross the extrapolation window and re-anchor, and run past
/// the calibration span (2 ms) so that extrapolation is in use where the machine allows it.
#[test]
fn readings_never_lead_std_never_decrease_and_trail_by_little() {
    let start = Instant::now();
    let threads: Vec<_> = (0..4)
        .map(|t| {
            std::thread::spawn(move || {
                let mut last = 0;
                let mut i = 0u64;
                while start.elapsed() < Duration::from_millis(300) {
                    let a = nanotime();
                    let std_since = Instant::now().duration_since(epoch()).as_nanos() as i64;
                    let b = nanotime();
                    assert!(a >= last, "thread {t}: the clock went back: {last} -> {a}");
                    assert!(a <= std_since, "thread {t}: {a} leads std's {std_since}");
                    // Generous (1 ms): a preempted thread may sit between the reads.
                    assert!(
                        std_since <= b + 1_000_000,
                        "thread {t}: {b} trails std's {std_since} by more than 1 ms"
                    );
                    last = b;
                    i += 1;
                    if i % 1_000 == 0 {
                        std::thread::sleep(Duration::from_micros(150));
                    }
                }
            })
        })
        .collect();
    for t in threads {
        t.join().expect("a clock thread failed");
    }
}
