//! A FIFO of slab indices, linked through the slots themselves, so that a waiter leaves the
//! middle of its queue in O(1) (Go's `waitq` of `sudog`s, `src/runtime/chan.go`). A cancelled
//! receive among thousands parked on one channel (say, every task's `select!` over a shared
//! `done` channel) must not scan the queue under the channel lock.

use std::ops::{Index, IndexMut};

/// The end of a list.
const NIL: u32 = u32::MAX;

/// A slot's position in its queue. Indices are `u32` (8 bytes in every slot, not 16): a slab
/// of four billion parked operations would not fit in memory anyway.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Links {
    prev: u32,
    next: u32,
}

/// `i` as a link; panics if a slab ever grew past `u32` indices.
#[inline]
fn link(i: usize) -> u32 {
    match u32::try_from(i) {
        Ok(i) if i != NIL => i,
        _ => panic!("gort::chan: slot index {i} does not fit a queue link"),
    }
}

/// A link as an index, `None` at the end of a list.
#[inline]
fn index(l: u32) -> Option<usize> {
    (l != NIL).then_some(l as usize)
}

impl Links {
    /// Not in any queue.
    pub(crate) const UNLINKED: Links = Links {
        prev: NIL,
        next: NIL,
    };

    /// The links of a free slot, which is in no queue: `next` threads the free list
    /// (`u32::MAX` at its end, which makes the last free slot's links [`Links::UNLINKED`]).
    pub(crate) fn free(next_free: u32) -> Links {
        Links {
            prev: NIL,
            next: next_free,
        }
    }

    /// The next free slot of a free slot's links ([`Links::free`]).
    pub(crate) fn next_free(self) -> u32 {
        self.next
    }
}

/// A slab element that can be queued.
pub(crate) trait Linked {
    fn links(&self) -> &Links;
    fn links_mut(&mut self) -> &mut Links;
}

/// A FIFO threaded through `slots` (any slab indexed by `usize`). Each index may be in at most
/// one queue at a time; the caller keeps track of which (the core's `queued` flag and slot
/// kind).
#[derive(Debug)]
pub(crate) struct Queue {
    head: u32,
    tail: u32,
}

impl Queue {
    pub(crate) const fn new() -> Self {
        Queue {
            head: NIL,
            tail: NIL,
        }
    }

    pub(crate) fn front(&self) -> Option<usize> {
        index(self.head)
    }

    /// The element after `i` (which must be queued here).
    pub(crate) fn next<S: Linked, L: Index<usize, Output = S> + ?Sized>(
        &self,
        slots: &L,
        i: usize,
    ) -> Option<usize> {
        index(slots[i].links().next)
    }

    pub(crate) fn push_back<S: Linked, L: IndexMut<usize, Output = S> + ?Sized>(
        &mut self,
        slots: &mut L,
        i: usize,
    ) {
        debug_assert_eq!(*slots[i].links(), Links::UNLINKED, "slot {i} queued twice");
        let l = link(i);
        *slots[i].links_mut() = Links {
            prev: self.tail,
            next: NIL,
        };
        match index(self.tail) {
            None => self.head = l,
            Some(tail) => slots[tail].links_mut().next = l,
        }
        self.tail = l;
    }

    /// Unlinks `i`, which must be queued here.
    pub(crate) fn remove<S: Linked, L: IndexMut<usize, Output = S> + ?Sized>(
        &mut self,
        slots: &mut L,
        i: usize,
    ) {
        let Links { prev, next } = *slots[i].links();
        match index(prev) {
            None => {
                debug_assert_eq!(index(self.head), Some(i), "slot {i} is not in this queue");
                self.head = next;
            }
            Some(p) => slots[p].links_mut().next = next,
        }
        match index(next) {
            None => {
                debug_assert_eq!(index(self.tail), Some(i), "slot {i} is not in this queue");
                self.tail = prev;
            }
            Some(n) => slots[n].links_mut().prev = prev,
        }
        *slots[i].links_mut() = Links::UNLINKED;
    }

    pub(crate) fn pop_front<S: Linked, L: IndexMut<usize, Output = S> + ?Sized>(
        &mut self,
        slots: &mut L,
    ) -> Option<usize> {
        let i = self.front()?;
        self.remove(slots, i);
        Some(i)
    }
}

#[cfg(test)]
mod tests {
    use super::{Linked, Links, Queue};

    struct S(Links);

    impl Linked for S {
        fn links(&self) -> &Links {
            &self.0
        }
        fn links_mut(&mut self) -> &mut Links {
            &mut self.0
        }
    }

    fn drain(q: &mut Queue, slots: &mut [S]) -> Vec<usize> {
        std::iter::from_fn(|| q.pop_front(slots)).collect()
    }

    #[test]
    fn fifo_with_removal_anywhere() {
        let mut slots: Vec<S> = (0..6).map(|_| S(Links::UNLINKED)).collect();
        let mut q = Queue::new();
        for i in [3, 0, 5, 1, 4] {
            q.push_back(&mut slots, i);
        }
        q.remove(&mut slots, 3); // head
        q.remove(&mut slots, 1); // middle
        q.remove(&mut slots, 4); // tail
        q.push_back(&mut slots, 2);
        let mut walked = Vec::new();
        let mut at = q.front();
        while let Some(i) = at {
            walked.push(i);
            at = q.next(&slots, i);
        }
        assert_eq!(walked, [0, 5, 2]);
        assert_eq!(drain(&mut q, &mut slots), [0, 5, 2]);
        assert_eq!(q.front(), None);
        assert!(slots.iter().all(|s| s.0 == Links::UNLINKED));
        // Reusable after emptying.
        q.push_back(&mut slots, 1);
        assert_eq!(drain(&mut q, &mut slots), [1]);
    }
}
