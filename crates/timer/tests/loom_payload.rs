//! loom models of the payload rule (design/TIMERS.md): payloads whose `Drop` re-enters the
//! heaps or checks the status, and the races of moving, clearing, draining and periodic or
//! waker runs against re-arming that `loom_timer.rs` does not cover.
//!
//! Run: `RUSTFLAGS="--cfg loom" LOOM_MAX_PREEMPTIONS=2 cargo test --release -p gort-timer
//! --test loom_payload`. One or two timers and one extra thread per model.
#![cfg(loom)]

use std::task::{Wake, Waker};

use gort_loom::atomic::{AtomicUsize, Ordering::SeqCst};
use gort_loom::{thread, Arc};
use gort_timer::*;

fn nohost() -> impl Host {
    |_: Nanos| {}
}

/// Counts runs and drops.
struct Probe {
    fired: Arc<AtomicUsize>,
    dropped: Arc<AtomicUsize>,
}

impl Fire for Probe {
    fn fire(self: std::sync::Arc<Self>, _when: Nanos) {
        self.fired.fetch_add(1, SeqCst);
    }
}

impl Drop for Probe {
    fn drop(&mut self) {
        self.dropped.fetch_add(1, SeqCst);
    }
}

/// (payload, fired count, dropped count).
fn probe() -> (std::sync::Arc<dyn Fire>, Arc<AtomicUsize>, Arc<AtomicUsize>) {
    let (fired, dropped) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let p = std::sync::Arc::new(Probe {
        fired: fired.clone(),
        dropped: dropped.clone(),
    });
    (p, fired, dropped)
}

/// A timer holding a fresh probe that nobody else references.
fn probed_timer() -> (Arc<Timer>, Arc<AtomicUsize>, Arc<AtomicUsize>) {
    let t = Timer::new();
    let (p, fired, dropped) = probe();
    t.set_fire(p);
    (t, fired, dropped)
}

/// A payload whose `Drop` waits out `watched`'s transient statuses (`is_pending`) and then
/// arms a fresh timer on `heap`, taking its lock: dropped under that lock, or inside a window
/// the dropping thread owns, it never finishes (loom reports the deadlock or the endless
/// spin).
struct Reenters {
    watched: Arc<Timer>,
    heap: Arc<Timers>,
}

impl Fire for Reenters {
    fn fire(self: std::sync::Arc<Self>, _when: Nanos) {}
}

impl Drop for Reenters {
    fn drop(&mut self) {
        let _ = self.watched.is_pending();
        self.heap.add(&Timer::new(), 1000, 0, &nohost());
    }
}

/// A one-shot run and a stop race to release a payload that re-enters the heap on drop:
/// whichever releases it, it drops once, outside the lock and every window.
#[test]
fn reentering_payload_del_vs_run() {
    loom::model(|| {
        let ts = Arc::new(Timers::new(0));
        let t = Timer::new();
        t.set_fire(std::sync::Arc::new(Reenters {
            watched: t.clone(),
            heap: ts.clone(),
        }));
        ts.add(&t, 10, 0, &nohost());
        let t2 = t.clone();
        let h = thread::spawn(move || del(&t2));
        ts.check(10, true);
        h.join().unwrap();
        assert_eq!(ts.len(), 1, "the payload's drop armed its timer once");
        ts.verify();
    });
}

/// `modify_fire` replacing a payload that re-enters the heap, racing a check: the old
/// payload drops after the arming's Modifying window.
#[test]
fn reentering_payload_replaced_vs_check() {
    loom::model(|| {
        let ts = Arc::new(Timers::new(0));
        let t = Timer::new();
        t.set_fire(std::sync::Arc::new(Reenters {
            watched: t.clone(),
            heap: ts.clone(),
        }));
        let (f, fired, _) = probe();
        let (ts2, t2) = (ts.clone(), t.clone());
        let h = thread::spawn(move || assert!(!modify_fire(&t2, 10, 0, &f, &ts2, &nohost())));
        ts.check(10, true);
        h.join().unwrap();
        ts.check(10, true);
        assert_eq!(fired.load(SeqCst), 1);
        ts.verify();
    });
}

/// `move_to` (under the scheduler's lock in gort) letting go of a payload that re-enters
/// the source heap, while another thread arms a timer there: it comes back in `Released`.
#[test]
fn reentering_payload_released_by_move_vs_add() {
    loom::model(|| {
        let a = Arc::new(Timers::new(0));
        let b = Timers::new(1);
        let x = Timer::new();
        a.add(&x, 10, 0, &nohost());
        assert!(del(&x));
        x.set_fire(std::sync::Arc::new(Reenters {
            watched: Timer::new(),
            heap: a.clone(),
        }));
        drop(x); // the heap's entry is the last reference
        let a2 = a.clone();
        let h = thread::spawn(move || a2.add(&Timer::new(), 20, 0, &nohost()));
        let released = a.move_to(&b, &nohost());
        h.join().unwrap();
        assert!(released.len() <= 1);
        drop(released);
        a.verify();
        b.verify();
    });
}

/// move_to racing modify-later: the timer follows to the destination and fires once, at the
/// later deadline.
#[test]
fn move_vs_modify_later() {
    loom::model(|| {
        let a = Arc::new(Timers::new(0));
        let b = Timers::new(1);
        let (t, fired, _) = probed_timer();
        a.add(&t, 10, 0, &nohost());
        let (a2, t2) = (a.clone(), t.clone());
        let h = thread::spawn(move || assert!(modify(&t2, 100, 0, &a2, &nohost())));
        drop(a.move_to(&b, &nohost()));
        h.join().unwrap();
        a.verify();
        b.verify();
        assert_eq!(b.check(99, true).ran, 0, "ran before its later deadline");
        assert_eq!(b.check(100, true).ran, 1);
        assert_eq!(fired.load(SeqCst), 1);
        assert!(a.is_empty() && b.is_empty());
    });
}

/// move_to racing a re-activation into the source heap: the timer ends in exactly one heap
/// and fires once.
#[test]
fn move_vs_reactivate() {
    loom::model(|| {
        let a = Arc::new(Timers::new(0));
        let b = Timers::new(1);
        let (t, fired, _) = probed_timer();
        let (a2, t2) = (a.clone(), t.clone());
        let h = thread::spawn(move || assert!(!modify(&t2, 10, 0, &a2, &nohost())));
        drop(a.move_to(&b, &nohost()));
        h.join().unwrap();
        a.verify();
        b.verify();
        assert_eq!(a.len() + b.len(), 1);
        assert_eq!(a.check(10, true).ran + b.check(10, true).ran, 1);
        assert_eq!(fired.load(SeqCst), 1);
    });
}

/// move_to racing a stealer's check of the source: the due timer runs exactly once, in
/// whichever heap holds it.
#[test]
fn move_vs_check() {
    loom::model(|| {
        let a = Arc::new(Timers::new(0));
        let b = Timers::new(1);
        let (t, fired, dropped) = probed_timer();
        a.add(&t, 10, 0, &nohost());
        let a2 = a.clone();
        let h = thread::spawn(move || a2.check(10, false).ran);
        drop(a.move_to(&b, &nohost()));
        let ran = h.join().unwrap() + b.check(10, true).ran;
        assert_eq!((ran, fired.load(SeqCst)), (1, 1));
        assert_eq!(
            dropped.load(SeqCst),
            1,
            "a one-shot run releases its payload"
        );
        assert!(a.is_empty() && b.is_empty());
    });
}

/// clear_deleted (the 1/4 rule of a local check) racing modify-earlier of a live timer: the
/// earlier deadline survives the clean-up's fresh start of the summary and list.
#[test]
fn clear_deleted_vs_modify_earlier() {
    loom::model(|| {
        let ts = Arc::new(Timers::new(0));
        let (t, fired, _) = probed_timer();
        let x = Timer::new();
        ts.add(&t, 100, 0, &nohost());
        ts.add(&x, 200, 0, &nohost());
        assert!(del(&x)); // 1 deleted of 2, not at the root: the next local check clears
        let (ts2, t2) = (ts.clone(), t.clone());
        let h = thread::spawn(move || assert!(modify(&t2, 5, 0, &ts2, &nohost())));
        ts.check(1, true);
        h.join().unwrap();
        let w = ts.wake_time();
        assert!(w != 0 && w <= 5, "lost the earlier deadline: {w}");
        ts.verify();
        assert_eq!(ts.check(5, true).ran, 1);
        assert_eq!(fired.load(SeqCst), 1);
    });
}

/// drain racing a `modify_fire` re-arm: either the arming lands first and the drain removes
/// it with its payload, or it re-activates the drained timer with its payload installed.
#[test]
fn drain_vs_modify_fire() {
    loom::model(|| {
        let ts = Arc::new(Timers::new(0));
        let (t, _, old_dropped) = probed_timer();
        ts.add(&t, 10, 0, &nohost());
        let (f, fired, dropped) = probe();
        let (ts2, t2) = (ts.clone(), t.clone());
        let h = thread::spawn(move || modify_fire(&t2, 5, 0, &f, &ts2, &nohost()));
        ts.drain();
        let was_pending = h.join().unwrap();
        ts.verify();
        let armed = t.is_pending();
        assert_eq!(armed, ts.len() == 1);
        assert_eq!(
            old_dropped.load(SeqCst),
            1,
            "the drain dropped the first payload"
        );
        assert!(
            !(was_pending && armed),
            "a re-arm before the drain is drained too"
        );
        ts.check(5, true);
        assert_eq!(fired.load(SeqCst), usize::from(armed && !was_pending));
        drop(t);
        ts.drain();
        assert_eq!(
            dropped.load(SeqCst),
            1,
            "the new payload is released exactly once"
        );
    });
}

/// A periodic run racing a modify that makes the timer a later one-shot: at most one tick
/// at 10, then exactly one run at 50, and the one-shot run releases the payload.
#[test]
fn periodic_run_vs_modify() {
    loom::model(|| {
        let ts = Arc::new(Timers::new(0));
        let (t, fired, dropped) = probed_timer();
        ts.add(&t, 10, 10, &nohost());
        let (ts2, t2) = (ts.clone(), t.clone());
        let h = thread::spawn(move || assert!(modify(&t2, 50, 0, &ts2, &nohost())));
        ts.check(10, true);
        h.join().unwrap();
        let ticks = fired.load(SeqCst);
        assert!(ticks <= 1);
        assert_eq!(
            ts.check(49, true).ran,
            0,
            "a periodic tick after the modify"
        );
        assert_eq!(ts.check(50, true).ran, 1);
        assert_eq!(fired.load(SeqCst), ticks + 1);
        assert!(ts.is_empty());
        assert_eq!(dropped.load(SeqCst), 1);
        ts.verify();
    });
}

/// Counts wake-ups.
struct CountWakes(AtomicUsize);

impl Wake for CountWakes {
    fn wake(self: std::sync::Arc<Self>) {
        self.0.fetch_add(1, SeqCst);
    }
}

/// A waiter replacing its waker (then asking `is_pending`) racing the run: either the run
/// wakes the new waker, or the waiter sees the timer no longer pending. Never both lost.
#[test]
fn waker_payload_vs_run() {
    loom::model(|| {
        let ts = Timers::new(0);
        let (w1, w2) = (
            std::sync::Arc::new(CountWakes(AtomicUsize::new(0))),
            std::sync::Arc::new(CountWakes(AtomicUsize::new(0))),
        );
        let t = Timer::new();
        t.set_waker(&Waker::from(w1.clone()));
        ts.add(&t, 10, 0, &nohost());
        let (t2, w2b) = (t.clone(), w2.clone());
        let h = thread::spawn(move || {
            t2.set_waker(&Waker::from(w2b));
            t2.is_pending()
        });
        assert_eq!(ts.check(10, true).ran, 1);
        let pending = h.join().unwrap();
        let (n1, n2) = (w1.0.load(SeqCst), w2.0.load(SeqCst));
        assert_eq!(n1 + n2, 1, "exactly one wake-up");
        assert!(n2 == 1 || !pending, "the new waker's wake-up was lost");
    });
}
