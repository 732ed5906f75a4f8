//! An M keeps glibc's deferred merge of small freed chunks incremental (`src/arena.rs`).
//!
//! Guards the after-func-storm stall (issue 17, item 1; design/STRESS.md): chunks an M
//! allocated and other threads freed sat unmerged in its arena's fast bins until one request
//! merged them all under the arena lock, ~200 ms for a million, while every thread freeing
//! into that arena waited. Here an M allocates 200k small chunks, another thread frees them,
//! and the M, scheduling with a timer pending, must merge them within a few of its rounds.
//! Without the per-M tick nothing in this program merges them, and the test times out.
//!
//! glibc only; alone in its test binary so that no other test's allocations merge the bins.

#![cfg(all(target_os = "linux", target_env = "gnu"))]

use gort_sched::timer_api::modtimer;
use gort_sched::{spawn, yield_now, Builder};
use gort_timer::{deadline_after, nanotime, Timer};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Bytes in unmerged fast-bin chunks over every arena of the process.
fn fast_bin_bytes() -> usize {
    // SAFETY: `mallinfo2` only reads the allocator's statistics (it merges nothing).
    unsafe { libc::mallinfo2() }.fsmblks
}

#[test]
fn an_m_merges_chunks_other_threads_freed_into_its_arena() {
    let rt = Builder::new().procs(1).build().unwrap();
    let outcome = rt.block_on(async {
        spawn(async {
            // A periodic timer on this P: the M runs its timers in every scheduling round.
            let tick = Timer::new();
            tick.set_fire(Arc::new(|_| {}));
            let first = deadline_after(nanotime(), Duration::from_millis(1));
            modtimer(&tick, first, 1_000_000, None);
            // 200k chunks of 48 bytes (a fast-bin size) from this M's arena, freed by
            // another thread: they go back to this arena's fast bins, unmerged.
            let chunks: Vec<Box<[u64; 5]>> = (0..200_000u64).map(|i| Box::new([i; 5])).collect();
            std::thread::spawn(move || drop(chunks)).join().unwrap();
            let peak = fast_bin_bytes();
            let start = Instant::now();
            while fast_bin_bytes() > peak / 10 && start.elapsed() < Duration::from_secs(5) {
                yield_now().await; // a scheduling round of this M, which holds the only P
            }
            gort_timer::del(&tick);
            (peak, fast_bin_bytes())
        })
        .await
        .unwrap()
    });
    let (peak, after) = outcome;
    assert!(
        peak >= 5_000_000,
        "the frees did not reach the fast bins: {peak} bytes"
    );
    assert!(
        after <= peak / 10,
        "the M never merged its arena's fast bins: {after} of {peak} bytes still unmerged"
    );
}
