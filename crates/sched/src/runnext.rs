//! A P's `runnext` slot (Go's `p.runnext`): the task its holder runs next, which other Ms may
//! take while the holder is busy.
//!
//! The holder fills and empties it; a thief (a spinning M, or sysmon) only empties it. Go's
//! slot is a `guintptr` that both sides CAS. A Rust task is moved, not copied, and gort's
//! `Task` is two words, so the slot is a cell plus a state word, in the style of the ring's
//! claim-then-copy (runq.rs): a thief claims the task (CAS `FULL` to `TAKING`), moves it out,
//! then releases the slot (`EMPTY`). Only the holder writes the cell, and only while the slot
//! is `EMPTY`: a holder that finds a thief moving the old task out (`TAKING`) does not wait
//! for it, and puts its task elsewhere ([`Pushed::Busy`]).
//!
//! The state word also counts fills (`seq`): whoever saw the slot full can tell, later, whether
//! the same fill is still there. A thief takes only the fill it saw (as Go's CAS of the value
//! read before its pause), and sysmon takes a task that sat in the slot between two of its
//! looks, which proves the holder stuck in one task (Go's `retake` compares `schedtick`).
//!
//! Orderings: the holder publishes a filled cell with a `Release` store of `FULL` that the
//! thief's `Acquire` claim reads; the thief's `Release` store of `EMPTY` orders its move out
//! before the holder's next write, which follows an `Acquire` load that saw it. The holder's
//! own take is a CAS too, so that each fill is taken once, by the holder or by one thief.
//! Model: `tests/loom_runnext.rs`.

use gort_loom::atomic::{AtomicU32, Ordering::*};
use gort_loom::UnsafeCell;
use std::mem::MaybeUninit;
use std::ptr;

/// The low two bits of the state word.
const TAG: u32 = 0b11;
const EMPTY: u32 = 0;
const FULL: u32 = 1;
/// A thief is moving the task out.
const TAKING: u32 = 2;
/// One fill in the count above the tag.
const SEQ_ONE: u32 = TAG + 1;

/// The slot.
pub(crate) struct RunNext<T> {
    state: AtomicU32,
    task: UnsafeCell<MaybeUninit<T>>,
}

// SAFETY: the task moves between threads (a thief takes what the holder put), so `T: Send`;
// the cell is written only by the holder while `EMPTY` and read by whoever won the CAS out of
// `FULL` (module docs), so no two threads touch it at once.
unsafe impl<T: Send> Sync for RunNext<T> {}
// SAFETY: as above.
unsafe impl<T: Send> Send for RunNext<T> {}

/// What [`RunNext::push`] did with the task.
#[derive(Debug)]
pub(crate) enum Pushed<T> {
    /// The slot was empty: the task is in it.
    Filled,
    /// The task is in the slot; this one, which was there, is out.
    Kicked(T),
    /// A thief is moving the slot's old task out: the task is not in the slot; here it is.
    Busy(T),
}

/// A fill of the slot that someone saw (see [`RunNext::seen`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Fill(u32);

impl<T> RunNext<T> {
    pub(crate) fn new() -> Self {
        RunNext {
            state: AtomicU32::new(EMPTY),
            task: UnsafeCell::new(MaybeUninit::uninit()),
        }
    }

    /// Puts `task` in the slot.
    ///
    /// # Safety
    ///
    /// Only the slot's holder (the M that holds the P) calls `push` and [`RunNext::pop`], one
    /// holder at a time, hand-offs ordered by a lock (p.rs).
    #[inline]
    pub(crate) unsafe fn push(&self, task: T) -> Pushed<T> {
        let s = self.state.load(Acquire);
        if s & TAG == EMPTY {
            // SAFETY: forwarded contract.
            return unsafe { self.fill(s, task) };
        }
        // SAFETY: forwarded contract.
        if let Some(old) = unsafe { self.pop() } {
            // SAFETY: forwarded contract; `pop` left the slot `EMPTY`, and only the holder
            // makes it anything else.
            unsafe { self.fill(self.state.load(Relaxed), task) };
            return Pushed::Kicked(old);
        }
        // SAFETY: forwarded contract.
        unsafe { self.push_past_a_thief(task) }
    }

    /// [`RunNext::push`] when a thief claimed the slot's task since `push` looked: fills the
    /// slot if the thief is done, else hands the task back. Out of line: thieves are rare.
    ///
    /// # Safety
    ///
    /// As [`RunNext::push`].
    #[cold]
    #[inline(never)]
    unsafe fn push_past_a_thief(&self, task: T) -> Pushed<T> {
        let s = self.state.load(Acquire);
        if s & TAG == EMPTY {
            // SAFETY: forwarded contract.
            unsafe { self.fill(s, task) }
        } else {
            Pushed::Busy(task)
        }
    }

    /// Writes `task` into the `EMPTY` slot whose state is `s`.
    ///
    /// # Safety
    ///
    /// As [`RunNext::push`], and the slot is `EMPTY` (no thief touches it then).
    #[inline]
    unsafe fn fill(&self, s: u32, task: T) -> Pushed<T> {
        debug_assert_eq!(s & TAG, EMPTY);
        // SAFETY: the slot is empty and only the holder writes it; a thief's move out of the
        // previous fill happened before its `Release` store of `EMPTY`, which our `Acquire`
        // load (in `push` or `pop`) read.
        self.task
            .with_mut(|p| unsafe { ptr::write(p, MaybeUninit::new(task)) });
        self.state
            .store((s & !TAG).wrapping_add(SEQ_ONE) | FULL, Release);
        Pushed::Filled
    }

    /// Takes the slot's task, unless it is empty or a thief is taking it.
    ///
    /// # Safety
    ///
    /// As [`RunNext::push`].
    #[inline]
    pub(crate) unsafe fn pop(&self) -> Option<T> {
        let s = self.state.load(Acquire);
        if s & TAG != FULL {
            return None;
        }
        // SAFETY: forwarded contract.
        unsafe { self.claim(s, EMPTY) }
    }

    /// Whether the slot holds a task (a racy hint for anyone; exact for the holder, but for
    /// a thief taking it meanwhile).
    pub(crate) fn is_full(&self) -> bool {
        self.state.load(Relaxed) & TAG == FULL
    }

    /// The fill in the slot now, if it is full.
    pub(crate) fn seen(&self) -> Option<Fill> {
        let s = self.state.load(Relaxed);
        (s & TAG == FULL).then_some(Fill(s))
    }

    /// A thief's take: the task of fill `seen`, if it is still in the slot.
    pub(crate) fn steal(&self, seen: Fill) -> Option<T> {
        // SAFETY: `TAKING` makes the holder leave the cell alone until our release; any
        // thread may claim.
        unsafe { self.claim(seen.0, TAKING) }
    }

    /// Moves the task of fill `s` out if the CAS from `s` to `via` wins, then leaves the slot
    /// `EMPTY` (at once when `via` is `EMPTY`: the holder, who alone writes the cell next).
    ///
    /// # Safety
    ///
    /// `s` is a `FULL` state; with `via == EMPTY`, the caller is the holder.
    #[inline]
    unsafe fn claim(&self, s: u32, via: u32) -> Option<T> {
        let held = (s & !TAG) | via;
        self.state
            .compare_exchange(s, held, Acquire, Relaxed)
            .ok()?;
        // SAFETY: the CAS out of `FULL` made the fill ours alone; its `Acquire` read the
        // holder's `Release` store that published the write.
        let task = self.task.with(|p| unsafe { ptr::read(p).assume_init() });
        if via != EMPTY {
            // Orders the move out before the holder's next write (module docs).
            self.state.store((s & !TAG) | EMPTY, Release);
        }
        Some(task)
    }
}

impl<T> Drop for RunNext<T> {
    fn drop(&mut self) {
        // SAFETY: `&mut self`: nobody else touches the slot; a full one holds a task.
        if let Some(task) = unsafe { self.pop() } {
            drop(task);
        }
    }
}
