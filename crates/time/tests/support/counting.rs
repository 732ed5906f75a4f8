//! A global allocator that counts live bytes and live allocations, for the tests that pin a
//! timer's heap memory. Include it with `#[path = "support/counting.rs"] mod counting;` in a
//! test file of its own (it becomes that binary's allocator, so no other test may allocate
//! while one counts).

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicIsize, Ordering::Relaxed};

/// Live bytes allocated through the global allocator.
pub static BYTES: AtomicIsize = AtomicIsize::new(0);
/// Live allocations.
pub static ALLOCS: AtomicIsize = AtomicIsize::new(0);

/// Counts live bytes and live allocations.
struct Counting;

// SAFETY: every call forwards to `System` with the caller's own arguments; the counters are
// only bookkeeping.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        BYTES.fetch_add(l.size() as isize, Relaxed);
        ALLOCS.fetch_add(1, Relaxed);
        // SAFETY: the caller's contract for `alloc` is `System::alloc`'s.
        unsafe { System.alloc(l) }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        BYTES.fetch_sub(l.size() as isize, Relaxed);
        ALLOCS.fetch_sub(1, Relaxed);
        // SAFETY: the caller's contract for `dealloc` is `System::dealloc`'s.
        unsafe { System.dealloc(p, l) }
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;
