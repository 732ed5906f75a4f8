//! loom models of a timer and its callback in one allocation (`TimerCell`): a stop, a drop of
//! the handle, a re-arm and a shutdown's drain racing a run; the callback is dropped exactly
//! once, never before its run, and runs at most once per arming.
//!
//! Run: `RUSTFLAGS="--cfg loom" LOOM_MAX_PREEMPTIONS=2 cargo test --release -p gort-timer
//! --test loom_cell`. The cell's own counts are std's `Arc` and `Weak` (not modelled); the
//! timer's status word and payload lock are loom's.
#![cfg(loom)]

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

impl CellFire for Probe {
    fn fire(cell: std::sync::Arc<TimerCell<Self>>, _when: Nanos) {
        cell.payload().fired.fetch_add(1, SeqCst);
    }
}

impl Drop for Probe {
    fn drop(&mut self) {
        self.dropped.fetch_add(1, SeqCst);
    }
}

/// (cell timer, fired count, dropped count).
fn probed() -> (CellTimer, Arc<AtomicUsize>, Arc<AtomicUsize>) {
    let (fired, dropped) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let t = CellTimer::new(Probe {
        fired: fired.clone(),
        dropped: dropped.clone(),
    });
    (t, fired, dropped)
}

/// A stop and the handle's drop race a run: a true stop means no run; the callback is
/// dropped once either way, by whichever lets go of it last.
#[test]
fn stop_and_drop_vs_run() {
    loom::model(|| {
        let ts = Arc::new(Timers::new(0));
        let (t, fired, dropped) = probed();
        modify_cell(&t, 10, 0, &ts, &nohost());
        let stopper = thread::spawn(move || {
            let stopped = t.stop();
            drop(t);
            stopped
        });
        ts.check(10, true);
        let stopped = stopper.join().unwrap();
        ts.check(10, true);
        assert_eq!(fired.load(SeqCst), usize::from(!stopped));
        assert_eq!(dropped.load(SeqCst), 1);
    });
}

/// A re-arm races the run of the first arming: the callback runs once per arming that was
/// not replaced while pending, and is dropped once after the handle is.
#[test]
fn rearm_vs_run() {
    loom::model(|| {
        let ts = Arc::new(Timers::new(0));
        let (t, fired, dropped) = probed();
        modify_cell(&t, 10, 0, &ts, &nohost());
        let heap = ts.clone();
        let rearm = thread::spawn(move || {
            let pending = modify_cell(&t, 5, 0, &heap, &nohost());
            drop(t);
            pending
        });
        ts.check(10, true);
        let pending = rearm.join().unwrap();
        ts.check(20, true);
        assert_eq!(fired.load(SeqCst), if pending { 1 } else { 2 });
        assert_eq!(dropped.load(SeqCst), 1);
    });
}

/// A shutdown's drain races the handle's drop of a pending cell: dropped once, never run.
#[test]
fn drain_vs_drop() {
    loom::model(|| {
        let ts = Arc::new(Timers::new(0));
        let (t, fired, dropped) = probed();
        modify_cell(&t, 10, 0, &ts, &nohost());
        let dropper = thread::spawn(move || drop(t));
        ts.drain_waking();
        dropper.join().unwrap();
        assert_eq!(fired.load(SeqCst), 0);
        assert_eq!(dropped.load(SeqCst), 1);
    });
}
