//! A task woken by a timer must not wait behind tasks that yield rarely (shape T10).

use gort_time::Ticker;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::Arc;
use std::time::{Duration, Instant};

fn spin_for(d: Duration) {
    let end = Instant::now() + d;
    while Instant::now() < end {
        std::hint::spin_loop();
    }
}

/// A 1 ms ticker read by one task while two tasks spin in 10 ms slices between yields, on 2
/// Ps. A tick that sysmon ran (every P busy) woke the task into the global queue, which a P
/// whose ring holds a yielding spinner looked at only every 61st round: ~0.6 s, a handful of
/// ticks per second. Now a yield serves waiting started work first, so the task runs within
/// about one slice: some 100 ticks per second. The bound (30 in a second) is far from both.
#[test]
fn a_ticker_task_runs_within_a_slice_of_coarse_spinners() {
    let rt = gort_sched::Builder::new().procs(2).build().unwrap();
    let received = rt.block_on(async {
        let stop = Arc::new(AtomicBool::new(false));
        for _ in 0..2 {
            let stop = stop.clone();
            gort_sched::spawn(async move {
                while !stop.load(Relaxed) {
                    spin_for(Duration::from_millis(10));
                    gort_sched::yield_now().await;
                }
            });
        }
        let reader = gort_sched::spawn(async move {
            let ticker = Ticker::new(Duration::from_millis(1));
            let t0 = Instant::now();
            let mut n = 0;
            while t0.elapsed() < Duration::from_secs(1) {
                ticker.c().recv().await.unwrap();
                n += 1;
            }
            n
        });
        let n = reader.await.unwrap();
        stop.store(true, Relaxed);
        n
    });
    assert!(
        received >= 30,
        "only {received} ticks in 1 s under 10 ms slices"
    );
}
