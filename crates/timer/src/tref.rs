//! [`TimerRef`]: the one owning reference to a timer that heaps and modified-earlier lists
//! hold, thin (one word) whichever allocation the timer lives in.
//!
//! A timer lives either in its own `Arc<Timer>` ([`Timer::new`]) or inside a callback's
//! [`TimerCell`](crate::TimerCell), the one allocation of a timer and its callback. Bit 1 of
//! the pointer says which ([`CELL`]): a plain reference is an `Arc<Timer>`'s strong one; a
//! cell reference is one of the cell's memory count, which keeps the timer's memory, never
//! the callback (`cell.rs`; design/TIMERS.md, "Memory"). Bit 0 is left to the heap entry (`entry.rs`).

use std::mem::ManuallyDrop;
use std::ops::Deref;
use std::ptr::NonNull;

use gort_loom::Arc;

use crate::cell::{clone_ref, drop_ref, Holder};
use crate::timer::Timer;

/// Bit 1 of a reference's pointer: the timer lives in a [`TimerCell`](crate::TimerCell).
pub(crate) const CELL: usize = 2;

/// The low bits a reference or an entry may set; `Timer` is 8-aligned, so all three are free.
pub(crate) const TAGS: usize = 7;

/// An owning reference to a timer: an `Arc<Timer>`'s strong reference, or a cell's weak one
/// (module docs). Clone adds a reference of the same kind; drop lets go of it.
pub(crate) struct TimerRef {
    /// The timer's address (what `Arc::into_raw` returned), with [`CELL`] or-ed in for a cell.
    tagged: NonNull<Timer>,
}

// SAFETY: a `TimerRef` owns an `Arc<Timer>` or a memory reference of a `TimerCell<P>` with
// `P: Send + Sync`; both are `Send + Sync` because `Timer` is.
unsafe impl Send for TimerRef {}
// SAFETY: as above; `&TimerRef` only hands out `&Timer`.
unsafe impl Sync for TimerRef {}

impl TimerRef {
    /// Adopts the strong reference of a plain timer.
    #[cfg(test)]
    pub(crate) fn from_arc(t: Arc<Timer>) -> TimerRef {
        // SAFETY: `into_raw` never returns null.
        let tagged = unsafe { NonNull::new_unchecked(Arc::into_raw(t).cast_mut()) };
        TimerRef { tagged }
    }

    /// A plain timer's reference, borrowed from `t` (never dropped: `ManuallyDrop`).
    #[inline]
    pub(crate) fn borrow_arc(t: &Arc<Timer>) -> ManuallyDrop<TimerRef> {
        // SAFETY: `as_ptr` is what `into_raw` returns, never null; the borrow lives no longer
        // than `t`, which owns the reference it stands for.
        let tagged = unsafe { NonNull::new_unchecked(Arc::as_ptr(t).cast_mut()) };
        ManuallyDrop::new(TimerRef { tagged })
    }

    /// A reference from its tagged pointer ([`into_tagged`](TimerRef::into_tagged)).
    ///
    /// # Safety
    ///
    /// `tagged` came from `into_tagged` (or is a cell's address with [`CELL`] set),
    /// and the reference it stands for is adopted: it is owned by nothing else now.
    #[inline]
    pub(crate) unsafe fn from_tagged(tagged: NonNull<Timer>) -> TimerRef {
        TimerRef { tagged }
    }

    /// The tagged pointer, owning the reference (undo with `from_tagged`).
    #[inline]
    pub(crate) fn into_tagged(self) -> NonNull<Timer> {
        ManuallyDrop::new(self).tagged
    }

    /// Whether the timer lives in a cell.
    #[inline]
    pub(crate) fn is_cell(&self) -> bool {
        self.tagged.as_ptr() as usize & CELL != 0
    }

    /// The timer's address, tags removed.
    #[inline]
    pub(crate) fn as_ptr(&self) -> *const Timer {
        untag(self.tagged.as_ptr())
    }

    /// A new holder reference of this reference's cell, as the payload its timer runs.
    ///
    /// # Safety
    ///
    /// `self` is a cell reference ([`is_cell`](TimerRef::is_cell)), and a holder reference
    /// of the cell lives meanwhile (the caller's `CellTimer`).
    #[inline]
    pub(crate) unsafe fn cell_payload(&self) -> Holder {
        // SAFETY: a cell reference's pointer has the cell's provenance; the caller's holder
        // keeps the callback alive while another is added.
        unsafe { Holder::new(self.as_ptr()) }
    }

    /// The plain timer's `Arc`, or the cell reference back.
    #[inline]
    pub(crate) fn into_arc(self) -> Result<Arc<Timer>, TimerRef> {
        if self.is_cell() {
            return Err(self);
        }
        let p = ManuallyDrop::new(self).as_ptr();
        // SAFETY: a plain reference's pointer came from `Arc::into_raw`; we adopt the strong
        // reference it owned (`self` is not dropped).
        Ok(unsafe { Arc::from_raw(p) })
    }

    /// Gives the reference back the way a one-shot run's does: a plain timer's last
    /// reference is kept for reuse ([`Timer::recycle`]); a cell's is let go of.
    #[inline]
    pub(crate) fn recycle(self) {
        if let Ok(t) = self.into_arc() {
            Timer::recycle(t);
        }
    }
}

/// `p` with the reference and entry tags cleared: the address `into_raw` returned.
#[inline]
pub(crate) fn untag(p: *mut Timer) -> *const Timer {
    let b = p.cast::<u8>();
    // Byte arithmetic rather than `map_addr` (MSRV 1.80).
    b.wrapping_sub(b as usize & TAGS)
        .cast::<Timer>()
        .cast_const()
}

impl Deref for TimerRef {
    type Target = Timer;

    #[inline]
    fn deref(&self) -> &Timer {
        // SAFETY: the reference keeps the timer's memory (a strong `Arc` or a cell's memory
        // reference), and a cell's timer is never dropped (`cell.rs`).
        unsafe { &*self.as_ptr() }
    }
}

impl Clone for TimerRef {
    #[inline]
    fn clone(&self) -> TimerRef {
        let p = self.as_ptr();
        if self.is_cell() {
            // SAFETY: `p` is a live cell's timer (we own a memory reference of it).
            unsafe { clone_ref(p) };
        } else {
            // SAFETY: `p` came from `Arc::into_raw` and our reference keeps the count above
            // zero while it is raised.
            unsafe { Arc::increment_strong_count(p) };
        }
        TimerRef {
            tagged: self.tagged,
        }
    }
}

impl Drop for TimerRef {
    #[inline]
    fn drop(&mut self) {
        let p = self.as_ptr();
        if self.is_cell() {
            // SAFETY: we own one memory reference of the cell, let go of once here. It frees
            // memory at most; the callback goes with the last holder reference.
            unsafe { drop_ref(p) };
        } else {
            // SAFETY: we own one strong reference, released once here.
            drop(unsafe { Arc::from_raw(p) });
        }
    }
}
