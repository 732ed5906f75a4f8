//! loom models of the status machine: one mutator thread racing the heap's owner.
//!
//! Run: `RUSTFLAGS="--cfg loom" LOOM_MAX_PREEMPTIONS=2 cargo test --release -p gort-timer
//! --test loom_timer`. Each model is one timer (two at most) and one extra thread, so the
//! whole file explores in seconds.
#![cfg(loom)]

use gort_loom::atomic::{AtomicUsize, Ordering::SeqCst};
use gort_loom::{thread, Arc};
use gort_timer::*;

/// A payload counting its runs and its drops.
struct Probe {
    fired: AtomicUsize,
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

fn nohost() -> impl Host {
    |_: Nanos| {}
}

/// A timer with a fresh `Probe`; returns the probe to count fires through.
fn timer_with_probe() -> (Arc<Timer>, std::sync::Arc<Probe>, Arc<AtomicUsize>) {
    let t = Timer::new();
    let dropped = Arc::new(AtomicUsize::new(0));
    let p = std::sync::Arc::new(Probe {
        fired: AtomicUsize::new(0),
        dropped: dropped.clone(),
    });
    t.set_fire(p.clone());
    (t, p, dropped)
}

/// del vs runtimer: the timer fires exactly once or del returns true, never both/neither.
#[test]
fn del_vs_run() {
    loom::model(|| {
        let ts = Timers::new(0);
        let (t, probe, _) = timer_with_probe();
        ts.add(&t, 10, 0, &nohost());
        let t2 = t.clone();
        let h = thread::spawn(move || del(&t2));
        ts.check(10, true);
        let stopped = h.join().unwrap();
        assert_eq!(probe.fired.load(SeqCst) + stopped as usize, 1);
        ts.verify();
    });
}

/// del vs a periodic run: a periodic timer stays pending, so del always wins, and it may
/// or may not have run once before.
#[test]
fn del_vs_periodic_run() {
    loom::model(|| {
        let ts = Timers::new(0);
        let (t, probe, _) = timer_with_probe();
        ts.add(&t, 10, 10, &nohost());
        let t2 = t.clone();
        let h = thread::spawn(move || del(&t2));
        ts.check(10, true);
        assert!(
            h.join().unwrap(),
            "a periodic timer is pending until stopped"
        );
        assert!(probe.fired.load(SeqCst) <= 1);
        let fired = probe.fired.load(SeqCst);
        ts.check(100, true);
        assert_eq!(probe.fired.load(SeqCst), fired, "no run after del");
        assert!(ts.is_empty());
    });
}

/// Invariant 6: modify-earlier racing adjust (another modified timer makes the check run
/// adjust). The new deadline is never lost: either the check ran the timer, or wake_time
/// reports it, and the next check at that time runs it exactly once.
#[test]
fn modify_earlier_vs_adjust() {
    loom::model(|| {
        let ts = Arc::new(Timers::new(0));
        let (t1, p1, _) = timer_with_probe();
        let (t2, p2, _) = timer_with_probe();
        ts.add(&t1, 100, 0, &nohost());
        ts.add(&t2, 50, 0, &nohost());
        modify(&t2, 5, 0, &ts, &nohost()); // summary 5: the check below runs adjust
        let woke = Arc::new(AtomicUsize::new(0));
        let (ts2, t1b, woke2) = (ts.clone(), t1.clone(), woke.clone());
        let h = thread::spawn(move || {
            let host = move |w: Nanos| {
                assert_eq!(w, 8);
                woke2.fetch_add(1, SeqCst);
            };
            assert!(modify(&t1b, 8, 0, &ts2, &host));
        });
        ts.check(10, true);
        h.join().unwrap();
        assert_eq!(woke.load(SeqCst), 1, "modify-earlier wakes the poller");
        if p1.fired.load(SeqCst) == 0 {
            let w = ts.wake_time();
            assert!(w != 0 && w <= 8, "lost modify-earlier: wake_time {w}");
        }
        ts.verify();
        ts.check(10, true);
        assert_eq!((p1.fired.load(SeqCst), p2.fired.load(SeqCst)), (1, 1));
    });
}

/// The dedupe path of the modified-earlier list: re-modifying a timer that is already queued
/// (so `modify` skips the push) while `adjust` drains the list. Not lost either way.
#[test]
fn requeue_vs_adjust() {
    loom::model(|| {
        let ts = Arc::new(Timers::new(0));
        let (t, pt, _) = timer_with_probe();
        let (u, pu, _) = timer_with_probe();
        ts.add(&t, 100, 0, &nohost());
        ts.add(&u, 100, 0, &nohost());
        modify(&t, 50, 0, &ts, &nohost()); // queued, due later than the check
        modify(&u, 5, 0, &ts, &nohost()); // queued, makes the check run adjust
        let (ts2, t2) = (ts.clone(), t.clone());
        let h = thread::spawn(move || assert!(modify(&t2, 6, 0, &ts2, &nohost())));
        ts.check(7, true);
        h.join().unwrap();
        if pt.fired.load(SeqCst) == 0 {
            let w = ts.wake_time();
            assert!(w != 0 && w <= 6, "lost re-queued deadline: wake_time {w}");
        }
        ts.verify();
        ts.check(7, true);
        assert_eq!((pt.fired.load(SeqCst), pu.fired.load(SeqCst)), (1, 1));
    });
}

/// del of a queued modified-earlier timer while adjust processes it: it runs exactly once
/// or del returns true.
#[test]
fn del_vs_adjust() {
    loom::model(|| {
        let ts = Timers::new(0);
        let (t, probe, _) = timer_with_probe();
        ts.add(&t, 100, 0, &nohost());
        modify(&t, 5, 0, &ts, &nohost());
        let t2 = t.clone();
        let h = thread::spawn(move || del(&t2));
        ts.check(10, true);
        let stopped = h.join().unwrap();
        assert_eq!(probe.fired.load(SeqCst) + stopped as usize, 1);
        ts.verify();
        ts.check(100, true);
        assert!(ts.is_empty());
    });
}

/// A stale entry (left by the promotion of the first earlier reset that `adjust` applied)
/// dropped at the root while another thread stops or re-arms the live timer: the drop never
/// touches the timer's status, so the stop or reset acts on the live entry alone.
#[test]
fn stale_root_vs_del_and_modify() {
    for stop in [true, false] {
        loom::model(move || {
            let ts = Arc::new(Timers::new(0));
            let (t, probe, _) = timer_with_probe();
            ts.add(&t, 100, 0, &nohost());
            modify(&t, 50, 0, &ts, &nohost());
            modify(&t, 60, 0, &ts, &nohost()); // summary stays 50: adjust runs at 50
            ts.check(50, false); // promoted: live entry at 60, stale one at 100
            assert_eq!(ts.deleted(), 1);
            modify(&t, 300, 0, &ts, &nohost()); // later: lazy, the root re-keys it
            let (t2, ts2) = (t.clone(), ts.clone());
            let h = thread::spawn(move || {
                if stop {
                    del(&t2)
                } else {
                    modify(&t2, 200, 0, &ts2, &nohost())
                }
            });
            let ran = ts.check(150, false).ran; // re-keys the live entry, drops the stale one
            assert!(h.join().unwrap(), "the timer was pending throughout");
            assert_eq!(ran + probe.fired.load(SeqCst), 0, "nothing due by 150");
            ts.verify();
            ts.check(1000, true);
            assert_eq!(probe.fired.load(SeqCst), usize::from(!stop));
            assert!(ts.is_empty());
            ts.verify();
        });
    }
}

/// modify-later vs runtimer: either the run wins (and modify re-arms a fired timer, false)
/// or modify wins (and the run re-keys instead of firing, true). One more run at 20 either way
/// (`modify_fire`: the one-shot run released the callback).
#[test]
fn modify_later_vs_run() {
    loom::model(|| {
        let ts = Arc::new(Timers::new(0));
        let (t, probe, _) = timer_with_probe();
        let f: std::sync::Arc<dyn Fire> = probe.clone();
        ts.add(&t, 10, 0, &nohost());
        let (ts2, t2) = (ts.clone(), t.clone());
        let h = thread::spawn(move || modify_fire(&t2, 20, 0, &f, &ts2, &nohost()));
        ts.check(10, true);
        let was_pending = h.join().unwrap();
        let early = probe.fired.load(SeqCst);
        assert_eq!(early, usize::from(!was_pending));
        ts.verify();
        ts.check(20, true);
        assert_eq!(probe.fired.load(SeqCst), early + 1);
    });
}

/// Resurrecting a deleted entry (Deleted -> Modifying) while the owner's runtimer meets it at
/// the root: it fires exactly once at its new deadline and the deleted count ends at 0.
#[test]
fn resurrect_vs_run() {
    loom::model(|| {
        let ts = Arc::new(Timers::new(0));
        let (t, probe, _) = timer_with_probe();
        ts.add(&t, 10, 0, &nohost());
        assert!(del(&t));
        let (ts2, t2, p2) = (ts.clone(), t.clone(), probe.clone());
        let h = thread::spawn(move || {
            t2.set_fire(p2);
            assert!(!modify(&t2, 5, 0, &ts2, &nohost()));
        });
        ts.check(10, true);
        h.join().unwrap();
        ts.verify();
        ts.check(10, true);
        assert_eq!(probe.fired.load(SeqCst), 1);
        assert_eq!((ts.len(), ts.deleted()), (0, 0));
    });
}

/// Re-activation (NoStatus -> Modifying -> insert -> Waiting) racing the home heap's check,
/// which may find the new root still Modifying and must wait for it.
#[test]
fn reactivate_vs_run() {
    loom::model(|| {
        let ts = Arc::new(Timers::new(0));
        let (u, pu, _) = timer_with_probe();
        ts.add(&u, 7, 0, &nohost());
        let (t, probe, _) = timer_with_probe();
        let (ts2, t2) = (ts.clone(), t.clone());
        let h = thread::spawn(move || assert!(!modify(&t2, 5, 0, &ts2, &nohost())));
        ts.check(10, true);
        h.join().unwrap();
        ts.verify();
        ts.check(10, true);
        assert_eq!((probe.fired.load(SeqCst), pu.fired.load(SeqCst)), (1, 1));
    });
}

/// Two checks of one heap (the owner and a stealer): each due timer runs exactly once.
#[test]
fn owner_vs_stealer() {
    loom::model(|| {
        let ts = Arc::new(Timers::new(0));
        let (a, pa, _) = timer_with_probe();
        let (b, pb, _) = timer_with_probe();
        ts.add(&a, 5, 0, &nohost());
        ts.add(&b, 6, 0, &nohost());
        let ts2 = ts.clone();
        let h = thread::spawn(move || ts2.check(10, false).ran);
        let ran = ts.check(10, true).ran + h.join().unwrap();
        assert_eq!(ran, 2);
        assert_eq!((pa.fired.load(SeqCst), pb.fired.load(SeqCst)), (1, 1));
        assert!(ts.is_empty());
    });
}

/// sysmon's check (`check_giving_way`) vs the owner arming a timer and then making its round:
/// the helper runs at least the earliest, gives way whenever the owner holds the lock between
/// two timers, and the owner's round runs what it left: each timer runs exactly once.
#[test]
fn giving_way_vs_owner_arming() {
    loom::model(|| {
        let ts = Arc::new(Timers::new(0));
        let (a, pa, _) = timer_with_probe();
        let (b, pb, _) = timer_with_probe();
        ts.add(&a, 5, 0, &nohost());
        ts.add(&b, 6, 0, &nohost());
        let ts2 = ts.clone();
        let h = thread::spawn(move || ts2.check_giving_way(10).ran);
        let (c, pc, _) = timer_with_probe();
        ts.add(&c, 7, 0, &nohost());
        let helper = h.join().unwrap();
        assert!(helper >= 1, "a look runs at least the earliest");
        let ran = helper + ts.check(10, true).ran;
        assert_eq!(ran, 3);
        let fired = [&pa, &pb, &pc].map(|p| p.fired.load(SeqCst));
        assert_eq!(fired, [1, 1, 1]);
        assert!(ts.is_empty());
    });
}

/// del racing modify (a caller race the code tolerates): the last one wins.
#[test]
fn del_vs_modify() {
    loom::model(|| {
        let ts = Arc::new(Timers::new(0));
        let (t, _, _) = timer_with_probe();
        ts.add(&t, 10, 0, &nohost());
        let t2 = t.clone();
        let h = thread::spawn(move || del(&t2));
        let was_pending = modify(&t, 20, 0, &ts, &nohost());
        assert!(
            h.join().unwrap(),
            "the timer is pending whichever goes first"
        );
        ts.verify();
        ts.check(20, true);
        // modify first (true) -> del last -> no run; del first -> modify re-arms -> one run.
        assert_eq!(ts.stats().fired, u64::from(!was_pending));
    });
}

/// del racing modify_fire (AfterFunc's stop vs reset, with no lock of their own): the
/// payload install is inside `Modifying`, so whichever order they fall in, an armed timer
/// holds its callback and a stopped one has dropped it.
#[test]
fn del_vs_modify_fire() {
    loom::model(|| {
        let ts = Arc::new(Timers::new(0));
        let (t, probe, dropped) = timer_with_probe();
        let f: std::sync::Arc<dyn Fire> = probe.clone();
        ts.add(&t, 10, 0, &nohost());
        let t2 = t.clone();
        let h = thread::spawn(move || del(&t2));
        let was_pending = modify_fire(&t, 20, 0, &f, &ts, &nohost());
        assert!(
            h.join().unwrap(),
            "the timer is pending whichever goes first"
        );
        assert_eq!(
            std::sync::Arc::strong_count(&probe),
            if was_pending { 2 } else { 3 },
            "a stopped timer holds no payload; an armed one holds exactly one"
        );
        ts.check(20, true);
        ts.verify();
        // modify_fire first -> del last: no run, payload gone (dropped by del; `f` and
        // `probe` keep the allocation). del first -> re-armed with the callback: one run.
        assert_eq!(probe.fired.load(SeqCst), usize::from(!was_pending));
        assert_eq!(
            dropped.load(SeqCst),
            0,
            "the probe outlives the model's handles"
        );
        assert_eq!(
            std::sync::Arc::strong_count(&probe),
            2,
            "a fired one-shot timer released its payload"
        );
    });
}

/// move_to racing del: del still returns true and the timer never runs in either heap.
#[test]
fn move_vs_del() {
    loom::model(|| {
        let a = Timers::new(0);
        let b = Timers::new(1);
        let (t, probe, _) = timer_with_probe();
        a.add(&t, 10, 0, &nohost());
        let t2 = t.clone();
        let h = thread::spawn(move || del(&t2));
        drop(a.move_to(&b, &nohost()));
        assert!(h.join().unwrap());
        a.verify();
        b.verify();
        assert_eq!(a.len(), 0);
        a.check(10, true);
        b.check(10, true);
        assert_eq!(probe.fired.load(SeqCst), 0);
        assert!(b.is_empty());
    });
}

/// move_to racing modify-earlier: the new deadline follows the timer to the destination.
#[test]
fn move_vs_modify_earlier() {
    loom::model(|| {
        let a = Arc::new(Timers::new(0));
        let b = Timers::new(1);
        let (t, probe, _) = timer_with_probe();
        a.add(&t, 100, 0, &nohost());
        let (a2, t2) = (a.clone(), t.clone());
        let h = thread::spawn(move || assert!(modify(&t2, 5, 0, &a2, &nohost())));
        drop(a.move_to(&b, &nohost()));
        h.join().unwrap();
        a.verify();
        b.verify();
        assert_eq!(a.wake_time(), 0);
        let w = b.wake_time();
        assert!(w != 0 && w <= 5, "lost the earlier deadline: {w}");
        b.check(5, true);
        assert_eq!(probe.fired.load(SeqCst), 1);
    });
}

/// drain racing del: the timer ends Removed with its payload dropped exactly once, and
/// never runs.
#[test]
fn drain_vs_del() {
    loom::model(|| {
        let ts = Timers::new(0);
        let (t, probe, dropped) = timer_with_probe();
        drop(probe); // only the timer holds the payload now
        ts.add(&t, 10, 0, &nohost());
        let t2 = t.clone();
        let h = thread::spawn(move || del(&t2));
        ts.drain();
        h.join().unwrap();
        assert_eq!(t.status(), Status::Removed);
        assert_eq!(dropped.load(SeqCst), 1);
        ts.verify();
        assert_eq!(ts.wake_time(), 0);
    });
}
