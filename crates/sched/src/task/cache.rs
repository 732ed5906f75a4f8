//! Freed task cells kept for the next spawn: Go's `gfree` lists (`gfput`/`gfget` in proc.go),
//! by size class.
//!
//! A spawn loop allocates its cells on one M, and the Ms that finish the tasks free them. With
//! the system allocator, every such free goes back to the spawner's arena under that arena's
//! lock, which the spawner holds for its next allocation: a third of T3_1M's CPU went to that
//! lock (futex sleeps and wake-ups) and the allocator's paths. Here a freed cell goes on its
//! thread's free list for its size class; a list that reaches `BATCH` cells is set aside whole
//! as the thread's spare batch, and the spare it replaces goes to a global pool in one locked
//! step; a thread whose list and spare are empty takes a batch from there before it calls the
//! allocator. So one lock is taken per `BATCH` cells that change threads, as Go's `gfput`
//! moves Gs to `sched.gFree` 32 at a time, and no free walks a list (cutting a batch off a
//! longer list read `BATCH` links of cells long out of the cache: design/PERFORMANCE-LOG.md,
//! "N5's CPU, counted").
//!
//! Cells larger than the last class, or more aligned than 16 bytes, go straight to the
//! allocator. The pool holds at most [`POOL_BYTES`] per class, the rest is freed; when a thread
//! exits, its spare batch goes to the pool and its shorter list is freed. Under loom every
//! cell goes straight to the allocator.

use std::alloc::Layout;
use std::ptr::NonNull;

/// Size step between classes (a cell wastes less than this to rounding).
const STEP: usize = 32;
/// Alignment of every class: the allocator's own (larger ones cost padding per block).
const ALIGN: usize = 16;
/// Number of classes: cells up to 1 KiB are kept.
const CLASSES: usize = 32;
/// Cells moved between a thread's list and the pool at once (Go moves 32 Gs).
#[cfg_attr(loom, allow(dead_code))]
const BATCH: usize = 32;
/// Bytes of free cells the pool keeps per class.
#[cfg_attr(loom, allow(dead_code))]
const POOL_BYTES: usize = 1 << 20;

/// The class of a cell with `layout`, if it is kept.
fn class_of(layout: Layout) -> Option<usize> {
    (layout.align() <= ALIGN && layout.size() <= STEP * CLASSES)
        .then(|| layout.size().max(1).div_ceil(STEP) - 1)
}

/// The layout every cell of class `c` is allocated with.
fn class_layout(c: usize) -> Layout {
    Layout::from_size_align((c + 1) * STEP, ALIGN).expect("a class layout is valid")
}

/// Allocates memory for a cell with `layout` (never zero-sized: a cell has a header).
pub(crate) fn alloc(layout: Layout) -> NonNull<u8> {
    debug_assert!(layout.size() > 0);
    let layout = match class_of(layout) {
        #[cfg(not(loom))]
        Some(c) => {
            if let Some(p) = lists::take(c) {
                return p;
            }
            class_layout(c)
        }
        #[cfg(loom)]
        Some(c) => class_layout(c),
        None => layout,
    };
    // SAFETY: the layout has a non-zero size.
    let p = unsafe { std::alloc::alloc(layout) };
    NonNull::new(p).unwrap_or_else(|| std::alloc::handle_alloc_error(layout))
}

/// Frees a cell's memory.
///
/// # Safety
///
/// `p` came from [`alloc`] with the same `layout`, and nothing uses it any more.
pub(crate) unsafe fn free(p: NonNull<u8>, layout: Layout) {
    let layout = match class_of(layout) {
        Some(c) => {
            #[cfg(not(loom))]
            // SAFETY: the caller's contract: `p` is a free block of class `c`.
            if unsafe { lists::put(c, p) } {
                return;
            }
            class_layout(c)
        }
        None => layout,
    };
    // SAFETY: `p` was allocated by `alloc` with this layout (a class's, or the cell's own).
    unsafe { std::alloc::dealloc(p.as_ptr(), layout) }
}

#[cfg(not(loom))]
mod lists {
    //! The per-thread free lists and the global pool. A free block's first word links it to
    //! the next block of its list.

    use super::{class_layout, BATCH, CLASSES, POOL_BYTES, STEP};
    use parking_lot::Mutex;
    use std::cell::Cell;
    use std::ptr::{self, NonNull};

    /// A list of free blocks of one class, linked through their first word.
    #[derive(Clone, Copy)]
    struct List {
        head: *mut u8,
        len: usize,
    }

    const EMPTY: List = List {
        head: ptr::null_mut(),
        len: 0,
    };

    /// One class's blocks on one thread: the list frees go to (fewer than `BATCH` blocks
    /// between calls) and a spare batch (empty or exactly `BATCH` blocks).
    #[derive(Clone, Copy)]
    struct Lists {
        current: List,
        spare: List,
    }

    const NONE: Lists = Lists {
        current: EMPTY,
        spare: EMPTY,
    };

    /// One thread's lists; given back to the pool when the thread exits.
    struct Local([Cell<Lists>; CLASSES]);

    impl Drop for Local {
        fn drop(&mut self) {
            for (c, lists) in self.0.iter().enumerate() {
                let Lists { current, spare } = lists.replace(NONE);
                give(c, current);
                give(c, spare);
            }
        }
    }

    thread_local! {
        static LOCAL: Local = const { Local([const { Cell::new(NONE) }; CLASSES]) };
    }

    /// A pool entry: a list of exactly `BATCH` blocks.
    struct Batch(*mut u8);
    // SAFETY: a batch is a list of free blocks that no thread refers to; whoever pops it from
    // the pool owns them.
    unsafe impl Send for Batch {}

    static POOL: [Mutex<Vec<Batch>>; CLASSES] = [const { Mutex::new(Vec::new()) }; CLASSES];

    /// Gives `batch` to the pool, or frees its blocks if the pool is full (or `batch` is not
    /// a whole batch: an exiting thread's partial list).
    fn give(c: usize, batch: List) {
        if batch.len == BATCH {
            let mut pool = POOL[c].lock();
            if pool.len() * BATCH * (c + 1) * STEP < POOL_BYTES {
                pool.push(Batch(batch.head));
                return;
            }
        }
        let mut p = batch.head;
        while !p.is_null() {
            // SAFETY: `p` is a free block of class `c`, allocated with its layout; its link
            // is read before it is freed.
            unsafe {
                let next = *p.cast::<*mut u8>();
                std::alloc::dealloc(p, class_layout(c));
                p = next;
            }
        }
    }

    /// A free block of class `c` from this thread's list, its spare batch or the pool.
    pub(super) fn take(c: usize) -> Option<NonNull<u8>> {
        LOCAL
            .try_with(|local| {
                let cell = &local.0[c];
                let mut lists = cell.get();
                if lists.current.len == 0 {
                    lists.current = if lists.spare.len > 0 {
                        std::mem::replace(&mut lists.spare, EMPTY)
                    } else {
                        let Batch(head) = POOL[c].lock().pop()?;
                        List { head, len: BATCH }
                    };
                }
                let l = &mut lists.current;
                let p = l.head;
                // SAFETY: `p` heads a non-empty list of free blocks: its first word links on.
                l.head = unsafe { *p.cast::<*mut u8>() };
                l.len -= 1;
                cell.set(lists);
                NonNull::new(p)
            })
            .ok()
            .flatten()
    }

    /// Puts a free block of class `c` on this thread's list; false when the thread is
    /// exiting (the caller frees it). A list that reaches `BATCH` blocks becomes the spare
    /// batch, and the spare it replaces goes to the pool.
    ///
    /// # Safety
    ///
    /// `p` is a block of class `c` that nothing uses any more.
    pub(super) unsafe fn put(c: usize, p: NonNull<u8>) -> bool {
        LOCAL
            .try_with(|local| {
                let cell = &local.0[c];
                let mut lists = cell.get();
                let l = &mut lists.current;
                // SAFETY: the block is free and at least 32 bytes long: its first word
                // becomes the link.
                unsafe { *p.as_ptr().cast::<*mut u8>() = l.head };
                l.head = p.as_ptr();
                l.len += 1;
                if l.len < BATCH {
                    cell.set(lists);
                    return;
                }
                let full = std::mem::replace(&mut lists.spare, lists.current);
                lists.current = EMPTY;
                cell.set(lists);
                if full.len > 0 {
                    give(c, full);
                }
            })
            .is_ok()
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn classes_round_up_to_32_bytes_and_stop_at_one_kib() {
        let l = |size, align| Layout::from_size_align(size, align).unwrap();
        assert_eq!(class_of(l(1, 1)), Some(0));
        assert_eq!(class_of(l(32, 8)), Some(0));
        assert_eq!(class_of(l(33, 8)), Some(1));
        assert_eq!(class_of(l(1024, 16)), Some(31));
        assert_eq!(class_of(l(1025, 8)), None);
        assert_eq!(class_of(l(64, 64)), None);
        assert_eq!(class_layout(1), l(64, 16));
    }

    /// Blocks freed on one thread are reused by another through the pool, and every block
    /// handed out is distinct while live.
    #[test]
    fn blocks_freed_on_one_thread_serve_allocations_on_another() {
        // The last class: no task cell of the other tests in this binary is that large.
        let layout = Layout::from_size_align(1000, 8).unwrap();
        let n = 10 * BATCH;
        let blocks: Vec<usize> = (0..n).map(|_| alloc(layout).as_ptr() as usize).collect();
        let distinct: std::collections::HashSet<_> = blocks.iter().collect();
        assert_eq!(distinct.len(), n);
        let freed = blocks.clone();
        std::thread::spawn(move || {
            for p in freed {
                // SAFETY: each block came from `alloc(layout)` above and is unused.
                unsafe { free(NonNull::new(p as *mut u8).unwrap(), layout) };
            }
        })
        .join()
        .unwrap();
        // The other thread kept at most 2 * BATCH and gave the rest to the pool (or freed
        // them at its exit): most of this thread's next allocations are those blocks.
        let again: Vec<usize> = (0..n).map(|_| alloc(layout).as_ptr() as usize).collect();
        let reused = again.iter().filter(|p| distinct.contains(p)).count();
        assert!(reused >= n / 2, "only {reused} of {n} blocks were reused");
        for p in again {
            // SAFETY: as above.
            unsafe { free(NonNull::new(p as *mut u8).unwrap(), layout) };
        }
    }
}
