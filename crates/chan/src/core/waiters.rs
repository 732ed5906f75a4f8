//! The two wait queues of a channel core and the slab of [`Slot`]s they index: parking an
//! operation, finding the first waiter that may complete now, and completing it (steps 1 and 2
//! of "Completing a parked operation" in [`crate::core`]). Everything here runs under the
//! channel lock.

use std::cell::UnsafeCell;
use std::ops::{Index, IndexMut};
use std::ptr;
use std::task::Waker;

use gort_loom::Arc;

use super::{Core, OpCtx};
use crate::group::{claim, Claim, Group, GroupRef};
use crate::queue::{Linked, Links, Queue};
use crate::wake::Deferred;

/// A parked (or recently completed) operation.
pub(super) struct Slot<T> {
    /// Linked in `sendq`/`recvq`.
    pub(super) queued: bool,
    /// Parked (last) as a receive: a `value` it holds was handed to it.
    pub(super) recv: bool,
    /// The value handed to it was overtaken by a timer's newer one
    /// ([`Core::try_send_overtaking`]): if the receive is cut off, it is dropped, not put back.
    pub(super) overtaken: bool,
    /// The offered value (send) or the handed-over value (receive); see invariants 2 and 3.
    pub(super) value: Option<T>,
    /// The task to wake when the slot is completed or unlinked.
    pub(super) waker: Option<Waker>,
    /// The select this operation belongs to, if any ...
    pub(super) group: Option<Arc<Group>>,
    /// ... and its arm there (a [`GroupRef`] in two fields: the `u32` packs with the flags).
    arm: u32,
    /// Neighbours in `sendq`/`recvq` while queued; while free, `next` links the free list
    /// ([`NO_SLOT`] at its end): a free slot is in no queue. So a slot is 56 bytes for an
    /// 8-byte value (a timer's `Instant`), and a timer's channel 16 bytes smaller.
    links: Links,
}

/// The end of the free list of slots. Slot indices are below it (`Slots::push`), so the free
/// list and the queues' links take `u32`s.
pub(super) const NO_SLOT: u32 = u32::MAX;

impl<T> Slot<T> {
    const EMPTY: Slot<T> = Slot {
        queued: false,
        recv: false,
        overtaken: false,
        value: None,
        waker: None,
        group: None,
        arm: 0,
        links: Links::UNLINKED,
    };

    /// Whether a counterparty whose own select is `me` may complete this waiter now.
    pub(super) fn claim(&self, me: Option<*const Group>) -> Claim {
        self.group
            .as_ref()
            .map_or(Claim::Won, |g| claim(g, self.arm, me))
    }

    /// Records membership of a select arm.
    fn join(&mut self, r: GroupRef) {
        self.group = Some(r.group);
        self.arm = r.arm;
    }
}

impl<T> Linked for Slot<T> {
    fn links(&self) -> &Links {
        &self.links
    }
    fn links_mut(&mut self) -> &mut Links {
        &mut self.links
    }
}

/// The slab of slots. Slot 0 is reached through a pointer. A plain channel's is an
/// [`InlineSlot`] that follows the channel in its allocation, so a channel with one parked
/// operation at a time (a ping-pong, a worker waiting for jobs) parks and completes without
/// touching a second allocation. A fused channel's (a timer's) is boxed while in use and
/// freed when it is free and alone ([`Core::trim_first`]), so a timer nobody waits on holds
/// no slot (design/TIMERS.md, "Memory"). Further slots live on the heap, numbered from 1,
/// behind one word (not a `Vec`'s three) in the many channels that never need them.
pub(super) struct Slots<T> {
    /// Slot 0. Null only in a fused channel whose slot 0 is free and which has no other slot
    /// (`rest` is `None`): its free list is then slot 0 alone, whose `next` is [`NO_SLOT`].
    first: *mut Slot<T>,
    // Boxed on purpose: one word in every core, against one more allocation in a channel
    // that ever has two operations parked at once.
    #[allow(clippy::box_collection)]
    rest: Option<Box<Vec<Slot<T>>>>,
}

// SAFETY: `first` is slot 0, owned by the slab as `rest` is (a plain channel's lives in the
// channel's allocation, reached only through the core): the slab moves and shares its slots
// as a `Vec<Slot<T>>` would.
unsafe impl<T: Send> Send for Slots<T> {}

/// A fused channel's slot 0 taken out of its core ([`Core::take_first`]), to be dropped
/// outside the channel's lock.
pub(crate) struct OwnedSlot<T>(#[allow(dead_code)] Box<Slot<T>>);

/// A plain channel's slot 0: after the channel, in its allocation ([`Core::attach_first`]).
#[repr(transparent)]
pub(crate) struct InlineSlot<T>(UnsafeCell<Slot<T>>);

impl<T> InlineSlot<T> {
    pub(crate) const fn new() -> Self {
        InlineSlot(UnsafeCell::new(Slot::EMPTY))
    }
}

impl<T> Slots<T> {
    /// A slab holding one free slot, 0, not allocated yet.
    pub(super) const fn new() -> Self {
        Slots {
            first: ptr::null_mut(),
            rest: None,
        }
    }

    /// Whether slot 0 is allocated (in a fused channel, it is not while free and alone).
    pub(super) fn has_first(&self) -> bool {
        !self.first.is_null()
    }

    pub(super) fn len(&self) -> usize {
        1 + self.rest.as_ref().map_or(0, |rest| rest.len())
    }

    /// Adds a slot and returns its index.
    fn push(&mut self) -> usize {
        let rest = self.rest.get_or_insert_with(Box::default);
        assert!(
            rest.len() + 1 < NO_SLOT as usize,
            "gort::chan: more than u32::MAX - 1 operations parked on one channel"
        );
        rest.push(Slot::EMPTY);
        rest.len()
    }

    /// The slots on the heap, 1 and up (slot `i` at `i - 1`).
    #[cold]
    fn rest(&self) -> &[Slot<T>] {
        self.rest.as_deref().map_or(&[], |rest| rest.as_slice())
    }

    /// [`Slots::rest`], mutable.
    #[cold]
    fn rest_mut(&mut self) -> &mut [Slot<T>] {
        self.rest
            .as_deref_mut()
            .map_or(&mut [], |rest| rest.as_mut_slice())
    }
}

impl<T> Index<usize> for Slots<T> {
    type Output = Slot<T>;

    #[inline]
    fn index(&self, i: usize) -> &Slot<T> {
        match i {
            0 => {
                debug_assert!(self.has_first(), "slot 0 used while not allocated");
                // SAFETY: slot 0 is indexed only while allocated: a plain channel's always is
                // (attached at creation), a fused channel's from `slot`, which boxes it when it
                // takes slot 0 off the free list, until `trim_first` finds it free and alone
                // (then nothing indexes it: the queues and `handed` are empty, and the free
                // list is read in `slot` only after the box). It is then an `InlineSlot` of
                // the channel's allocation or that box, valid while the slab is and reached
                // only through it.
                unsafe { &*self.first }
            }
            i => &self.rest()[i - 1],
        }
    }
}

impl<T> IndexMut<usize> for Slots<T> {
    #[inline]
    fn index_mut(&mut self, i: usize) -> &mut Slot<T> {
        match i {
            0 => {
                debug_assert!(self.has_first(), "slot 0 used while not allocated");
                // SAFETY: as in `index`, and `&mut self` is the only way to it.
                unsafe { &mut *self.first }
            }
            i => &mut self.rest_mut()[i - 1],
        }
    }
}

/// Which queue a slot parks in.
#[derive(Clone, Copy)]
pub(super) enum Side {
    Send,
    Recv,
}

impl<T> Core<T> {
    /// Step 1 of completing a parked operation: unlinks and returns the first waiter of `q`
    /// that may complete now, on behalf of an operation whose own select is `me`.
    pub(super) fn pop_claimable(
        q: &mut Queue,
        slots: &mut Slots<T>,
        me: Option<*const Group>,
        d: &mut Deferred,
    ) -> Option<usize> {
        let mut at = q.front();
        while let Some(i) = at {
            at = q.next(slots, i);
            match slots[i].claim(me) {
                Claim::Won => {
                    q.remove(slots, i);
                    slots[i].queued = false;
                    return Some(i);
                }
                Claim::Busy => {
                    if let Some(w) = &slots[i].waker {
                        d.wake(w.clone());
                    }
                }
                Claim::Own => {}
                Claim::Gone => {
                    q.remove(slots, i);
                    let s = &mut slots[i];
                    s.queued = false;
                    if let Some(w) = s.waker.take() {
                        d.discard(w);
                    }
                }
            }
        }
        None
    }

    /// Step 2 for a receiver: hands it `v`.
    pub(super) fn give(&mut self, r: usize, v: T, d: &mut Deferred) {
        let s = &mut self.slots[r];
        debug_assert!(
            s.value.is_none(),
            "handed a value to a receiver that has one"
        );
        s.value = Some(v);
        s.overtaken = false;
        self.handed += 1;
        if let Some(w) = s.waker.take() {
            d.wake(w);
        }
    }

    /// Step 2 for a sender: takes its offered value.
    pub(super) fn take(&mut self, s: usize, d: &mut Deferred) -> T {
        let s = &mut self.slots[s];
        let v = s
            .value
            .take()
            .expect("a parked sender always offers its value");
        if let Some(w) = s.waker.take() {
            d.wake(w);
        }
        v
    }

    /// The slot of `slot`, allocating one if needed.
    pub(super) fn slot(&mut self, slot: &mut Option<usize>) -> usize {
        if let Some(i) = *slot {
            return i;
        }
        let i = if self.free == NO_SLOT {
            self.slots.push()
        } else {
            let i = self.free as usize;
            if !self.slots.has_first() {
                // A fused channel's slot 0, free and alone: its free list is slot 0 alone.
                self.slots.first = Box::into_raw(Box::new(Slot {
                    links: Links::free(NO_SLOT),
                    ..Slot::EMPTY
                }));
            }
            self.free = self.slots[i].links.next_free();
            self.slots[i].links = Links::UNLINKED;
            i
        };
        *slot = Some(i);
        i
    }

    /// Returns an idle slot to the free list, which is threaded through the slots themselves
    /// so that parking and completing touch no allocation besides the slab.
    pub(super) fn release(&mut self, slot: &mut Option<usize>, d: &mut Deferred) {
        let Some(i) = slot.take() else { return };
        let s = &mut self.slots[i];
        debug_assert!(
            !s.queued && s.value.is_none(),
            "released a slot still in use"
        );
        if let Some(w) = s.waker.take() {
            d.discard(w);
        }
        s.group = None;
        debug_assert_eq!(s.links, Links::UNLINKED, "released a queued slot");
        s.links = Links::free(self.free);
        // Below `NO_SLOT`: `Slots::push` never makes a larger index.
        self.free = i as u32;
    }

    /// Makes `slot` this plain channel's slot 0 (before any operation).
    ///
    /// # Safety
    ///
    /// `slot` is valid as long as this core is (it follows the channel in its allocation) and
    /// is reached only through it.
    pub(crate) unsafe fn attach_first(&mut self, slot: *const InlineSlot<T>) {
        debug_assert!(!self.slots.has_first(), "slot 0 attached twice");
        // `InlineSlot` is a transparent `UnsafeCell<Slot<T>>`.
        self.slots.first = UnsafeCell::raw_get(slot.cast::<UnsafeCell<Slot<T>>>());
    }

    /// Frees a fused channel's slot 0 if it is free and alone (no slot on the heap): a timer
    /// nobody waits on then holds none. Its waker and group were let go by `release`, so the
    /// drop runs no user code.
    ///
    /// # Safety
    ///
    /// Only for a fused channel's core (no [`attach_first`](Core::attach_first)): its slot 0
    /// is boxed here in `slot`.
    pub(crate) unsafe fn trim_first(&mut self) {
        if self.free == 0 && self.slots.rest.is_none() && self.slots.has_first() {
            // SAFETY: a fused channel's slot 0 comes from `Box::into_raw` in `slot`; the
            // pointer is cleared, so it is freed once.
            drop(unsafe { Box::from_raw(self.slots.first) });
            self.slots.first = ptr::null_mut();
        }
    }

    /// Takes a fused channel's slot 0 out whatever its state (the channel is being dropped;
    /// a leaked receive may have left it in use, holding a waker and a value): the caller
    /// drops it once it holds no lock, since those drops are user code.
    ///
    /// # Safety
    ///
    /// As [`trim_first`](Core::trim_first).
    pub(crate) unsafe fn take_first(&mut self) -> Option<OwnedSlot<T>> {
        if !self.slots.has_first() {
            return None;
        }
        // SAFETY: as in `trim_first`.
        let slot = unsafe { Box::from_raw(self.slots.first) };
        self.slots.first = ptr::null_mut();
        Some(OwnedSlot(slot))
    }

    /// Records the caller's waker and select membership, then queues the slot.
    pub(super) fn park(&mut self, i: usize, side: Side, ctx: &mut OpCtx<'_>, d: &mut Deferred) {
        self.refresh(i, ctx, d);
        self.slots[i].queued = true;
        self.slots[i].recv = matches!(side, Side::Recv);
        match side {
            Side::Send => self.sendq.push_back(&mut self.slots, i),
            Side::Recv => self.recvq.push_back(&mut self.slots, i),
        }
    }

    /// Unlinks a queued slot whose owner completes the operation itself.
    pub(super) fn unpark(&mut self, i: usize, side: Side) {
        let q = match side {
            Side::Send => &mut self.sendq,
            Side::Recv => &mut self.recvq,
        };
        q.remove(&mut self.slots, i);
        self.slots[i].queued = false;
    }

    /// [`Core::unpark`] for a sender, taking back its offered value.
    pub(super) fn unpark_sender(&mut self, i: usize) -> T {
        self.unpark(i, Side::Send);
        self.slots[i]
            .value
            .take()
            .expect("a parked sender always offers its value")
    }

    /// Updates a slot's waker (if it would wake another task) and select membership.
    pub(super) fn refresh(&mut self, i: usize, ctx: &mut OpCtx<'_>, d: &mut Deferred) {
        let s = &mut self.slots[i];
        if !s.waker.as_ref().is_some_and(|w| w.will_wake(ctx.waker)) {
            if let Some(old) = s.waker.replace(ctx.waker.clone()) {
                d.discard(old);
            }
        }
        match ctx.select.as_deref_mut() {
            None => s.group = None,
            Some(sel) => {
                let current = sel.group.as_ref().is_some_and(|g| {
                    s.arm as usize == sel.arm
                        && s.group.as_ref().is_some_and(|mine| Arc::ptr_eq(mine, g))
                });
                if !current {
                    s.join(sel.group_ref());
                }
            }
        }
    }
}

#[cfg(all(test, not(loom), target_pointer_width = "64"))]
mod tests {
    use super::Slot;

    /// A slot of an 8-byte value (a timer's `Instant`) is 56 bytes: the free list shares the
    /// queue links, the select arm a word with the flags (design/TIMERS.md, "Memory").
    #[test]
    fn a_slot_of_a_word_is_seven_words() {
        assert_eq!(std::mem::size_of::<Slot<u64>>(), 56);
    }
}
