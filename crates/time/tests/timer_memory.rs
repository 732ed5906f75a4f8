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

use counting::{chunk, ALLOCS, BYTES, CHUNK_BYTES};
use gort_sched::{Builder, Runtime};
use gort_time::Timer;

const COUNT: usize = 2_000;
const HOUR: Duration = Duration::from_secs(3600);

/// The channel (its core, lock, one-value buffer, slot 0's pointer and functions, 80 bytes)
/// and the timer's arming core (24: the lock's byte beside the state, the deadline, the
/// runtime timer's pointer) in one allocation with one pair of `Arc` counts (16): 120 bytes.
/// Slot 0 (56 bytes) and the runtime timer (88, gort-timer's) exist only while a receive
/// waits: the ones each timer had while its receive waited were freed when it fired. Before:
/// two allocations, 152 and 56 bytes (160 and 64 in glibc's chunks).
const ALLOCATIONS_PER_TIMER: isize = 1;
const BYTES_PER_TIMER: isize = 120;
/// The same in a glibc chunk: what the process grows by.
const CHUNK_BYTES_PER_TIMER: isize = 128;
/// The handle itself (in the caller's memory): the receiver, which reaches the core at its
/// channel's address (before: 24, the core's `Arc` beside it).
const HANDLE_BYTES: usize = 16;
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

/// [`runtime_timer_bytes`] in a glibc chunk.
fn runtime_timer_chunk() -> isize {
    chunk(runtime_timer_bytes() as usize) as isize
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

/// What COUNT received-on timers hold: live bytes asked, allocations, bytes in chunks.
#[derive(Clone, Copy, Debug, Default)]
struct Held {
    bytes: isize,
    allocs: isize,
    chunks: isize,
}

impl Held {
    fn now() -> Held {
        Held {
            bytes: BYTES.load(Relaxed),
            allocs: ALLOCS.load(Relaxed),
            chunks: CHUNK_BYTES.load(Relaxed),
        }
    }
}

/// Live bytes and allocations added while COUNT received-on timers are held. The `Vec` of
/// handles is made first, outside the window.
fn held_by_timers(rt: &Runtime) -> Held {
    rt.block_on(async {
        let mut timers = Vec::with_capacity(COUNT);
        let before = Held::now();
        for _ in 0..COUNT {
            let t = Timer::new(Duration::from_micros(1));
            t.c().recv().await.expect("the timer's value");
            t.reset(HOUR);
            timers.push(t);
        }
        let after = Held::now();
        drop(timers);
        Held {
            bytes: after.bytes - before.bytes,
            allocs: after.allocs - before.allocs,
            chunks: after.chunks - before.chunks,
        }
    })
}

/// Whether `held` is `COUNT` timers of the pinned layout, give or take some recycled runtime
/// timers and a few stray bytes.
fn is_the_pinned_layout(held: Held) -> bool {
    let count = COUNT as isize;
    let recycled = held.allocs - ALLOCATIONS_PER_TIMER * count;
    let near = |got: isize, per_timer: isize, per_recycled: isize| {
        (got - per_timer * count - per_recycled * recycled).abs() <= STRAY_BYTES_AT_MOST
    };
    recycled.abs() <= RECYCLED_AT_MOST
        && near(held.bytes, BYTES_PER_TIMER, runtime_timer_bytes())
        && near(held.chunks, CHUNK_BYTES_PER_TIMER, runtime_timer_chunk())
}

#[test]
fn a_received_on_channel_timer_holds_one_allocation_of_120_bytes() {
    // The handle (in the caller's memory; checked here: a second test would allocate while
    // this one counts).
    assert_eq!(std::mem::size_of::<Timer>(), HANDLE_BYTES);
    assert_eq!(std::mem::size_of::<gort_time::Ticker>(), HANDLE_BYTES);
    let rt = Builder::new().procs(1).build().unwrap();
    // Warm up what the runtime allocates once (its timer heap's first entries).
    held_by_timers(&rt);
    // The runtime's other threads may allocate or free during a window (a stray buffer is a
    // few bytes and a thousandth of an allocation per timer): a layout change shows in every
    // window, a stray one in one at most.
    let mut last = Held::default();
    for _ in 0..3 {
        last = held_by_timers(&rt);
        let per = |n: isize| n as f64 / COUNT as f64;
        eprintln!(
            "per channel Timer: {} allocations, {} bytes, {} in glibc chunks",
            per(last.allocs),
            per(last.bytes),
            per(last.chunks)
        );
        if is_the_pinned_layout(last) {
            return;
        }
    }
    let Held {
        bytes,
        allocs,
        chunks,
    } = last;
    let count = COUNT as isize;
    assert!(
        (allocs - ALLOCATIONS_PER_TIMER * count).abs() <= RECYCLED_AT_MOST,
        "{allocs} allocations for {COUNT} timers, pinned at {ALLOCATIONS_PER_TIMER} per timer: \
         update design/TIMERS.md and PERFORMANCE-LOG.md if this is meant"
    );
    panic!(
        "{bytes} bytes ({chunks} in chunks) in {allocs} allocations for {COUNT} timers: \
         {BYTES_PER_TIMER} bytes per timer ({CHUNK_BYTES_PER_TIMER} in chunks), pinned, and \
         some recycled runtime timers of {} bytes do not explain it: update design/TIMERS.md \
         and PERFORMANCE-LOG.md if this is meant",
        runtime_timer_bytes()
    );
}
