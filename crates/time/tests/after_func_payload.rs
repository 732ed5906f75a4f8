//! Issue 17, item 2: an `after_func`'s closure is user code, and dropping it may wake tasks.
//! It must be released as soon as the timer fired and the handle is gone, and never dropped
//! under a runtime lock. The scenario of both bugs: an `after_func` reset earlier, so that
//! the timer heap *promotes* it and leaves a stale entry at the old deadline (an hour away),
//! then fires at the new one.

#[path = "support/canary.rs"]
mod canary;

use canary::Canary;
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::mpsc;
use std::sync::Arc;
use std::time::Duration;

use gort_sched::{Builder, Runtime};
use gort_time::after_func;

const HOUR: Duration = Duration::from_secs(3600);
/// Far beyond anything these tests need on a loaded machine: only a hang or a leak reaches it.
const PATIENCE: Duration = Duration::from_secs(20);

/// Arms `n` after_funcs an hour away from a thread without a P (so they spread over the Ps
/// round-robin), resets each to 1 ms (modified earlier: promoted when it comes due, leaving
/// a stale entry an hour away, behind enough live timers that nothing removes it), waits until every one fired and drops the handles. `keep`
/// gives what closure `i` owns.
fn fire_promoted<T: Send + Sync + 'static>(rt: &Runtime, keep: impl Fn(usize) -> T, n: usize) {
    let (fired_tx, fired_rx) = mpsc::channel::<()>();
    rt.block_on(async {
        // Live timers due before the stale entries (which are dropped when they reach the
        // root) and enough of them for the 1/4 rule to leave the stale ones alone.
        for _ in 0..16 * n {
            let _ = after_func(HOUR / 2, || {});
        }
        let handles: Vec<_> = (0..n)
            .map(|i| {
                let owned = keep(i);
                let fired = fired_tx.clone();
                after_func(HOUR, move || {
                    let _ = &owned;
                    let _ = fired.send(());
                })
            })
            .collect();
        for h in &handles {
            assert!(
                h.reset(Duration::from_millis(1)),
                "reset of a pending timer"
            );
        }
        // Block this thread (no timer of its own on any heap) until every closure ran.
        for _ in 0..n {
            fired_rx
                .recv_timeout(PATIENCE)
                .expect("an after_func did not fire");
        }
        drop(handles);
    });
}

/// Item 2, third bullet: a fired after_func whose reset was promoted kept its closure alive
/// until the stale entry reached the root (an hour here). Now the run releases it at once.
#[test]
fn fired_promoted_after_func_releases_its_closure_at_once() {
    let rt = Builder::new().procs(2).build().unwrap();
    let dropped = Arc::new(AtomicUsize::new(0));
    fire_promoted(&rt, |_| Canary(dropped.clone()), 4);
    let start = std::time::Instant::now();
    while dropped.load(SeqCst) < 4 {
        assert!(
            start.elapsed() < PATIENCE,
            "{} of 4 fired closures still alive after their handles were dropped",
            4 - dropped.load(SeqCst)
        );
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// Item 2, first bullet: `set_procs` dropped the stale entries of the P it retired under the
/// scheduler lock; the last reference to a fired after_func's closure went with them, and the
/// closure's channel `Sender`, dropped, woke its receiver, whose wake-up took the same lock:
/// `set_procs` (or the retiring M) hung for ever.
#[test]
fn set_procs_never_drops_a_closure_under_the_scheduler_lock() {
    const N: usize = 4;
    let rt = Arc::new(Builder::new().procs(2).build().unwrap());
    // One channel per closure: dropping any closure's Sender wakes a task.
    let (closed_tx, closed_rx) = mpsc::channel::<()>();
    let mut senders = Vec::new();
    for _ in 0..N {
        let (tx, rx) = gort_chan::bounded::<()>(1);
        let closed = closed_tx.clone();
        rt.spawn(async move {
            assert_eq!(rx.recv().await, None);
            let _ = closed.send(());
        });
        senders.push(std::sync::Mutex::new(Some(tx)));
    }
    let senders = Arc::new(senders);
    fire_promoted(&rt, |i| senders[i].lock().unwrap().take().unwrap(), N);

    let (done_tx, done_rx) = mpsc::channel();
    let r = rt.clone();
    std::thread::spawn(move || {
        r.set_procs(1);
        let _ = done_tx.send(());
    });
    let resized = done_rx.recv_timeout(PATIENCE).is_ok();
    let closed = (0..N).all(|_| closed_rx.recv_timeout(PATIENCE).is_ok());
    if !(resized && closed) {
        std::mem::forget(rt); // hung: dropping it would hang the test too
        panic!("set_procs returned: {resized}; every closure's Sender dropped: {closed}");
    }
}

/// The scheduler's half of the payload rule: a payload that `move_to` must let go of (one
/// installed on a stopped timer that was then dropped, so the heap's `Deleted` entry holds the
/// last reference) comes back in `Released`, which `set_procs` drops after the scheduler
/// lock. Before, it dropped under that lock, and its `Sender` woke a task: a hang in 2 of 5
/// runs (whether that wake-up needs the lock depends on what the Ms are doing).
#[test]
fn set_procs_drops_what_move_to_lets_go_of_after_the_scheduler_lock() {
    use gort_sched::timer_api::modtimer;
    use gort_timer::{del, nanotime, Timer};

    const N: usize = 4;
    let rt = Arc::new(Builder::new().procs(2).build().unwrap());
    let (closed_tx, closed_rx) = mpsc::channel::<()>();
    let mut senders = Vec::new();
    for _ in 0..N {
        let (tx, rx) = gort_chan::bounded::<()>(1);
        let closed = closed_tx.clone();
        rt.spawn(async move {
            assert_eq!(rx.recv().await, None);
            let _ = closed.send(());
        });
        senders.push(tx);
    }
    rt.block_on(async {
        // From a thread without a P, so the timers spread over both Ps; behind live timers
        // (due earlier, and enough of them) so that nothing removes the stopped ones first.
        let _live: Vec<_> = (0..16 * N).map(|_| after_func(HOUR / 2, || {})).collect();
        for tx in senders {
            let t = Timer::new();
            let when = nanotime() + HOUR.as_nanos() as i64;
            modtimer(&t, when, 0, None).expect("in a runtime");
            assert!(del(&t));
            t.set_fire(Arc::new(move |_| {
                let _ = &tx;
            }));
        }
    });

    let (done_tx, done_rx) = mpsc::channel();
    let r = rt.clone();
    std::thread::spawn(move || {
        r.set_procs(1);
        let _ = done_tx.send(());
    });
    let resized = done_rx.recv_timeout(PATIENCE).is_ok();
    if !resized {
        std::mem::forget(rt); // hung: dropping it would hang the test too
        panic!("set_procs hung: a payload was dropped under the scheduler lock");
    }
    // Round-robin put every other timer on P 1, which set_procs retired: those payloads
    // were dropped, and their receivers woke.
    assert!(
        (0..N / 2).all(|_| closed_rx.recv_timeout(PATIENCE).is_ok()),
        "a payload of the retired P was not dropped"
    );
}
