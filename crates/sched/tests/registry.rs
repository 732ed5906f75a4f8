//! Finished tasks leave the registry of live tasks: a P takes its finished tasks out in
//! batches (registry.rs, "Who touches a shard"), and nothing of a finished task outlives the
//! P's next idle moment or shows in `Metrics::tasks_alive`.

use gort_sched::{spawn, Builder, Runtime};
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A task output that counts its drops (and panics in its `Drop` if asked).
struct Output {
    drops: Arc<AtomicUsize>,
    panic: bool,
}

impl Drop for Output {
    fn drop(&mut self) {
        self.drops.fetch_add(1, SeqCst);
        if self.panic {
            panic!("an output's Drop panics");
        }
    }
}

/// Waits (up to 10 s) until `done` holds, checking every millisecond.
fn wait_until(what: &str, done: impl Fn() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !done() {
        assert!(Instant::now() < deadline, "timed out waiting until {what}");
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// Spawns `n` tasks from a task (so from a P), each returning an `Output`, and drops their
/// join handles: the outputs live in the cells until the registry lets go of them.
fn spawn_unjoined(rt: &Runtime, n: usize, drops: &Arc<AtomicUsize>, panic: bool) {
    let drops = drops.clone();
    rt.block_on(rt.spawn(async move {
        for _ in 0..n {
            let drops = drops.clone();
            drop(spawn(async move { Output { drops, panic } }));
        }
    }))
    .unwrap();
}

/// Fewer finished tasks than a batch: their outputs are dropped and none counts as alive,
/// though no batch filled (an idle P gives the slots back: `handle.rs`'s unit test).
#[test]
fn the_outputs_of_unjoined_tasks_are_dropped_and_none_is_alive() {
    let rt = Builder::new().procs(2).build().unwrap();
    let drops = Arc::new(AtomicUsize::new(0));
    spawn_unjoined(&rt, 10, &drops, false);
    wait_until("every output is dropped", || drops.load(SeqCst) == 10);
    // Outputs go at completion, slots a moment later (a P's batch): wait for the slots.
    wait_until("no task is alive", || rt.metrics().tasks_alive == 0);
    assert_eq!(rt.metrics().tasks_spawned, 11);
}

/// Many batches: every output is dropped exactly once and `tasks_alive` counts none of the
/// finished tasks, even those a P still holds.
#[test]
fn every_finished_task_leaves_the_registry_exactly_once() {
    let rt = Builder::new().procs(2).build().unwrap();
    let drops = Arc::new(AtomicUsize::new(0));
    spawn_unjoined(&rt, 100_003, &drops, false);
    wait_until("every output is dropped", || drops.load(SeqCst) == 100_003);
    // Outputs go at completion, slots a moment later (a P's batch): wait for the slots.
    wait_until("no task is alive", || rt.metrics().tasks_alive == 0);
    drop(rt);
    assert_eq!(drops.load(SeqCst), 100_003, "an output dropped twice");
}

/// An output whose `Drop` panics when a batch frees it neither kills the M nor loses the
/// rest of the batch: the panics are counted and every other output is dropped.
#[test]
fn a_panicking_output_drop_in_a_batch_is_caught() {
    let rt = Builder::new().procs(2).build().unwrap();
    let drops = Arc::new(AtomicUsize::new(0));
    spawn_unjoined(&rt, 200, &drops, true);
    wait_until("every output is dropped", || drops.load(SeqCst) == 200);
    // A drop counts itself before it panics; the runtime counts the panic once caught.
    wait_until("every panic is counted", || rt.metrics().user_panics >= 200);
    // Outputs go at completion, slots a moment later (a P's batch): wait for the slots.
    wait_until("no task is alive", || rt.metrics().tasks_alive == 0);
    assert_eq!(rt.metrics().user_panics, 200);
    // The Ms still run tasks.
    assert_eq!(rt.block_on(rt.spawn(async { 7 })).unwrap(), 7);
}

/// Keeps both Ps of `rt` busy (so none goes idle and gives back its finished tasks) until the
/// returned flag is set.
fn keep_ps_busy(rt: &Runtime) -> Arc<std::sync::atomic::AtomicBool> {
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    for _ in 0..2 {
        let stop = stop.clone();
        drop(rt.spawn(async move {
            while !stop.load(SeqCst) {
                gort_sched::yield_now().await;
            }
        }));
    }
    stop
}

/// A detached task's output is dropped when the task completes, even while its P stays busy
/// and keeps the task's registry slot for a later batch (Tokio drops it then too).
#[test]
fn a_detached_tasks_output_is_dropped_when_it_completes() {
    let rt = Builder::new().procs(2).build().unwrap();
    let stop = keep_ps_busy(&rt);
    let drops = Arc::new(AtomicUsize::new(0));
    let d = drops.clone();
    drop(rt.spawn(async move {
        gort_sched::yield_now().await;
        Output {
            drops: d,
            panic: false,
        }
    }));
    wait_until("the detached output is dropped", || drops.load(SeqCst) == 1);
    stop.store(true, SeqCst);
}

/// A `JoinHandle` dropped after its task completed drops the output then, not when the
/// registry lets go of the cell.
#[test]
fn dropping_the_handle_of_a_completed_task_drops_its_output() {
    let rt = Builder::new().procs(2).build().unwrap();
    let stop = keep_ps_busy(&rt);
    let drops = Arc::new(AtomicUsize::new(0));
    let d = drops.clone();
    let handle = rt.spawn(async move {
        Output {
            drops: d,
            panic: false,
        }
    });
    wait_until("the task completes", || handle.is_finished());
    assert_eq!(drops.load(SeqCst), 0, "the output went before its handle");
    drop(handle);
    assert_eq!(drops.load(SeqCst), 1);
    stop.store(true, SeqCst);
}
