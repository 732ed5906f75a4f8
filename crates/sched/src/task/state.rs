//! The task state word: who may touch a task's future and output, as bits of one atomic.
//!
//! | bit         | set by                         | cleared by                    |
//! |-------------|--------------------------------|-------------------------------|
//! | `SCHEDULED` | a waker or `abort` (by CAS)    | `run` when it starts a poll   |
//! | `RUNNING`   | `run` when it starts a poll    | `run` when the poll returns   |
//! | `COMPLETE`  | `run`/`cancel`, once, final    | never                         |
//! | `CANCELLED` | `abort` or runtime shutdown    | never                         |
//! | `JOIN_INTEREST` | set at creation            | the `JoinHandle`'s drop       |
//!
//! Invariants:
//! 1. `SCHEDULED` set means exactly one reference to the task sits in a run queue (or is about
//!    to be pushed by the thread that set the bit), so a task is queued at most once however
//!    often it is woken. A wake while `RUNNING` only sets the bit; `run` re-queues it after
//!    the poll (that is how `yield_now` goes to the back of the queue).
//! 2. Only the thread that moved the task to `RUNNING` touches the future.
//! 3. The output slot is written once before `COMPLETE` is published (Release) and read only by
//!    the `JoinHandle` after it observed `COMPLETE` (Acquire).
//! 4. A detached task's output is dropped once: never stored if `JOIN_INTEREST` was gone
//!    before the task finished (it never comes back), else by whichever of `complete` and
//!    the `JoinHandle`'s drop comes second: `complete` that finds `JOIN_INTEREST` gone, or
//!    the drop that finds `COMPLETE` set (Tokio's rule: the output never outlives both).

use gort_loom::atomic::{AtomicUsize, Ordering::*};

pub(crate) const SCHEDULED: usize = 1;
pub(crate) const RUNNING: usize = 1 << 1;
pub(crate) const COMPLETE: usize = 1 << 2;
pub(crate) const CANCELLED: usize = 1 << 3;
pub(crate) const JOIN_INTEREST: usize = 1 << 4;

/// What a waker must do after marking the task.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Wake {
    /// Push the task to a run queue: this waker set `SCHEDULED` on an idle task.
    Schedule,
    /// Nothing: already queued, running (the runner re-queues it) or complete.
    Nothing,
}

/// What `run` must do after the poll returned `Pending`.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum AfterPoll {
    /// The task went idle; a future wake schedules it.
    Idle,
    /// It was woken (or cancelled) during the poll: queue it again.
    Requeue,
}

#[derive(Debug)]
pub(crate) struct State(AtomicUsize);

impl State {
    /// A new task starts scheduled (`spawn` queues it at once), with a `JoinHandle`.
    pub(crate) fn new_scheduled() -> State {
        State(AtomicUsize::new(SCHEDULED | JOIN_INTEREST))
    }

    pub(crate) fn load(&self) -> usize {
        // Acquire pairs with the Release in `complete` so the output is visible.
        self.0.load(Acquire)
    }

    /// A waker fired.
    pub(crate) fn wake(&self) -> Wake {
        let mut cur = self.0.load(Acquire);
        loop {
            if cur & (SCHEDULED | COMPLETE) != 0 {
                return Wake::Nothing;
            }
            // AcqRel: the waker's writes (e.g. a value sent on a channel) happen-before the
            // poll that the runner starts after it saw SCHEDULED.
            match self
                .0
                .compare_exchange_weak(cur, cur | SCHEDULED, AcqRel, Acquire)
            {
                Ok(_) if cur & RUNNING != 0 => return Wake::Nothing,
                Ok(_) => return Wake::Schedule,
                Err(actual) => cur = actual,
            }
        }
    }

    /// `run` takes the task: clears `SCHEDULED`, sets `RUNNING`. Returns the previous word.
    pub(crate) fn start_poll(&self) -> usize {
        // AcqRel pairs with the waker's CAS in `wake` (see there).
        let prev = self.0.fetch_xor(SCHEDULED | RUNNING, AcqRel);
        debug_assert!(
            prev & SCHEDULED != 0 && prev & RUNNING == 0,
            "gort: task ran while not scheduled (state {prev:#b})"
        );
        prev
    }

    /// The poll returned `Pending`: clear `RUNNING`, in one step with deciding whether the
    /// task must be queued again (a wake or an abort arrived during the poll).
    pub(crate) fn end_poll(&self) -> AfterPoll {
        let mut cur = self.0.load(Acquire);
        loop {
            let (next, after) = if cur & SCHEDULED != 0 {
                (cur & !RUNNING, AfterPoll::Requeue)
            } else if cur & CANCELLED != 0 {
                ((cur & !RUNNING) | SCHEDULED, AfterPoll::Requeue)
            } else {
                (cur & !RUNNING, AfterPoll::Idle)
            };
            match self.0.compare_exchange_weak(cur, next, AcqRel, Acquire) {
                Ok(_) => return after,
                Err(actual) => cur = actual,
            }
        }
    }

    /// The output is stored: publish it. Returns whether a `JoinHandle` still wants it
    /// (invariant 4: if not, the caller drops it).
    pub(crate) fn complete(&self) -> bool {
        // Release pairs with the Acquire in `load` by the JoinHandle; Acquire pairs with the
        // Release of `drop_join_interest`.
        let prev = self
            .0
            .fetch_update(AcqRel, Acquire, |cur| {
                Some((cur | COMPLETE) & !(RUNNING | SCHEDULED))
            })
            .unwrap_or_else(|cur| cur);
        prev & JOIN_INTEREST != 0
    }

    /// The `JoinHandle` is dropped. Returns whether the task has completed (invariant 4: the
    /// caller then drops the output).
    pub(crate) fn drop_join_interest(&self) -> bool {
        // AcqRel: the output's writes happen-before our drop of it when COMPLETE is seen.
        self.0.fetch_and(!JOIN_INTEREST, AcqRel) & COMPLETE != 0
    }

    /// Marks the task cancelled. Returns whether the caller must queue it so that a runner
    /// drops the future (the task was idle).
    pub(crate) fn cancel(&self) -> bool {
        let mut cur = self.0.load(Acquire);
        loop {
            if cur & (COMPLETE | CANCELLED) != 0 {
                return false;
            }
            let schedule = cur & (SCHEDULED | RUNNING) == 0;
            let next = cur | CANCELLED | if schedule { SCHEDULED } else { 0 };
            match self.0.compare_exchange_weak(cur, next, AcqRel, Acquire) {
                Ok(_) => return schedule,
                Err(actual) => cur = actual,
            }
        }
    }

    /// Runtime teardown: takes the future of a task that is not complete, as `run` would.
    /// Returns false when the task already completed (or, with `idle_only`, is queued or
    /// being polled).
    pub(crate) fn claim_for_shutdown(&self, idle_only: bool) -> bool {
        // `idle_only`: while Ms may still run, claim only a task in no queue and no poll:
        // idle (no SCHEDULED, no RUNNING) is the one state no M can take it from, and the
        // claim then is `start_poll`'s step, so a wake that comes after it only sets
        // SCHEDULED (the "poll" owns the task) as during any poll.
        let busy = if idle_only {
            COMPLETE | RUNNING | SCHEDULED
        } else {
            COMPLETE | RUNNING
        };
        let mut cur = self.0.load(Acquire);
        loop {
            if cur & busy != 0 {
                return false;
            }
            let next = (cur & !SCHEDULED) | RUNNING | CANCELLED;
            match self.0.compare_exchange_weak(cur, next, AcqRel, Acquire) {
                Ok(_) => return true,
                Err(actual) => cur = actual,
            }
        }
    }
}
