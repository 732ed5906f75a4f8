//! A timer and its callback in one allocation (`TimerCell`, `CellTimer`): the callback is
//! dropped exactly once, as soon as the handle is gone and no arming or run holds it (a stop,
//! a one-shot run and a drain release the armed one at once), whatever the heaps still hold;
//! the heaps' references keep only the memory. design/TIMERS.md, "Memory".
#![cfg(not(loom))]

mod common;

use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::{Arc, Mutex};

use common::{armed, quiet, Log};
use gort_timer::*;

/// Counts the firings, the shutdown notices and the drops of one callback.
#[derive(Default)]
struct Counts {
    fired: AtomicUsize,
    shutdowns: AtomicUsize,
    dropped: AtomicUsize,
}

impl Counts {
    fn get(&self) -> (usize, usize, usize) {
        (
            self.fired.load(SeqCst),
            self.shutdowns.load(SeqCst),
            self.dropped.load(SeqCst),
        )
    }
}

struct Counted(Arc<Counts>);

impl CellFire for Counted {
    fn fire(cell: CellRef<Self>, _when: Nanos) {
        cell.payload().0.fired.fetch_add(1, SeqCst);
    }

    fn shutdown(cell: CellRef<Self>) {
        cell.payload().0.shutdowns.fetch_add(1, SeqCst);
    }
}

impl Drop for Counted {
    fn drop(&mut self) {
        self.0.dropped.fetch_add(1, SeqCst);
    }
}

fn counted() -> (CellTimer, Arc<Counts>) {
    let counts = Arc::new(Counts::default());
    (CellTimer::new(Counted(counts.clone())), counts)
}

#[test]
fn stop_then_drop_drops_the_callback_once() {
    let ts = Timers::new(0);
    let (t, c) = counted();
    assert!(!modify_cell(&t, 10, 0, &ts, &quiet()));
    assert!(t.stop());
    assert_eq!(c.get(), (0, 0, 0), "the handle still holds the callback");
    drop(t);
    assert_eq!(c.get(), (0, 0, 1));
    // The heap's `Deleted` entry goes lazily; its reference keeps only the memory.
    assert_eq!(ts.check(100, true).ran, 0);
    ts.verify();
    assert_eq!(ts.stats().pending, 0);
    assert_eq!(c.get(), (0, 0, 1));
}

#[test]
fn fire_then_drop_drops_the_callback_once() {
    let ts = Timers::new(0);
    let (t, c) = counted();
    modify_cell(&t, 10, 0, &ts, &quiet());
    assert_eq!(ts.check(10, true).ran, 1);
    assert_eq!(c.get(), (1, 0, 0));
    assert!(!t.stop(), "fired");
    drop(t);
    assert_eq!(c.get(), (1, 0, 1));
}

#[test]
fn a_handle_dropped_while_pending_leaves_the_callback_to_the_run() {
    let ts = Timers::new(0);
    let (t, c) = counted();
    modify_cell(&t, 10, 0, &ts, &quiet());
    drop(t);
    assert_eq!(c.get(), (0, 0, 0), "the armed payload holds the callback");
    assert_eq!(ts.check(10, true).ran, 1);
    assert_eq!(c.get(), (1, 0, 1), "dropped once it ran");
}

#[test]
fn reset_after_fire_installs_the_callback_again() {
    let ts = Timers::new(0);
    let (t, c) = counted();
    modify_cell(&t, 10, 0, &ts, &quiet());
    assert_eq!(ts.check(10, true).ran, 1);
    assert!(
        !modify_cell(&t, 20, 0, &ts, &quiet()),
        "not pending after it fired"
    );
    assert!(
        modify_cell(&t, 30, 0, &ts, &quiet()),
        "pending: re-keyed lazily"
    );
    assert_eq!(ts.check(20, true).ran, 0);
    assert_eq!(ts.check(30, true).ran, 1);
    assert!(!t.stop(), "fired");
    assert!(!modify_cell(&t, 40, 0, &ts, &quiet()));
    assert!(t.stop(), "stopped while pending");
    drop(t);
    assert_eq!(c.get(), (2, 0, 1));
    ts.verify();
}

#[test]
fn shutdown_with_the_timer_pending_tells_and_drops_the_callback_once() {
    let ts = Timers::new(0);
    let (t, c) = counted();
    modify_cell(&t, 10, 0, &ts, &quiet());
    drop(t);
    ts.drain_waking();
    assert_eq!(c.get(), (0, 1, 1));
    drop(ts);
    assert_eq!(c.get(), (0, 1, 1));

    // A heap dropped while the handle lives: the callback goes with the handle.
    let ts = Timers::new(0);
    let (t, c) = counted();
    modify_cell(&t, 10, 0, &ts, &quiet());
    drop(ts);
    assert_eq!(c.get(), (0, 0, 0));
    assert_eq!(t.status(), Status::Removed);
    drop(t);
    assert_eq!(c.get(), (0, 0, 1));
}

/// A cell modified earlier is promoted (a second, indexed entry; the first left stale behind
/// a live timer) and fires: with the handle gone the callback is dropped at once, though the
/// stale entry still names the cell's timer.
#[test]
fn a_stale_entry_keeps_the_cells_memory_not_its_callback() {
    let ts = Timers::new(0);
    let log = Log::new();
    let _front = armed(&ts, &log, 0, 500);
    let (t, c) = counted();
    modify_cell(&t, 1000, 0, &ts, &quiet());
    assert!(modify_cell(&t, 100, 0, &ts, &quiet()));
    assert_eq!(ts.check(100, false).ran, 1); // not local: no 1/4 clean-up
    drop(t);
    assert_eq!(c.get(), (1, 0, 1));
    assert_eq!(ts.stats().deleted, 1, "the stale entry is still there");
    ts.verify();
    assert_eq!(ts.check(2000, true).ran, 1, "the front timer");
    assert_eq!(ts.stats().pending, 0);
    assert_eq!(c.get(), (1, 0, 1));
}

/// `move_to` carries a pending cell to another heap, where it fires.
#[test]
fn a_pending_cell_moves_and_fires_in_its_new_heap() {
    let (a, b) = (Timers::new(0), Timers::new(1));
    let (t, c) = counted();
    modify_cell(&t, 50, 0, &a, &quiet());
    let (u, d) = counted();
    modify_cell(&u, 60, 0, &a, &quiet());
    assert!(u.stop());
    drop(u);
    assert!(a.move_to(&b, &quiet()).is_empty());
    assert_eq!(a.stats().pending, 0);
    b.verify();
    assert_eq!(b.check(50, true).ran, 1);
    assert_eq!(c.get(), (1, 0, 0));
    drop(t);
    assert_eq!(c.get(), (1, 0, 1));
    assert_eq!(d.get(), (0, 0, 1));
}

/// Periodic cells keep their payload across runs, as any periodic timer does.
#[test]
fn a_periodic_cell_fires_each_period_and_drops_once() {
    let ts = Timers::new(0);
    let (t, c) = counted();
    modify_cell(&t, 10, 10, &ts, &quiet());
    drop(t);
    for now in [10, 20, 30] {
        assert_eq!(ts.check(now, true).ran, 1);
    }
    assert_eq!(c.get(), (3, 0, 0), "the armed payload holds it");
    drop(ts);
    assert_eq!(c.get(), (3, 0, 1));
}

/// Many threads stop, re-arm and run cells of one heap at once; every callback is dropped
/// exactly once, after its last firing.
#[test]
fn concurrent_stops_resets_and_runs_drop_every_callback_once() {
    let ts = Arc::new(Timers::new(0));
    let all: Mutex<Vec<Arc<Counts>>> = Mutex::new(Vec::new());
    std::thread::scope(|s| {
        for w in 0..4u32 {
            let ts = &ts;
            let all = &all;
            s.spawn(move || {
                for i in 0..2_000i64 {
                    let (t, c) = counted();
                    all.lock().unwrap().push(c);
                    modify_cell(&t, 1 + (i * 7 + i64::from(w)) % 50, 0, ts, &quiet());
                    match i % 4 {
                        0 => drop(t),
                        1 => {
                            t.stop();
                        }
                        2 => {
                            modify_cell(&t, 1 + i % 30, 0, ts, &quiet());
                        }
                        _ => {
                            ts.check(1 + i % 60, w == 0);
                        }
                    }
                }
            });
        }
    });
    ts.check(1_000, true);
    ts.verify();
    drop(ts);
    for c in all.into_inner().unwrap() {
        let (fired, _, dropped) = c.get();
        assert_eq!(dropped, 1);
        assert!(fired <= 2);
    }
}
