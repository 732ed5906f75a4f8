//! Work conservation: no P idles while a runnable task waits.

use gort_sched::{spawn, Builder};
use std::sync::atomic::{AtomicBool, Ordering::SeqCst};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Two tasks spawned back to back from `block_on`, each spinning (without yielding) until the
/// other has started, on a 2-P runtime. One M took both from the global queue, ran the first,
/// and woke nobody for the second (its wake rule asked for two tasks left in its ring), so
/// the second never started while the other P idled. Go and Tokio wake a second worker.
/// Each task gives up after 20 s so that a regression fails instead of hanging.
#[test]
fn two_tasks_spawned_together_both_start() {
    let rt = Builder::new().procs(2).build().unwrap();
    let started = [
        Arc::new(AtomicBool::new(false)),
        Arc::new(AtomicBool::new(false)),
    ];
    let met = rt.block_on(async {
        let handles: Vec<_> = (0..2)
            .map(|i| {
                let me = started[i].clone();
                let other = started[1 - i].clone();
                spawn(async move {
                    me.store(true, SeqCst);
                    let give_up = Instant::now() + Duration::from_secs(20);
                    while !other.load(SeqCst) {
                        if Instant::now() > give_up {
                            return false;
                        }
                        std::hint::spin_loop();
                    }
                    true
                })
            })
            .collect();
        let mut met = true;
        for h in handles {
            met &= h.await.unwrap();
        }
        met
    });
    assert!(
        met,
        "a task waited behind a spinning one while the other P idled"
    );
}
