//! The checks the runner adds to every scenario: lateness within the scenario's bound (a
//! warning only on a machine others kept busy), memory back near the baseline.

use super::{bound_scale, Ctx};
use crate::report::{LatenessBound, MemoryReport};
use crate::stats::{self, CpuTime, HistSummary, RssSampler};
use std::time::Duration;

/// The scenario's memory: its peak is the sampler's unless the kernel's high-water mark
/// could be reset at the start (then the higher of the two, the mark catching spikes between
/// samples); its end is measured after giving freed memory back (`trim_heap`).
pub(super) fn memory_report(baseline: u64, hwm_reset: bool, sampler: RssSampler) -> MemoryReport {
    let sampled_peak = sampler.finish();
    let peak = if hwm_reset {
        sampled_peak.max(stats::rss().peak)
    } else {
        sampled_peak
    };
    stats::trim_heap();
    let end = stats::rss().current;
    MemoryReport {
        baseline,
        peak,
        end,
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
pub(super) const CONTENDED: f64 = 0.15;

/// Share of the machine's CPU capacity that processes other than this one used: machine busy
/// time minus ours, over wall time times online CPUs.
pub(super) fn external_load(machine_busy: Duration, ours: CpuTime, wall: Duration) -> f64 {
    let others = machine_busy
        .saturating_sub(ours.user + ours.system)
        .as_secs_f64();
    others / (wall.as_secs_f64() * stats::online_cpus() as f64).max(1e-9)
}

/// Memory must come back near the baseline: what the scenario leaves resident may not exceed
/// 64 MiB plus a quarter of what it grew to (allocators keep some of a large peak).
pub(super) fn check_memory(ctx: &Ctx, m: MemoryReport) {
    let grown = m.peak.saturating_sub(m.baseline);
    let kept = m.end.saturating_sub(m.baseline);
    let allowed = (64 << 20) + grown / 4;
    ctx.violations.check(kept <= allowed, || {
        format!(
            "RSS stayed {} MiB above baseline after the runtime was dropped (allowed {} MiB)",
            kept >> 20,
            allowed >> 20
        )
    });
}
