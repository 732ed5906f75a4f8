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
const PATIENCE: Duration = Duration::from_secs(6);
/// The wait each round must stay under: sysmon looks every 10 ms while a P idles (10-30 ms
/// waits), and a machine at load 15 on 2 cores delayed one round in 750 to 260 ms and one in
/// ~200 to 1 s (sysmon's or the new M's thread waiting for a CPU), not to the whole give-up.
const BOUND: Duration = Duration::from_secs(2);
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

/// What [`queue_and_compute`] saw.
#[derive(Debug)]
struct Round {
    /// How long the queued task waited.
    waited: Duration,
    /// Whether it ran on another thread than the one that queued it and computed.
    elsewhere: bool,
    /// sysmon's wakes for rings meanwhile.
    ring_wakes: u64,
}

/// Queues a task into this P's ring waking nobody, then computes without yielding until it
/// ran or `PATIENCE` passed.
fn queue_and_compute() -> Round {
    let before = ring_wakes_here();
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
    Round {
        waited,
        elsewhere,
        ring_wakes: ring_wakes_here() - before,
    }
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
    let late = rounds.iter().filter(|r| r.waited > BOUND).count();
    assert_eq!(
        late, 0,
        "a task waited in a busy P's ring while the other P idled: {late} of {ROUNDS} rounds \
         over {BOUND:?}: {rounds:?}"
    );
    assert!(
        rounds.iter().all(|r| r.elsewhere),
        "a task ran on the thread that never yielded: {rounds:?}"
    );
    // Each round's task came out by one wake of sysmon's: none else looks (a fresh runtime has
    // no parked M), and the woken M emptied the ring, so sysmon woke nobody again.
    assert!(
        rounds.iter().all(|r| r.ring_wakes == 1),
        "sysmon woke Ms for a ring other than once a round: {rounds:?}"
    );
}

/// With every P busy nothing idles: sysmon wakes nobody for a ring (the other P runs the task
/// once its own task ends). And once the ring is emptied it wakes nobody again, however long
/// its holder computes on.
#[test]
fn sysmon_wakes_nobody_for_a_ring_while_every_p_runs_or_once_it_is_emptied() {
    const SPELL: Duration = Duration::from_millis(300);
    let rt = crate::Builder::new().procs(2).build().unwrap();
    let (ran_early, wakes_while_busy, waited, wakes_after) = rt
        .block_on(rt.spawn(async {
            let (started, release) = (
                Arc::new(AtomicBool::new(false)),
                Arc::new(AtomicBool::new(false)),
            );
            let (started2, release2) = (started.clone(), release.clone());
            // The other P's task: computes until released (bounded, so a failure never hangs).
            let hog = crate::spawn(async move {
                started2.store(true, SeqCst);
                let start = Instant::now();
                while !release2.load(SeqCst) && start.elapsed() < 2 * PATIENCE {
                    std::hint::spin_loop();
                }
            });
            while !started.load(SeqCst) {
                std::hint::spin_loop();
            }
            let before = ring_wakes_here();
            let ran = Arc::new(AtomicBool::new(false));
            let ran2 = ran.clone();
            drop(spawn_into_ring_waking_nobody(async move {
                ran2.store(true, SeqCst)
            }));
            compute_for(SPELL);
            let ran_early = ran.load(SeqCst);
            let wakes_while_busy = ring_wakes_here() - before;
            // The other P's task ends; its M takes the queued task.
            release.store(true, SeqCst);
            let start = Instant::now();
            while !ran.load(SeqCst) && start.elapsed() < PATIENCE {
                std::hint::spin_loop();
            }
            let waited = start.elapsed();
            // The ring is empty now; compute on with the other P idle.
            let before = ring_wakes_here();
            compute_for(SPELL);
            let wakes_after = ring_wakes_here() - before;
            hog.await.unwrap();
            (ran_early, wakes_while_busy, waited, wakes_after)
        }))
        .unwrap();
    assert!(
        !ran_early && waited < BOUND,
        "the queued task ran while every P was busy ({ran_early}) or not once one was free \
         (waited {waited:?}): the test did not set up its case"
    );
    assert_eq!(wakes_while_busy, 0, "sysmon woke Ms while every P ran");
    assert_eq!(wakes_after, 0, "sysmon woke Ms for an emptied ring");
}

/// Computes without yielding for `d`.
fn compute_for(d: Duration) {
    let start = Instant::now();
    while start.elapsed() < d {
        std::hint::spin_loop();
    }
}

fn ring_wakes_here() -> u64 {
    context::current()
        .expect("on the runtime")
        .sysmon_ring_wakes
        .load(Relaxed)
}
