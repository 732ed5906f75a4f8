//! The type-erased task: a pointer to a cell's [`Header`], a reference count, and the
//! cell's [`Vtable`] (Tokio's `RawTask`). Cells are allocated by [`cache`](super::cache),
//! not by `Arc`, so that a freed cell can serve the next spawn on the same thread.

use super::id::Id;
use super::state::{State, Wake};
use gort_loom::atomic::{fence, AtomicUsize, Ordering::*};
use std::ptr::NonNull;
use std::task::{Context, RawWaker, RawWakerVTable, Waker};

/// The first field of every cell (`#[repr(C)]`), so a header pointer is a cell pointer.
pub(crate) struct Header {
    pub(crate) state: State,
    /// References: queue entries, wakers, the registry slot, the `JoinHandle`.
    refs: AtomicUsize,
    pub(crate) vtable: &'static Vtable,
    /// The task's id, fixed at creation.
    pub(crate) id: Id,
}

/// What a cell of one future and scheduler type does, behind its header.
pub(crate) struct Vtable {
    /// Polls the future once; takes over the caller's reference.
    pub(crate) run: unsafe fn(RawTask),
    /// Drops the future of a task that will never run again; takes over the reference.
    /// With `idle_only`, only if the task is idle (Ms may still run the queued ones).
    pub(crate) shutdown: unsafe fn(RawTask, bool),
    /// Hands a reference to the cell's scheduler (the task was made runnable).
    pub(crate) schedule: unsafe fn(RawTask),
    /// Polls for the output: writes a `Poll<Result<F::Output, JoinError>>` to `out`.
    pub(crate) poll_join: unsafe fn(NonNull<Header>, out: *mut (), cx: &mut Context<'_>),
    /// Drops the output of a completed task that no `JoinHandle` will read.
    pub(crate) drop_output: unsafe fn(NonNull<Header>),
    /// Drops the cell and frees its memory (the last reference went).
    pub(crate) dealloc: unsafe fn(NonNull<Header>),
}

impl Header {
    pub(crate) fn new(vtable: &'static Vtable) -> Header {
        Header {
            state: State::new_scheduled(),
            refs: AtomicUsize::new(1),
            vtable,
            id: Id::next(),
        }
    }
}

/// One counted reference to a task cell.
pub(crate) struct RawTask(NonNull<Header>);

// SAFETY: a cell is shared by reference counting, as an `Arc` is; the cell types that get a
// header are `Send + Sync` (their future is touched only by the thread owning RUNNING).
unsafe impl Send for RawTask {}
// SAFETY: as above.
unsafe impl Sync for RawTask {}

impl RawTask {
    /// Adopts the reference that `Header::new` counted.
    ///
    /// # Safety
    ///
    /// `ptr` points to a live cell that starts with a header, and the caller gives up one
    /// counted reference to it.
    pub(crate) unsafe fn from_raw(ptr: NonNull<Header>) -> RawTask {
        RawTask(ptr)
    }

    pub(crate) fn header(&self) -> &Header {
        // SAFETY: this reference keeps the cell alive.
        unsafe { self.0.as_ref() }
    }

    pub(crate) fn ptr(&self) -> NonNull<Header> {
        self.0
    }

    /// Polls the task (it was taken from a run queue).
    pub(crate) fn run(self) {
        let run = self.header().vtable.run;
        // SAFETY: the vtable belongs to this cell's type; the reference is handed over.
        unsafe { run(self) }
    }

    /// Drops the future of a task that will never run (runtime teardown).
    pub(crate) fn shutdown(self) {
        let shutdown = self.header().vtable.shutdown;
        // SAFETY: as in `run`.
        unsafe { shutdown(self, false) }
    }

    /// Drops the future of a task that is idle: in no run queue and no poll (runtime
    /// teardown while Ms may still run; see `State::claim_for_shutdown`).
    pub(crate) fn shutdown_if_idle(self) {
        let shutdown = self.header().vtable.shutdown;
        // SAFETY: as in `run`.
        unsafe { shutdown(self, true) }
    }

    /// Hands this reference to the cell's scheduler.
    pub(crate) fn schedule(self) {
        let schedule = self.header().vtable.schedule;
        // SAFETY: as in `run`.
        unsafe { schedule(self) }
    }

    /// Cancels the task (`JoinHandle::abort`, `AbortHandle::abort`): marks it cancelled and,
    /// if it was idle, queues it so that a runner drops its future.
    pub(crate) fn abort(&self) {
        if self.header().state.cancel() {
            self.clone().schedule();
        }
    }

    /// A waker for this task, borrowing this reference (no count changes until it is cloned).
    pub(crate) fn waker_ref(&self) -> std::mem::ManuallyDrop<Waker> {
        // SAFETY: the raw waker follows `WAKER`'s contract; being `ManuallyDrop`, it never
        // gives back the reference it borrows.
        std::mem::ManuallyDrop::new(unsafe { Waker::from_raw(raw_waker(self.0)) })
    }
}

impl Clone for RawTask {
    fn clone(&self) -> RawTask {
        // Relaxed: a new reference is made from an existing one (the `Arc` argument).
        let old = self.header().refs.fetch_add(1, Relaxed);
        if old > isize::MAX as usize {
            std::process::abort();
        }
        RawTask(self.0)
    }
}

impl Drop for RawTask {
    fn drop(&mut self) {
        // Release, then Acquire before freeing: every use of the cell through other
        // references happens-before its destruction (the `Arc` argument).
        if self.header().refs.fetch_sub(1, Release) != 1 {
            return;
        }
        fence(Acquire);
        let dealloc = self.header().vtable.dealloc;
        // SAFETY: this was the last reference.
        unsafe { dealloc(self.0) }
    }
}

// ---- wakers: one counted reference each -----------------------------------------------------

static WAKER: RawWakerVTable =
    RawWakerVTable::new(waker_clone, waker_wake, waker_wake_by_ref, waker_drop);

fn raw_waker(ptr: NonNull<Header>) -> RawWaker {
    RawWaker::new(ptr.as_ptr() as *const (), &WAKER)
}

/// The reference a waker holds, adopted.
///
/// # Safety
///
/// `data` is a waker's pointer: a header with one reference counted for this waker.
unsafe fn adopt(data: *const ()) -> RawTask {
    // SAFETY: the caller's contract; a waker's data is never null.
    RawTask(unsafe { NonNull::new_unchecked(data as *mut Header) })
}

unsafe fn waker_clone(data: *const ()) -> RawWaker {
    // SAFETY: `data` is a live waker's reference; it stays with that waker.
    let this = std::mem::ManuallyDrop::new(unsafe { adopt(data) });
    let copy = std::mem::ManuallyDrop::new(RawTask::clone(&this));
    raw_waker(copy.0)
}

unsafe fn waker_wake(data: *const ()) {
    // SAFETY: waking by value consumes the waker's reference.
    let task = unsafe { adopt(data) };
    if task.header().state.wake() == Wake::Schedule {
        task.schedule();
    }
}

unsafe fn waker_wake_by_ref(data: *const ()) {
    // SAFETY: the waker keeps its reference; a queued task gets a new one.
    let this = std::mem::ManuallyDrop::new(unsafe { adopt(data) });
    if this.header().state.wake() == Wake::Schedule {
        RawTask::clone(&this).schedule();
    }
}

unsafe fn waker_drop(data: *const ()) {
    // SAFETY: dropping the waker gives back its reference.
    drop(unsafe { adopt(data) });
}
