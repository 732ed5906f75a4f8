//! One heap slot: a deadline and a tagged reference to its timer.
//!
//! The tag says whether the heap keeps the timer's slot number current (the entry is
//! *indexed*). A timer starts unindexed, and no sift writes to it: a sift down a large heap
//! then touches only the heap's own lines, never a cold timer (the index store on every
//! level was a fifth of a large heap's pop). The first time `adjust` must find a timer in
//! place (modified earlier, go#41699), it promotes it: the timer becomes indexed for good
//! ([`Timer::index`] never returns to [`UNINDEXED`]), `adjust` pushes a second, indexed entry
//! with the new key, and the old entry is *stale*. Each timer so leaves at most one stale
//! entry; it counts as deleted and is dropped when it reaches the root or in
//! `clear_deleted`, without looking at the timer's status, which belongs to the live entry.

use std::mem::ManuallyDrop;
use std::ptr::NonNull;

use gort_loom::atomic::Ordering::Relaxed;

use crate::clock::Nanos;
use crate::timer::Timer;
use crate::tref::{untag, TimerRef};

/// [`Timer::index`] of a timer that was never promoted.
pub(crate) const UNINDEXED: u32 = u32::MAX;

/// Bit 0 of the pointer: this entry is indexed. `Timer` is 8-aligned, so the bit is free
/// (bit 1 is [`TimerRef`]'s, naming a timer that lives in a cell).
const INDEXED: usize = 1;

/// 16 bytes outside loom, so a node's four children fill one 64-byte cache line.
pub(crate) struct Entry {
    pub(crate) when: Nanos,
    /// A [`TimerRef`]'s tagged pointer, with [`INDEXED`] or-ed in; owns its reference.
    tagged: NonNull<Timer>,
}

// SAFETY: an `Entry` owns a `TimerRef`, which is `Send + Sync`.
unsafe impl Send for Entry {}
// SAFETY: as above; `&Entry` only hands out `&Timer`.
unsafe impl Sync for Entry {}

impl Entry {
    /// An entry for `timer` with key `when`, indexed exactly when the timer was promoted.
    /// The caller holds the lock of the heap it pushes into; the timer's index is written
    /// only under the lock of the heap holding its live indexed entry (see the module docs).
    pub(crate) fn new(when: Nanos, timer: TimerRef) -> Entry {
        let indexed = timer.index.load(Relaxed) != UNINDEXED;
        // Byte arithmetic rather than `map_addr` (MSRV 1.80); bit 0 of the address is clear.
        let tagged = timer
            .into_tagged()
            .as_ptr()
            .cast::<u8>()
            .wrapping_add(usize::from(indexed))
            .cast::<Timer>();
        Entry {
            when,
            // SAFETY: a reference's pointer is non-null, and or-ing bit 0 into a non-null
            // address keeps it non-null.
            tagged: unsafe { NonNull::new_unchecked(tagged) },
        }
    }

    /// The timer's address, tags removed: what `Arc::into_raw` returned.
    #[inline]
    pub(crate) fn as_ptr(&self) -> *const Timer {
        untag(self.tagged.as_ptr())
    }

    /// The reference's tagged pointer: ours without [`INDEXED`].
    #[inline]
    fn ref_tagged(&self) -> NonNull<Timer> {
        let p = self.tagged.as_ptr().cast::<u8>();
        let p = p.wrapping_sub(p as usize & INDEXED).cast::<Timer>();
        // SAFETY: clearing bit 0 of an 8-aligned address tagged with bits 0-1 leaves it
        // non-null.
        unsafe { NonNull::new_unchecked(p) }
    }

    #[inline]
    pub(crate) fn timer(&self) -> &Timer {
        // SAFETY: the entry owns a reference, so the timer lives at least as long as `self`.
        unsafe { &*self.as_ptr() }
    }

    /// Whether the timer lives in a cell (`tref.rs`'s `CELL` bit).
    #[inline]
    pub(crate) fn is_cell(&self) -> bool {
        self.tagged.as_ptr() as usize & crate::tref::CELL != 0
    }

    /// A new reference to the timer.
    pub(crate) fn clone_timer(&self) -> TimerRef {
        // SAFETY: borrows the entry's reference (never dropped) to clone it.
        let r = ManuallyDrop::new(unsafe { TimerRef::from_tagged(self.ref_tagged()) });
        TimerRef::clone(&r)
    }

    /// The entry's reference to the timer.
    pub(crate) fn into_timer(self) -> TimerRef {
        let p = ManuallyDrop::new(self).ref_tagged();
        // SAFETY: adopts the reference the entry owned (its `Drop` will not run).
        unsafe { TimerRef::from_tagged(p) }
    }

    /// Whether the heap records this entry's slot in its timer.
    #[inline]
    pub(crate) fn indexed(&self) -> bool {
        self.tagged.as_ptr() as usize & INDEXED != 0
    }

    /// An unindexed entry of a promoted timer: left behind by the promotion, no longer the
    /// timer's place in any heap. Lock held. (A promotion happens under the lock of the heap
    /// holding the old entry, and `move_to` never carries stale entries along, so every
    /// holder of that lock sees the promoted index.)
    #[inline]
    pub(crate) fn is_stale(&self) -> bool {
        !self.indexed() && self.timer().index.load(Relaxed) != UNINDEXED
    }
}

impl Drop for Entry {
    fn drop(&mut self) {
        // SAFETY: releases the reference the entry owned, once.
        drop(unsafe { TimerRef::from_tagged(self.ref_tagged()) });
    }
}
