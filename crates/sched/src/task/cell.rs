//! The task cell: one allocation holding a spawned future, its header (state word, reference
//! count, vtable) and its output.

use super::cache;
use super::id::CurrentGuard;
use super::join::JoinError;
use super::raw::{Header, RawTask, Vtable};
use super::state::{AfterPoll, CANCELLED, COMPLETE, JOIN_INTEREST};
use super::{catch_user_here, Schedule, Task};
use gort_loom::atomic::{AtomicUsize, Ordering::Relaxed};
use gort_loom::{Mutex, UnsafeCell};
use std::alloc::Layout;
use std::future::Future;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::pin::Pin;
use std::ptr::NonNull;
use std::task::{Context, Poll, Waker};

enum Stage<F: Future> {
    Running(F),
    Finished(Result<F::Output, JoinError>),
    Consumed,
}

/// A spawned task. `S` says where it is queued when woken (a runtime's Ps, or the blocking pool).
/// `#[repr(C)]` with the header first: the header pointer the queues hold is the cell's.
#[repr(C)]
pub(crate) struct Cell<F: Future, S> {
    header: Header,
    sched: S,
    /// Slot in the owner's task registry; written once right after creation, before the task
    /// is queued (so every later reader sees it through the queue's synchronisation).
    slot: AtomicUsize,
    /// Touched only by the thread that set `RUNNING`, or by the JoinHandle after `COMPLETE`
    /// (see `state.rs`, invariants 2 and 3).
    stage: UnsafeCell<Stage<F>>,
    join_waker: Mutex<Option<Waker>>,
}

impl<F, S> Cell<F, S>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
    S: Schedule,
{
    const VTABLE: &'static Vtable = &Vtable {
        run: Self::run,
        shutdown: Self::shutdown,
        schedule: Self::schedule,
        poll_join: Self::poll_join,
        drop_output: Self::drop_output,
        dealloc: Self::dealloc,
    };

    /// Allocates a cell (from the cell cache) holding `future`; the task starts scheduled.
    pub(crate) fn spawn(future: F, sched: S) -> RawTask {
        let cell = Cell {
            header: Header::new(Self::VTABLE),
            sched,
            slot: AtomicUsize::new(usize::MAX),
            stage: UnsafeCell::new(Stage::Running(future)),
            join_waker: Mutex::new(None),
        };
        let ptr = cache::alloc(Layout::new::<Self>()).cast::<Self>();
        // SAFETY: `ptr` is fresh memory with this type's layout; the header is the first
        // field, and `Header::new` counted the reference adopted here.
        unsafe {
            ptr.as_ptr().write(cell);
            RawTask::from_raw(ptr.cast())
        }
    }

    /// The cell behind a header of this vtable.
    ///
    /// # Safety
    ///
    /// `ptr` heads a live `Cell<F, S>` (its vtable is `Self::VTABLE`).
    unsafe fn from_header<'a>(ptr: NonNull<Header>) -> &'a Self {
        // SAFETY: the caller's contract; the header is the first field of a `repr(C)` cell.
        unsafe { ptr.cast::<Self>().as_ref() }
    }

    pub(crate) fn set_slot(task: &RawTask, slot: usize) {
        // SAFETY: `task` was made by `Cell::<F, S>::new`.
        unsafe { Self::from_header(task.ptr()) }
            .slot
            .store(slot, Relaxed);
    }

    /// Drops the future, then stores the output or, for a detached task, drops it; publishes
    /// COMPLETE, wakes the joiner and leaves the registry. Caller owns RUNNING.
    fn finish(&self, output: Result<F::Output, JoinError>) {
        // A panicking destructor of the future must not take the worker down with it
        // (counted in `Metrics::user_panics`). The assignment completes even then: the old
        // value counts as dropped and `Consumed` is written.
        // SAFETY: the caller owns RUNNING, so no other thread touches the stage.
        self.stage
            .with_mut(|stage| catch_user_here(|| unsafe { *stage = Stage::Consumed }));
        // `JOIN_INTEREST` never comes back once gone: a task whose handle was dropped before
        // it finished (every `spawn` whose handle is discarded) drops its output here, after
        // its future as when stored, and never stores it (invariant 4 of state.rs).
        if self.header.state.load() & JOIN_INTEREST == 0 {
            catch_user_here(move || drop(output));
            self.header.state.complete();
        } else {
            // SAFETY: as above.
            self.stage
                .with_mut(|stage| unsafe { *stage = Stage::Finished(output) });
            if !self.header.state.complete() {
                // The handle went while the task finished: its output goes now, not with
                // the cell, which the registry may keep a while (a P's batch).
                // SAFETY: as above; the JoinHandle is gone, so nobody else reads the stage.
                self.stage
                    .with_mut(|stage| catch_user_here(|| unsafe { *stage = Stage::Consumed }));
            }
        }
        let waker = self.join_waker.lock().take();
        if let Some(w) = waker {
            // The joiner's waker is user code (any executor's); the lock is released.
            catch_user_here(|| w.wake());
        }
        self.sched.release(self.slot.load(Relaxed));
    }

    /// `Vtable::run`.
    unsafe fn run(task: RawTask) {
        // SAFETY: the vtable is this type's.
        let this = unsafe { Self::from_header(task.ptr()) };
        // `task::id()` answers for the whole run: the poll, and the drops in `finish`.
        let _current = CurrentGuard::enter(this.header.id);
        let prev = this.header.state.start_poll();
        if prev & CANCELLED != 0 {
            this.finish(Err(JoinError::cancelled(this.header.id)));
            return;
        }
        let waker = task.waker_ref();
        let mut cx = Context::from_waker(&waker);
        let res = this.stage.with_mut(|stage| {
            // SAFETY: start_poll gave this thread RUNNING: exclusive access to the stage.
            let Stage::Running(fut) = (unsafe { &mut *stage }) else {
                unreachable!("gort: a task was polled after it completed");
            };
            // SAFETY: the future lives inside the cell and is never moved until dropped.
            let fut = unsafe { Pin::new_unchecked(fut) };
            // Every poll starts with a full cooperative budget (gort-coop): no restore
            // afterwards, as nothing of the M's own reads it, and the next poll sets it again.
            gort_coop::start_task_poll();
            catch_unwind(AssertUnwindSafe(|| fut.poll(&mut cx)))
        });
        match res {
            Ok(Poll::Pending) => {
                if this.header.state.end_poll() == AfterPoll::Requeue {
                    // `yield_task` must not read `this.sched` once the task is queued
                    // (`Schedule`'s rule).
                    this.sched.yield_task(Task::Raw(task));
                }
            }
            Ok(Poll::Ready(out)) => this.finish(Ok(out)),
            Err(payload) => {
                this.sched.on_panic();
                this.finish(Err(JoinError::panic(this.header.id, payload)))
            }
        }
    }

    /// `Vtable::shutdown`.
    unsafe fn shutdown(task: RawTask, idle_only: bool) {
        // SAFETY: the vtable is this type's.
        let this = unsafe { Self::from_header(task.ptr()) };
        // The runtime's threads are gone; claim the future as `run` would and drop it.
        if this.header.state.claim_for_shutdown(idle_only) {
            this.finish(Err(JoinError::cancelled(this.header.id)));
        }
    }

    /// `Vtable::schedule`.
    unsafe fn schedule(task: RawTask) {
        // SAFETY: the vtable is this type's.
        let this = unsafe { Self::from_header(task.ptr()) };
        this.sched.schedule(Task::Raw(task));
    }

    /// `Vtable::poll_join`.
    unsafe fn poll_join(ptr: NonNull<Header>, out: *mut (), cx: &mut Context<'_>) {
        // SAFETY: the vtable is this type's, and the JoinHandle's reference keeps it alive.
        let this = unsafe { Self::from_header(ptr) };
        let out = out.cast::<Poll<Result<F::Output, JoinError>>>();
        if this.header.state.load() & COMPLETE == 0 {
            {
                let mut slot = this.join_waker.lock();
                match &*slot {
                    Some(w) if w.will_wake(cx.waker()) => {}
                    _ => *slot = Some(cx.waker().clone()),
                }
            }
            // Re-check after publishing the waker: `finish` sets COMPLETE before taking it.
            if this.header.state.load() & COMPLETE == 0 {
                return;
            }
        }
        let stage = this.stage.with_mut(|stage| {
            // SAFETY: COMPLETE was observed with Acquire: the runner is done with the stage,
            // and only this (unique) JoinHandle reads it from now on.
            unsafe { std::mem::replace(&mut *stage, Stage::Consumed) }
        });
        match stage {
            // SAFETY: `out` is the JoinHandle's `Poll` of this cell's output type.
            Stage::Finished(res) => unsafe { *out = Poll::Ready(res) },
            _ => panic!("gort: JoinHandle polled after it returned Ready"),
        }
    }

    /// `Vtable::drop_output`: the JoinHandle is dropped after the task completed.
    unsafe fn drop_output(ptr: NonNull<Header>) {
        // SAFETY: the vtable is this type's.
        let this = unsafe { Self::from_header(ptr) };
        // The output's `Drop` sees the task's id, as the rest of the task's code does, not
        // the id of whoever drops the handle (Tokio's
        // `task_id_output_destructor_handle_dropped_after_completion`).
        let _current = CurrentGuard::enter(this.header.id);
        this.stage.with_mut(|stage| {
            // SAFETY: COMPLETE was observed (AcqRel): the runner is done with the stage, and
            // the dropping JoinHandle was its only reader.
            catch_user_here(|| unsafe { *stage = Stage::Consumed });
        });
    }

    /// `Vtable::dealloc`.
    unsafe fn dealloc(ptr: NonNull<Header>) {
        let cell = ptr.cast::<Self>();
        // SAFETY: the last reference went: nothing else can reach the cell. A panicking
        // destructor (of a future dropped here, or of the scheduler handle) must not leak
        // the memory into an unwinding worker.
        unsafe {
            catch_user_here(|| std::ptr::drop_in_place(cell.as_ptr()));
            cache::free(cell.cast(), Layout::new::<Self>());
        }
    }
}
