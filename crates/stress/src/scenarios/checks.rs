//! The checks the runner adds to every scenario: lateness within the scenario's bound (a
//! warning only on a machine others kept busy), memory back near the baseline.

use super::{bound_scale, Ctx};
use crate::report::{HeapReport, LatenessBound, MemoryReport};
use crate::stats::{self, CpuTime, HeapStats, HistSummary, RssSampler};
use std::time::Duration;

/// The scenario's memory: its peak is the sampler's unless the kernel's high-water mark
/// could be reset at the start (then the higher of the two, the mark catching spikes between
/// samples); its end is measured after giving freed memory back (`trim_heap`), with the
/// allocator's books when it keeps them (`heap` is the baseline's).
pub(super) fn memory_report(
    baseline: u64,
    heap: Option<HeapStats>,
    hwm_reset: bool,
    sampler: RssSampler,
) -> MemoryReport {
    let sampled_peak = sampler.finish();
    let peak = if hwm_reset {
        sampled_peak.max(stats::rss().peak)
    } else {
        sampled_peak
    };
    stats::trim_heap();
    let end = stats::rss().current;
    let heap = heap
        .zip(stats::heap_stats())
        .map(|(before, after)| HeapReport {
            in_use_baseline: before.in_use,
            in_use_end: after.in_use,
            free_end: after.free,
        });
    MemoryReport {
        baseline,
        peak,
        end,
        heap,
    }
}

/// The lateness bound that holds for this build: the scenario's release bound, times
/// [`DEBUG_SLOWDOWN`](super::DEBUG_SLOWDOWN) in unoptimised builds.
pub(super) fn build_bound(release: LatenessBound) -> LatenessBound {
    let factor = bound_scale();
    LatenessBound {
        p99_us: release.p99_us * factor,
        max_us: release.max_us * factor,
    }
}

/// Lateness over `bound`, and every timing complaint the scenario recorded itself, is a
/// violation on a quiet machine; when other processes took more than [`CONTENDED`] of the
/// CPU, only a warning (the bounds promise lateness on a machine that is not overloaded).
pub(super) fn check_lateness(ctx: &Ctx, lateness: &HistSummary, bound: LatenessBound, others: f64) {
    ctx.note(format!(
        "other processes used {:.0}% of the machine's CPU",
        others * 100.0
    ));
    let mut over = std::mem::take(&mut *ctx.timing.lock().unwrap_or_else(|e| e.into_inner()));
    if lateness.count > 0 && lateness.p99_us > bound.p99_us {
        over.push(format!(
            "lateness p99 {} µs exceeds the bound {} µs",
            lateness.p99_us, bound.p99_us
        ));
    }
    if lateness.count > 0 && lateness.max_us > bound.max_us {
        over.push(format!(
            "lateness max {} µs exceeds the bound {} µs",
            lateness.max_us, bound.max_us
        ));
    }
    for o in over {
        if others > CONTENDED {
            ctx.warn(format!(
                "{o}, but other processes took {:.0}% of the machine's CPU meanwhile: not counted (rerun on a quiet machine)",
                others * 100.0
            ));
        } else {
            ctx.violation(o);
        }
    }
}

/// Share of the machine's CPU that other processes may take before lateness bounds stop
/// being enforced (they promise lateness on a machine that is not overloaded).
pub(crate) const CONTENDED: f64 = 0.15;

/// Share of the machine's CPU capacity that processes other than this one used: machine busy
/// time minus ours, over wall time times online CPUs.
pub(crate) fn external_load(machine_busy: Duration, ours: CpuTime, wall: Duration) -> f64 {
    let others = machine_busy
        .saturating_sub(ours.user + ours.system)
        .as_secs_f64();
    others / (wall.as_secs_f64() * stats::online_cpus() as f64).max(1e-9)
}

/// Heap bytes a scenario may leave in use once its runtime is dropped: its own books
/// (histograms, timeline, notes) live on until its result is built, and the first scenario
/// starts the process's lazy statics: 1.2 MiB at most measured; a storm's leaked tasks or
/// timers (a hundred bytes and more each) reach 16 MiB by the hundred thousand.
pub(super) const HEAP_KEPT: u64 = 16 << 20;

/// Memory must come back near the baseline.
pub(super) fn check_memory(ctx: &Ctx, m: MemoryReport) {
    for v in memory_violations(&m) {
        ctx.violations.check(false, || v);
    }
}

/// The memory rules, each a message when broken. Where the allocator keeps books (glibc), the
/// heap in use must come back within [`HEAP_KEPT`] of the baseline: exact, whatever the
/// allocator keeps resident. RSS may keep 64 MiB plus a quarter of its growth (allocators keep
/// some of a large peak) plus the heap's free bytes: glibc's `malloc_trim` leaves each worker
/// arena's top chunk resident (up to 64 MiB an arena, up to 8 arenas per core), which made 4 Ps
/// on 2 cores keep 122 MiB of a 192 MiB growth with 1 MiB of it in use (`stats::trim_heap`).
/// Memory outside the heap (thread stacks, mappings) has no such excuse.
pub(super) fn memory_violations(m: &MemoryReport) -> Vec<String> {
    let mut found = Vec::new();
    if let Some(h) = m.heap {
        let kept = h.in_use_end.saturating_sub(h.in_use_baseline);
        if kept > HEAP_KEPT {
            found.push(format!(
                "heap in use stayed {} MiB above baseline after the runtime was dropped \
                 (allowed {} MiB)",
                kept >> 20,
                HEAP_KEPT >> 20
            ));
        }
    }
    let grown = m.peak.saturating_sub(m.baseline);
    let kept = m.end.saturating_sub(m.baseline);
    let free = m.heap.map_or(0, |h| h.free_end);
    let allowed = (64 << 20) + grown / 4 + free;
    if kept > allowed {
        found.push(format!(
            "RSS stayed {} MiB above baseline after the runtime was dropped (allowed {} MiB: \
             64 + a quarter of the growth + {} MiB the allocator holds free)",
            kept >> 20,
            allowed >> 20,
            free >> 20
        ));
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: u64 = 1 << 20;

    fn report(end: u64, heap: Option<(u64, u64, u64)>) -> MemoryReport {
        MemoryReport {
            baseline: 42 * MIB,
            peak: 235 * MIB,
            end,
            heap: heap.map(|(in_use_baseline, in_use_end, free_end)| HeapReport {
                in_use_baseline,
                in_use_end,
                free_end,
            }),
        }
    }

    /// sleep-fanout on 4 Ps (2 cores), seed 1387091270576406606: RSS kept 122 MiB of a
    /// 193 MiB growth while the heap in use came back to ~1 MiB over baseline (a replay
    /// measured 1.3 -> 2.5 MiB in use, 336 MiB held free): worker arenas' top chunks.
    #[test]
    fn resident_free_heap_after_a_trim_is_no_leak() {
        let m = report(
            164 * MIB,
            Some((MIB + MIB / 4, 2 * MIB + MIB / 2, 336 * MIB)),
        );
        assert_eq!(memory_violations(&m), Vec::<String>::new());
    }

    #[test]
    fn heap_left_in_use_is_a_leak_however_little_rss_kept() {
        let m = report(50 * MIB, Some((MIB, MIB + HEAP_KEPT + MIB, 300 * MIB)));
        let v = memory_violations(&m);
        assert_eq!(v.len(), 1, "{v:?}");
        assert!(v[0].starts_with("heap in use stayed 17 MiB"), "{v:?}");
    }

    #[test]
    fn rss_beyond_the_heaps_free_bytes_is_a_leak() {
        // 64 + 193/4 + 20 = 132 MiB allowed; 150 kept.
        let m = report(192 * MIB, Some((MIB, MIB, 20 * MIB)));
        let v = memory_violations(&m);
        assert_eq!(v.len(), 1, "{v:?}");
        assert!(v[0].starts_with("RSS stayed 150 MiB"), "{v:?}");
    }

    #[test]
    fn without_the_allocators_books_rss_alone_is_held() {
        assert_eq!(memory_violations(&report(150 * MIB, None)).len(), 0);
        assert_eq!(memory_violations(&report(164 * MIB, None)).len(), 1);
    }
}
