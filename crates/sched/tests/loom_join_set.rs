//! Loom models of `JoinSet` (`src/task/join_set.rs`) with the real task cells: tasks finish
//! on a runner thread while the set's owner awaits `join_next` (parked with loom's `park`,
//! so that a lost wake-up is reported as a deadlock), aborts them, or drops the set.
//!
//! They check that every task's output comes back exactly once, that a finish racing the
//! registration of `join_next`'s waker is not lost, and that abort and drop leave every
//! future dropped once.
//!
//! Run: `RUSTFLAGS="--cfg loom" LOOM_MAX_PREEMPTIONS=2 cargo test --release -p gort-sched --test loom_join_set`
#![cfg(loom)]

include!("support/task_model.rs");

use loom::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use loom::sync::{Arc, Mutex};
use loom::thread;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, Wake, Waker};
use task::{Cell, JoinHandle, JoinSet, Schedule, Task};

/// A run queue (the registry's reference is not modelled: `release` is a no-op).
#[derive(Default)]
struct Queue {
    tasks: Mutex<Vec<Task>>,
}

impl Schedule for Arc<Queue> {
    fn schedule(&self, task: Task) {
        self.tasks.lock().unwrap().push(task);
    }
    fn yield_task(&self, task: Task) {
        self.schedule(task);
    }
    fn release(&self, _slot: usize) {}
    fn on_panic(&self) {}
}

impl Queue {
    fn run_all(&self) {
        loop {
            let next = self.tasks.lock().unwrap().pop();
            let Some(t) = next else { return };
            t.run();
        }
    }
}

/// Ready with `value` at its first poll; counts its drop.
struct Value {
    value: usize,
    dropped: Arc<AtomicUsize>,
}

impl Future for Value {
    type Output = usize;
    fn poll(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<usize> {
        Poll::Ready(self.value)
    }
}

impl Drop for Value {
    fn drop(&mut self) {
        self.dropped.fetch_add(1, SeqCst);
    }
}

/// Spawns `value` on `q` into `set`.
fn spawn(set: &mut JoinSet<usize>, q: &Arc<Queue>, value: usize, dropped: &Arc<AtomicUsize>) {
    let fut = Value {
        value,
        dropped: dropped.clone(),
    };
    let raw = Cell::spawn(fut, q.clone());
    q.schedule(Task::Raw(raw.clone()));
    // SAFETY: the future's output is `usize`.
    set.insert(unsafe { JoinHandle::new(raw) });
}

/// Unparks the thread that blocks on a future.
struct Unpark(thread::Thread);

impl Wake for Unpark {
    fn wake(self: std::sync::Arc<Self>) {
        self.0.unpark();
    }
}

/// A waker that does nothing.
struct Noop;

impl Wake for Noop {
    fn wake(self: std::sync::Arc<Self>) {}
}

/// Polls `f` to completion, parking the thread between polls (loom reports a deadlock if no
/// wake-up comes).
fn block_on<F: Future>(f: F) -> F::Output {
    let waker = Waker::from(std::sync::Arc::new(Unpark(thread::current())));
    let mut cx = Context::from_waker(&waker);
    let mut f = std::pin::pin!(f);
    loop {
        if let Poll::Ready(v) = f.as_mut().poll(&mut cx) {
            return v;
        }
        thread::park();
    }
}

fn runner(q: &Arc<Queue>) -> thread::JoinHandle<()> {
    let q = q.clone();
    thread::spawn(move || q.run_all())
}

/// Two tasks finish on another thread while `join_next` polls and parks: both outputs come
/// back, once each, then `None`.
#[test]
fn outputs_raced_against_join_next_come_back_once_each() {
    loom::model(|| {
        let q = Arc::new(Queue::default());
        let dropped = Arc::new(AtomicUsize::new(0));
        let mut set = JoinSet::new();
        spawn(&mut set, &q, 1, &dropped);
        spawn(&mut set, &q, 2, &dropped);
        let r = runner(&q);
        let (a, b, end) = block_on(async {
            let a = set.join_next().await.unwrap().unwrap();
            let b = set.join_next().await.unwrap().unwrap();
            (a, b, set.join_next().await.is_none())
        });
        r.join().unwrap();
        assert_eq!(a + b, 3);
        assert!(end && set.is_empty());
        assert_eq!(dropped.load(SeqCst), 2);
    });
}

/// `abort_all` races the task's completion: it comes back completed or cancelled, and its
/// future is dropped once. (One task: with two, loom 0.7 trips over its own modification-order
/// assertion in `match_rmw_to_stores`, tokio-rs/loom#252, on the state word's CAS loop.)
#[test]
fn abort_all_races_completion() {
    loom::model(|| {
        let q = Arc::new(Queue::default());
        let dropped = Arc::new(AtomicUsize::new(0));
        let mut set = JoinSet::new();
        spawn(&mut set, &q, 1, &dropped);
        let r = runner(&q);
        set.abort_all();
        r.join().unwrap();
        // A task that was idle when aborted was queued again: run it to the end.
        q.run_all();
        let res = block_on(set.join_next()).expect("the task");
        assert!(matches!(
            res.map_err(|e| e.is_cancelled()),
            Ok(1) | Err(true)
        ));
        assert!(block_on(set.join_next()).is_none());
        assert_eq!(dropped.load(SeqCst), 1);
    });
}

/// The set is dropped while a task finishes: the finishing task's join waker (which
/// reports to the dropped set's ready queue) and the abort do no harm.
#[test]
fn dropping_the_set_while_tasks_finish() {
    loom::model(|| {
        let q = Arc::new(Queue::default());
        let dropped = Arc::new(AtomicUsize::new(0));
        let mut set = JoinSet::new();
        spawn(&mut set, &q, 1, &dropped);
        // Register the task's join waker first, so that its finish wakes into the set.
        // (A waker that does nothing: loom's `unpark` must not reach a thread in `join`.)
        let waker = Waker::from(std::sync::Arc::new(Noop));
        let _ = std::pin::pin!(set.join_next()).poll(&mut Context::from_waker(&waker));
        let r = runner(&q);
        drop(set);
        r.join().unwrap();
        q.run_all();
        assert_eq!(dropped.load(SeqCst), 1);
    });
}
