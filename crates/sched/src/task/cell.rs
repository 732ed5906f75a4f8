//! The task cell: one allocation holding a spawned future, its state word and its output.

use super::join::{JoinError, JoinTarget};
use super::state::{AfterPoll, State, Wake as WakeAction, CANCELLED, COMPLETE};
use super::{Runnable, Schedule, Task};
use gort_sync::atomic::{AtomicUsize, Ordering::Relaxed};
use gort_sync::{Mutex, UnsafeCell};
use std::future::Future;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};

enum Stage<F: Future> {
    Running(F),
    Finished(Result<F::Output, JoinError>),
    Consumed,
}

/// A spawned task. `S` says where it is queued when woken (a runtime's Ps, or the blocking pool).
pub(crate) struct Cell<F: Future, S> {
    state: State,
    sched: S,
    /// Slot in the owner's task registry; written once right after creation, before the task
    /// is queued (so every later reader sees it through the queue's synchronisation).
    slot: AtomicUsize,
    /// Touched only by the thread that set `RUNNING`, or by the JoinHandle after `COMPLETE`
    /// (see `state.rs`, invariants 2 and 3).
    stage: UnsafeCell<Stage<F>>,
    join_waker: Mutex<Option<Waker>>,
}

// SAFETY: the future is only touched by the one thread that owns RUNNING (invariant 2 of
// state.rs), so moving it across threads needs only `F: Send`; the output is handed from the
// runner to the JoinHandle through the COMPLETE Release/Acquire pair, so `F::Output: Send`.
unsafe impl<F: Future + Send, S: Send + Sync> Sync for Cell<F, S> where F::Output: Send {}

impl<F, S> Cell<F, S>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
    S: Schedule,
{
    pub(crate) fn new(future: F, sched: S) -> Arc<Self> {
        Arc::new(Cell {
            state: State::new_scheduled(),
            sched,
            slot: AtomicUsize::new(usize::MAX),
            stage: UnsafeCell::new(Stage::Running(future)),
            join_waker: Mutex::new(None),
        })
    }

    pub(crate) fn set_slot(&self, slot: usize) {
        self.slot.store(slot, Relaxed);
    }

    /// Stores the output (dropping the future first), publishes COMPLETE, wakes the joiner and
    /// leaves the registry. Caller owns RUNNING.
    fn finish(self: &Arc<Self>, output: Result<F::Output, JoinError>) {
        self.stage.with_mut(|stage| {
            // A panicking destructor of the future must not take the worker down with it.
            // SAFETY: the caller owns RUNNING, so no other thread touches the stage.
            let _ = catch_unwind(AssertUnwindSafe(|| unsafe { *stage = Stage::Consumed }));
            // SAFETY: as above.
            unsafe { *stage = Stage::Finished(output) };
        });
        self.state.complete();
        let waker = self.join_waker.lock().take();
        if let Some(w) = waker {
            w.wake();
        }
        self.sched.release(self.slot.load(Relaxed));
    }
}

impl<F, S> Runnable for Cell<F, S>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
    S: Schedule,
{
    fn run(self: Arc<Self>) {
        let prev = self.state.start_poll();
        if prev & CANCELLED != 0 {
            self.finish(Err(JoinError::cancelled()));
            return;
        }
        let waker = Waker::from(self.clone());
        let mut cx = Context::from_waker(&waker);
        let res = self.stage.with_mut(|stage| {
            // SAFETY: start_poll gave this thread RUNNING: exclusive access to the stage.
            let Stage::Running(fut) = (unsafe { &mut *stage }) else {
                unreachable!("gort: a task was polled after it completed");
            };
            // SAFETY: the future lives inside the Arc'd cell and is never moved until dropped.
            let fut = unsafe { Pin::new_unchecked(fut) };
            catch_unwind(AssertUnwindSafe(|| fut.poll(&mut cx)))
        });
        match res {
            Ok(Poll::Pending) => {
                if self.state.end_poll() == AfterPoll::Requeue {
                    let sched = &self.sched;
                    sched.yield_task(self.clone());
                }
            }
            Ok(Poll::Ready(out)) => self.finish(Ok(out)),
            Err(payload) => {
                self.sched.on_panic();
                self.finish(Err(JoinError::panic(payload)))
            }
        }
    }

    fn shutdown(self: Arc<Self>) {
        // The runtime's threads are gone; claim the future as `run` would and drop it.
        if self.state.claim_for_shutdown() {
            self.finish(Err(JoinError::cancelled()));
        }
    }
}

impl<F, S> Wake for Cell<F, S>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
    S: Schedule,
{
    fn wake(self: Arc<Self>) {
        if self.state.wake() == WakeAction::Schedule {
            let task: Task = self.clone();
            self.sched.schedule(task);
        }
    }

    fn wake_by_ref(self: &Arc<Self>) {
        if self.state.wake() == WakeAction::Schedule {
            self.sched.schedule(self.clone() as Task);
        }
    }
}

impl<F, S> JoinTarget<F::Output> for Cell<F, S>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
    S: Schedule,
{
    fn poll_join(&self, cx: &mut Context<'_>) -> Poll<Result<F::Output, JoinError>> {
        if self.state.load() & COMPLETE == 0 {
            {
                let mut slot = self.join_waker.lock();
                match &*slot {
                    Some(w) if w.will_wake(cx.waker()) => {}
                    _ => *slot = Some(cx.waker().clone()),
                }
            }
            // Re-check after publishing the waker: `finish` sets COMPLETE before taking it.
            if self.state.load() & COMPLETE == 0 {
                return Poll::Pending;
            }
        }
        let stage = self.stage.with_mut(|stage| {
            // SAFETY: COMPLETE was observed with Acquire: the runner is done with the stage,
            // and only this (unique) JoinHandle reads it from now on.
            unsafe { std::mem::replace(&mut *stage, Stage::Consumed) }
        });
        match stage {
            Stage::Finished(out) => Poll::Ready(out),
            _ => panic!("gort: JoinHandle polled after it returned Ready"),
        }
    }

    fn abort(self: Arc<Self>) {
        if self.state.cancel() {
            // The task was idle: queue it so that a worker drops the future.
            let sched = &self.sched;
            sched.schedule(self.clone() as Task);
        }
    }

    fn is_finished(&self) -> bool {
        self.state.load() & COMPLETE != 0
    }
}
