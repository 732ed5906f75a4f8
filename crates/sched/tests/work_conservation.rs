//! Work conservation: no P idles while a runnable task waits.

use gort_sched::{spawn, yield_now, Builder};
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering::SeqCst};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};
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

/// Rounds of the spawn and wake probes, the give-up of each round and the bound each must meet.
const PROBE_ROUNDS: usize = 20;
const PROBE_PATIENCE: Duration = Duration::from_secs(5);
const PROBE_BOUND: Duration = Duration::from_secs(1);

/// A task that spawns a task and then computes without yielding left the new task alone in
/// its P's `runnext`, where only that P's M looked, while the other P idled: the new task
/// waited for the whole computation (every round to the give-up). Go's thieves take a
/// running P's `runnext`; gort's do too, and sysmon takes one that sits there.
#[test]
fn a_task_spawned_by_a_task_that_computes_runs_meanwhile() {
    let rt = Builder::new().procs(2).build().unwrap();
    let waits = rt.block_on(async {
        spawn(async {
            let mut waits = Vec::new();
            for _ in 0..PROBE_ROUNDS {
                let flag = Arc::new(AtomicBool::new(false));
                let set = flag.clone();
                let h = spawn(async move { set.store(true, SeqCst) });
                waits.push(spin_for(&flag, PROBE_PATIENCE));
                h.await.unwrap();
            }
            waits
        })
        .await
        .unwrap()
    });
    assert_all_within(&waits, "a spawned task");
}

/// As above for a task woken (here through a hand-made one-shot) by a task that then
/// computes: the woken task went to the waker's `runnext`, as a spawned one does.
#[test]
fn a_task_woken_by_a_task_that_computes_runs_meanwhile() {
    let rt = Builder::new().procs(2).build().unwrap();
    let waits = rt.block_on(async {
        spawn(async {
            let mut waits = Vec::new();
            for _ in 0..PROBE_ROUNDS {
                let shot = Arc::new(OneShot::default());
                let ran = Arc::new(AtomicBool::new(false));
                let (shot2, ran2) = (shot.clone(), ran.clone());
                let h = spawn(async move {
                    Fired(&shot2).await;
                    ran2.store(true, SeqCst);
                });
                // Let the task run and wait on the one-shot.
                while !shot.waiting.load(SeqCst) {
                    yield_now().await;
                }
                shot.fire();
                waits.push(spin_for(&ran, PROBE_PATIENCE));
                h.await.unwrap();
            }
            waits
        })
        .await
        .unwrap()
    });
    assert_all_within(&waits, "a woken task");
}

/// Spins until `flag` is set or `patience` passed; returns how long it spun.
fn spin_for(flag: &AtomicBool, patience: Duration) -> Duration {
    let start = Instant::now();
    while !flag.load(SeqCst) && start.elapsed() < patience {
        std::hint::spin_loop();
    }
    start.elapsed()
}

fn assert_all_within(waits: &[Duration], what: &str) {
    let late = waits.iter().filter(|w| **w > PROBE_BOUND).count();
    assert_eq!(
        late,
        0,
        "{what} waited behind its computing parent while the other P idled: \
         {late} of {} rounds over {PROBE_BOUND:?} (waits {waits:?})",
        waits.len()
    );
}

/// A one-shot signal: a future that completes once fired, and says when a task waits on it.
#[derive(Default)]
struct OneShot {
    fired: AtomicBool,
    waiting: AtomicBool,
    waker: Mutex<Option<Waker>>,
}

impl OneShot {
    /// Fires and wakes the waiting task (outside the lock).
    fn fire(&self) {
        self.fired.store(true, SeqCst);
        let waker = self.waker.lock().unwrap().take();
        if let Some(w) = waker {
            w.wake();
        }
    }
}

/// Waits until the one-shot fires.
struct Fired<'a>(&'a OneShot);

impl Future for Fired<'_> {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let shot = self.0;
        *shot.waker.lock().unwrap() = Some(cx.waker().clone());
        shot.waiting.store(true, SeqCst);
        if shot.fired.load(SeqCst) {
            Poll::Ready(())
        } else {
            Poll::Pending
        }
    }
}
