//! The thread-local scheduler context: which runtime this thread belongs to and which P (if
//! any) it holds. Workers (Ms) set it for their whole life; `block_on` and blocking-pool
//! threads set it without a P, so that `spawn` works there and sends tasks to the global queue.

use crate::p::P;
use crate::shared::Shared;
use gort_timer::RuntimeClock;
use std::cell::{Cell, RefCell};
use std::sync::Arc;

thread_local! {
    static SHARED: RefCell<Option<Arc<Shared>>> = const { RefCell::new(None) };
    /// The P this thread holds, or null. Ps live as long as their runtime (`Shared::allp`),
    /// which `SHARED` keeps alive, so the pointer stays valid while it is set.
    static CURRENT_P: Cell<*const P> = const { Cell::new(std::ptr::null()) };
    /// The P this thread holds, also while another runtime is entered (which hides it from
    /// `CURRENT_P`): what a worker takes back if a task leaves such an entry behind
    /// (`restore_worker`). Set with `CURRENT_P` by `set_current_p`; `enter` leaves it alone.
    static OWN_P: Cell<*const P> = const { Cell::new(std::ptr::null()) };
    /// Whether `block_on` may park this thread: true on a plain thread (a `Handle::enter`
    /// guard does not change it), on a blocking-pool thread, which run no tasks, and on an M
    /// inside `block_in_place`, which handed its P (and so its tasks) to another M; false on
    /// an M otherwise and inside `block_on` itself, where parking would stall the tasks to be
    /// run.
    static MAY_BLOCK_ON: Cell<bool> = const { Cell::new(true) };
    /// The runtime whose paused clock this thread holds while it runs user code without a P
    /// (null when none): a task inside `block_in_place`, a blocking-pool closure. A
    /// `block_on` of that runtime there lends the hold out for its life: a thread parked in
    /// `block_on` waits on the runtime and runs no user code, and holds the clock only while
    /// its future runs, as a top-level `block_on` does (paused.rs).
    static THREAD_HOLD: Cell<*const Shared> = const { Cell::new(std::ptr::null()) };
    /// The runtime whose batch of wake-ups this M is making (`begin_wake_batch`), null when
    /// none, and whether a push of the batch left a task stealable (one `wakep` owed).
    static WAKE_BATCH: Cell<(*const Shared, bool)> = const { Cell::new((std::ptr::null(), false)) };
    /// Whether this M owes a `wakep` for a timer it armed while no M polled
    /// (`Shared::owe_timer_wakep`): paid before it runs another task, dropped when it goes
    /// idle, whose look at every heap covers the timer.
    static TIMER_WAKE_OWED: Cell<bool> = const { Cell::new(false) };
    /// Whether this M is running a task (`Task::run` in the M loop), the one place where
    /// `block_in_place` may hand the P away: the loop re-reads the P after each run. Between
    /// tasks the M works on its P itself (a timer batch, a steal, a look at the sockets)
    /// and the user code it calls there (a waker) must leave the P where it is.
    static RUNNING_TASK: Cell<bool> = const { Cell::new(false) };
    /// The runtime whose `block_on` is polling its future on this thread (null when none):
    /// that poll holds the runtime's paused clock, so `block_in_place` there may let its
    /// closure `block_on` as a worker's may (`enter_holding_clock`).
    static BLOCK_ON_POLL: Cell<*const Shared> = const { Cell::new(std::ptr::null()) };
}

/// Marks this thread as polling `shared`'s `block_on` future until dropped.
pub(crate) struct BlockOnPoll(*const Shared);

pub(crate) fn enter_block_on_poll(shared: &Arc<Shared>) -> BlockOnPoll {
    BlockOnPoll(BLOCK_ON_POLL.with(|b| b.replace(Arc::as_ptr(shared))))
}

impl Drop for BlockOnPoll {
    fn drop(&mut self) {
        BLOCK_ON_POLL.with(|b| b.set(self.0));
    }
}

/// Whether this thread is polling `shared`'s `block_on` future.
pub(crate) fn polls_block_on_of(shared: &Arc<Shared>) -> bool {
    BLOCK_ON_POLL.with(|b| std::ptr::eq(b.get(), Arc::as_ptr(shared)))
}

/// Restores the previous context when dropped.
pub(crate) struct EnterGuard {
    prev: Option<Arc<Shared>>,
    /// The P to restore, or `None` to leave the P alone (see `enter_keep_own`).
    prev_p: Option<*const P>,
    prev_may_block: bool,
    prev_thread_hold: *const Shared,
}

/// Makes `shared` (or none) this thread's runtime, and its clock the thread's clock; returns
/// the previous runtime.
fn replace_shared(shared: Option<Arc<Shared>>) -> Option<Arc<Shared>> {
    let clock = shared
        .as_ref()
        .map_or(std::ptr::null(), |s| &s.clock as *const RuntimeClock);
    // SAFETY: `SHARED` keeps the runtime, which owns the clock, alive while the clock is
    // this thread's: both are set together here and replaced together by the next call.
    unsafe { RuntimeClock::set_current(clock) };
    SHARED.with(|s| std::mem::replace(&mut *s.borrow_mut(), shared))
}

/// Makes `shared` the current runtime of this thread (without a P).
pub(crate) fn enter(shared: Arc<Shared>) -> EnterGuard {
    let prev = replace_shared(Some(shared));
    let prev_p = CURRENT_P.with(|p| p.replace(std::ptr::null()));
    let prev_may_block = MAY_BLOCK_ON.with(|b| b.replace(false));
    let prev_thread_hold = THREAD_HOLD.with(|h| h.replace(std::ptr::null()));
    EnterGuard {
        prev,
        prev_p: Some(prev_p),
        prev_may_block,
        prev_thread_hold,
    }
}

/// `enter` for a blocking-pool thread.
pub(crate) fn enter_blocking_pool(shared: Arc<Shared>) -> EnterGuard {
    let guard = enter(shared);
    MAY_BLOCK_ON.with(|b| b.set(true));
    guard
}

/// `Handle::enter`: makes `shared` current, and whether this thread may `block_on` stays
/// as it was (entering a runtime does not make a thread run tasks).
///
/// Entering the thread's own runtime leaves its P alone, now and when the guard drops: a
/// task that enters its own runtime changes nothing, and if it then gives its P away
/// (`block_in_place`), the guard must not hand the old P back to this thread. Entering
/// another runtime hides the P (its queues and timers are not that runtime's) until the
/// guard drops; the guard cannot be held across an await, so the P is still this
/// thread's then.
pub(crate) fn enter_keep_own(shared: Arc<Shared>) -> EnterGuard {
    let own = with_current(|s| s.is_some_and(|s| Arc::ptr_eq(s, &shared)));
    let prev = replace_shared(Some(shared));
    let prev_p = (!own).then(|| CURRENT_P.with(|p| p.replace(std::ptr::null())));
    EnterGuard {
        prev,
        prev_p,
        prev_may_block: may_block_on(),
        prev_thread_hold: THREAD_HOLD.with(Cell::get),
    }
}

impl Drop for EnterGuard {
    fn drop(&mut self) {
        replace_shared(self.prev.take());
        if let Some(prev_p) = self.prev_p {
            CURRENT_P.with(|p| p.set(prev_p));
        }
        MAY_BLOCK_ON.with(|b| b.set(self.prev_may_block));
        THREAD_HOLD.with(|h| h.set(self.prev_thread_hold));
    }
}

/// Whether `block_on` may park this thread (see `MAY_BLOCK_ON`).
pub(crate) fn may_block_on() -> bool {
    MAY_BLOCK_ON.with(|b| b.get())
}

/// Restores the context `enter_holding_clock` changed when dropped (also when the user code
/// unwinds, so that an M does not go on running tasks with `block_on` allowed).
pub(crate) struct HoldingGuard {
    prev_may_block: bool,
    prev_thread_hold: *const Shared,
}

/// This thread runs user code without a P and has taken a hold of `shared`'s clock for it:
/// `block_in_place` after handing its P off, a blocking-pool thread running a closure. It
/// runs no tasks, so it may `block_on`, which lends the hold out (see `THREAD_HOLD`).
pub(crate) fn enter_holding_clock(shared: &Arc<Shared>) -> HoldingGuard {
    HoldingGuard {
        prev_may_block: MAY_BLOCK_ON.with(|b| b.replace(true)),
        prev_thread_hold: THREAD_HOLD.with(|h| h.replace(Arc::as_ptr(shared))),
    }
}

impl Drop for HoldingGuard {
    fn drop(&mut self) {
        MAY_BLOCK_ON.with(|b| b.set(self.prev_may_block));
        THREAD_HOLD.with(|h| h.set(self.prev_thread_hold));
    }
}

/// Whether this thread holds `shared`'s clock for the user code it runs (see `THREAD_HOLD`).
pub(crate) fn holds_clock_here(shared: &Arc<Shared>) -> bool {
    THREAD_HOLD.with(|h| std::ptr::eq(h.get(), Arc::as_ptr(shared)))
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
    OWN_P.with(|c| c.set(p));
}

/// Whether `shared` is this thread's current runtime.
#[inline]
pub(crate) fn is_current(shared: &Arc<Shared>) -> bool {
    with_current(|c| c.is_some_and(|c| Arc::ptr_eq(c, shared)))
}

/// Puts a worker thread of `shared` back into it, holding its own P, as it was before the
/// task it ran entered another runtime and left the entry behind (a `Handle::enter` guard
/// forgotten, or guards dropped out of order: a guard cannot be held across an `.await`, so
/// none is legitimately alive once a poll returns). Without this the worker went on in the
/// other runtime's context with its P hidden, and the M loop dropped that P for good.
pub(crate) fn restore_worker(shared: &Arc<Shared>) {
    restore_runtime(shared);
    MAY_BLOCK_ON.with(|b| b.set(false));
    THREAD_HOLD.with(|h| h.set(std::ptr::null()));
}

/// [`restore_worker`] for a blocking-pool thread, after a closure: its runtime back (and no
/// P, which it never holds). Whether it may `block_on` and its clock hold are its job's
/// guard's to restore, and `Handle::enter` changes neither.
pub(crate) fn restore_runtime(shared: &Arc<Shared>) {
    replace_shared(Some(shared.clone()));
    CURRENT_P.with(|p| p.set(OWN_P.with(Cell::get)));
}

/// Marks this M as running a task until dropped (see `RUNNING_TASK`); restores the mark on
/// unwinding too, so a panic that escapes a task leaves no M marked between tasks.
pub(crate) struct RunningTask(bool);

impl RunningTask {
    #[inline]
    pub(crate) fn enter() -> RunningTask {
        RunningTask(RUNNING_TASK.with(|r| r.replace(true)))
    }
}

impl Drop for RunningTask {
    #[inline]
    fn drop(&mut self) {
        RUNNING_TASK.with(|r| r.set(self.0));
    }
}

/// Whether this M is running a task (see `RUNNING_TASK`).
#[inline]
pub(crate) fn running_task() -> bool {
    RUNNING_TASK.with(|r| r.get())
}

/// Starts a batch of wake-ups for `shared` on this thread (`Shared::wake_batch`); returns the
/// batch it replaces, for [`end_wake_batch`].
pub(crate) fn begin_wake_batch(shared: &Arc<Shared>) -> (*const Shared, bool) {
    WAKE_BATCH.with(|b| b.replace((Arc::as_ptr(shared), false)))
}

/// Ends this thread's batch, restoring `prev`; returns whether the batch owes a `wakep`.
pub(crate) fn end_wake_batch(prev: (*const Shared, bool)) -> bool {
    WAKE_BATCH.with(|b| b.replace(prev)).1
}

/// Records that this M owes a `wakep` for a timer (`Shared::owe_timer_wakep`).
#[inline]
pub(crate) fn owe_timer_wake() {
    TIMER_WAKE_OWED.with(|o| o.set(true));
}

/// Takes this M's `wakep` debt for a timer: true if it owed one.
#[inline]
pub(crate) fn take_timer_wake() -> bool {
    TIMER_WAKE_OWED.with(|o| o.replace(false))
}

/// Called by a push onto this thread's P of `shared` that left a task stealable: true if a
/// batch of `shared` is in progress here, which then owes the `wakep` instead.
#[inline]
pub(crate) fn defer_wake(shared: &Arc<Shared>) -> bool {
    WAKE_BATCH.with(|b| {
        let (batch, _) = b.get();
        let ours = std::ptr::eq(batch, Arc::as_ptr(shared));
        if ours {
            b.set((batch, true));
        }
        ours
    })
}
