//! Work collected under the channel lock and done after it is released: waking tasks and
//! dropping stale wakers. Both can run arbitrary code (an executor's wake, or the drop of the
//! last reference to a task whose future holds this channel's handles), so neither may run
//! while the lock is held (tokio's `process_at_time` habit).

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::task::Waker;

/// A list that holds its first element inline, so the common case (one element) never
/// allocates.
#[derive(Debug)]
pub(crate) struct Bag<T> {
    first: Option<T>,
    rest: Vec<T>,
}

impl<T> Default for Bag<T> {
    fn default() -> Self {
        Bag {
            first: None,
            rest: Vec::new(),
        }
    }
}

impl<T> Bag<T> {
    pub(crate) fn push(&mut self, v: T) {
        if self.first.is_none() {
            self.first = Some(v);
        } else {
            self.rest.push(v);
        }
    }

    pub(crate) fn len(&self) -> usize {
        usize::from(self.first.is_some()) + self.rest.len()
    }
}

impl<T> IntoIterator for Bag<T> {
    type Item = T;
    type IntoIter = std::iter::Chain<std::option::IntoIter<T>, std::vec::IntoIter<T>>;

    fn into_iter(self) -> Self::IntoIter {
        self.first.into_iter().chain(self.rest)
    }
}

/// Wakers to wake and wakers to drop once the channel lock is released.
///
/// Built and checked by every channel operation, so the common cases are kept to a few words:
/// nothing (most operations), or one waker to wake (a send handing its value to a parked
/// receiver) and one to drop (the completed operation's own). Anything beyond one of each
/// (a close, a select's cancellations) spills into a boxed list, allocated only then.
#[derive(Debug, Default)]
pub(crate) struct Deferred {
    wake: Option<Waker>,
    discard: Option<Waker>,
    more: Option<Box<More>>,
}

/// The wakers past the first of each kind, in the order they were collected.
#[derive(Debug, Default)]
struct More {
    wake: Vec<Waker>,
    discard: Vec<Waker>,
}

impl Deferred {
    #[inline]
    pub(crate) fn new() -> Self {
        Deferred::default()
    }

    /// Wakes `w` after unlocking.
    #[inline]
    pub(crate) fn wake(&mut self, w: Waker) {
        if self.wake.is_none() {
            self.wake = Some(w);
        } else {
            self.more.get_or_insert_with(Box::default).wake.push(w);
        }
    }

    /// Drops `w` after unlocking.
    #[inline]
    pub(crate) fn discard(&mut self, w: Waker) {
        if self.discard.is_none() {
            self.discard = Some(w);
        } else {
            self.more.get_or_insert_with(Box::default).discard.push(w);
        }
    }

    /// Wakes (in the order they were collected) and drops; call with no lock held.
    #[inline]
    pub(crate) fn run(self) {
        // Most operations complete without touching another task: keep that path free of
        // calls and destructors.
        if self.wake.is_none() && self.discard.is_none() && self.more.is_none() {
            std::mem::forget(self);
            return;
        }
        self.run_slow();
    }

    /// The common case past the empty one is a single wake and a single drop: done without
    /// building an iterator; the spill list is reached only if it was ever used.
    fn run_slow(mut self) {
        if self.more.is_none() {
            let mut discard = self.discard.take();
            if let Some(w) = self.wake.take() {
                let left = DropUnwinding(&mut discard);
                w.wake();
                std::mem::forget(left);
            }
            drop(discard);
            return;
        }
        self.run_spilled();
    }

    /// `run_slow` past one waker of each kind.
    #[cold]
    fn run_spilled(mut self) {
        if let Some(m) = self.more.as_mut() {
            // `next` pops from the back.
            m.wake.reverse();
            m.discard.reverse();
        }
        let left = Unwinding(&mut self);
        while let Some(job) = left.0.next() {
            job.run();
        }
        // Nothing left to run: the guard has nothing to do.
        std::mem::forget(left);
    }

    /// The next waker to wake (in the order collected), then the next to drop.
    #[inline]
    fn next(&mut self) -> Option<Job> {
        if let Some(w) = self.wake.take() {
            return Some(Job::Wake(w));
        }
        if let Some(w) = self.more.as_mut().and_then(|m| m.wake.pop()) {
            return Some(Job::Wake(w));
        }
        if let Some(w) = self.discard.take() {
            return Some(Job::Drop(w));
        }
        self.more
            .as_mut()
            .and_then(|m| m.discard.pop())
            .map(Job::Drop)
    }
}

/// One waker to wake or to drop.
enum Job {
    Wake(Waker),
    Drop(Waker),
}

impl Job {
    #[inline]
    fn run(self) {
        match self {
            Job::Wake(w) => w.wake(),
            Job::Drop(w) => drop(w),
        }
    }
}

/// What `run_slow` has not run yet. A waker is user code (another executor's, a foreign
/// `Waker` polled on a gort channel): when one's `wake` or `drop` panics, the rest are still
/// woken and dropped here while the panic unwinds to the caller, each caught on its own: a
/// close must not strand the operations parked behind the one that panicked, nor abort the
/// process at a second panic (a `Vec`'s drop glue would). Forgotten on the normal path, where
/// nothing is left.
struct Unwinding<'a>(&'a mut Deferred);

impl Drop for Unwinding<'_> {
    fn drop(&mut self) {
        while let Some(job) = self.0.next() {
            if let Err(again) = catch_unwind(AssertUnwindSafe(|| job.run())) {
                // The first panic is the one unwinding; dropping this payload could panic.
                std::mem::forget(again);
            }
        }
    }
}

/// The one waker to drop, should the one to wake panic (`Unwinding`'s rule, for the common
/// case).
struct DropUnwinding<'a>(&'a mut Option<Waker>);

impl Drop for DropUnwinding<'_> {
    fn drop(&mut self) {
        if let Some(w) = self.0.take() {
            if let Err(again) = catch_unwind(AssertUnwindSafe(|| drop(w))) {
                std::mem::forget(again);
            }
        }
    }
}
