//! `block_in_place` called from user code the runtime runs outside a task's poll: a waker's
//! `wake` run by a timer batch or a finishing task, the `Drop` of an aborted task's future or
//! of an output nobody joins, an `after_func` callback. Each hands the M's P away in the
//! middle of the runtime's own work on it. The rule: no hang, no P run by two Ms, and the
//! runtime keeps running tasks and timers.

mod support;

use support::{within, WATCHDOG};

use std::future::Future;
use std::pin::pin;
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::Arc;
use std::task::{Context, Wake, Waker};
use std::time::Duration;

/// Blocks in place for a moment: the M hands its P to another M meanwhile.
fn block_a_moment(runs: &AtomicUsize) {
    gort::block_in_place(|| std::thread::sleep(Duration::from_millis(5)));
    runs.fetch_add(1, SeqCst);
}

struct PlaceWaker(Arc<AtomicUsize>);

impl Wake for PlaceWaker {
    fn wake(self: Arc<Self>) {
        block_a_moment(&self.0);
    }
}

struct PlaceOnDrop(Arc<AtomicUsize>);

impl Drop for PlaceOnDrop {
    fn drop(&mut self) {
        block_a_moment(&self.0);
    }
}

/// The runtime still runs tasks and timers on every P, many times over.
fn still_healthy(rt: &gort::Runtime) {
    let sum = rt.block_on(async {
        let mut set = gort::JoinSet::new();
        for i in 0..200u64 {
            set.spawn(async move {
                gort::time::sleep(Duration::from_micros(i % 7 * 100)).await;
                gort::task::yield_now().await;
                i
            });
        }
        let mut sum = 0;
        while let Some(r) = set.join_next().await {
            sum += r.unwrap();
        }
        sum
    });
    assert_eq!(sum, 199 * 200 / 2);
}

fn wait_for(runs: &AtomicUsize, n: usize) {
    let start = std::time::Instant::now();
    while runs.load(SeqCst) < n {
        assert!(
            start.elapsed() < WATCHDOG,
            "{} of {n} ran",
            runs.load(SeqCst)
        );
        std::thread::sleep(Duration::from_millis(1));
    }
}

fn check(procs: usize, scenario: fn(&gort::Runtime, &Arc<AtomicUsize>) -> usize) {
    within(move || {
        let rt = gort::Builder::new().procs(procs).build().unwrap();
        let runs = Arc::new(AtomicUsize::new(0));
        let n = scenario(&rt, &runs);
        wait_for(&runs, n);
        still_healthy(&rt);
        drop(rt);
    });
}

/// Ten sleeps due together, each armed with a waker that blocks in place when woken: the
/// timer batch runs the wakers on an M that holds the P whose heap it is running.
fn timer_wakers(rt: &gort::Runtime, runs: &Arc<AtomicUsize>) -> usize {
    for _ in 0..10 {
        let waker = Waker::from(Arc::new(PlaceWaker(runs.clone())));
        drop(rt.spawn(async move {
            let mut s = pin!(gort::time::sleep(Duration::from_millis(5)));
            assert!(s
                .as_mut()
                .poll(&mut Context::from_waker(&waker))
                .is_pending());
            gort::time::sleep(Duration::from_millis(50)).await;
        }));
    }
    10
}

/// Before the fix this hung about one run in ten (the watchdog failed it): the M went on
/// running the P it had handed away, and leaked the idle P it took back. Repeated to make
/// that likely in one run.
#[test]
fn block_in_place_in_wakers_a_timer_batch_runs() {
    for _ in 0..5 {
        check(1, timer_wakers);
        check(2, timer_wakers);
    }
}

/// Join handles polled with a waker that blocks in place: the finishing task's M wakes it.
fn join_wakers(rt: &gort::Runtime, runs: &Arc<AtomicUsize>) -> usize {
    for _ in 0..10 {
        let waker = Waker::from(Arc::new(PlaceWaker(runs.clone())));
        let h = rt.spawn(async {
            gort::time::sleep(Duration::from_millis(5)).await;
        });
        drop(rt.spawn(async move {
            let mut h = pin!(h);
            assert!(h
                .as_mut()
                .poll(&mut Context::from_waker(&waker))
                .is_pending());
            gort::time::sleep(Duration::from_millis(50)).await;
        }));
    }
    10
}

#[test]
fn block_in_place_in_join_wakers() {
    check(1, join_wakers);
    check(2, join_wakers);
}

/// Aborted tasks whose futures block in place when dropped, and detached outputs likewise.
fn drops(rt: &gort::Runtime, runs: &Arc<AtomicUsize>) -> usize {
    for _ in 0..10 {
        let guard = PlaceOnDrop(runs.clone());
        let h = rt.spawn(async move {
            let _g = guard;
            std::future::pending::<()>().await;
        });
        h.abort();
        let out = PlaceOnDrop(runs.clone());
        drop(rt.spawn(async move { out }));
    }
    20
}

#[test]
fn block_in_place_in_drops_the_runtime_runs() {
    check(1, drops);
    check(2, drops);
}

fn callbacks(rt: &gort::Runtime, runs: &Arc<AtomicUsize>) -> usize {
    let _g = rt.handle().enter();
    for i in 0..10u64 {
        let runs = runs.clone();
        std::mem::forget(gort::time::after_func(
            Duration::from_millis(i % 3),
            move || block_a_moment(&runs),
        ));
    }
    10
}

#[test]
fn block_in_place_in_after_func_callbacks() {
    check(1, callbacks);
    check(2, callbacks);
}

/// Everything above at once, with the number of Ps changing under it: tasks that block in
/// place, wakers that block in place from timer batches, aborts, and a resizer thread.
#[test]
fn block_in_place_everywhere_while_procs_change() {
    within(|| {
        let rt = Arc::new(gort::Builder::new().procs(3).build().unwrap());
        let resizer = support::Resizer::start(rt.clone(), Duration::from_micros(300));
        let runs = Arc::new(AtomicUsize::new(0));
        for round in 0..10u64 {
            let runs = runs.clone();
            let sum = rt.block_on(async move {
                let mut set = gort::JoinSet::new();
                for i in 0..60u64 {
                    let runs = runs.clone();
                    set.spawn(async move {
                        match (round + i) % 4 {
                            0 => gort::block_in_place(|| {
                                std::thread::sleep(Duration::from_micros(200))
                            }),
                            1 => {
                                let waker = Waker::from(Arc::new(PlaceWaker(runs)));
                                let mut s = pin!(gort::time::sleep(Duration::from_micros(300)));
                                let _ = s.as_mut().poll(&mut Context::from_waker(&waker));
                            }
                            2 => {
                                let h = gort::spawn(std::future::pending::<()>());
                                h.abort();
                                assert!(h.await.unwrap_err().is_cancelled());
                            }
                            _ => gort::task::yield_now().await,
                        }
                        gort::time::sleep(Duration::from_micros(i % 3 * 400)).await;
                        i
                    });
                }
                let mut sum = 0;
                while let Some(r) = set.join_next().await {
                    sum += r.unwrap();
                }
                sum
            });
            assert_eq!(sum, 59 * 60 / 2);
        }
        resizer.stop();
        still_healthy(&rt);
    });
}
