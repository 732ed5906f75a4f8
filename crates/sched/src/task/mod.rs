//! Tasks: Go's G. A task is one cell (`cell::Cell`) holding a header (state word
//! (`state`), reference count, vtable: `raw`), the future and the output, shared by the
//! run queues (as `Task`), its wakers, the owner's registry and the [`JoinHandle`]. Cells
//! come from and go back to per-thread free lists (`cache`), Go's `gfree`.
//!
//! The public part: [`JoinSet`], [`AbortHandle`], task [`Id`]s and [`id()`].

mod abort;
mod cache;
mod callback;
mod cell;
mod id;
mod join;
mod join_set;
mod raw;
mod registry;
pub(crate) mod state;

pub use abort::AbortHandle;
#[doc(hidden)]
pub use callback::Callback;
pub(crate) use callback::CallbackTask;
pub(crate) use cell::Cell;
pub use id::{id, try_id, Id};
pub use join::{JoinError, JoinHandle};
pub use join_set::JoinSet;
pub(crate) use raw::RawTask;
pub(crate) use registry::{Registry, Releases, RELEASE_BATCH};

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::Ordering::Relaxed;

/// A unit of work as the queues see it.
pub(crate) enum Task {
    /// A spawned task.
    Raw(RawTask),
    /// A callback (an `after_func` firing): runs, no future, no registry slot.
    Callback(CallbackTask),
}

impl Task {
    /// Runs it once (the caller took it from a run queue).
    pub(crate) fn run(self) {
        match self {
            Task::Raw(t) => t.run(),
            Task::Callback(c) => c.run(),
        }
    }

    /// Drops a task that will never run again (runtime teardown).
    pub(crate) fn shutdown(self) {
        match self {
            Task::Raw(t) => t.shutdown(),
            Task::Callback(c) => c.shutdown(),
        }
    }
}

/// Where a task goes when it becomes runnable: a runtime's Ps, or the blocking pool.
///
/// The rule of every method that queues the task: `self` is the handle kept in the task's
/// own cell, and once the task is queued another M may run it to completion and free that
/// cell, so the method must not read `self` after queueing it: it reaches the runtime
/// through an `Arc` that lives elsewhere (shared.rs, `RuntimeRef`). Reading
/// `self` afterwards was a use-after-free: `yield_task`'s, a segfault in tests/timers.rs
/// about one debug run in 120 beside CPU hogs; `schedule`'s `wakep` after the push, the same.
pub(crate) trait Schedule: Send + Sync + 'static {
    /// A waker (or `abort`, or `spawn`) made the task runnable.
    fn schedule(&self, task: Task);
    /// The task was woken while it ran (e.g. `yield_now`): queue it behind the others.
    fn yield_task(&self, task: Task);
    /// The task completed: forget its registry slot.
    fn release(&self, slot: usize);
    /// The task's poll panicked (counted in the metrics).
    fn on_panic(&self);
}

/// `Shared::catch_user` for code that has no `Shared` at hand: counted in the current
/// thread's runtime, if any.
pub(crate) fn catch_user_here<R>(f: impl FnOnce() -> R) -> Option<R> {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(r) => Some(r),
        Err(payload) => {
            crate::context::with_current(|s| {
                if let Some(s) = s {
                    s.user_panics.fetch_add(1, Relaxed);
                }
            });
            drop_panic_payload(payload);
            None
        }
    }
}

/// Drops a caught panic's payload, whose own `Drop` may panic again (it is a user value).
pub(crate) fn drop_panic_payload(payload: Box<dyn std::any::Any + Send>) {
    if let Err(again) = catch_unwind(AssertUnwindSafe(|| drop(payload))) {
        // Dropping this one could panic too; leak it rather than loop.
        std::mem::forget(again);
    }
}
