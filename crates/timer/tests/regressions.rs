//! Regression tests named after the Go issues they guard against, on a fake clock.
#![cfg(not(loom))]

mod common;

use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::Arc;
use std::time::Duration;

use common::{quiet, Counted, Log, Wakes};
use gort_timer::*;

/// golang/go#51654: a timer modified earlier and then deleted must not leave a stale
/// modified-earliest summary once the heap empties; the stale value made `wake_time` report
/// a past deadline forever and idle Ms spin.
#[test]
fn go51654_modify_earlier_then_delete_leaves_no_stale_summary() {
    let ts = Timers::new(0);
    let log = Log::new();
    let a = Timer::new();
    a.set_fire(log.fire_for(0));
    ts.add(&a, 100, 0, &quiet());
    modify(&a, 50, 0, &ts, &quiet());
    assert!(del(&a));
    assert_eq!(
        ts.wake_time(),
        50,
        "stale-low is allowed while the entry is heaped"
    );
    // `add` runs cleantimers, which removes the deleted root and empties the heap before
    // inserting: the summary must be cleared right there.
    let b = Timer::new();
    b.set_fire(log.fire_for(1));
    ts.add(&b, 200, 0, &quiet());
    assert_eq!(ts.wake_time(), 200);
    ts.verify();
    for now in [60, 61, 62] {
        let c = ts.check(now, true);
        assert_eq!((c.ran, c.next), (0, 200), "no hot loop at now={now}");
    }
}

#[test]
fn go51654_heap_emptied_by_run_clears_summary() {
    let ts = Timers::new(0);
    let log = Log::new();
    let a = Timer::new();
    a.set_fire(log.fire_for(0));
    ts.add(&a, 100, 0, &quiet());
    modify(&a, 50, 0, &ts, &quiet());
    del(&a);
    // The local quarter rule sweeps the lone deleted entry.
    assert_eq!(ts.check(10, true).ran, 0);
    assert_eq!((ts.len(), ts.wake_time()), (0, 0));
    // Same through the lazy path on a stealer's check once it is due.
    let b = Timer::new();
    b.set_fire(log.fire_for(1));
    ts.add(&b, 100, 0, &quiet());
    modify(&b, 50, 0, &ts, &quiet());
    del(&b);
    assert_eq!(ts.check(50, false), Checked { next: 0, ran: 0 });
    assert_eq!(ts.wake_time(), 0);
    ts.verify();
    assert!(log.take().is_empty());
}

/// golang/go#47762 (Go's TestTimerModifiedEarlier): stopping and resetting a long timer to
/// the past, repeatedly, must not lose the reset; the timer fires at the next check.
#[test]
fn go47762_reset_to_the_past_is_not_ignored() {
    let ts = Timers::new(0);
    let log = Log::new();
    let hour = 3_600_000_000_000i64;
    let mut now = 1_000;
    for i in 0..1000 {
        let t = Timer::new();
        t.set_fire(log.fire_for(i));
        ts.add(&t, now + hour, 0, &quiet());
        for _ in 0..10 {
            if !del(&t) {
                panic!("timer {i} fired without a check");
            }
            t.set_fire(log.fire_for(i));
            assert!(!modify(&t, 1, 0, &ts, &quiet()), "stopped: not pending");
        }
        assert!(
            ts.wake_time() <= now,
            "the reset must be visible to the scheduler"
        );
        now += 1;
        assert_eq!(ts.check(now, true).ran, 1, "timer {i} must fire at once");
        assert_eq!(log.take(), vec![(i, 1)]);
    }
    ts.verify();
}

/// Same with many timers reset earlier between checks, some of them twice (list dedupe).
#[test]
fn go47762_many_resets_between_checks() {
    let ts = Timers::new(0);
    let log = Log::new();
    let all: Vec<_> = (0..300)
        .map(|i| {
            let t = Timer::new();
            t.set_fire(log.fire_for(i));
            ts.add(&t, 10_000 + i as i64, 0, &quiet());
            t
        })
        .collect();
    for (i, t) in all.iter().enumerate() {
        modify(t, 5_000 + i as i64, 0, &ts, &quiet());
        if i % 2 == 0 {
            modify(t, 4_000 + i as i64, 0, &ts, &quiet());
        }
    }
    ts.verify();
    assert_eq!(ts.check(4_999, true).ran, 150);
    assert_eq!(ts.check(5_299, true).ran, 150);
    assert!(ts.is_empty());
}

/// golang/go#44868: a zero-duration timer must fire at the next check, not behind a far
/// root or after a long poller sleep.
#[test]
fn go44868_zero_duration_timer_fires_promptly() {
    let ts = Timers::new(0);
    let log = Log::new();
    let wakes = Wakes::default();
    let now = 5_000;
    let far = Timer::new();
    far.set_fire(log.fire_for(0));
    ts.add(
        &far,
        deadline_after(now, Duration::from_secs(120)),
        0,
        &quiet(),
    );
    let zero = Timer::new();
    zero.set_fire(log.fire_for(1));
    let when = deadline_after(now, Duration::ZERO);
    assert_eq!(when, now);
    ts.add(&zero, when, 0, &wakes);
    assert_eq!(wakes.take(), vec![now], "the poller is told to wake now");
    assert_eq!(ts.wake_time(), now);
    assert_eq!(ts.check(now, true).ran, 1);
    // And through a reset of the far timer to zero.
    modify(&far, deadline_after(now, Duration::ZERO), 0, &ts, &wakes);
    assert_eq!(wakes.take(), vec![now]);
    assert_eq!(ts.check(now, true).ran, 1);
    assert_eq!(log.take(), vec![(1, now), (0, now)]);
}

/// golang/go#45716: timers (including modified-earlier ones) must survive `move_to` and
/// fire on the destination at the right time.
#[test]
fn go45716_timers_survive_move_to() {
    let (p0, p1) = (Timers::new(0), Timers::new(1));
    let log = Log::new();
    let mk = |i: usize, when: Nanos, p: &Timers| {
        let t = Timer::new();
        t.set_fire(log.fire_for(i));
        p.add(&t, when, 0, &quiet());
        t
    };
    let a = mk(0, 1_000, &p1);
    let _b = mk(1, 2_000, &p1);
    let _c = mk(2, 3_000, &p0);
    modify(&a, 500, 0, &p1, &quiet()); // ModifiedEarlier, only p1's summary knows
    drop(p1.move_to(&p0, &quiet()));
    assert_eq!(
        p0.wake_time(),
        500,
        "the earlier deadline moved with the timer"
    );
    assert_eq!(p1.wake_time(), 0);
    p0.verify();
    // Modify again after the move: the destination's list and summary are used.
    modify(
        &a,
        400,
        0,
        &p1, /* home is irrelevant: it is heaped */
        &quiet(),
    );
    assert_eq!((p0.wake_time(), p1.len()), (400, 0));
    p0.verify();
    assert_eq!(p0.check(400, true).ran, 1);
    assert_eq!(p0.check(3_000, true).ran, 2);
    assert_eq!(log.take(), vec![(0, 400), (1, 2_000), (2, 3_000)]);
}

/// golang/go#60144 and #61542: stopped timers must release their payload at once, though
/// the heap entries go lazily.
#[test]
fn go60144_payloads_of_stopped_timers_are_freed_promptly() {
    let ts = Timers::new(0);
    let drops = Arc::new(AtomicUsize::new(0));
    let all: Vec<_> = (0..1_000)
        .map(|i| {
            let t = Timer::new();
            t.set_fire(Arc::new(Counted(drops.clone())));
            ts.add(&t, 1_000_000 + i, 0, &quiet());
            t
        })
        .collect();
    for t in &all {
        assert!(del(t));
    }
    assert_eq!(
        drops.load(SeqCst),
        1_000,
        "every payload freed without a check"
    );
    assert_eq!(ts.deleted(), 1_000);
    ts.check(1, true);
    assert_eq!(
        (ts.len(), ts.deleted()),
        (0, 0),
        "the quarter rule swept the entries"
    );
}
