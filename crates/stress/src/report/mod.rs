//! What a run found, and its three renderings: the terminal table, JSON and an HTML page.

pub mod host;
pub mod html;
pub mod json;
pub mod page_parts;
pub mod table;

use crate::stats::{HistSummary, TimelineBin};
use serde::Serialize;
use std::collections::BTreeMap;

/// Timer operations a scenario performed or observed.
#[derive(Debug, Clone, Copy, Default, Serialize, PartialEq, Eq)]
pub struct TimerCounts {
    /// Timers, tickers, sleeps and callbacks armed (first arming only).
    pub started: u64,
    /// Expiries observed (values received, callbacks run, sleeps woken).
    pub fired: u64,
    /// Stop calls.
    pub stopped: u64,
    /// Reset calls.
    pub reset: u64,
}

/// The lateness bound a scenario promises, in microseconds.
#[derive(Debug, Clone, Copy, Serialize, PartialEq, Eq)]
pub struct LatenessBound {
    /// Bound on the 99th percentile.
    pub p99_us: u64,
    /// Bound on the maximum.
    pub max_us: u64,
}

/// Memory of the process around one scenario, in bytes.
#[derive(Debug, Clone, Copy, Default, Serialize, PartialEq, Eq)]
pub struct MemoryReport {
    /// RSS before the scenario built its runtime.
    pub baseline: u64,
    /// Peak RSS while it ran.
    pub peak: u64,
    /// RSS after its runtime was dropped and the heap trimmed.
    pub end: u64,
    /// The allocator's books, where it keeps them (glibc).
    pub heap: Option<HeapReport>,
}

/// The allocator's books around one scenario (glibc's `mallinfo2`), in bytes.
#[derive(Debug, Clone, Copy, Default, Serialize, PartialEq, Eq)]
pub struct HeapReport {
    /// Heap bytes in use before the scenario built its runtime.
    pub in_use_baseline: u64,
    /// Heap bytes in use after its runtime was dropped.
    pub in_use_end: u64,
    /// Bytes the allocator held free after the trim, of which any part may be resident.
    pub free_end: u64,
}

/// Everything one scenario measured and found.
#[derive(Debug, Clone, Default, Serialize)]
pub struct ScenarioResult {
    /// Scenario name (`timer-storm`, ...).
    pub name: String,
    /// Wall-clock time, milliseconds.
    pub wall_ms: f64,
    /// Scenario-specific operations (timer calls, messages, task spawns ...).
    pub ops: u64,
    /// Timer operation counts.
    pub timers: TimerCounts,
    /// Lateness of expiries (observed minus due), microseconds.
    pub lateness: HistSummary,
    /// The bound checked against `lateness`.
    pub bound: Option<LatenessBound>,
    /// Lateness over time.
    pub timeline: Vec<TimelineBin>,
    /// Memory around the scenario.
    pub memory: MemoryReport,
    /// User CPU time, milliseconds.
    pub cpu_user_ms: f64,
    /// System CPU time, milliseconds.
    pub cpu_system_ms: f64,
    /// Share of the machine's CPU (0..1) that other processes used meanwhile; above
    /// `CONTENDED` lateness bounds only warn.
    pub others_cpu: f64,
    /// The runtime's metrics at the end (before drain checks), by field name.
    pub metrics: BTreeMap<String, u64>,
    /// Number of invariant violations.
    pub violation_count: u64,
    /// The first violation messages.
    pub violations: Vec<String>,
    /// Things worth a look that are not invariant breaks.
    pub warnings: Vec<String>,
    /// Parameters and extra figures (`key=value`).
    pub notes: Vec<String>,
}

/// A whole run.
#[derive(Debug, Clone, Serialize)]
pub struct SuiteResult {
    /// The seed that replays the run's random choices.
    pub seed: u64,
    /// Ps per runtime.
    pub procs: usize,
    /// Requested total duration, milliseconds.
    pub duration_ms: u64,
    /// Fault injected (test-only), if any.
    pub fault: Option<String>,
    /// Per-scenario results in run order.
    pub scenarios: Vec<ScenarioResult>,
    /// Sum of all violations.
    pub violations: u64,
    /// True when no invariant broke.
    pub passed: bool,
    /// The machine and build the run ran on (set by the caller after the run).
    pub host: Option<host::HostInfo>,
}

impl SuiteResult {
    /// Wraps finished scenarios, totalling the violations.
    pub fn new(
        seed: u64,
        procs: usize,
        duration_ms: u64,
        fault: Option<String>,
        scenarios: Vec<ScenarioResult>,
    ) -> Self {
        let violations = scenarios.iter().map(|s| s.violation_count).sum();
        SuiteResult {
            seed,
            procs,
            duration_ms,
            fault,
            scenarios,
            violations,
            passed: violations == 0,
            host: None,
        }
    }
}

/// `1.23 ms`-style rendering of microseconds.
pub fn fmt_us(us: u64) -> String {
    match us {
        0..=999 => format!("{us}µs"),
        1_000..=999_999 => format!("{:.2}ms", us as f64 / 1e3),
        _ => format!("{:.2}s", us as f64 / 1e6),
    }
}

/// `12.3 MiB`-style rendering of bytes.
pub fn fmt_bytes(b: u64) -> String {
    const UNITS: [&str; 4] = ["B", "KiB", "MiB", "GiB"];
    let mut v = b as f64;
    let mut u = 0;
    while v >= 1024.0 && u + 1 < UNITS.len() {
        v /= 1024.0;
        u += 1;
    }
    if u == 0 {
        format!("{b}B")
    } else {
        format!("{v:.1}{}", UNITS[u])
    }
}

/// `1.2M`-style rendering of a count.
pub fn fmt_count(n: u64) -> String {
    match n {
        0..=9_999 => n.to_string(),
        10_000..=999_999 => format!("{:.1}k", n as f64 / 1e3),
        _ => format!("{:.2}M", n as f64 / 1e6),
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A small but complete result, for the renderers' tests.
    pub(crate) fn sample(name: &str, violations: &[&str]) -> ScenarioResult {
        let h = crate::stats::Histogram::default();
        let t = crate::stats::Timeline::new(std::time::Duration::from_millis(100));
        for v in [10, 200, 3_000, 45_000] {
            h.record(v);
            t.record(v * 1_000, v);
        }
        ScenarioResult {
            name: name.into(),
            wall_ms: 1234.5,
            ops: 2_500_000,
            timers: TimerCounts {
                started: 1_000_000,
                fired: 900_000,
                stopped: 120_000,
                reset: 50_000,
            },
            lateness: h.summary(),
            bound: Some(LatenessBound {
                p99_us: 50_000,
                max_us: 1_000_000,
            }),
            timeline: t.snapshot(),
            memory: MemoryReport {
                baseline: 10 << 20,
                peak: 300 << 20,
                end: 12 << 20,
                heap: Some(HeapReport {
                    in_use_baseline: 1 << 20,
                    in_use_end: 2 << 20,
                    free_end: 40 << 20,
                }),
            },
            cpu_user_ms: 1500.0,
            cpu_system_ms: 100.0,
            others_cpu: 0.05,
            metrics: [("timers_pending".to_string(), 0)].into_iter().collect(),
            violation_count: violations.len() as u64,
            violations: violations.iter().map(|s| s.to_string()).collect(),
            warnings: vec!["a warning <b>".into()],
            notes: vec!["timers=1000000".into()],
        }
    }

    #[test]
    fn formats() {
        assert_eq!(fmt_us(999), "999µs");
        assert_eq!(fmt_us(1_500), "1.50ms");
        assert_eq!(fmt_us(2_500_000), "2.50s");
        assert_eq!(fmt_bytes(512), "512B");
        assert_eq!(fmt_bytes(3 << 20), "3.0MiB");
        assert_eq!(fmt_count(12_345), "12.3k");
        assert_eq!(fmt_count(2_000_000), "2.00M");
    }

    #[test]
    fn suite_totals_violations() {
        let s = SuiteResult::new(
            1,
            2,
            60_000,
            None,
            vec![sample("a", &[]), sample("b", &["x", "y"])],
        );
        assert_eq!(s.violations, 2);
        assert!(!s.passed);
        assert!(SuiteResult::new(1, 2, 1, None, vec![sample("a", &[])]).passed);
    }
}
