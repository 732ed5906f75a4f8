//! The heap's storage: a growable array of [`Entry`]s laid out so that the four children of
//! every slot (`4i+1 ..= 4i+4`) share one 64-byte cache line (Go 1.23's `timerWhen` layout
//! has the same aim). A plain `Vec<Entry>` starts wherever the allocator puts it, and with
//! 16-byte entries three groups in four straddle two lines, so a sift down a large heap
//! touched two lines per level. Here the allocation is 64-byte aligned and slot 0 starts
//! `PAD` bytes into it, which puts slot `4i+1` on a line boundary.
//!
//! Only what the heap uses is provided: push, `swap_remove`, and the slice view
//! (indexing, `swap`, `iter`, `first`) through `Deref`.

use std::alloc::{self, Layout};
use std::mem::{align_of, size_of};
use std::ops::{Deref, DerefMut};
use std::ptr::{self, NonNull};

use crate::heap::Entry;

const LINE: usize = 64;
/// Bytes before slot 0, so that slot 1 starts a line (for 16-byte entries: three slots' worth).
const PAD: usize = (LINE - size_of::<Entry>() % LINE) % LINE;

pub(crate) struct Slots {
    /// Start of the allocation (64-byte aligned); dangling while `cap == 0`.
    base: NonNull<u8>,
    len: usize,
    cap: usize,
}

// SAFETY: `Slots` owns its entries like a `Vec<Entry>` does; `Entry` is `Send + Sync`.
unsafe impl Send for Slots {}
// SAFETY: as above; shared access only hands out `&[Entry]`.
unsafe impl Sync for Slots {}

/// Hints the CPU to load the line holding `p` (a no-op off x86_64).
#[inline]
pub(crate) fn prefetch(p: *const u8) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: SSE is part of the x86_64 baseline, and a prefetch never faults nor reads
    // memory the program can observe, whatever the address.
    unsafe {
        std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(p.cast())
    };
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}

impl Default for Slots {
    fn default() -> Slots {
        Slots {
            base: NonNull::dangling(),
            len: 0,
            cap: 0,
        }
    }
}

impl Slots {
    fn layout(cap: usize) -> Layout {
        let bytes = size_of::<Entry>()
            .checked_mul(cap)
            .and_then(|b| b.checked_add(PAD))
            .unwrap_or_else(|| panic!("gort: timer heap capacity overflow"));
        Layout::from_size_align(bytes, LINE.max(align_of::<Entry>()))
            .unwrap_or_else(|_| panic!("gort: timer heap capacity overflow"))
    }

    /// Slot 0.
    fn first_slot(&self) -> *mut Entry {
        // With `cap > 0`, `base + PAD` is inside the allocation; with `cap == 0` the pointer
        // is never dereferenced, and `wrapping_add` keeps the arithmetic defined anyway.
        self.base.as_ptr().wrapping_add(PAD).cast::<Entry>()
    }

    fn grow(&mut self) {
        let new_cap = if self.cap == 0 { 4 } else { self.cap * 2 };
        let new = Self::layout(new_cap);
        let p = if self.cap == 0 {
            // SAFETY: the layout has a non-zero size (at least four entries).
            unsafe { alloc::alloc(new) }
        } else {
            // SAFETY: `base` was allocated with `layout(cap)`, whose alignment equals the new
            // one; the new size is non-zero. Entries are moved bitwise, as `Vec` moves them.
            unsafe { alloc::realloc(self.base.as_ptr(), Self::layout(self.cap), new.size()) }
        };
        self.base = NonNull::new(p).unwrap_or_else(|| alloc::handle_alloc_error(new));
        self.cap = new_cap;
    }

    /// Prefetches the four lines holding the grandchildren of slot `i` (slots `16i + 5 ..=
    /// 16i + 20`, contiguous and line-aligned), so a sift down a large heap has the next
    /// level's line in flight while it compares this level's children.
    #[inline]
    pub(crate) fn prefetch_grandchildren(&self, i: usize) {
        let g = 16 * i + 5;
        if g < self.len {
            // The lines past `len` may lie beyond the allocation: a hint, never read.
            let p = self.first_slot().wrapping_add(g).cast::<u8>();
            for k in 0..4 {
                prefetch(p.wrapping_add(k * LINE));
            }
        }
    }

    pub(crate) fn push(&mut self, e: Entry) {
        if self.len == self.cap {
            self.grow();
        }
        // SAFETY: `len < cap`, so slot `len` lies inside the allocation and is vacant.
        unsafe { self.first_slot().add(self.len).write(e) };
        self.len += 1;
    }

    /// Removes slot `i`, moving the last entry into it.
    pub(crate) fn swap_remove(&mut self, i: usize) -> Entry {
        assert!(i < self.len, "gort: timer heap slot {i} out of range");
        let last = self.len - 1;
        self.swap(i, last);
        self.len = last;
        // SAFETY: slot `last` held a live entry and is now outside the length (read once).
        unsafe { self.first_slot().add(last).read() }
    }
}

impl Deref for Slots {
    type Target = [Entry];
    fn deref(&self) -> &[Entry] {
        if self.cap == 0 {
            return &[];
        }
        // SAFETY: slots `0..len` are initialised, contiguous and aligned for `Entry`.
        unsafe { std::slice::from_raw_parts(self.first_slot(), self.len) }
    }
}

impl DerefMut for Slots {
    fn deref_mut(&mut self) -> &mut [Entry] {
        if self.cap == 0 {
            return &mut [];
        }
        // SAFETY: as in `deref`, and `&mut self` makes the access unique.
        unsafe { std::slice::from_raw_parts_mut(self.first_slot(), self.len) }
    }
}

impl<'a> IntoIterator for &'a Slots {
    type Item = &'a Entry;
    type IntoIter = std::slice::Iter<'a, Entry>;
    fn into_iter(self) -> Self::IntoIter {
        self.iter()
    }
}

impl Drop for Slots {
    fn drop(&mut self) {
        if self.cap == 0 {
            return;
        }
        // SAFETY: slots `0..len` are live and dropped exactly once here; then the
        // allocation is freed with the layout it was made with.
        unsafe {
            ptr::drop_in_place(ptr::slice_from_raw_parts_mut(self.first_slot(), self.len));
            alloc::dealloc(self.base.as_ptr(), Self::layout(self.cap));
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::timer::Timer;

    fn entry(when: i64) -> Entry {
        Entry::new(when, crate::tref::TimerRef::from_arc(Timer::new()))
    }

    #[test]
    fn every_group_of_four_children_starts_a_cache_line() {
        let mut s = Slots::default();
        for k in 0..1000 {
            s.push(entry(k));
            for i in 0..=(s.len() - 1) / 4 {
                let c = 4 * i + 1;
                if c < s.len() {
                    assert_eq!(&s[c] as *const Entry as usize % LINE, 0, "children of {i}");
                }
            }
        }
    }

    #[test]
    fn behaves_like_a_vec() {
        let mut s = Slots::default();
        assert!(s.is_empty());
        let mut model: Vec<i64> = Vec::new();
        for k in 0..100 {
            s.push(entry(k));
            model.push(k);
        }
        assert_eq!(s.swap_remove(10).when, model.swap_remove(10));
        s.swap(0, 5);
        model.swap(0, 5);
        while s.len() > 50 {
            drop(s.swap_remove(s.len() - 1));
        }
        model.truncate(50);
        assert_eq!(s.iter().map(|e| e.when).collect::<Vec<_>>(), model);
        let t = s[3].clone_timer().into_arc().ok().expect("a plain timer");
        assert_eq!(std::sync::Arc::strong_count(&t), 2);
        drop(std::mem::take(&mut s));
        assert_eq!(
            std::sync::Arc::strong_count(&t),
            1,
            "entries dropped with the slots"
        );
        assert!(s.is_empty());
    }
}
