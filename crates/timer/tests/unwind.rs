//! A payload that panics while `Timers::check` runs it. The scheduler catches the panic
//! around `check` (gort-sched's `Shared::run_timers`, issue 17 item 3) and relies on what
//! this checks: the payload runs with the heap unlocked and the timer out of every transient
//! status, so after the unwind the heap is whole and the next `check` runs the rest.
#![cfg(not(loom))]

use gort_timer::{Status, Timer, Timers};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::Arc;

#[test]
fn a_panicking_payload_leaves_the_heap_whole_for_the_next_check() {
    let timers = Timers::new(0);
    let ran = Arc::new(AtomicUsize::new(0));
    let bad = Timer::new();
    bad.set_fire(Arc::new(|_| panic!("test: this payload panics")));
    timers.add(&bad, 10, 0, &|_| {});
    let tick = Timer::new();
    let r = ran.clone();
    tick.set_fire(Arc::new(move |_| {
        r.fetch_add(1, SeqCst);
    }));
    timers.add(&tick, 20, 10, &|_| {}); // periodic
    let later = Timer::new();
    let r = ran.clone();
    later.set_fire(Arc::new(move |_| {
        r.fetch_add(1, SeqCst);
    }));
    timers.add(&later, 30, 0, &|_| {});

    let unwound = catch_unwind(AssertUnwindSafe(|| timers.check(35, true)));
    assert!(unwound.is_err(), "the payload's panic reaches the caller");
    timers.verify();
    assert_eq!(
        bad.status(),
        Status::NoStatus,
        "the fired one-shot left the heap"
    );
    assert_eq!(ran.load(SeqCst), 0, "the batch ended at the panic");
    assert!(timers.wake_time() <= 35, "the rest are still due");

    let c = timers.check(35, true);
    assert_eq!(c.ran, 2);
    assert_eq!(ran.load(SeqCst), 2);
    timers.verify();
    assert_eq!(tick.when(), 40, "the periodic one re-armed as usual");
    assert_eq!(timers.len(), 1);
}
