//! Keeps glibc's deferred merge of small freed chunks incremental on every M.
//!
//! glibc puts a freed small chunk (up to 128 bytes: a timer callback's closure, a waker) on
//! its arena's *fast bin* without merging it with its neighbours, and merges the whole bin
//! later, in one pass under the arena lock (`malloc_consolidate`), when a request needs it
//! (a large one, or a small one the arena's top cannot serve). Chunks go back to the arena of
//! the thread that allocated them, whoever frees them. So when an M creates a million
//! `after_func`s and other Ms free them as the callbacks run, and the creating M then stops
//! allocating those sizes, its arena's fast bins grow to a million chunks; the next request
//! that merges them holds the arena lock for as long as a million cache misses take, and
//! every M freeing into that arena (an M dropping a fired timer, sysmon) waits: both Ps
//! stop at once (design/STRESS.md, "The after-func-storm stall"; the measurements are in
//! design/PERFORMANCE-LOG.md under the same name).
//!
//! Go's allocator has no such pause (per-P caches, incremental sweeping). gort uses the C
//! allocator, so each M keeps the merge small instead: at most once per `TICK` of the clock
//! it already reads for its timers, it asks its own arena for a block above the thread
//! cache's sizes and frees it, which merges only what was freed into that arena since the
//! last tick. When nothing is waiting to merge, that is one malloc/free pair per tick.
//! Other allocators (musl, jemalloc, mimalloc) have no deferred merge: the tick is compiled
//! for glibc only. Threads that run no timers (a `block_on` thread, the blocking pool) do not
//! tick; an idle M ticks when it runs due timers without a P, and sysmon when it runs a stuck
//! P's.

use gort_timer::Nanos;

/// How often an M merges its arena's fast bins (ns): short enough that a tick's merge is
/// small at any free rate an M can sustain, long enough to cost nothing measurable.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
const TICK: Nanos = 1_000_000;

/// A request glibc serves from an arena's large bins (above the 1032-byte thread cache and
/// the 1024-byte small bins), which merges the arena's fast bins first.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
const MERGE_REQUEST: usize = 4096;

#[cfg(all(target_os = "linux", target_env = "gnu"))]
std::thread_local! {
    /// When this thread last merged its arena's fast bins.
    static LAST: std::cell::Cell<Nanos> = const { std::cell::Cell::new(0) };
}

/// Called by an M with the clock it read for its timers: merges the fast bins of this
/// thread's arena if `TICK` has passed since the last merge.
#[inline]
pub(crate) fn tick(now: Nanos) {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    LAST.with(|last| {
        if now - last.get() >= TICK {
            last.set(now);
            merge_fast_bins();
        }
    });
    #[cfg(not(all(target_os = "linux", target_env = "gnu")))]
    let _ = now;
}

/// A large request and its release: glibc merges the arena's fast bins to serve it.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
#[cold]
fn merge_fast_bins() {
    // SAFETY: a plain C allocation and its release; the pointer is never dereferenced, and
    // `free(NULL)` is allowed should the allocation fail.
    unsafe {
        let p = libc::malloc(MERGE_REQUEST);
        // The pair must reach the allocator: without this the compiler may elide it.
        libc::free(std::hint::black_box(p));
    }
}
