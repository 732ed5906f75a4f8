//! Short lists of wakers with their first kept inline: a socket direction nearly always has
//! one waiting task or none, and an expiry, a deadline change or a close nearly always
//! releases one or none. [`Waiting`] is the descriptor's waiter list (`desc.rs`), where a
//! `Vec` cost an allocation per socket and direction, fresh memory on every new connection
//! (design/PERFORMANCE-LOG.md, "N5's CPU, counted"); [`Wakers`] what an operation on it
//! released (`io.rs`), where a `Vec` allocated and freed a buffer at every expiry that found
//! a task blocked (design/PERFORMANCE-LOG.md, "N5: no allocation per expiry").

use std::task::Waker;

#[derive(Debug, Default)]
pub(crate) struct Wakers {
    /// The first waker; `None` only while `more` is empty too.
    first: Option<Waker>,
    /// Any further ones (several tasks reading one socket at once).
    more: Vec<Waker>,
}

impl Wakers {
    pub(crate) fn push(&mut self, waker: Waker) {
        match self.first {
            None => self.first = Some(waker),
            Some(_) => self.more.push(waker),
        }
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

/// A direction's waiter list in the descriptor (`desc.rs`): wakers in slots, the first kept
/// inline (most directions have one waiter or none, and a `Vec` cost an allocation per
/// socket). An operation future that registered owns its slot (`owned`) and gives it back
/// when dropped ([`Half::cancel`](crate::desc::Half::cancel)), so a read given up under a
/// `timeout` does not keep its task until the next release; a poll without an owning future
/// (the I/O trait impls) shares one slot per task (deduplicated with `will_wake`) until the
/// release, and at most [`MAX_UNOWNED`] such slots are kept ([`Waiting::evict_unowned`]).
/// A slot given back is reused by the next registration.
#[derive(Debug, Default)]
pub(crate) struct Waiting {
    /// Slot 0.
    first: Option<Entry>,
    /// Slots 1 and up.
    more: Vec<Option<Entry>>,
    /// Occupied slots.
    live: usize,
    /// Occupied slots that no future owns.
    unowned: usize,
}

/// The most slots a direction keeps for polls without an owning future (the I/O trait
/// impls). Nothing tells such a slot that its poller gave up (a trait read dropped by a
/// `timeout`), so on an idle socket read that way by many short-lived tasks the list grew
/// by one slot per task until the next readiness: each kept its finished task's memory, and
/// each registration scanned them all under the lock (20,000 such tasks: 82 MiB and 4.3 s
/// of CPU in a debug build, quadratic; `tests/abuse_compat.rs`). Past the cap the first
/// such slot found is woken and emptied: a spurious wake-up for a task still waiting (it
/// polls again and registers anew), nothing for one that gave up. The cost of the cap:
/// more than this many tasks polling one direction through the traits at once keep waking
/// each other (a spin while the socket is idle; 100 readers with a cap of 64 kept both
/// cores busy), hence a cap far above any real use of one stream (hyper and the codecs
/// poll each from one task). Tokio keeps one waker per direction for such polls, the last
/// (an earlier poller is never woken), and offers them on `&mut` streams only.
pub(crate) const MAX_UNOWNED: usize = 256;

#[derive(Debug)]
struct Entry {
    waker: Waker,
    /// Registered by an operation future that gives the slot back when dropped.
    owned: bool,
}

impl Waiting {
    pub(crate) fn is_empty(&self) -> bool {
        self.live == 0
    }

    fn slot(&mut self, slot: usize) -> &mut Option<Entry> {
        match slot {
            0 => &mut self.first,
            n => &mut self.more[n - 1],
        }
    }

    /// Whether a slot no future owns holds a waker that wakes the same task as `waker`.
    pub(crate) fn holds_unowned(&self, waker: &Waker) -> bool {
        std::iter::once(&self.first)
            .chain(&self.more)
            .flatten()
            .any(|e| !e.owned && e.waker.will_wake(waker))
    }

    /// How many occupied slots no future owns.
    pub(crate) fn unowned(&self) -> usize {
        self.unowned
    }

    /// Empties the first slot found that no future owns, returning its waker for the caller
    /// to wake outside the lock: the cap of [`MAX_UNOWNED`]. The list is not left empty (the
    /// caller registers right after), so the waiter count does not change.
    pub(crate) fn evict_unowned(&mut self) -> Option<Waker> {
        let slot = std::iter::once(&self.first)
            .chain(&self.more)
            .position(|e| e.as_ref().is_some_and(|e| !e.owned))?;
        self.take(slot)
    }

    /// Puts `waker` in a free slot and returns the slot.
    pub(crate) fn push(&mut self, waker: Waker, owned: bool) -> usize {
        let entry = Some(Entry { waker, owned });
        self.live += 1;
        self.unowned += usize::from(!owned);
        if self.first.is_none() {
            self.first = entry;
            return 0;
        }
        if let Some(i) = self.more.iter().position(Option::is_none) {
            self.more[i] = entry;
            return i + 1;
        }
        self.more.push(entry);
        self.more.len()
    }

    /// Makes the owned `slot` hold `waker` unless it holds one for the same task already;
    /// returns the waker replaced, for the caller to drop outside the lock.
    pub(crate) fn refresh(
        &mut self,
        slot: usize,
        waker: &Waker,
        mine: &mut Option<Waker>,
    ) -> Option<Waker> {
        let entry = self
            .slot(slot)
            .as_mut()
            .expect("gort: an owned waiter slot is empty");
        if entry.waker.will_wake(waker) {
            return None;
        }
        mine.take().map(|w| std::mem::replace(&mut entry.waker, w))
    }

    /// Empties `slot`, returning its waker.
    pub(crate) fn take(&mut self, slot: usize) -> Option<Waker> {
        let entry = self.slot(slot).take()?;
        self.live -= 1;
        self.unowned -= usize::from(!entry.owned);
        if self.live == 0 {
            self.more.clear(); // capacity kept
        }
        Some(entry.waker)
    }

    /// Moves every waker into `out`, leaving none (and `more`'s capacity for the next).
    pub(crate) fn move_into(&mut self, out: &mut impl Extend<Waker>) {
        out.extend(self.first.take().map(|e| e.waker));
        out.extend(self.more.drain(..).flatten().map(|e| e.waker));
        self.live = 0;
        self.unowned = 0;
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;
    use std::task::Wake;

    struct Count(AtomicUsize);

    impl Wake for Count {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::Relaxed);
        }
    }

    #[test]
    fn eviction_takes_an_unowned_slot_and_never_an_owned_one() {
        let woken = Arc::new(Count(AtomicUsize::new(0)));
        let waker = Waker::from(woken.clone());
        let mut list = Waiting::default();
        let owned = list.push(waker.clone(), true);
        for _ in 0..3 {
            list.push(waker.clone(), false);
        }
        assert_eq!((list.live, list.unowned()), (4, 3));
        for left in (0..3).rev() {
            list.evict_unowned().unwrap().wake();
            assert_eq!((list.live, list.unowned()), (left + 1, left));
        }
        assert!(list.evict_unowned().is_none());
        assert!(list.take(owned).is_some());
        assert!(list.is_empty());
        assert_eq!(woken.0.load(Ordering::Relaxed), 3);
        list.push(waker.clone(), false);
        let mut out = Wakers::default();
        list.move_into(&mut out);
        assert_eq!((list.live, list.unowned()), (0, 0));
    }
}
