//! The 1/4 cleanup rule, `move_to` and `drain`, on a fake clock.
#![cfg(not(loom))]

mod common;

use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::Arc;

use common::{armed, quiet, Counted, Log, Wakes};
use gort_timer::*;

// ---- clearDeletedTimers (the 1/4 rule) ------------------------------------------------------

#[test]
fn quarter_rule_cleans_only_the_local_heap() {
    let ts = Timers::new(0);
    let log = Log::new();
    let all: Vec<_> = (0..8)
        .map(|i| armed(&ts, &log, i, 1_000 + i as i64))
        .collect();
    for t in &all[1..4] {
        del(t); // 3 of 8 > 8/4, but the root (1_000) is live, so runtimer removes nothing
    }
    modify(&all[5], 2_000, 0, &ts, &quiet());
    let c = ts.check(10, false);
    assert_eq!(
        (c.ran, c.next, ts.len()),
        (0, 1_000, 8),
        "stealers do not clean"
    );
    let c = ts.check(10, true);
    assert_eq!((c.ran, c.next, ts.len(), ts.deleted()), (0, 1_000, 5, 0));
    assert_eq!(all[5].status(), Status::Waiting, "re-keyed by the sweep");
    assert_eq!(all[1].status(), Status::Removed);
    ts.verify();
    assert_eq!(ts.check(2_000, true).ran, 5);
}

#[test]
fn quarter_rule_threshold_is_strict() {
    let ts = Timers::new(0);
    let log = Log::new();
    let all: Vec<_> = (0..8)
        .map(|i| armed(&ts, &log, i, 1_000 + i as i64))
        .collect();
    del(&all[1]);
    del(&all[2]); // 2 of 8 is not > 8/4
    ts.check(10, true);
    assert_eq!(ts.len(), 8);
}

// ---- cleantimers on arming ---------------------------------------------------------------------

#[test]
fn start_stop_loop_keeps_the_heap_near_its_live_size() {
    // T1's pattern: arm a fresh timer, stop it, never run `check`. Arming clears stopped
    // timers off the top (Go's addtimer) and applies the 1/4 rule, so nothing piles up even
    // behind live timers that stay at the top.
    let ts = Timers::new(0);
    let log = Log::new();
    let live: Vec<_> = (0..100)
        .map(|i| armed(&ts, &log, i, 1_000 + i as i64))
        .collect();
    for i in 0..10_000 {
        let t = Timer::new();
        modify(&t, 2_000_000 + i, 0, &ts, &quiet());
        assert!(del(&t));
        assert!(
            ts.len() <= 100 + 100 / 3 + 2,
            "heap grew to {} after {i} start-stops",
            ts.len()
        );
    }
    for t in &live {
        del(t);
    }
    let t = Timer::new();
    modify(&t, 5_000_000, 0, &ts, &quiet());
    assert_eq!((ts.len(), ts.deleted()), (1, 0), "all stopped timers went");
    ts.verify();
    assert_eq!(ts.check(1_000_000, true).ran, 0, "no stopped timer fires");
}

// ---- moveTimers / drain -----------------------------------------------------------------------

#[test]
fn move_to_moves_live_drops_deleted_and_rekeys_modified() {
    let (p0, p1) = (Timers::new(0), Timers::new(1));
    let log = Log::new();
    let wakes = Wakes::default();
    let a = armed(&p0, &log, 0, 30);
    let b = armed(&p0, &log, 1, 40);
    let c = armed(&p0, &log, 2, 50);
    let d = armed(&p1, &log, 3, 100);
    del(&b);
    modify(&c, 20, 0, &p0, &quiet());
    drop(p0.move_to(&p1, &wakes));
    assert!(p0.is_empty());
    assert_eq!(p0.wake_time(), 0, "every summary of the source is zeroed");
    p0.verify();
    p1.verify();
    assert_eq!(p1.len(), 3);
    assert_eq!(b.status(), Status::Removed);
    assert_eq!(
        (a.status(), c.status(), d.status()),
        (Status::Waiting, Status::Waiting, Status::Waiting)
    );
    assert_eq!(
        wakes.take(),
        vec![20],
        "destination's earliest dropped from 100 to 20"
    );
    assert_eq!(p1.stats().moved, 2);
    assert_eq!(p1.check(1_000, true).ran, 3);
    assert_eq!(
        log.take().iter().map(|x| x.0).collect::<Vec<_>>(),
        vec![2, 0, 3]
    );
}

#[test]
fn move_to_works_in_both_lock_orders() {
    let (p0, p5) = (Timers::new(0), Timers::new(5));
    let log = Log::new();
    let a = armed(&p5, &log, 0, 10);
    drop(p5.move_to(&p0, &quiet())); // higher id to lower id
    assert_eq!((p0.len(), p5.len()), (1, 0));
    drop(p0.move_to(&p5, &quiet()));
    assert_eq!((p0.len(), p5.len()), (1 - 1, 1));
    assert!(del(&a));
    assert_eq!(p5.deleted(), 1);
}

#[test]
#[should_panic(expected = "same Timers")]
fn move_to_self_panics() {
    let p0 = Timers::new(0);
    drop(p0.move_to(&p0, &quiet()));
}

#[test]
fn drain_removes_everything_and_drops_payloads() {
    let ts = Timers::new(0);
    let drops = Arc::new(AtomicUsize::new(0));
    let mut all = Vec::new();
    for i in 0..5 {
        let t = Timer::new();
        t.set_fire(Arc::new(Counted(drops.clone())));
        ts.add(&t, 10 + i, 0, &quiet());
        all.push(t);
    }
    del(&all[0]);
    modify(&all[1], 5, 0, &ts, &quiet());
    assert_eq!(drops.load(SeqCst), 1);
    ts.drain();
    assert_eq!(drops.load(SeqCst), 5);
    assert!(all.iter().all(|t| t.status() == Status::Removed));
    assert_eq!((ts.len(), ts.deleted(), ts.wake_time()), (0, 0, 0));
    ts.verify();
    assert!(!del(&all[2]));
    // A drained heap can be reused.
    all[3].set_fire(Arc::new(|_| {}));
    assert!(!modify(&all[3], 7, 0, &ts, &quiet()));
    assert_eq!(ts.check(7, true).ran, 1);
}

/// A callback that counts the shutdowns it is told of.
struct ToldOfShutdown(Arc<AtomicUsize>);

impl Fire for ToldOfShutdown {
    fn fire(self: Arc<Self>, _when: Nanos) {
        panic!("a drained timer ran");
    }
    fn shutdown(self: Arc<Self>) {
        self.0.fetch_add(1, SeqCst);
    }
}

/// A runtime's shutdown: a waiter parked outside the runtime's tasks must learn that its
/// timer is gone, so a waker is woken; a callback is told, not run, and dropped.
#[test]
fn drain_waking_wakes_wakers_and_drops_callbacks() {
    struct Flag(AtomicUsize);
    impl std::task::Wake for Flag {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, SeqCst);
        }
    }
    let ts = Timers::new(0);
    let woken = Arc::new(Flag(AtomicUsize::new(0)));
    let waiting = Timer::new();
    waiting.set_waker(&std::task::Waker::from(woken.clone()));
    ts.add(&waiting, 10, 0, &quiet());
    let drops = Arc::new(AtomicUsize::new(0));
    let log = Log::new();
    let callback = Timer::new();
    callback.set_fire(Arc::new(Counted(drops.clone())));
    ts.add(&callback, 20, 0, &quiet());
    let logged = armed(&ts, &log, 1, 30);
    let told = Arc::new(AtomicUsize::new(0));
    let waited_on = Timer::new();
    waited_on.set_fire(Arc::new(ToldOfShutdown(told.clone())));
    ts.add(&waited_on, 40, 0, &quiet());
    ts.drain_waking();
    assert_eq!(woken.0.load(SeqCst), 1);
    assert_eq!(drops.load(SeqCst), 1);
    assert_eq!(
        told.load(SeqCst),
        1,
        "a callback was not told of the shutdown"
    );
    assert!(log.take().is_empty(), "a callback was run");
    assert!([&waiting, &callback, &logged, &waited_on]
        .iter()
        .all(|t| t.status() == Status::Removed));
    assert_eq!((ts.len(), ts.wake_time()), (0, 0));
}

#[test]
fn dropping_timers_drains() {
    let t = Timer::new();
    {
        let ts = Timers::new(0);
        ts.add(&t, 10, 0, &quiet());
    }
    assert_eq!(t.status(), Status::Removed);
    assert!(!del(&t));
}

// ---- the slack hint --------------------------------------------------------------------------

#[test]
fn wake_bound_adds_the_root_timers_slack_only() {
    let ts = Timers::new(0);
    assert_eq!(ts.wake_bound(), 0, "no timers");
    let a = Timer::new();
    a.set_slack(500);
    modify(&a, 10_000, 0, &ts, &quiet());
    let b = Timer::new();
    modify(&b, 20_000, 0, &ts, &quiet());
    assert_eq!(
        ts.wake_bound(),
        10_500,
        "the root's deadline plus its slack"
    );
    // Moved earlier lazily: the bound is that deadline itself, with no slack.
    modify(&b, 5_000, 0, &ts, &quiet());
    assert_eq!(ts.wake_bound(), 5_000);
    assert_eq!(ts.check(6_000, true).ran, 1);
    assert_eq!(ts.wake_bound(), 10_500);
    del(&a);
    ts.check(6_000, true);
    assert_eq!(ts.wake_bound(), 0, "the stopped root went; nothing left");
}
