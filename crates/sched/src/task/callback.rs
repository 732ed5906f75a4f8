//! Callbacks queued as their own unit of work: what a timer's `after_func` payload becomes
//! when it fires (Go's `goFunc`: `go f()`), without a task cell per firing.
//!
//! A callback lives in its timer's allocation (a `gort_timer::TimerCell`); the run queues
//! hold a holder reference of that cell ([`CallbackTask`]: its pointer and the function that
//! runs it), so queueing one is a reference-count increment. There is no future, no join
//! handle and no registry slot: a queued callback is dropped with the queue at shutdown.
//! Queued twice, it runs twice, possibly on two Ms at once, as two goroutines would.

use super::catch_user_here;
use crate::context;
use gort_timer::CellRef;
use std::mem::ManuallyDrop;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::ptr::NonNull;
use std::sync::atomic::Ordering::Relaxed;

/// A function the scheduler runs from a run queue (see [`crate::timer_api::run_callback`]).
pub trait Callback: Send + Sync + 'static {
    /// Runs the function once. A panic is caught and counted like a task's
    /// (`Metrics::task_panics`); it never reaches the M.
    fn call(&self);
}

/// A queued callback: a `CellRef<C>` as its raw pointer, with the function that knows `C`.
pub(crate) struct CallbackTask {
    /// `CellRef::into_raw` of a `CellRef<C>`, owning its holder reference.
    raw: NonNull<()>,
    /// `run_cell::<C>`.
    run: unsafe fn(NonNull<()>, bool),
}

// SAFETY: it owns a `CellRef<C>` with `C: Callback` (`Send + Sync`), itself `Send`.
unsafe impl Send for CallbackTask {}

impl CallbackTask {
    /// Queues `cell`'s callback: takes its holder reference.
    pub(crate) fn new<C: Callback>(cell: CellRef<C>) -> CallbackTask {
        CallbackTask {
            raw: CellRef::into_raw(cell),
            run: run_cell::<C>,
        }
    }

    /// Runs it once (the caller took it from a run queue).
    pub(crate) fn run(self) {
        let this = ManuallyDrop::new(self);
        // SAFETY: `raw` and `run` were paired by `new`; the reference is given up once
        // (`this` is not dropped).
        unsafe { (this.run)(this.raw, true) }
    }

    /// Drops it without running (runtime teardown).
    pub(crate) fn shutdown(self) {
        drop(self);
    }
}

impl Drop for CallbackTask {
    fn drop(&mut self) {
        // SAFETY: as in `run`; dropped once.
        unsafe { (self.run)(self.raw, false) }
    }
}

/// Runs the callback of the cell at `raw` if `call`, then lets go of the reference.
///
/// # Safety
///
/// `raw` came from `CellRef::<C>::into_raw`, adopted once here.
unsafe fn run_cell<C: Callback>(raw: NonNull<()>, call: bool) {
    // SAFETY: per this function's contract.
    let cell = unsafe { CellRef::<C>::from_raw(raw) };
    if call && catch_unwind(AssertUnwindSafe(|| cell.payload().call())).is_err() {
        context::with_current(|s| {
            if let Some(s) = s {
                s.panics.fetch_add(1, Relaxed);
            }
        });
    }
    // This may be the last reference: dropping it drops the callback's captures, user code
    // that may panic too (`Metrics::user_panics`).
    catch_user_here(move || drop(cell));
}
