//! loom models of a timer and its callback in one allocation (`TimerCell`): a stop, a drop of
//! the handle, a re-arm (`modify_cell`, or `add_cell` by a handle alone) and a shutdown's
//! drain racing a run, one-shot or periodic; the callback is dropped exactly once, never
//! before its run, and runs at most once per arming; the last holder's drop of the callback
//! racing a heap's read of the timer and a heap's last reference. A cell's payload is reached
//! without its lock (`cell.rs`): the payload's loom cells report any access the status word
//! does not order.
//!
//! Run: `RUSTFLAGS="--cfg loom" LOOM_MAX_PREEMPTIONS=2 cargo test --release -p gort-timer
//! --test loom_cell`. The cell's two counts (holders, memory), the timer's status word and
//! its payload lock are loom's; the callback keeps a loom cell that its runs read and its drop
//! writes, so a drop not ordered after every run is a reported race.
#![cfg(loom)]

use gort_loom::atomic::{AtomicUsize, Ordering::SeqCst};
use gort_loom::{thread, Arc, UnsafeCell};
use gort_timer::*;

fn nohost() -> impl Host {
    |_: Nanos| {}
}

/// Counts runs and drops.
struct Probe {
    fired: Arc<AtomicUsize>,
    dropped: Arc<AtomicUsize>,
    /// Read by every run, written by the drop: loom reports a drop not ordered after a run.
    state: State,
}

/// A loom cell shared by the runs (reads) and the drop (a write).
struct State(UnsafeCell<usize>);

// SAFETY: the runs only read it and the drop writes it through `&mut`; loom reports any
// access not ordered by the cell's counts, which is what these models check.
unsafe impl Sync for State {}

impl CellFire for Probe {
    fn fire(cell: CellRef<Self>, _when: Nanos) {
        // SAFETY: a shared read; only the drop writes, after the last holder.
        let seen = cell.payload().state.0.with(|p| unsafe { *p });
        assert_eq!(seen, 7);
        cell.payload().fired.fetch_add(1, SeqCst);
    }
}

impl Drop for Probe {
    fn drop(&mut self) {
        // SAFETY: `&mut self`; loom checks it against the runs' reads.
        self.state.0.with_mut(|p| unsafe { *p = 0 });
        self.dropped.fetch_add(1, SeqCst);
    }
}

/// (cell timer, fired count, dropped count).
fn probed() -> (CellTimer, Arc<AtomicUsize>, Arc<AtomicUsize>) {
    let (fired, dropped) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let t = CellTimer::new(Probe {
        fired: fired.clone(),
        dropped: dropped.clone(),
        state: State(UnsafeCell::new(7)),
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

/// The handle, the last holder of a stopped cell, drops the callback while a heap reads the
/// timer through its entry (the deleted root) and lets go of the last reference: the heap
/// never sees freed memory (loom's atomics would be read after the free), the callback is
/// dropped once, never run.
#[test]
fn last_holder_vs_heap_read_and_last_reference() {
    loom::model(|| {
        let ts = Arc::new(Timers::new(0));
        let (t, fired, dropped) = probed();
        modify_cell(&t, 10, 0, &ts, &nohost());
        assert!(t.stop());
        let dropper = thread::spawn(move || drop(t));
        // Reads the deleted root's status and drops its entry, the heap's last reference.
        ts.check(10, true);
        dropper.join().unwrap();
        assert_eq!(fired.load(SeqCst), 0);
        assert_eq!(dropped.load(SeqCst), 1);
    });
}

/// The run of a firing holds the callback while the handle goes: whichever of the run's
/// reference and the handle is last drops the callback, after the run read it.
#[test]
fn run_holder_vs_handle_drop() {
    loom::model(|| {
        let ts = Arc::new(Timers::new(0));
        let (t, fired, dropped) = probed();
        modify_cell(&t, 10, 0, &ts, &nohost());
        let dropper = thread::spawn(move || drop(t));
        ts.check(10, true);
        dropper.join().unwrap();
        assert_eq!(fired.load(SeqCst), 1);
        assert_eq!(dropped.load(SeqCst), 1);
    });
}

/// `add_cell` on a fresh cell (the handle alone: no status CAS, no payload lock), then a stop
/// and the handle's drop race a run, as in [`stop_and_drop_vs_run`]: the plain stores of the
/// add are published by the heap lock, so the run and the stop see the installed callback.
#[test]
fn add_alone_then_stop_vs_run() {
    loom::model(|| {
        let ts = Arc::new(Timers::new(0));
        let (mut t, fired, dropped) = probed();
        assert!(!add_cell(&mut t, 10, 0, &ts, &nohost()));
        let heap = ts.clone();
        let runner = thread::spawn(move || heap.check(10, true).ran);
        let stopped = t.stop();
        drop(t);
        let ran = runner.join().unwrap();
        ts.check(10, true);
        assert_eq!(fired.load(SeqCst), usize::from(!stopped));
        assert_eq!(ran, usize::from(!stopped));
        assert_eq!(dropped.load(SeqCst), 1);
    });
}

/// `add_cell` after the first arming's run raced by that run: while the heap or the run
/// still references the cell it re-arms through `modify_cell`; once the handle is alone it
/// takes the fast path. Either way each arming runs once unless re-armed while pending, and
/// loom reports any payload access the status word does not order.
#[test]
fn add_again_vs_run() {
    loom::model(|| {
        let ts = Arc::new(Timers::new(0));
        let (mut t, fired, dropped) = probed();
        add_cell(&mut t, 10, 0, &ts, &nohost());
        let heap = ts.clone();
        let runner = thread::spawn(move || {
            heap.check(10, true);
        });
        let pending = add_cell(&mut t, 20, 0, &ts, &nohost());
        runner.join().unwrap();
        ts.check(20, true);
        drop(t);
        assert_eq!(fired.load(SeqCst), if pending { 1 } else { 2 });
        assert_eq!(dropped.load(SeqCst), 1);
    });
}

/// A periodic cell's run (which puts a holder back, without the payload lock) races a stop
/// (which takes the payload out, without it either): the status word orders the two, the
/// stop always finds the timer pending, no run follows it, and the callback is dropped once.
#[test]
fn periodic_run_vs_stop() {
    loom::model(|| {
        let ts = Arc::new(Timers::new(0));
        let (t, fired, dropped) = probed();
        modify_cell(&t, 10, 10, &ts, &nohost());
        let stopper = thread::spawn(move || {
            let stopped = t.stop();
            drop(t);
            stopped
        });
        ts.check(10, true);
        assert!(stopper.join().unwrap(), "a periodic timer stays pending");
        let before = fired.load(SeqCst);
        assert!(before <= 1);
        ts.check(30, true);
        assert_eq!(fired.load(SeqCst), before, "no run after the stop");
        assert_eq!(dropped.load(SeqCst), 1);
    });
}
