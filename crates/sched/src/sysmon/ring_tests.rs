//! sysmon's backstop for the rings (sysmon.rs, "Rings"): a task left in a busy P's ring with
//! nobody woken for it (a lost wake-up) runs on an idle P within about one sysmon tick, not
//! after the computation of the task that queued it.

use crate::context;
use crate::runq::Lane;
use crate::shared::Shared;
use crate::task::{Cell, JoinHandle, Task};
use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering::*};
use std::sync::{Arc, Mutex};
use std::thread::{self, ThreadId};
use std::time::{Duration, Instant};

/// How long a task computes at most while it waits for another (a regression fails, not hangs).
const PATIENCE: Duration = Duration::from_secs(3);
/// The wait each round must stay under: sysmon looks every 10 ms while a P idles, and a busy
/// machine delays threads by milliseconds, not by the seconds a lost wake-up costs.
const BOUND: Duration = Duration::from_secs(1);
const ROUNDS: usize = 5;

/// `spawn` into the ring of the P this thread holds, waking nobody: the push of a task whose
/// `wakep` was lost (the one 2a0fcd4 fixed, or one not yet found).
fn spawn_into_ring_waking_nobody<F>(future: F) -> JoinHandle<F::Output>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    let shared = context::current().expect("called off the runtime");
    let p = shared.held_p();
    assert!(!p.is_null(), "called off every P");
    let raw = Cell::spawn(future, shared.clone());
    // SAFETY: a P this thread holds stays allocated (`allp` keeps every P).
    let home = unsafe { (*p).id };
    Cell::<F, Arc<Shared>>::set_slot(&raw, shared.registry.insert(raw.clone(), Some(home)));
    // SAFETY: this thread holds `p` and is inside a task's poll, outside every `with_local`
    // borrow (as `Shared::push_task_from`); `push_local` itself wakes nobody.
    unsafe { (*p).push_local(Task::Raw(raw.clone()), false, &shared.global, Lane::Fresh) };
    // SAFETY: the cell's future is an `F`.
    unsafe { JoinHandle::new(raw) }
}

/// Queues a task into this P's ring waking nobody, then computes without yielding until it
/// ran or `PATIENCE` passed. Returns how long it waited and whether it ran on another thread.
fn queue_and_compute() -> (Duration, bool) {
    let ran = Arc::new(AtomicBool::new(false));
    let ran_on: Arc<Mutex<Option<ThreadId>>> = Arc::default();
    let (ran2, ran_on2) = (ran.clone(), ran_on.clone());
    drop(spawn_into_ring_waking_nobody(async move {
        *ran_on2.lock().unwrap() = Some(thread::current().id());
        ran2.store(true, SeqCst);
    }));
    let start = Instant::now();
    while !ran.load(SeqCst) && start.elapsed() < PATIENCE {
        std::hint::spin_loop();
    }
    let waited = start.elapsed();
    let elsewhere = ran_on
        .lock()
        .unwrap()
        .is_some_and(|t| t != thread::current().id());
    (waited, elsewhere)
}

/// A task in a busy P's ring while the other P idles and nobody spins: sysmon wakes an M,
/// which steals it, while the task that queued it computes. Without the backstop it waited
/// for the whole computation (to `PATIENCE`). Each round on a fresh runtime, whose only M is
/// the busy one: a parked M's own look (`PARK_BACKSTOP`) would rescue the task in 50 ms.
#[test]
fn a_task_left_in_a_busy_ps_ring_runs_on_the_idle_p() {
    let rounds: Vec<_> = (0..ROUNDS)
        .map(|_| {
            let rt = crate::Builder::new().procs(2).build().unwrap();
            rt.block_on(rt.spawn(async { queue_and_compute() }))
                .unwrap()
        })
        .collect();
    let late = rounds.iter().filter(|(w, _)| *w > BOUND).count();
    assert_eq!(
        late, 0,
        "a task waited in a busy P's ring while the other P idled: {late} of {ROUNDS} rounds \
         over {BOUND:?} (waits and whether it ran elsewhere: {rounds:?})"
    );
    assert!(
        rounds.iter().all(|(_, elsewhere)| *elsewhere),
        "a task ran on the thread that never yielded: {rounds:?}"
    );
}

/// With every P busy nothing idles: sysmon wakes nobody for a ring (the holder or the other
/// P, when its task ends, runs the task). And once the ring is emptied it wakes nobody again,
/// however long its holder computes on.
#[test]
fn sysmon_wakes_nobody_for_a_ring_while_every_p_runs_or_once_it_is_emptied() {
    const HOG: Duration = Duration::from_millis(300);
    let rt = crate::Builder::new().procs(2).build().unwrap();
    let (waited, wakes_while_busy, wakes_after) = rt
        .block_on(rt.spawn(async {
            let started = Arc::new(AtomicBool::new(false));
            let started2 = started.clone();
            // The other P's task: computes for `HOG`.
            let hog = crate::spawn(async move {
                started2.store(true, SeqCst);
                let start = Instant::now();
                while start.elapsed() < HOG {
                    std::hint::spin_loop();
                }
            });
            while !started.load(SeqCst) {
                std::hint::spin_loop();
            }
            let before = ring_wakes_here();
            let (waited, _) = queue_and_compute();
            let wakes_while_busy = ring_wakes_here() - before;
            // The ring is empty now; compute on with the other P idle.
            let start = Instant::now();
            while start.elapsed() < HOG {
                std::hint::spin_loop();
            }
            let wakes_after = ring_wakes_here() - before - wakes_while_busy;
            hog.await.unwrap();
            (waited, wakes_while_busy, wakes_after)
        }))
        .unwrap();
    assert!(
        waited >= HOG / 2 && waited < PATIENCE,
        "the queued task did not wait for the busy P (waited {waited:?}): the test did not \
         set up its case"
    );
    assert_eq!(wakes_while_busy, 0, "sysmon woke Ms while every P ran");
    assert_eq!(wakes_after, 0, "sysmon woke Ms for an emptied ring");
}

fn ring_wakes_here() -> u64 {
    context::current()
        .expect("on the runtime")
        .sysmon_ring_wakes
        .load(Relaxed)
}
