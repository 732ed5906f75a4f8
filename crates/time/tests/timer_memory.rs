//! The heap memory one channel `Timer` holds, pinned so that it cannot grow back unseen
//! (issue 20: T9_chan's peak RSS against Go's). A counting allocator measures the live bytes
//! and allocations per timer over many timers, each received on once (a receive that waits
//! takes the channel's parked slot and puts the runtime timer in a heap) and reset to an hour.
//!
//! The layout and its history: design/TIMERS.md ("Memory") and design/PERFORMANCE-LOG.md.
//! A file of its own with a single test, so that no other test allocates while it counts.
#![cfg(not(loom))]
#![cfg(target_pointer_width = "64")]

#[path = "support/counting.rs"]
mod counting;

use std::alloc::Layout;
use std::sync::atomic::Ordering::Relaxed;
use std::time::Duration;

use counting::{ALLOCS, BYTES};
use gort_sched::{Builder, Runtime};
use gort_time::Timer;

const COUNT: usize = 2_000;
const HOUR: Duration = Duration::from_secs(3600);

/// The channel (its core, lock, one-value buffer, parked slot and hook in one allocation) and
/// the timer's arming core. The runtime timer (88 bytes, gort-timer's) exists only while a
/// receive waits: the one each timer had while its receive waited was freed when it fired.
const ALLOCATIONS_PER_TIMER: isize = 2;
const BYTES_PER_TIMER: isize = 240;
/// The allocation of a runtime timer: gort-timer's `Timer` in its `Arc`. A runtime timer let
/// go is kept for reuse on the list of the thread that let it go, up to 256 a thread
/// (crates/timer/src/recycle.rs), and taken from the list of the thread that makes one: when
/// a runtime timer is made on one thread and let go on another (a heap run by sysmon or a
/// second M, as on a loaded machine), a window ends with some more or fewer of them live.
fn runtime_timer_bytes() -> isize {
    let counts = Layout::new::<[usize; 2]>();
    let (inner, _) = counts
        .extend(Layout::new::<gort_timer::Timer>())
        .expect("a small layout");
    inner.pad_to_align().size() as isize
}

/// Runtime timers a window may gain or lose that way: the lists of two threads (beside six
/// CPU hogs on two cores, up to 170 were seen; on a quiet machine none). A layout change
/// moves the count by 2,000 allocations or the bytes by an amount that whole runtime timers
/// do not explain.
const RECYCLED_AT_MOST: isize = 2 * 256;

/// Bytes a window may gain or lose beyond whole runtime timers: a few small buffers the
/// runtime's other threads allocate or free meanwhile (-3 allocations and -152 bytes were
/// seen in 2 of 12 runs on an idle machine). A layout change moves the bytes by at least 8
/// a timer, 16,000 a window: far more.
const STRAY_BYTES_AT_MOST: isize = 2_048;

/// Live bytes and allocations added while COUNT received-on timers are held.
fn held_by_timers(rt: &Runtime) -> (isize, isize) {
    rt.block_on(async {
        let mut timers = Vec::with_capacity(COUNT);
        let (bytes, allocs) = (BYTES.load(Relaxed), ALLOCS.load(Relaxed));
        for _ in 0..COUNT {
            let t = Timer::new(Duration::from_micros(1));
            t.c().recv().await.expect("the timer's value");
            t.reset(HOUR);
            timers.push(t);
        }
        let out = (BYTES.load(Relaxed) - bytes, ALLOCS.load(Relaxed) - allocs);
        drop(timers);
        out
    })
}

/// Whether `held` (bytes, allocations) is `COUNT` timers of the pinned layout, give or take
/// some recycled runtime timers and a few stray bytes.
fn is_the_pinned_layout(held: (isize, isize)) -> bool {
    let count = COUNT as isize;
    let (bytes, allocs) = held;
    let recycled = allocs - ALLOCATIONS_PER_TIMER * count;
    recycled.abs() <= RECYCLED_AT_MOST
        && (bytes - BYTES_PER_TIMER * count - runtime_timer_bytes() * recycled).abs()
            <= STRAY_BYTES_AT_MOST
}

#[test]
fn a_received_on_channel_timer_holds_two_allocations_of_240_bytes() {
    let rt = Builder::new().procs(1).build().unwrap();
    // Warm up what the runtime allocates once (its timer heap's first entries).
    held_by_timers(&rt);
    // The runtime's other threads may allocate or free during a window (a stray buffer is a
    // few bytes and a thousandth of an allocation per timer): a layout change shows in every
    // window, a stray one in one at most.
    let mut last = (0, 0);
    for _ in 0..3 {
        last = held_by_timers(&rt);
        let per = |n: isize| n as f64 / COUNT as f64;
        eprintln!(
            "per channel Timer: {} allocations, {} bytes",
            per(last.1),
            per(last.0)
        );
        if is_the_pinned_layout(last) {
            return;
        }
    }
    let (bytes, allocs) = last;
    let count = COUNT as isize;
    assert!(
        (allocs - ALLOCATIONS_PER_TIMER * count).abs() <= RECYCLED_AT_MOST,
        "{allocs} allocations for {COUNT} timers, pinned at {ALLOCATIONS_PER_TIMER} per timer: \
         update design/TIMERS.md and PERFORMANCE-LOG.md if this is meant"
    );
    panic!(
        "{bytes} bytes in {allocs} allocations for {COUNT} timers: {BYTES_PER_TIMER} bytes \
         per timer, pinned, and some recycled runtime timers of {} bytes do not explain it: \
         update design/TIMERS.md and PERFORMANCE-LOG.md if this is meant",
        runtime_timer_bytes()
    );
}
