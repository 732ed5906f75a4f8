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
    /// Whether this thread is a blocking-pool thread outside any `block_on`: the one kind
    /// of runtime thread that may call `Handle::block_on` (it runs no tasks, so parking it
    /// stalls nothing).
    static BLOCKING_POOL: Cell<bool> = const { Cell::new(false) };
}

/// Restores the previous context when dropped.
pub(crate) struct EnterGuard {
    prev: Option<Arc<Shared>>,
    prev_p: *const P,
    prev_pool: bool,
}

/// Makes `shared` the current runtime of this thread (without a P).
pub(crate) fn enter(shared: Arc<Shared>) -> EnterGuard {
    let prev = SHARED.with(|s| s.borrow_mut().replace(shared));
    let prev_p = CURRENT_P.with(|p| p.replace(std::ptr::null()));
    let prev_pool = BLOCKING_POOL.with(|b| b.replace(false));
    EnterGuard {
        prev,
        prev_p,
        prev_pool,
    }
}

/// `enter` for a blocking-pool thread.
pub(crate) fn enter_blocking_pool(shared: Arc<Shared>) -> EnterGuard {
    let guard = enter(shared);
    BLOCKING_POOL.with(|b| b.set(true));
    guard
}

/// `Handle::enter`: makes `shared` current, keeping this thread's P (and its blocking-pool
/// mark) when `shared` is already its runtime, so that entering one's own runtime from a
/// task changes nothing.
pub(crate) fn enter_keep_own(shared: Arc<Shared>) -> EnterGuard {
    let own = with_current(|s| s.is_some_and(|s| Arc::ptr_eq(s, &shared)));
    let prev = SHARED.with(|s| s.borrow_mut().replace(shared));
    let prev_p = current_p();
    let prev_pool = BLOCKING_POOL.with(|b| b.get());
    if !own {
        set_current_p(std::ptr::null());
        BLOCKING_POOL.with(|b| b.set(false));
    }
    EnterGuard {
        prev,
        prev_p,
        prev_pool,
    }
}

impl Drop for EnterGuard {
    fn drop(&mut self) {
        SHARED.with(|s| *s.borrow_mut() = self.prev.take());
        CURRENT_P.with(|p| p.set(self.prev_p));
        BLOCKING_POOL.with(|b| b.set(self.prev_pool));
    }
}

/// Whether `block_on` may park this thread: a plain thread, or a blocking-pool thread. A
/// worker (M) or a thread already in `block_on` may not.
pub(crate) fn may_block_on() -> bool {
    with_current(|s| s.is_none()) || BLOCKING_POOL.with(|b| b.get())
}

/// The current runtime; `Err` while this thread's locals are being torn down.
pub(crate) fn try_current() -> Result<Option<Arc<Shared>>, std::thread::AccessError> {
    SHARED.try_with(|s| s.borrow().clone())
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
