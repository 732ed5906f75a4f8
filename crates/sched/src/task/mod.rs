//! Tasks: Go's G. A task is one heap cell ([`cell::Cell`]) holding the future, a state word
//! ([`state`]) and the output, shared by the run queues (as [`Task`]), its wakers, the owner's
//! registry and the [`JoinHandle`].

mod callback;
mod cell;
mod join;
mod registry;
pub(crate) mod state;

pub use callback::Callback;
pub(crate) use cell::Cell;
pub use join::{JoinError, JoinHandle};
pub(crate) use registry::Registry;

use std::sync::Arc;

/// A runnable task as the queues see it.
pub(crate) type Task = Arc<dyn Runnable>;

/// The type-erased face of a task cell.
pub(crate) trait Runnable: Send + Sync + 'static {
    /// Polls the future once (the caller took it from a run queue).
    fn run(self: Arc<Self>);
    /// Drops the future of a task that will never run again (runtime teardown).
    fn shutdown(self: Arc<Self>);
}

/// Where a task goes when it becomes runnable: a runtime's Ps, or the blocking pool.
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
