//! Edge cases of each ported Go function, driven through the public API with a fake `now`.
#![cfg(not(loom))]

mod common;

use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::Arc;

use common::{armed, quiet, Counted, Log, Wakes};
use gort_timer::*;

// ---- addtimer / doaddtimer -------------------------------------------------------------

#[test]
fn add_publishes_root_and_always_wakes() {
    let ts = Timers::new(0);
    let log = Log::new();
    let wakes = Wakes::default();
    let a = Timer::new();
    a.set_fire(log.fire_for(0));
    ts.add(&a, 50, 0, &wakes);
    assert_eq!(ts.wake_time(), 50);
    let b = Timer::new();
    b.set_fire(log.fire_for(1));
    ts.add(&b, 80, 0, &wakes); // not the new root: Go 1.19 still wakes
    assert_eq!(ts.wake_time(), 50);
    assert_eq!(wakes.take(), vec![50, 80]);
    assert_eq!((ts.len(), a.status(), a.when()), (2, Status::Waiting, 50));
    ts.verify();
}

#[test]
#[should_panic(expected = "initialized timer")]
fn add_rejects_an_armed_timer() {
    let ts = Timers::new(0);
    let t = Timer::new();
    ts.add(&t, 5, 0, &quiet());
    ts.add(&t, 6, 0, &quiet());
}

#[test]
#[should_panic(expected = "initialized timer")]
fn add_rejects_a_stopped_timer() {
    let ts = Timers::new(0);
    let t = Timer::new();
    ts.add(&t, 5, 0, &quiet());
    del(&t);
    ts.add(&t, 6, 0, &quiet());
}

#[test]
#[should_panic(expected = "must be > 0")]
fn add_rejects_zero_deadline() {
    Timers::new(0).add(&Timer::new(), 0, 0, &quiet());
}

#[test]
#[should_panic(expected = "`period` must be >= 0")]
fn add_rejects_negative_period() {
    Timers::new(0).add(&Timer::new(), 1, -1, &quiet());
}

#[test]
fn add_cleans_deleted_and_modified_roots() {
    let ts = Timers::new(0);
    let log = Log::new();
    let a = armed(&ts, &log, 0, 10);
    let b = armed(&ts, &log, 1, 20);
    del(&a);
    modify(&b, 200, 0, &ts, &quiet()); // later: stale key 20
    assert_eq!(ts.len(), 2);
    let _c = armed(&ts, &log, 2, 100); // cleantimers runs first
    assert_eq!(a.status(), Status::Removed);
    assert_eq!(b.status(), Status::Waiting);
    assert_eq!(ts.len(), 2);
    assert_eq!(ts.deleted(), 0);
    assert_eq!(ts.wake_time(), 100);
    ts.verify();
}

// ---- deltimer ----------------------------------------------------------------------------

#[test]
fn del_return_values_follow_the_arming() {
    let ts = Timers::new(0);
    let log = Log::new();
    let t = Timer::new();
    assert!(!del(&t), "fresh timer is not pending");
    t.set_fire(log.fire_for(0));
    ts.add(&t, 10, 0, &quiet());
    assert!(t.is_pending());
    assert!(del(&t));
    assert!(!t.is_pending());
    assert_eq!(t.status(), Status::Deleted);
    assert!(!del(&t), "second stop");
    assert_eq!((ts.len(), ts.deleted()), (1, 1), "lazy: entry stays");
    assert_eq!(ts.check(10, true).ran, 0);
    assert!(log.take().is_empty());
    assert_eq!(t.status(), Status::Removed);
    assert!(!del(&t));
}

#[test]
fn del_after_fire_is_false() {
    let ts = Timers::new(0);
    let log = Log::new();
    let t = armed(&ts, &log, 0, 10);
    assert_eq!(ts.check(10, true).ran, 1);
    assert_eq!(t.status(), Status::NoStatus);
    assert!(!del(&t));
}

#[test]
fn del_modified_timer_is_true() {
    let ts = Timers::new(0);
    let log = Log::new();
    let t = armed(&ts, &log, 0, 10);
    modify(&t, 5, 0, &ts, &quiet());
    assert!(del(&t));
    let u = armed(&ts, &log, 1, 10);
    modify(&u, 50, 0, &ts, &quiet());
    assert!(del(&u));
    assert_eq!(ts.check(100, true).ran, 0);
    assert!(ts.is_empty());
    ts.verify();
}

#[test]
fn del_drops_the_payload_at_once() {
    let ts = Timers::new(0);
    let drops = Arc::new(AtomicUsize::new(0));
    let t = Timer::new();
    t.set_fire(Arc::new(Counted(drops.clone())));
    ts.add(&t, 1_000, 0, &quiet());
    assert_eq!(drops.load(SeqCst), 0);
    assert!(del(&t));
    assert_eq!(
        drops.load(SeqCst),
        1,
        "payload must not wait for lazy removal"
    );
    assert_eq!(ts.len(), 1, "the entry itself is removed lazily");
}

#[test]
fn del_counts_stopped() {
    let ts = Timers::new(0);
    let log = Log::new();
    let ts_ = (0..4)
        .map(|i| armed(&ts, &log, i, 10 + i as i64))
        .collect::<Vec<_>>();
    for t in &ts_[..3] {
        del(t);
    }
    let s = ts.stats();
    assert_eq!((s.stopped, s.deleted, s.pending), (3, 3, 1));
}

// ---- modtimer / resettimer ---------------------------------------------------------------

#[test]
fn modify_earlier_is_lazy_and_wakes() {
    let ts = Timers::new(0);
    let log = Log::new();
    let wakes = Wakes::default();
    let t = armed(&ts, &log, 0, 100);
    let _u = armed(&ts, &log, 1, 90);
    assert!(modify(&t, 40, 0, &ts, &wakes));
    assert_eq!(t.status(), Status::ModifiedEarlier);
    assert_eq!(t.when(), 40);
    assert_eq!(wakes.take(), vec![40]);
    assert_eq!(ts.wake_time(), 40, "summary lowered");
    ts.verify();
    assert_eq!(ts.check(39, true).ran, 0);
    assert_eq!(ts.check(40, true).ran, 1);
    assert_eq!(log.take(), vec![(0, 40)]);
    assert_eq!(ts.stats().adjusted, 1);
    ts.verify();
}

/// The first earlier reset that `adjust` applies promotes the timer (a second, indexed entry;
/// the first turns stale and counts as deleted); later ones re-key it in place. The stale
/// entry never fires, not even after the timer is re-armed behind it. (Non-local checks:
/// a local one would apply the 1/4 rule to these tiny heaps and clear the stale entry.)
#[test]
fn modify_earlier_promotes_once_and_the_stale_entry_never_fires() {
    let ts = Timers::new(0);
    let log = Log::new();
    let t = armed(&ts, &log, 0, 1000);
    let _u = armed(&ts, &log, 1, 2000);
    let _v = armed(&ts, &log, 2, 990); // keeps the stale entry off the root below
    assert!(modify(&t, 900, 0, &ts, &quiet()));
    assert!(modify(&t, 950, 0, &ts, &quiet())); // still earlier than the key 1000
    let c = ts.check(900, false);
    assert_eq!((c.ran, c.next), (0, 950), "promoted, not due");
    let s = ts.stats();
    assert_eq!(
        (ts.len(), s.deleted, s.pending),
        (4, 1, 3),
        "one stale entry"
    );
    ts.verify();

    assert!(modify(&t, 920, 0, &ts, &quiet()));
    assert_eq!(ts.check(920, false).ran, 1);
    assert_eq!(log.take(), vec![(0, 920)]);
    assert_eq!(ts.len(), 3, "re-keyed in place: no third entry of t");
    ts.verify();

    // Fired (which released the payload); re-armed later than its stale entry's key 1000.
    t.set_fire(log.fire_for(0));
    assert!(!modify(&t, 1500, 0, &ts, &quiet()));
    ts.verify();
    let c = ts.check(1000, false);
    assert_eq!(
        (c.ran, c.next),
        (1, 1500),
        "the stale entry is dropped, not run"
    );
    assert_eq!(log.take(), vec![(2, 990)]);
    assert_eq!((ts.len(), ts.deleted()), (2, 0));
    ts.verify();
    assert_eq!(ts.check(2000, false).ran, 2);
    assert_eq!(log.take(), vec![(0, 1500), (1, 2000)]);
    assert!(ts.is_empty());
}

/// `move_to` leaves stale entries behind, and a promoted timer stays indexed in its new heap.
#[test]
fn move_drops_stale_entries_and_keeps_promoted_timers_indexed() {
    let (a, b) = (Timers::new(0), Timers::new(1));
    let log = Log::new();
    let t = armed(&a, &log, 0, 1000);
    let _u = armed(&a, &log, 1, 2000);
    modify(&t, 900, 0, &a, &quiet());
    modify(&t, 950, 0, &a, &quiet());
    assert_eq!(a.check(900, false).ran, 0);
    assert_eq!(a.deleted(), 1);
    drop(a.move_to(&b, &quiet()));
    assert!(a.is_empty());
    assert_eq!(
        (b.len(), b.deleted()),
        (2, 0),
        "the stale entry stayed behind"
    );
    b.verify();
    // In place again: an earlier reset adds no entry.
    modify(&t, 930, 0, &b, &quiet());
    assert_eq!(b.check(920, false).ran, 0);
    assert_eq!((b.len(), b.deleted()), (2, 0));
    b.verify();
    assert_eq!(b.check(2000, false).ran, 2);
    assert_eq!(log.take(), vec![(0, 930), (1, 2000)]);
}

#[test]
fn modify_later_does_not_wake_and_fires_late() {
    let ts = Timers::new(0);
    let log = Log::new();
    let wakes = Wakes::default();
    let t = armed(&ts, &log, 0, 10);
    assert!(modify(&t, 30, 0, &ts, &wakes));
    assert_eq!(t.status(), Status::ModifiedLater);
    assert!(wakes.take().is_empty());
    assert_eq!(
        ts.wake_time(),
        10,
        "stale-early key: an early wake-up, never a late one"
    );
    let c = ts.check(10, true);
    assert_eq!(
        (c.ran, c.next),
        (0, 30),
        "re-keyed at the root instead of firing"
    );
    assert_eq!(ts.check(30, true).ran, 1);
    assert_eq!(log.take(), vec![(0, 30)]);
}

#[test]
fn modify_compares_with_the_heap_key_not_the_old_nextwhen() {
    let ts = Timers::new(0);
    let log = Log::new();
    let t = armed(&ts, &log, 0, 100);
    modify(&t, 300, 0, &ts, &quiet()); // later than key 100
    modify(&t, 200, 0, &ts, &quiet()); // earlier than nextwhen, later than the key
    assert_eq!(t.status(), Status::ModifiedLater);
    modify(&t, 50, 0, &ts, &quiet());
    assert_eq!(t.status(), Status::ModifiedEarlier);
    assert_eq!(ts.check(50, true).ran, 1);
    assert_eq!(log.take(), vec![(0, 50)]);
}

#[test]
fn modify_reactivates_into_home() {
    let (p0, p1) = (Timers::new(0), Timers::new(1));
    let log = Log::new();
    let wakes = Wakes::default();
    let t = armed(&p0, &log, 0, 10);
    assert_eq!(p0.check(10, true).ran, 1);
    // Fired (NoStatus): goes to the caller's heap, not the old one.
    assert!(!modify(&t, 20, 0, &p1, &wakes));
    assert_eq!((p0.len(), p1.len()), (0, 1));
    assert_eq!(wakes.take(), vec![20]);
    // Stopped and removed: same.
    assert!(del(&t));
    assert_eq!(p1.check(20, true).ran, 0);
    assert_eq!(t.status(), Status::Removed);
    t.set_fire(log.fire_for(0)); // del dropped the payload
    assert!(!modify(&t, 30, 0, &p0, &quiet()));
    assert_eq!((p0.len(), p1.len()), (1, 0));
    assert_eq!(p0.check(30, true).ran, 1);
    assert_eq!(log.take(), vec![(0, 10), (0, 30)]);
    assert_eq!(p0.stats().modified, 1);
}

/// A timer left in one heap's modified-earlier list when it leaves that heap (stopped, then
/// removed by the next add's clean-up) and moved earlier in another heap must go on the
/// other heap's list: its mark in the first list is not a mark in the second (`queued` is
/// a flag, cleared when a timer leaves its heap).
#[test]
fn a_timer_stale_in_one_early_list_is_listed_again_in_its_next_heap() {
    let (p0, p1) = (Timers::new(0), Timers::new(1));
    let log = Log::new();
    let t = armed(&p0, &log, 0, 100);
    modify(&t, 50, 0, &p0, &quiet());
    assert_eq!(
        t.status(),
        Status::ModifiedEarlier,
        "listed in p0's early list"
    );
    assert!(del(&t));
    // The next add cleans the deleted root out: `t` leaves p0, its entry in p0's early list
    // left behind (the list is taken only by a check that is due).
    let u = armed(&p0, &log, 1, 1_000);
    assert_eq!(t.status(), Status::Removed);
    t.set_fire(log.fire_for(0));
    assert!(
        !modify(&t, 200, 0, &p1, &quiet()),
        "removed: armed anew in p1"
    );
    // p1's root, so that only the early list (not a re-key at the root) can bring `t` up.
    let v = armed(&p1, &log, 2, 100);
    modify(&t, 20, 0, &p1, &quiet());
    assert_eq!(t.status(), Status::ModifiedEarlier);
    p1.verify();
    assert_eq!(p1.wake_time(), 20);
    assert_eq!(
        p1.check(20, true).ran,
        1,
        "moved earlier in p1: runs at 20, not 200"
    );
    assert_eq!(log.take(), vec![(0, 20)]);
    assert_eq!(p1.check(100, true).ran, 1);
    assert_eq!(log.take(), vec![(2, 100)]);
    // p0 takes its list (the stale entry names another owner) and runs `u` alone.
    assert_eq!(p0.check(1_000, true).ran, 1);
    assert_eq!(log.take(), vec![(1, 1_000)]);
    p0.verify();
    drop((u, v));
}

#[test]
fn modify_resurrects_a_deleted_entry_in_place() {
    let (p0, p1) = (Timers::new(0), Timers::new(1));
    let log = Log::new();
    let t = armed(&p0, &log, 0, 10);
    assert!(del(&t));
    assert_eq!(p0.deleted(), 1);
    t.set_fire(log.fire_for(0)); // del dropped the payload
    assert!(!modify(&t, 5, 0, &p1, &quiet()), "stopped: not pending");
    assert_eq!(p0.deleted(), 0);
    assert_eq!((p0.len(), p1.len()), (1, 0), "still in its old heap");
    assert_eq!(t.status(), Status::ModifiedEarlier);
    p0.verify();
    assert_eq!(p0.check(5, true).ran, 1);
    assert_eq!(log.take(), vec![(0, 5)]);
}

#[test]
#[should_panic(expected = "must be > 0")]
fn modify_rejects_zero_deadline() {
    let ts = Timers::new(0);
    modify(&Timer::new(), 0, 0, &ts, &quiet());
}

#[test]
#[should_panic(expected = "`period` must be >= 0")]
fn modify_rejects_negative_period() {
    let ts = Timers::new(0);
    modify(&Timer::new(), 1, -5, &ts, &quiet());
}

#[test]
fn reset_keeps_the_period() {
    let ts = Timers::new(0);
    let log = Log::new();
    let t = Timer::new();
    t.set_fire(log.fire_for(0));
    ts.add(&t, 10, 7, &quiet());
    assert!(reset(&t, 20, &ts, &quiet()));
    assert_eq!(t.period(), 7);
    assert_eq!(ts.check(20, true).ran, 1);
    assert_eq!(t.when(), 27);
    assert_eq!(ts.check(27, true).ran, 1);
    assert_eq!(log.take(), vec![(0, 20), (0, 27)]);
}

// ---- runtimer / runOneTimer ----------------------------------------------------------------

#[test]
fn runtimer_runs_in_deadline_order_and_reports_next() {
    let ts = Timers::new(0);
    let log = Log::new();
    let _k: Vec<_> = [50, 10, 40, 20, 30, 60]
        .iter()
        .enumerate()
        .map(|(i, &w)| armed(&ts, &log, i, w))
        .collect();
    let c = ts.check(45, true);
    assert_eq!((c.ran, c.next), (4, 50));
    let whens: Vec<_> = log.take().iter().map(|x| x.1).collect();
    assert_eq!(whens, vec![10, 20, 30, 40]);
    ts.verify();
}

#[test]
fn runtimer_skips_deleted_root_and_empties() {
    let ts = Timers::new(0);
    let log = Log::new();
    let a = armed(&ts, &log, 0, 10);
    del(&a);
    let c = ts.check(10, false);
    assert_eq!((c.ran, c.next), (0, 0));
    assert!(ts.is_empty());
    assert_eq!(ts.wake_time(), 0);
}

#[test]
fn periodic_skips_missed_ticks_and_passes_the_due_deadline() {
    let ts = Timers::new(0);
    let log = Log::new();
    let t = Timer::new();
    t.set_fire(log.fire_for(0));
    ts.add(&t, 100, 10, &quiet());
    assert_eq!(ts.check(100, true).ran, 1);
    assert_eq!(ts.check(135, true).ran, 1, "one run for three missed ticks");
    assert_eq!(t.when(), 140);
    assert_eq!(log.take(), vec![(0, 100), (0, 110)]);
    assert!(t.is_pending());
    assert!(del(&t));
}

#[test]
fn periodic_overflow_saturates_to_never() {
    let ts = Timers::new(0);
    let log = Log::new();
    let t = Timer::new();
    t.set_fire(log.fire_for(0));
    ts.add(&t, NEVER - 10, NEVER / 2, &quiet());
    assert_eq!(ts.check(NEVER - 10, true).ran, 1);
    assert_eq!(t.when(), NEVER);
    assert_eq!(ts.check(NEVER - 1, true).ran, 0);
    ts.verify();
}

/// Re-arms its own timer twice, 5 ns after each deadline, re-installing itself (a one-shot
/// run released it).
struct Rearm {
    ts: Arc<Timers>,
    t: Arc<Timer>,
    count: AtomicUsize,
}

impl Fire for Rearm {
    fn fire(self: Arc<Self>, when: Nanos) {
        if self.count.fetch_add(1, SeqCst) < 2 {
            let me: Arc<dyn Fire> = self.clone();
            modify_fire(&self.t, when + 5, 0, &me, &self.ts, &|_| {});
        }
    }
}

#[test]
fn callback_may_rearm_its_own_timer() {
    // The lock is released around callbacks, so a callback may call back in.
    let ts = Arc::new(Timers::new(0));
    let t = Timer::new();
    let f = Arc::new(Rearm {
        ts: ts.clone(),
        t: t.clone(),
        count: AtomicUsize::new(0),
    });
    t.set_fire(f.clone());
    ts.add(&t, 10, 0, &quiet());
    assert_eq!(ts.check(100, true).ran, 3, "10, 15, 20 are all due at 100");
    assert_eq!(f.count.load(SeqCst), 3);
    // The last one-shot run released the payload, and with it the payload -> timer cycle.
    assert_eq!(Arc::strong_count(&f), 1);
    drop(f);
    assert_eq!(Arc::strong_count(&t), 1);
}

// ---- check_at_most (a bounded round) -----------------------------------------------------

#[test]
fn check_at_most_runs_the_earliest_and_leaves_the_rest_due_in_order() {
    let ts = Timers::new(0);
    let log = Log::new();
    // Added out of order: the bound takes the earliest deadlines, not the first added.
    let timers: Vec<_> = (0..10_000)
        .map(|i| armed(&ts, &log, i, 1 + (i as Nanos * 7919) % 10_000))
        .collect();
    let c = ts.check_at_most(20_000, true, 128);
    assert_eq!(c.ran, 128);
    assert!(
        c.next != 0 && c.next <= 20_000,
        "the rest is still due: {c:?}"
    );
    let fired = log.take();
    let whens: Vec<Nanos> = fired.iter().map(|&(_, w)| w).collect();
    assert_eq!(whens, (1..=128).collect::<Vec<Nanos>>());
    assert_eq!(ts.len(), 10_000 - 128);
    ts.verify();
    // Rounds without a bound finish the backlog, still in deadline order.
    let c = ts.check(20_000, true);
    assert_eq!((c.ran, c.next, ts.len()), (10_000 - 128, 0, 0));
    let whens: Vec<Nanos> = log.take().iter().map(|&(_, w)| w).collect();
    assert_eq!(whens, (129..=10_000).collect::<Vec<Nanos>>());
    drop(timers);
}

#[test]
fn try_check_at_most_is_bounded_too() {
    let ts = Timers::new(0);
    let log = Log::new();
    let _timers: Vec<_> = (0..10)
        .map(|i| armed(&ts, &log, i, 10 + i as Nanos))
        .collect();
    let c = ts
        .try_check_at_most(100, 3)
        .expect("the heap is not locked");
    assert_eq!((c.ran, c.next, ts.len()), (3, 13, 7));
    let c = ts.try_check_at_most(100, usize::MAX).expect("not locked");
    assert_eq!((c.ran, c.next, ts.len()), (7, 0, 0));
}
