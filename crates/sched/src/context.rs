//! The thread-local scheduler context: which runtime this thread belongs to and which P (if
//! any) it holds. Workers (Ms) set it for their whole life; `block_on` and blocking-pool
//! threads set it without a P, so that `spawn` works there and sends tasks to the global queue.

use crate::p::P;
use crate::shared::Shared;
use std::cell::{Cell, RefCell};
use std::sync::Arc;

thread_local! {
    static SHARED: RefCell<Option<Arc<Shared>>> = const { RefCell::new(None) };
    /// The P this thread holds, or null. Ps live as long as their runtime (`Shared::allp`),
    /// which `SHARED` keeps alive, so the pointer stays valid while it is set.
    static CURRENT_P: Cell<*const P> = const { Cell::new(std::ptr::null()) };
}

/// Restores the previous context when dropped.
pub(crate) struct EnterGuard {
    prev: Option<Arc<Shared>>,
    prev_p: *const P,
}

/// Makes `shared` the current runtime of this thread (without a P).
pub(crate) fn enter(shared: Arc<Shared>) -> EnterGuard {
    let prev = SHARED.with(|s| s.borrow_mut().replace(shared));
    let prev_p = CURRENT_P.with(|p| p.replace(std::ptr::null()));
    EnterGuard { prev, prev_p }
}

impl Drop for EnterGuard {
    fn drop(&mut self) {
        SHARED.with(|s| *s.borrow_mut() = self.prev.take());
        CURRENT_P.with(|p| p.set(self.prev_p));
    }
}

/// The current runtime, if this thread is in one.
pub(crate) fn current() -> Option<Arc<Shared>> {
    SHARED.with(|s| s.borrow().clone())
}

/// Runs `f` with the current runtime, without cloning its `Arc`.
#[inline]
pub(crate) fn with_current<R>(f: impl FnOnce(Option<&Arc<Shared>>) -> R) -> R {
    SHARED.with(|s| f(s.borrow().as_ref()))
}

/// The P this thread holds (null when none).
#[inline]
pub(crate) fn current_p() -> *const P {
    CURRENT_P.with(|p| p.get())
}

/// Records that this thread now holds `p` (or none).
#[inline]
pub(crate) fn set_current_p(p: *const P) {
    CURRENT_P.with(|c| c.set(p));
}
