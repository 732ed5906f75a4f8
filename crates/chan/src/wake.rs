//! Work collected under the channel lock and done after it is released: waking tasks and
//! dropping stale wakers. Both can run arbitrary code (an executor's wake, or the drop of the
//! last reference to a task whose future holds this channel's handles), so neither may run
//! while the lock is held (tokio's `process_at_time` habit).

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

    /// Empty, and owning no allocation.
    pub(crate) fn is_empty(&self) -> bool {
        self.first.is_none() && self.rest.capacity() == 0
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
#[derive(Debug, Default)]
pub(crate) struct Deferred {
    wake: Bag<Waker>,
    discard: Bag<Waker>,
}

impl Deferred {
    #[inline]
    pub(crate) fn new() -> Self {
        Deferred::default()
    }

    /// Wakes `w` after unlocking.
    #[inline]
    pub(crate) fn wake(&mut self, w: Waker) {
        self.wake.push(w);
    }

    /// Drops `w` after unlocking.
    #[inline]
    pub(crate) fn discard(&mut self, w: Waker) {
        self.discard.push(w);
    }

    /// Wakes (in the order they were collected) and drops; call with no lock held.
    #[inline]
    pub(crate) fn run(self) {
        // Most operations complete without touching another task: keep that path free of
        // iterator and destructor calls.
        if self.wake.is_empty() && self.discard.is_empty() {
            std::mem::forget(self);
            return;
        }
        self.run_slow();
    }

    /// The common case past the empty one is a single wake (a send handing its value to one
    /// parked receiver): wake it without building an iterator, and reach the lists only if
    /// they ever held more than one waker.
    fn run_slow(self) {
        let Deferred { wake, discard } = self;
        if let Some(w) = wake.first {
            w.wake();
        }
        if wake.rest.capacity() != 0 {
            for w in wake.rest {
                w.wake();
            }
        }
        drop(discard.first);
        if discard.rest.capacity() != 0 {
            drop(discard.rest);
        }
    }
}
