//! The heap memory of an `after_func`, pinned (issue 20: T9's peak RSS against Tokio's): one
//! allocation, the runtime timer with the closure inline (gort-timer's `TimerCell`), none left
//! once 100,000 of them fired and their handles were dropped, and none made by a firing. A counting allocator
//! measures live allocations. The layout and its history: design/TIMERS.md ("Memory") and
//! design/PERFORMANCE-LOG.md. A file of its own, so that no other test allocates while it
//! counts.
#![cfg(not(loom))]
#![cfg(target_pointer_width = "64")]

#[path = "support/counting.rs"]
mod counting;

use std::sync::atomic::{AtomicUsize, Ordering::Relaxed, Ordering::SeqCst};
use std::sync::Arc;
use std::time::{Duration, Instant};

use counting::{ALLOCS, BYTES};
use gort_sched::{Builder, Runtime};
use gort_time::after_func;

const COUNT: usize = 2_000;
const HOUR: Duration = Duration::from_secs(3600);
/// Far beyond anything these tests need on a loaded machine: only a hang or a leak reaches it.
const PATIENCE: Duration = Duration::from_secs(30);
/// Allocations the runtime's other threads may make or free during a window (a stray buffer),
/// far below one per timer.
const STRAY: isize = 64;

/// The cell of an `after_func` whose closure captures one pointer: the runtime timer (64),
/// the vtable pointer (8), the two counts in one word (8) and the closure (8); a 96-byte
/// glibc chunk (104 and 112 with a 72-byte timer and a word per count).
const CELL_BYTES: isize = 88;

/// Live allocations and bytes added while COUNT pending after_funcs are held (each closure
/// capturing one `Arc`), in a fresh runtime with one P (so that no stopped timer of an
/// earlier window is freed in this one). Growing the heap's array moves bytes, never the
/// count of allocations.
fn held_by_after_funcs() -> (isize, isize) {
    let rt = Builder::new().procs(1).build().unwrap();
    rt.block_on(async {
        let shared = Arc::new(AtomicUsize::new(0));
        let mut handles = Vec::with_capacity(COUNT);
        let (allocs, bytes) = (ALLOCS.load(Relaxed), BYTES.load(Relaxed));
        for _ in 0..COUNT {
            let s = shared.clone();
            handles.push(after_func(HOUR, move || {
                s.fetch_add(1, Relaxed);
            }));
        }
        (ALLOCS.load(Relaxed) - allocs, BYTES.load(Relaxed) - bytes)
    })
}

#[test]
fn an_after_func_is_one_allocation_none_is_left_after_100k_and_firing_allocates_none() {
    // Warm up what a thread allocates once.
    held_by_after_funcs();
    let mut last = (0, 0);
    for _ in 0..3 {
        last = held_by_after_funcs();
        eprintln!(
            "per after_func: {} allocations, {} bytes",
            last.0 as f64 / COUNT as f64,
            last.1 as f64 / COUNT as f64
        );
        if (last.0 - COUNT as isize).abs() <= STRAY {
            break;
        }
    }
    let (allocs, bytes) = last;
    assert!(
        (allocs - COUNT as isize).abs() <= STRAY,
        "{allocs} allocations for {COUNT} after_funcs, pinned at one each: update \
         design/TIMERS.md and PERFORMANCE-LOG.md if this is meant"
    );
    // Beside the cells: the heap's array of 16-byte entries, grown to a power of two.
    let cells = CELL_BYTES * COUNT as isize;
    assert!(
        bytes >= cells && bytes <= cells + 4 * 16 * COUNT as isize,
        "{bytes} bytes for {COUNT} after_funcs, pinned at {CELL_BYTES} each and the heap's entries"
    );
    no_leak_over_100k(&Builder::new().procs(1).build().unwrap());
    a_firing_allocates_nothing();
}

/// Firings queue the cells themselves: with the handles held (so no cell is freed), the
/// live allocations do not move while 200 after_funcs fire and their callbacks run.
fn a_firing_allocates_nothing() {
    const N: usize = 200;
    let rt = Builder::new().procs(1).build().unwrap();
    let ran = Arc::new(AtomicUsize::new(0));
    let arm = |d: Duration| {
        let handles: Vec<_> = (0..N)
            .map(|_| {
                let r = ran.clone();
                after_func(d, move || {
                    r.fetch_add(1, SeqCst);
                })
            })
            .collect();
        handles
    };
    // Warm-up: the heap's array, the run queue, the threads' first allocations.
    let warm = rt.block_on(async { arm(Duration::from_millis(1)) });
    wait_for(&ran, N);
    let handles = rt.block_on(async { arm(Duration::from_millis(20)) });
    let allocs = ALLOCS.load(Relaxed);
    wait_for(&ran, 2 * N);
    let moved = ALLOCS.load(Relaxed) - allocs;
    assert!(
        moved.abs() <= STRAY,
        "{moved} allocations while {N} after_funcs fired"
    );
    drop((warm, handles));
}

fn wait_for(n: &AtomicUsize, want: usize) {
    let start = Instant::now();
    while n.load(SeqCst) < want {
        assert!(start.elapsed() < PATIENCE, "after_funcs did not fire");
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// 100,000 after_funcs, due at once, fired and their handles dropped: every closure is
/// dropped once and the live allocations come back to where they were.
fn no_leak_over_100k(rt: &Runtime) {
    const N: usize = 100_000;
    let ran = Arc::new(AtomicUsize::new(0));
    let dropped = Arc::new(AtomicUsize::new(0));
    let round = |ran: &Arc<AtomicUsize>, dropped: &Arc<AtomicUsize>| {
        let base = dropped.load(SeqCst);
        rt.block_on(async {
            for _ in 0..N {
                let r = ran.clone();
                let canary = Canary(dropped.clone());
                drop(after_func(Duration::from_micros(1), move || {
                    let _ = &canary;
                    r.fetch_add(1, Relaxed);
                }));
            }
        });
        let start = Instant::now();
        while dropped.load(SeqCst) < base + N {
            assert!(start.elapsed() < PATIENCE, "closures still alive");
            std::thread::sleep(Duration::from_millis(1));
        }
    };
    round(&ran, &dropped); // warm-up: the heap's array at its high-water mark
    let allocs = ALLOCS.load(Relaxed);
    round(&ran, &dropped);
    assert_eq!(ran.load(SeqCst), 2 * N);
    assert_eq!(dropped.load(SeqCst), 2 * N, "each closure dropped once");
    let start = Instant::now();
    loop {
        let left = ALLOCS.load(Relaxed) - allocs;
        if left.abs() <= STRAY {
            return;
        }
        assert!(
            start.elapsed() < PATIENCE,
            "{left} allocations left after {N} after_funcs fired and were dropped"
        );
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// Counts its drops.
struct Canary(Arc<AtomicUsize>);

impl Drop for Canary {
    fn drop(&mut self) {
        self.0.fetch_add(1, SeqCst);
    }
}
