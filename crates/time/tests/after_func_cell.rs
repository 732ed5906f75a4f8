//! An `after_func` is one allocation: its closure lives in the runtime timer's (gort-timer's
//! `TimerCell`). What that relies on, checked in a runtime: the closure is dropped exactly
//! once whichever way the timer ends (stopped, fired, reset after firing, left pending at
//! shutdown), never before its last run, and a panic in it or in its drop is caught and
//! counted without losing the drop. design/TIMERS.md, "Memory".
#![cfg(not(loom))]

#[path = "support/canary.rs"]
mod canary;

use canary::Canary;
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};

use gort_sched::{Builder, Runtime};
use gort_time::after_func;

const HOUR: Duration = Duration::from_secs(3600);
/// Far beyond anything these tests need on a loaded machine: only a hang or a leak reaches it.
const PATIENCE: Duration = Duration::from_secs(20);

/// Panics when dropped, after counting the drop.
struct PanicOnDrop(Arc<AtomicUsize>);

impl Drop for PanicOnDrop {
    fn drop(&mut self) {
        self.0.fetch_add(1, SeqCst);
        panic!("a closure's capture panics in its drop");
    }
}

fn runtime() -> Runtime {
    Builder::new().procs(2).build().unwrap()
}

/// Waits until `n` reaches `want` (a run queue may hold the closure a moment after it ran),
/// then checks that it stays there a little.
fn settles_at(n: &AtomicUsize, want: usize, what: &str) {
    let start = Instant::now();
    while n.load(SeqCst) < want {
        assert!(
            start.elapsed() < PATIENCE,
            "{what}: {} of {want}",
            n.load(SeqCst)
        );
        std::thread::sleep(Duration::from_millis(1));
    }
    std::thread::sleep(Duration::from_millis(20));
    assert_eq!(n.load(SeqCst), want, "{what}");
}

#[test]
fn stop_then_drop_drops_the_closure_once_at_the_drop() {
    let rt = runtime();
    let drops = Arc::new(AtomicUsize::new(0));
    rt.block_on(async {
        let c = Canary(drops.clone());
        let h = after_func(HOUR, move || {
            let _ = &c;
        });
        assert!(h.stop());
        assert_eq!(drops.load(SeqCst), 0, "the handle holds it");
        drop(h);
        assert_eq!(drops.load(SeqCst), 1, "the handle held the last reference");
    });
    drop(rt);
    assert_eq!(drops.load(SeqCst), 1);
}

#[test]
fn fire_then_drop_and_reset_after_fire_drop_the_closure_once() {
    let rt = runtime();
    let drops = Arc::new(AtomicUsize::new(0));
    let (tx, rx) = mpsc::channel::<()>();
    rt.block_on(async {
        let c = Canary(drops.clone());
        let h = after_func(Duration::from_millis(1), move || {
            let _ = &c;
            let _ = tx.send(());
        });
        rx.recv_timeout(PATIENCE).expect("the first firing");
        assert!(!h.reset(Duration::from_millis(1)), "fired: not pending");
        rx.recv_timeout(PATIENCE)
            .expect("the firing after the reset");
        assert_eq!(drops.load(SeqCst), 0, "the handle holds it");
        drop(h);
    });
    settles_at(&drops, 1, "closure drops");
    drop(rt);
    assert_eq!(drops.load(SeqCst), 1);
}

#[test]
fn a_handle_dropped_while_pending_leaves_the_closure_to_its_run() {
    let rt = runtime();
    let drops = Arc::new(AtomicUsize::new(0));
    let runs = Arc::new(AtomicUsize::new(0));
    let (go, gate) = gate();
    rt.block_on(async {
        let c = Canary(drops.clone());
        let r = runs.clone();
        drop(after_func(Duration::from_millis(1), move || {
            let _ = &c;
            gate.pass();
            r.fetch_add(1, SeqCst);
        }));
        assert_eq!(drops.load(SeqCst), 0, "the armed timer or its run holds it");
        go.send(()).unwrap();
    });
    settles_at(&runs, 1, "runs");
    settles_at(&drops, 1, "closure drops");
}

/// A callback that waits until the test lets it finish, so that its run, not the handle,
/// holds the last reference however soon the timer fires.
struct Gate(Mutex<mpsc::Receiver<()>>);

impl Gate {
    fn pass(&self) {
        let _ = self.0.lock().unwrap().recv_timeout(PATIENCE);
    }
}

fn gate() -> (mpsc::Sender<()>, Gate) {
    let (tx, rx) = mpsc::channel();
    (tx, Gate(Mutex::new(rx)))
}

#[test]
fn shutdown_with_the_timer_pending_drops_the_closure_once() {
    // Handle dropped: the shutdown's drain lets go of the last reference.
    let rt = runtime();
    let drops = Arc::new(AtomicUsize::new(0));
    rt.block_on(async {
        let c = Canary(drops.clone());
        drop(after_func(HOUR, move || {
            let _ = &c;
        }));
    });
    drop(rt);
    assert_eq!(drops.load(SeqCst), 1);

    // Handle kept past the runtime: the drain releases the armed reference, the handle the
    // last one.
    let rt = runtime();
    let drops = Arc::new(AtomicUsize::new(0));
    let h = rt.block_on(async {
        let c = Canary(drops.clone());
        after_func(HOUR, move || {
            let _ = &c;
        })
    });
    drop(rt);
    assert_eq!(drops.load(SeqCst), 0, "the handle holds it");
    assert!(!h.stop(), "the drain removed it");
    drop(h);
    assert_eq!(drops.load(SeqCst), 1);
}

#[test]
fn a_panicking_closure_is_counted_and_dropped_once() {
    let rt = runtime();
    let drops = Arc::new(AtomicUsize::new(0));
    let before = rt.metrics().task_panics;
    rt.block_on(async {
        let c = Canary(drops.clone());
        drop(after_func(Duration::from_millis(1), move || {
            let _ = &c;
            panic!("an after_func callback panics");
        }));
    });
    let start = Instant::now();
    while rt.metrics().task_panics == before {
        assert!(start.elapsed() < PATIENCE, "the panic was not counted");
        std::thread::sleep(Duration::from_millis(1));
    }
    settles_at(&drops, 1, "closure drops");
    assert_eq!(rt.metrics().task_panics, before + 1);
}

/// The run queue holds the last reference (the handle went first): the capture's panicking
/// drop runs there, caught and counted as user code's, once.
#[test]
fn a_closure_whose_drop_panics_is_dropped_once_and_counted() {
    let rt = runtime();
    let drops = Arc::new(AtomicUsize::new(0));
    let before = rt.metrics().user_panics;
    let (go, gate) = gate();
    rt.block_on(async {
        let p = PanicOnDrop(drops.clone());
        drop(after_func(Duration::from_millis(1), move || {
            let _ = &p;
            gate.pass();
        }));
        go.send(()).unwrap();
    });
    settles_at(&drops, 1, "closure drops");
    let start = Instant::now();
    while rt.metrics().user_panics == before {
        assert!(
            start.elapsed() < PATIENCE,
            "the drop's panic was not counted"
        );
        std::thread::sleep(Duration::from_millis(1));
    }
    assert_eq!(rt.metrics().user_panics, before + 1);
    // The runtime still runs timers.
    let (tx, rx) = mpsc::channel::<()>();
    rt.block_on(async {
        let _h = after_func(Duration::from_millis(1), move || {
            let _ = tx.send(());
        });
        rx.recv_timeout(PATIENCE).expect("a later after_func fires");
    });
}
