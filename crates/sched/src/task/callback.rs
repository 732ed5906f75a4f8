//! Callbacks queued as their own unit of work: what a timer's `after_func` payload becomes
//! when it fires (Go's `goFunc`: `go f()`), without a task cell per firing.
//!
//! The run queues hold `Arc<dyn Runnable>`; a [`Callback`] is runnable itself, so queueing
//! one is a reference-count increment. There is no future, no join handle and no registry
//! slot: a queued callback is dropped with the queue at shutdown. Queued twice, it runs
//! twice, possibly on two Ms at once, as two goroutines would.

use super::{catch_user_here, Runnable};
use crate::context;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;

/// A function the scheduler runs from a run queue (see [`crate::timer_api::run_callback`]).
pub trait Callback: Send + Sync + 'static {
    /// Runs the function once. A panic is caught and counted like a task's
    /// (`Metrics::task_panics`); it never reaches the M.
    fn call(&self);
}

/// A callback that lives in its timer's allocation (`gort::time::after_func`'s): the cell is
/// what the run queue holds, so a firing queues it without allocating.
impl<C: Callback> Callback for gort_timer::TimerCell<C> {
    fn call(&self) {
        self.payload().call()
    }
}

impl<C: Callback> Runnable for C {
    fn run(self: Arc<Self>) {
        if catch_unwind(AssertUnwindSafe(|| self.call())).is_err() {
            context::with_current(|s| {
                if let Some(s) = s {
                    s.panics.fetch_add(1, Relaxed);
                }
            });
        }
        // This may be the last reference: dropping it drops the callback's captures, user
        // code that may panic too (`Metrics::user_panics`).
        catch_user_here(move || drop(self));
    }

    fn shutdown(self: Arc<Self>) {
        catch_user_here(move || drop(self));
    }
}
