//! Tokio's `tests/rt_metrics.rs`, ported to gort's `Runtime::metrics`, `proc_metrics` and
//! `global_queue_depth`: each test keeps its Tokio name and a comment naming its file, and
//! runs under a watchdog. Tokio's current-thread runtime is a gort runtime of 1 P, its
//! threaded runtime of 2 workers one of 2 Ps. `num_workers` is `Metrics::procs`,
//! `num_alive_tasks` is `tasks_alive`, `worker_total_busy_duration(i)` is `proc_metrics()[i]
//! .busy`.
//!
//! Gort's `Metrics` is a snapshot (a struct of figures), not a live handle: each check reads
//! a new one. Skipped, where gort deliberately differs:
//! - `global_queue_depth_current_thread`: gort's Ps run on their own Ms whether or not a
//!   `block_on` is running, so a task spawned from outside runs at once instead of waiting
//!   in the queue for the next `block_on`;
//! - `worker_park_count`, `worker_park_unpark_count`: gort counts the Ms it wakes
//!   (`Metrics::ms_woken`), not per-worker parks; the figure is ported as a coarser check;
//! - reading the busy time after the runtime is dropped: gort's figures come from the
//!   runtime, so they are read just before the drop.

mod support;

use std::sync::mpsc;
use std::time::Duration;
use support::within;

fn current_thread() -> gort::Runtime {
    gort::Builder::new().procs(1).build().unwrap()
}

fn threaded() -> gort::Runtime {
    gort::Builder::new().procs(2).build().unwrap()
}

/// Polls `cond` every 10 ms for up to 10 s (Tokio's loop for counters that settle after a
/// task's completion is seen).
fn eventually(mut cond: impl FnMut() -> bool) -> bool {
    for _ in 0..1000 {
        if cond() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    false
}

// rt_metrics.rs
#[test]
fn num_workers() {
    within(|| {
        assert_eq!(1, current_thread().metrics().procs);
        assert_eq!(2, threaded().metrics().procs);
    });
}

// rt_metrics.rs
#[test]
fn num_alive_tasks() {
    within(|| {
        for rt in [current_thread(), threaded()] {
            assert_eq!(0, rt.metrics().tasks_alive);
            rt.block_on(rt.spawn(async move {
                let m = gort::runtime::Handle::current().metrics();
                assert_eq!(1, m.tasks_alive);
            }))
            .unwrap();
            // The join is woken before the task is released: the count settles soon after.
            assert!(eventually(|| rt.metrics().tasks_alive == 0));
        }
    });
}

// rt_metrics.rs (the spawned count: `tasks_spawned` counts spawns, not `spawn_blocking`)
#[test]
fn num_spawned_tasks() {
    within(|| {
        let rt = threaded();
        let before = rt.metrics().tasks_spawned;
        rt.block_on(async {
            for _ in 0..10 {
                gort::spawn(async {}).await.unwrap();
            }
            gort::spawn_blocking(|| {}).await.unwrap();
        });
        assert_eq!(rt.metrics().tasks_spawned - before, 10);
    });
}

/// Blocks every P with a task waiting on a plain channel (Tokio's `try_block_threaded`).
fn try_block_threaded(rt: &gort::Runtime) -> Result<Vec<mpsc::Sender<()>>, mpsc::RecvTimeoutError> {
    let (tx, rx) = mpsc::channel();
    let blocking_tasks = (0..rt.metrics().procs)
        .map(|_| {
            let tx = tx.clone();
            let (task, barrier) = mpsc::channel::<()>();
            rt.spawn(async move {
                tx.send(()).ok();
                barrier.recv().ok();
            });
            task
        })
        .collect();
    for _ in 0..rt.metrics().procs {
        rx.recv_timeout(Duration::from_secs(1))?;
    }
    Ok(blocking_tasks)
}

// rt_metrics.rs
#[test]
fn global_queue_depth_multi_thread() {
    within(|| {
        for _ in 0..10 {
            let rt = threaded();
            if let Ok(blocking_tasks) = try_block_threaded(&rt) {
                for i in 0..10 {
                    assert_eq!(i, rt.global_queue_depth());
                    rt.spawn(async {});
                }
                drop(blocking_tasks);
                // Unblocked, the Ps drain the queue.
                assert!(eventually(|| rt.global_queue_depth() == 0));
                return;
            }
        }
        panic!("exhausted every try to block the runtime");
    });
}

// rt_metrics.rs
#[test]
fn worker_total_busy_duration() {
    within(|| {
        const N: usize = 5;
        for rt in [current_thread(), threaded()] {
            rt.block_on(async {
                for _ in 0..N {
                    gort::spawn(async {
                        gort::task::yield_now().await;
                    })
                    .await
                    .unwrap();
                }
            });
            let ps = rt.proc_metrics();
            assert_eq!(ps.len(), rt.metrics().procs);
            // Every P was held at some point (to start up, to run the tasks).
            for p in &ps {
                assert!(p.busy > Duration::ZERO, "P {} never busy: {ps:?}", p.id);
            }
        }
    });
}

// rt_metrics.rs (`worker_park_unpark_count`, coarser: a task spawned on an idle runtime wakes
// a parked M for it)
#[test]
fn worker_park_unpark_count() {
    within(|| {
        let rt = threaded();
        // Let the Ms park after start-up.
        std::thread::sleep(Duration::from_millis(50));
        let before = rt.metrics().ms_woken;
        for _ in 0..5 {
            rt.block_on(rt.spawn(async {})).unwrap();
            std::thread::sleep(Duration::from_millis(20));
        }
        assert!(rt.metrics().ms_woken > before, "{:?}", rt.metrics());
    });
}
