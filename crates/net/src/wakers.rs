//! A short list of wakers with its first kept inline: a socket direction nearly always has
//! one waiting task or none, and an expiry, a deadline change or a close nearly always
//! releases one or none. Used for both: the descriptor's waiter list (`desc.rs`), where a
//! `Vec` cost an allocation per socket and direction, fresh memory on every new connection
//! (design/PERFORMANCE-LOG.md, "N5's CPU, counted"), and what an operation on it released
//! (`io.rs`), where a `Vec` allocated and freed a buffer at every expiry that found a task
//! blocked (design/PERFORMANCE-LOG.md, "N5: no allocation per expiry").

use std::task::Waker;

#[derive(Debug, Default)]
pub(crate) struct Wakers {
    /// The first waker; `None` only while `more` is empty too.
    first: Option<Waker>,
    /// Any further ones (several tasks reading one socket at once).
    more: Vec<Waker>,
}

impl Wakers {
    pub(crate) fn is_empty(&self) -> bool {
        self.first.is_none()
    }

    /// Whether a waker that wakes the same task as `waker` is in the list.
    pub(crate) fn holds(&self, waker: &Waker) -> bool {
        self.first
            .iter()
            .chain(&self.more)
            .any(|w| w.will_wake(waker))
    }

    pub(crate) fn push(&mut self, waker: Waker) {
        match self.first {
            None => self.first = Some(waker),
            Some(_) => self.more.push(waker),
        }
    }

    /// Moves every waker into `out`, leaving none (and `more`'s capacity for the next).
    pub(crate) fn move_into(&mut self, out: &mut impl Extend<Waker>) {
        out.extend(self.first.take());
        out.extend(self.more.drain(..));
    }
}

impl Extend<Waker> for Wakers {
    fn extend<I: IntoIterator<Item = Waker>>(&mut self, wakers: I) {
        wakers.into_iter().for_each(|w| self.push(w));
    }
}

impl IntoIterator for Wakers {
    type Item = Waker;
    type IntoIter = std::iter::Chain<std::option::IntoIter<Waker>, std::vec::IntoIter<Waker>>;

    fn into_iter(self) -> Self::IntoIter {
        self.first.into_iter().chain(self.more)
    }
}
