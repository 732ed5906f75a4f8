//! A global allocator that counts live bytes and live allocations, for the tests that pin a
//! structure's heap memory (timers here; also gort-net's deadlines, gort-sync's `ErrGroup`
//! and the soak probe, which include this file by path). Include it with `#[path = "support/counting.rs"] mod counting;` in a
//! test file of its own (it becomes that binary's allocator, so no other test may allocate
//! while one counts).

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicIsize, Ordering::Relaxed};

/// Live bytes allocated through the global allocator.
pub static BYTES: AtomicIsize = AtomicIsize::new(0);
/// Live allocations.
pub static ALLOCS: AtomicIsize = AtomicIsize::new(0);
/// Live bytes as glibc's malloc holds them ([`chunk`]): what a process's memory grows by.
#[allow(dead_code)] // not every test reads it
pub static CHUNK_BYTES: AtomicIsize = AtomicIsize::new(0);

/// The size of the chunk glibc's malloc (64-bit) takes for a request of `size` bytes with
/// an alignment of at most 16: the request and the 8-byte size field, rounded up to 16, and
/// at least 32. An allocation's memory grows in these steps: 152 bytes asked take 160, and
/// 153 take 176.
pub fn chunk(size: usize) -> usize {
    ((size + 8 + 15) & !15).max(32)
}

/// Counts live bytes and live allocations.
struct Counting;

// SAFETY: every call forwards to `System` with the caller's own arguments; the counters are
// only bookkeeping.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        BYTES.fetch_add(l.size() as isize, Relaxed);
        CHUNK_BYTES.fetch_add(chunk(l.size()) as isize, Relaxed);
        ALLOCS.fetch_add(1, Relaxed);
        // SAFETY: the caller's contract for `alloc` is `System::alloc`'s.
        unsafe { System.alloc(l) }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        BYTES.fetch_sub(l.size() as isize, Relaxed);
        CHUNK_BYTES.fetch_sub(chunk(l.size()) as isize, Relaxed);
        ALLOCS.fetch_sub(1, Relaxed);
        // SAFETY: the caller's contract for `dealloc` is `System::dealloc`'s.
        unsafe { System.dealloc(p, l) }
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;
