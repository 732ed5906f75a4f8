//! `wake_time`, the clock, payload kinds and `Debug`.
#![cfg(not(loom))]

mod common;

use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::Arc;
use std::task::{Wake, Waker};

use common::{armed, quiet, Log};
use gort_timer::*;

// ---- wake_time, check's lock-free exit, clock -------------------------------------------------

#[test]
fn wake_time_is_min_of_root_and_modified() {
    let ts = Timers::new(0);
    let log = Log::new();
    assert_eq!(ts.wake_time(), 0);
    assert_eq!(ts.check(0, true), Checked { next: 0, ran: 0 });
    let a = armed(&ts, &log, 0, 100);
    assert_eq!(ts.wake_time(), 100);
    modify(&a, 60, 0, &ts, &quiet());
    assert_eq!(ts.wake_time(), 60);
    assert_eq!(ts.check(59, true), Checked { next: 60, ran: 0 });
}

#[test]
fn check_with_zero_now_reads_the_clock() {
    let ts = Timers::new(0);
    let log = Log::new();
    let _t = armed(&ts, &log, 0, nanotime());
    assert_eq!(ts.check(0, true).ran, 1);
    let far = armed(
        &ts,
        &log,
        1,
        deadline_after(nanotime(), std::time::Duration::from_secs(3600)),
    );
    assert_eq!(ts.check(0, true).next, far.when());
}

#[test]
fn clock_is_monotonic_positive_and_tied_to_epoch() {
    let a = nanotime();
    let now = std::time::Instant::now();
    let b = nanotime();
    assert!(a >= 1 && b >= a);
    let since = now.duration_since(epoch()).as_nanos() as i64;
    // gort's clock may trail std's a little (normally under 1 µs; 1 ms here so that a
    // preempted epoch reading cannot flake the test), and never leads it (see `epoch`).
    assert!(
        a <= since && since <= b + 1_000_000,
        "{a} <= {since} <= {b} + 1 ms"
    );
    assert_eq!(
        deadline_after(NEVER - 1, std::time::Duration::from_nanos(5)),
        NEVER
    );
}

// ---- payload kinds -----------------------------------------------------------------------------

struct CountWake(AtomicUsize);
impl Wake for CountWake {
    fn wake(self: Arc<Self>) {
        self.0.fetch_add(1, SeqCst);
    }
}

#[test]
fn waker_payload_is_woken_and_consumed_by_one_shot() {
    let ts = Timers::new(0);
    let w = Arc::new(CountWake(AtomicUsize::new(0)));
    let waker = Waker::from(w.clone());
    let t = Timer::new();
    t.set_waker(&waker);
    t.set_waker(&waker); // will_wake: no replacement
    assert_eq!(Arc::strong_count(&w), 3, "one clone in the timer");
    ts.add(&t, 10, 0, &quiet());
    assert_eq!(ts.check(10, true).ran, 1);
    assert_eq!(w.0.load(SeqCst), 1);
    assert_eq!(
        Arc::strong_count(&w),
        2,
        "a one-shot run consumes the waker"
    );
}

#[test]
fn waker_payload_survives_periodic_runs_and_del_drops_it() {
    let ts = Timers::new(0);
    let w = Arc::new(CountWake(AtomicUsize::new(0)));
    let t = Timer::new();
    t.set_waker(&Waker::from(w.clone()));
    ts.add(&t, 10, 10, &quiet());
    ts.check(10, true);
    ts.check(20, true);
    assert_eq!(w.0.load(SeqCst), 2);
    assert_eq!(Arc::strong_count(&w), 2);
    assert!(del(&t));
    assert_eq!(Arc::strong_count(&w), 1);
}

#[test]
fn timer_without_payload_runs_silently() {
    let ts = Timers::new(0);
    let t = Timer::new();
    ts.add(&t, 10, 0, &quiet());
    assert_eq!(ts.check(10, true).ran, 1);
    assert_eq!(ts.stats().fired, 1);
}

#[test]
fn debug_output_names_the_state() {
    let ts = Timers::new(7);
    let t = Timer::new();
    ts.add(&t, 10, 0, &quiet());
    let s = format!("{t:?} {ts:?}");
    assert!(s.contains("Waiting") && s.contains("id: 7"), "{s}");
}
