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
    fn run_slow(self) {
        let Deferred {
            wake,
            discard,
            more,
        } = self;
        if let Some(w) = wake {
            w.wake();
        }
        let more = more.map(|m| {
            let More { wake, discard } = *m;
            for w in wake {
                w.wake();
            }
            discard
        });
        drop(discard);
        drop(more);
    }
}
