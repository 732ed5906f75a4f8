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
                spawn(async move { spin_until_started(&me, &other, Duration::from_secs(20)) })
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

/// A pick other than `runnext` (here the limit on `runnext` picks in a row, which a task that
/// spawns pairs and waits for them reaches every few rounds) left `runnext`'s task behind the
/// picked one; only its own P takes from `runnext`, so while the picked task spun waiting for
/// it the other P idled, for as long as the spinner ran (1-3 % of rounds; up to the give-up).
/// Now the passed-over task goes to the ring, where the idle P's M steals it.
#[test]
fn a_task_passed_over_in_runnext_is_stolen() {
    const ROUNDS: usize = 300;
    let rt = Builder::new().procs(2).build().unwrap();
    let stranded = rt.block_on(async {
        spawn(async {
            let mut stranded = 0;
            for _ in 0..ROUNDS {
                let started = [
                    Arc::new(AtomicBool::new(false)),
                    Arc::new(AtomicBool::new(false)),
                ];
                let pair: Vec<_> = (0..2)
                    .map(|i| {
                        let me = started[i].clone();
                        let other = started[1 - i].clone();
                        spawn(
                            async move { spin_until_started(&me, &other, Duration::from_secs(2)) },
                        )
                    })
                    .collect();
                for h in pair {
                    stranded += usize::from(!h.await.unwrap());
                }
            }
            stranded
        })
        .await
        .unwrap()
    });
    assert_eq!(
        stranded, 0,
        "a task waited in runnext behind a spinning one while the other P idled"
    );
}

/// Marks `me` started, then spins until `other` has started (true) or `patience` passed
/// (false), so that a regression fails instead of hanging.
fn spin_until_started(me: &AtomicBool, other: &AtomicBool, patience: Duration) -> bool {
    me.store(true, SeqCst);
    let give_up = Instant::now() + patience;
    while !other.load(SeqCst) {
        if Instant::now() > give_up {
            return false;
        }
        std::hint::spin_loop();
    }
    true
}
