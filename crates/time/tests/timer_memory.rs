//! The heap memory one channel `Timer` holds, pinned so that it cannot grow back unseen
//! (issue 20: T9_chan's peak RSS against Go's). A counting allocator measures the live bytes
//! and allocations per timer over many timers, each received on once (a receive that waits
//! takes the channel's parked slot and puts the runtime timer in a heap) and reset to an hour.
//!
//! The layout and its history: design/TIMERS.md ("Memory") and design/PERFORMANCE-LOG.md.
//! A file of its own with a single test, so that no other test allocates while it counts.
#![cfg(not(loom))]
#![cfg(target_pointer_width = "64")]

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicIsize, Ordering::Relaxed};
use std::time::Duration;

use gort_sched::{Builder, Runtime};
use gort_time::Timer;

/// Counts live bytes and live allocations.
struct Counting;

static BYTES: AtomicIsize = AtomicIsize::new(0);
static ALLOCS: AtomicIsize = AtomicIsize::new(0);

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

const COUNT: usize = 2_000;
const HOUR: Duration = Duration::from_secs(3600);

/// The channel (its core, lock, one-value buffer, parked slot and hook in one allocation) and
/// the timer's arming core. The runtime timer (88 bytes, gort-timer's) exists only while a
/// receive waits: the one each timer had while its receive waited was freed when it fired.
const ALLOCATIONS_PER_TIMER: f64 = 2.0;
const BYTES_PER_TIMER: f64 = 240.0;

/// Live bytes and allocations per timer while COUNT received-on timers are held.
fn per_timer(rt: &Runtime) -> (f64, f64) {
    rt.block_on(async {
        let mut timers = Vec::with_capacity(COUNT);
        let (bytes, allocs) = (BYTES.load(Relaxed), ALLOCS.load(Relaxed));
        for _ in 0..COUNT {
            let t = Timer::new(Duration::from_micros(1));
            t.c().recv().await.expect("the timer's value");
            t.reset(HOUR);
            timers.push(t);
        }
        let per = |now: isize, before: isize| (now - before) as f64 / COUNT as f64;
        let out = (
            per(BYTES.load(Relaxed), bytes),
            per(ALLOCS.load(Relaxed), allocs),
        );
        drop(timers);
        out
    })
}

#[test]
fn a_received_on_channel_timer_holds_two_allocations_of_240_bytes() {
    let rt = Builder::new().procs(1).build().unwrap();
    // Warm up what the runtime allocates once (its timer heap's first entries).
    per_timer(&rt);
    // The runtime's other threads may allocate or free during a window (a stray buffer is a
    // few bytes and a thousandth of an allocation per timer): a layout change shows in every
    // window, a stray one in one at most.
    let mut last = (0.0, 0.0);
    for _ in 0..3 {
        last = per_timer(&rt);
        eprintln!(
            "per channel Timer: {} allocations, {} bytes",
            last.1, last.0
        );
        if last == (BYTES_PER_TIMER, ALLOCATIONS_PER_TIMER) {
            return;
        }
    }
    let (bytes, allocs) = last;
    assert_eq!(
        allocs, ALLOCATIONS_PER_TIMER,
        "allocations per timer, pinned at {ALLOCATIONS_PER_TIMER}: update design/TIMERS.md \
         and PERFORMANCE-LOG.md if this is meant"
    );
    assert_eq!(
        bytes, BYTES_PER_TIMER,
        "bytes per timer, pinned at {BYTES_PER_TIMER}: update design/TIMERS.md and \
         PERFORMANCE-LOG.md if this is meant"
    );
}
