//! A timer channel's reset on a thread whose clock trails another's.
//!
//! gort's clock extrapolates by the time-stamp counter per thread, so a reading may trail one
//! another thread took a moment earlier (by up to `gort_timer::CLOCK_TRAIL`). A fire in flight was
//! observed due on the firing thread's clock; a `reset(0)` that reads a trailing clock after
//! stopping the timer must still start its arming after that fire's deadline, or the stale
//! value is taken for the new arming's: received after `reset` returned (Go 1.23's rule
//! broken), and the new arming's own value dropped. This walks that interleaving step by step
//! on the real `Arming` with a clock that trails by a set amount.

use std::sync::{Arc, Mutex};

use gort_time::arming::{Arming, Heap, OneShot, Sink};
use gort_time::Instant;

/// How far this thread's readings trail the clock the fake scheduler observes (under
/// `gort_timer::CLOCK_TRAIL`, as the real clock's do).
const TRAIL: i64 = 500;

/// A capacity-1 channel.
#[derive(Default)]
struct OneSlot(Mutex<Option<i64>>);

impl Sink for OneSlot {
    type Wakes = ();
    type Chan = ();
    fn try_send(&self, _: &(), v: Instant, _: &mut ()) -> bool {
        let mut slot = self.0.lock().unwrap();
        if slot.is_some() {
            return false;
        }
        *slot = Some(v.as_nanos());
        true
    }
    fn take_buffered(&self, _: &(), maybe_buffered: bool, _: &mut ()) -> usize {
        let taken = self.0.lock().unwrap().take();
        assert!(
            maybe_buffered || taken.is_none(),
            "the arming said nothing was sent since the last drain, but {taken:?} was buffered"
        );
        usize::from(taken.is_some())
    }
}

/// The arming's end of the channel (the test reads the channel too).
struct SlotEnd(Arc<OneSlot>);

impl Sink for SlotEnd {
    type Wakes = ();
    type Chan = ();
    fn try_send(&self, _: &(), v: Instant, _: &mut ()) -> bool {
        self.0.try_send(&(), v, &mut ())
    }
    fn take_buffered(&self, _: &(), maybe_buffered: bool, _: &mut ()) -> usize {
        self.0.take_buffered(&(), maybe_buffered, &mut ())
    }
}

/// The runtime timer (a pending deadline, 0 if in no heap) and a clock: `clock` is what the
/// scheduler thread observes; `now()` is the resetting thread's reading, `TRAIL` behind.
#[derive(Default)]
struct TrailingRt {
    timer: Mutex<i64>,
    clock: Mutex<i64>,
}

impl Heap for TrailingRt {
    type Rt = ();
    type Chan = ();

    fn chan(&self) -> &() {
        &()
    }

    fn now(&self) -> i64 {
        *self.clock.lock().unwrap() - TRAIL
    }
    fn now_exact(&self) -> i64 {
        *self.clock.lock().unwrap()
    }
    fn add(&self, _rt: &mut (), when: i64, _period: i64) {
        *self.timer.lock().unwrap() = when;
    }
    fn del(&self, _rt: &mut ()) {
        *self.timer.lock().unwrap() = 0;
    }
}

#[test]
fn a_fire_in_flight_is_not_taken_for_the_value_of_a_zero_reset_on_a_trailing_clock() {
    let rt = TrailingRt::default();
    *rt.clock.lock().unwrap() = 10_000;
    let chan = Arc::new(OneSlot::default());
    let arming = Arming::<_, _, OneShot>::new(SlotEnd(chan.clone()), ());
    assert!(!arming.reset(&rt, |now| now + 1_000, 0), "first arming");
    arming.block(&rt); // a receiver waits: the timer is in a heap
    let first = *rt.timer.lock().unwrap();
    assert!(first > 0);

    // The scheduler observes the deadline and claims the timer, then is delayed before it
    // runs the callback (no lock held, as gort-timer's `runtimer` does).
    *rt.clock.lock().unwrap() = first;
    *rt.timer.lock().unwrap() = 0;

    // Meanwhile, a moment later: reset(0) on a thread whose reading trails the scheduler's.
    *rt.clock.lock().unwrap() = first + 1;
    assert!(
        arming.reset(&rt, |now| now, 0),
        "the first arming had sent nothing"
    );

    // The late fire of the first arming arrives: it must be dropped.
    arming.fire(first, &rt);
    let received = chan.0.lock().unwrap().take();
    assert_ne!(
        received,
        Some(first),
        "a value of the arming before reset was received after reset returned"
    );

    // The new arming delivers its own value, due at or after the reset.
    let due = *rt.timer.lock().unwrap();
    assert!(
        due > first,
        "the new arming starts after the stale fire's deadline"
    );
    *rt.clock.lock().unwrap() = due;
    *rt.timer.lock().unwrap() = 0;
    assert!(arming.fire(due, &rt), "the new arming's own value is sent");
    assert_eq!(chan.0.lock().unwrap().take(), Some(due));
}
