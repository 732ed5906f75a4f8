//! Loom models of the task cell (`src/task/`): the real source, compiled here against loom's
//! atomics, cells and mutex (`gort_loom` under `--cfg loom`); cells go straight to the
//! allocator under loom (`cache.rs`).
//!
//! They check the state word and the reference count together: a wake racing the poll that
//! registered the waker neither loses the wake-up nor queues the task twice; the future is
//! dropped exactly once and the cell freed once, after the last of the run queue's, the
//! waker's, the registry's and the `JoinHandle`'s references, in any order; an abort racing
//! a wake still drops the future once and reports cancellation, and so does a teardown's
//! claim of an idle task racing a wake and the run it queues; a `JoinHandle` dropped while
//! the task completes has the output dropped exactly once, before the registry lets go.
//!
//! Run: `RUSTFLAGS="--cfg loom" LOOM_MAX_PREEMPTIONS=2 cargo test --release -p gort-sched --test loom_task`
#![cfg(loom)]

include!("support/task_model.rs");

use loom::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use loom::sync::{Arc, Mutex};
use loom::thread;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, Waker};
use task::{Cell, JoinHandle, Schedule, Task};

/// A run queue; `release` counts registry removals.
#[derive(Default)]
struct Queue {
    tasks: Mutex<Vec<Task>>,
    released: AtomicUsize,
}

impl Schedule for Arc<Queue> {
    fn schedule(&self, task: Task) {
        self.tasks.lock().unwrap().push(task);
    }
    fn yield_task(&self, task: Task) {
        self.schedule(task);
    }
    fn release(&self, _slot: usize) {
        self.released.fetch_add(1, SeqCst);
    }
    fn on_panic(&self) {}
}

impl Queue {
    /// Runs queued tasks until none is left; returns how many runs there were.
    fn run_all(&self) -> usize {
        let mut runs = 0;
        loop {
            let next = self.tasks.lock().unwrap().pop();
            let Some(t) = next else { return runs };
            t.run();
            runs += 1;
        }
    }
}

/// Pending on its first poll (after publishing its waker), ready on the next; counts polls
/// and its own drop.
struct TwoPolls {
    waker: Arc<Mutex<Option<Waker>>>,
    polls: usize,
    dropped: Arc<AtomicUsize>,
}

impl Future for TwoPolls {
    type Output = usize;
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<usize> {
        self.polls += 1;
        if self.polls == 1 {
            *self.waker.lock().unwrap() = Some(cx.waker().clone());
            Poll::Pending
        } else {
            Poll::Ready(self.polls)
        }
    }
}

impl Drop for TwoPolls {
    fn drop(&mut self) {
        self.dropped.fetch_add(1, SeqCst);
    }
}

/// A spawned task as `spawn_on` makes it: queued, and with a registry reference (kept here
/// and dropped at `release`, as the registry does).
fn spawn(
    q: &Arc<Queue>,
) -> (
    JoinHandle<usize>,
    task::RawTask,
    Arc<Mutex<Option<Waker>>>,
    Arc<AtomicUsize>,
) {
    let waker = Arc::new(Mutex::new(None));
    let dropped = Arc::new(AtomicUsize::new(0));
    let fut = TwoPolls {
        waker: waker.clone(),
        polls: 0,
        dropped: dropped.clone(),
    };
    let raw = Cell::spawn(fut, q.clone());
    let registry = raw.clone();
    q.schedule(Task::Raw(raw.clone()));
    // SAFETY: the future's output is `usize`.
    let join = unsafe { JoinHandle::new(raw) };
    (join, registry, waker, dropped)
}

fn block_on<F: Future>(mut f: F) -> F::Output {
    let waker = Waker::noop().clone();
    let mut cx = Context::from_waker(&waker);
    // SAFETY: `f` is not moved while pinned.
    let mut f = unsafe { Pin::new_unchecked(&mut f) };
    loop {
        if let Poll::Ready(v) = f.as_mut().poll(&mut cx) {
            return v;
        }
        thread::yield_now();
    }
}

/// The waker fires from another thread while the task runs its first poll (or after): the
/// task is polled exactly twice, the output reaches the JoinHandle, the future is dropped
/// once, and the cell outlives every reference.
#[test]
fn wake_races_the_poll_that_registered_the_waker() {
    loom::model(|| {
        let q = Arc::new(Queue::default());
        let (join, registry, waker, dropped) = spawn(&q);
        let waker2 = waker.clone();
        let waker_thread = thread::spawn(move || loop {
            let w = waker2.lock().unwrap().take();
            if let Some(w) = w {
                w.wake();
                return;
            }
            thread::yield_now();
        });
        let runner = {
            let q = q.clone();
            thread::spawn(move || q.run_all())
        };
        let mut runs = runner.join().unwrap();
        waker_thread.join().unwrap();
        runs += q.run_all();
        assert_eq!(runs, 2, "the task ran {runs} times");
        assert_eq!(block_on(join).unwrap(), 2);
        assert_eq!(dropped.load(SeqCst), 1);
        assert_eq!(q.released.load(SeqCst), 1);
        drop(registry);
    });
}

/// The JoinHandle and the registry's reference go on other threads while the task runs to
/// completion: whichever reference is last frees the cell, once.
#[test]
fn last_reference_frees_the_cell_from_any_thread() {
    loom::model(|| {
        let q = Arc::new(Queue::default());
        let (join, registry, waker, dropped) = spawn(&q);
        let dropper = thread::spawn(move || {
            drop(join);
            drop(registry);
        });
        q.run_all();
        let w = waker.lock().unwrap().take();
        w.expect("the first poll published its waker").wake();
        q.run_all();
        dropper.join().unwrap();
        assert_eq!(dropped.load(SeqCst), 1);
    });
}

/// An abort races the wake: the task ends cancelled or completed, its future dropped once.
#[test]
fn abort_races_a_wake() {
    loom::model(|| {
        let q = Arc::new(Queue::default());
        let (join, registry, waker, dropped) = spawn(&q);
        q.run_all();
        let w = waker.lock().unwrap().take().expect("the waker");
        let waker_thread = thread::spawn(move || w.wake());
        join.abort();
        waker_thread.join().unwrap();
        let runs = q.run_all();
        assert!(runs == 1, "queued {runs} times after abort and wake");
        let out = block_on(join);
        assert!(out.is_err() || out.unwrap() == 2);
        assert_eq!(dropped.load(SeqCst), 1);
        drop(registry);
    });
}

/// Teardown while Ms still run (`Runtime`'s early drop of idle tasks, `shutdown_if_idle`)
/// races a waker whose thread then runs the queue, as an M would: the claim takes the task
/// only while it is idle, so the task is polled or claimed, never both; it is queued at most
/// once, its future dropped once, and the JoinHandle sees a cancellation or the output.
#[test]
fn idle_shutdown_races_a_wake_and_its_run() {
    loom::model(|| {
        let q = Arc::new(Queue::default());
        let (join, registry, waker, dropped) = spawn(&q);
        q.run_all();
        let w = waker.lock().unwrap().take().expect("the waker");
        let q2 = q.clone();
        let runner = thread::spawn(move || {
            w.wake();
            q2.run_all()
        });
        registry.clone().shutdown_if_idle();
        let runs = runner.join().unwrap() + q.run_all();
        assert!(runs <= 1, "queued {runs} times");
        let out = block_on(join);
        match out {
            Ok(polls) => assert_eq!((polls, runs), (2, 1)),
            Err(e) => assert!(e.is_cancelled() && runs == 0),
        }
        assert_eq!(dropped.load(SeqCst), 1);
        drop(registry);
    });
}

/// An output that counts its drops.
struct Counted(Arc<AtomicUsize>);

impl Drop for Counted {
    fn drop(&mut self) {
        self.0.fetch_add(1, SeqCst);
    }
}

/// Ready on its first poll with its output.
struct ReadyWith(Option<Counted>);

impl Future for ReadyWith {
    type Output = Counted;
    fn poll(mut self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<Counted> {
        Poll::Ready(self.0.take().expect("polled after Ready"))
    }
}

/// The JoinHandle is dropped on another thread while the task completes: the output is
/// dropped exactly once, by the completion or by the drop, before the registry lets go of
/// the cell (a P may keep a finished task's slot for a while).
#[test]
fn a_handle_dropped_racing_completion_drops_the_output_once() {
    loom::model(|| {
        let q = Arc::new(Queue::default());
        let drops = Arc::new(AtomicUsize::new(0));
        let raw = Cell::spawn(ReadyWith(Some(Counted(drops.clone()))), q.clone());
        let registry = raw.clone();
        q.schedule(Task::Raw(raw.clone()));
        // SAFETY: the future's output is `Counted`.
        let join = unsafe { JoinHandle::<Counted>::new(raw) };
        let dropper = thread::spawn(move || drop(join));
        q.run_all();
        dropper.join().unwrap();
        assert_eq!(
            drops.load(SeqCst),
            1,
            "the output outlived its task and its handle"
        );
        drop(registry);
        assert_eq!(drops.load(SeqCst), 1, "the output was dropped twice");
    });
}
