//! The payload rule (design/TIMERS.md, issue 17 item 2): a payload is released as soon as
//! its timer fired (one-shot) or was stopped, and is dropped only with no heap lock held and
//! outside every transient status; `move_to` hands back what it must let go of.
#![cfg(not(loom))]

mod common;

use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::mpsc;
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use common::{armed, quiet, Counted, Log};
use gort_timer::*;

/// A payload whose `Drop` records the status of `watched` at that moment.
struct Probe {
    watched: Weak<Timer>,
    seen: Arc<Mutex<Vec<Status>>>,
}

impl Fire for Probe {
    fn fire(self: Arc<Self>, _when: Nanos) {}
}

impl Drop for Probe {
    fn drop(&mut self) {
        if let Some(t) = self.watched.upgrade() {
            self.seen.lock().unwrap().push(t.status());
        }
    }
}

fn probe(watched: &Arc<Timer>, seen: &Arc<Mutex<Vec<Status>>>) -> Arc<dyn Fire> {
    Arc::new(Probe {
        watched: Arc::downgrade(watched),
        seen: seen.clone(),
    })
}

/// A stopped timer holding a payload installed after the stop, whose only reference left is
/// its `Deleted` heap entry: the one case where a heap lets go of a payload itself.
fn abandoned_with(ts: &Timers, when: Nanos, payload: Arc<dyn Fire>) {
    let x = Timer::new();
    ts.add(&x, when, 0, &quiet());
    assert!(del(&x));
    x.set_fire(payload);
}

/// Before: a one-shot run kept its callback (Go keeps `f`), so a stale entry kept the
/// callback's captures alive until it surfaced.
#[test]
fn one_shot_run_releases_its_callback_at_once() {
    let ts = Timers::new(0);
    let drops = Arc::new(AtomicUsize::new(0));
    let t = Timer::new();
    t.set_fire(Arc::new(Counted(drops.clone())));
    ts.add(&t, 10, 0, &quiet());
    assert_eq!(ts.check(10, true).ran, 1);
    assert_eq!(
        drops.load(SeqCst),
        1,
        "the fired callback is still installed"
    );
}

/// Item 2, third bullet, at the crate level: a timer modified earlier is promoted, fires, and
/// its handle is dropped; the stale entry (key 1000, behind a live timer at 500) now keeps
/// only the small `Timer`.
#[test]
fn promoted_timer_fires_and_its_stale_entry_keeps_no_captures() {
    let ts = Timers::new(0);
    let log = Log::new();
    let _front = armed(&ts, &log, 0, 500);
    let drops = Arc::new(AtomicUsize::new(0));
    let t = Timer::new();
    t.set_fire(Arc::new(Counted(drops.clone())));
    ts.add(&t, 1000, 0, &quiet());
    assert!(modify(&t, 100, 0, &ts, &quiet()));
    assert_eq!(ts.check(100, false).ran, 1); // not local: no 1/4 clean-up
    assert_eq!(ts.deleted(), 1, "promoted: one stale entry left");
    drop(t);
    assert_eq!(
        drops.load(SeqCst),
        1,
        "the stale entry kept the callback alive"
    );
    ts.verify();
}

/// Item 2, second bullet: `modify_fire` replaced an installed payload inside the
/// `Modifying` window it owned, so the old payload's `Drop` saw (and could spin on) it.
#[test]
fn modify_fire_drops_the_replaced_payload_after_modifying() {
    let ts = Timers::new(0);
    let seen = Arc::new(Mutex::new(Vec::new()));
    let t = Timer::new();
    t.set_fire(probe(&t, &seen));
    let f: Arc<dyn Fire> = Arc::new(|_| {});
    assert!(!modify_fire(&t, 10, 0, &f, &ts, &quiet()));
    assert_eq!(*seen.lock().unwrap(), vec![Status::Waiting]);
}

/// Item 2, second bullet: what tidying freed before an insertion was dropped while the
/// inserting `add` (or re-activating `modify`) still owned `Modifying`, and before that
/// under the heap lock.
#[test]
fn insertion_drops_what_tidying_freed_after_modifying() {
    for reactivate in [false, true] {
        let ts = Timers::new(0);
        let seen = Arc::new(Mutex::new(Vec::new()));
        let t = Timer::new();
        abandoned_with(&ts, 10, probe(&t, &seen));
        if reactivate {
            assert!(!modify(&t, 20, 0, &ts, &quiet()));
        } else {
            ts.add(&t, 20, 0, &quiet());
        }
        assert_eq!(*seen.lock().unwrap(), vec![Status::Waiting], "{reactivate}");
        ts.verify();
    }
}

/// `move_to` runs under the scheduler lock: it returns what it lets go of instead of
/// dropping it there.
#[test]
fn move_to_hands_back_the_payloads_it_lets_go_of() {
    let (a, b) = (Timers::new(0), Timers::new(1));
    let drops = Arc::new(AtomicUsize::new(0));
    abandoned_with(&a, 10, Arc::new(Counted(drops.clone())));
    let released = a.move_to(&b, &quiet());
    assert_eq!((released.len(), drops.load(SeqCst)), (1, 0));
    drop(released);
    assert_eq!(drops.load(SeqCst), 1);
    assert!(a.is_empty() && b.is_empty());
}

/// Runs `f` on its own thread; a hang (a payload `Drop` that re-entered a heap whose lock
/// was held) fails instead of hanging the test.
fn without_hanging(what: &str, f: impl FnOnce() + Send + 'static) {
    let (done_tx, done_rx) = mpsc::channel();
    std::thread::spawn(move || {
        f();
        let _ = done_tx.send(());
    });
    assert!(
        done_rx.recv_timeout(Duration::from_secs(20)).is_ok(),
        "{what} hung: a payload was dropped under the heap lock"
    );
}

/// A payload whose `Drop` arms a fresh timer on `ts` (takes its lock).
struct Rearms(Arc<Timers>);

impl Fire for Rearms {
    fn fire(self: Arc<Self>, _when: Nanos) {}
}

impl Drop for Rearms {
    fn drop(&mut self) {
        self.0.add(&Timer::new(), 1_000_000, 0, &quiet());
    }
}

/// Every way a lock holder lets go of a timer: the root removal (`check`'s `runtimer` and
/// insertion's `cleantimers`) and `clear_deleted` (the 1/4 rule), with a payload whose
/// `Drop` takes the same heap's lock.
#[test]
fn lock_holders_never_drop_a_payload_that_reenters_the_heap() {
    for how in ["check", "add", "clear_deleted"] {
        without_hanging(how, move || {
            let ts = Arc::new(Timers::new(0));
            let log = Log::new();
            let when = if how == "clear_deleted" { 50 } else { 10 };
            let _front = armed(&ts, &log, 0, 20);
            abandoned_with(&ts, when, Arc::new(Rearms(ts.clone())));
            match how {
                "check" => assert_eq!(ts.check(15, true).ran, 0),
                "add" => ts.add(&Timer::new(), 30, 0, &quiet()),
                _ => assert_eq!(ts.check(1, true).ran, 0), // 1 deleted of 2 > 2/4
            }
            assert_eq!(ts.deleted(), 0, "{how} removed the stopped timer");
            ts.verify();
        });
    }
}
