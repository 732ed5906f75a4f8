//! `--repeat N`: the summary of several runs of the same selection, each with its own seed.
//!
//! One run that passes says little about a flaky failure (the after-func-storm stall of
//! design/STRESS.md failed about one run in two); N runs in a row, with the worst and median
//! lateness of each scenario over them, say how often and by how much.

use crate::report::{fmt_us, SuiteResult};
use std::fmt::Write;

/// What the summary keeps of one run.
#[derive(Debug, Clone, PartialEq)]
struct RunDigest {
    seed: u64,
    violations: u64,
    /// Per scenario: name, lateness p99 and max (µs), warnings raised.
    scenarios: Vec<(String, u64, u64, usize)>,
}

/// Results of the runs so far.
#[derive(Debug, Default)]
pub struct Repeat {
    runs: Vec<RunDigest>,
}

impl Repeat {
    /// Records a finished run.
    pub fn add(&mut self, suite: &SuiteResult) {
        self.runs.push(RunDigest {
            seed: suite.seed,
            violations: suite.violations,
            scenarios: suite
                .scenarios
                .iter()
                .map(|s| {
                    let l = &s.lateness;
                    (s.name.clone(), l.p99_us, l.max_us, s.warnings.len())
                })
                .collect(),
        });
    }

    /// True when no run broke an invariant.
    pub fn passed(&self) -> bool {
        self.runs.iter().all(|r| r.violations == 0)
    }

    /// The summary: one line for the runs, then per scenario the median and worst p99 and
    /// the worst max over the runs, and how many runs warned.
    pub fn render(&self) -> String {
        let n = self.runs.len();
        let failed: Vec<String> = self
            .runs
            .iter()
            .filter(|r| r.violations > 0)
            .map(|r| r.seed.to_string())
            .collect();
        let mut out = String::new();
        let _ = writeln!(
            out,
            "repeat: {n} run(s), {} passed, {} failed{}",
            n - failed.len(),
            failed.len(),
            if failed.is_empty() {
                String::new()
            } else {
                format!(" (seeds {})", failed.join(", "))
            }
        );
        let _ = writeln!(
            out,
            "{:<18} {:>10} {:>10} {:>10} {:>8}",
            "scenario", "p99 median", "p99 worst", "max worst", "warned"
        );
        for name in self.scenario_names() {
            let rows: Vec<&(String, u64, u64, usize)> = self
                .runs
                .iter()
                .flat_map(|r| r.scenarios.iter().filter(|s| s.0 == name))
                .collect();
            let mut p99: Vec<u64> = rows.iter().map(|s| s.1).collect();
            p99.sort_unstable();
            let worst_max = rows.iter().map(|s| s.2).max().unwrap_or(0);
            let warned = rows.iter().filter(|s| s.3 > 0).count();
            let _ = writeln!(
                out,
                "{:<18} {:>10} {:>10} {:>10} {:>8}",
                name,
                fmt_us(p99[p99.len() / 2]),
                fmt_us(*p99.last().unwrap_or(&0)),
                fmt_us(worst_max),
                format!("{warned}/{}", rows.len()),
            );
        }
        out
    }

    /// Scenario names in first-run order.
    fn scenario_names(&self) -> Vec<String> {
        let mut names: Vec<String> = Vec::new();
        for r in &self.runs {
            for s in &r.scenarios {
                if !names.contains(&s.0) {
                    names.push(s.0.clone());
                }
            }
        }
        names
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::tests::sample;

    fn suite(seed: u64, p99s: &[u64], violation: bool) -> SuiteResult {
        let v: &[&str] = if violation { &["broken"] } else { &[] };
        let scenarios = p99s
            .iter()
            .map(|&p| {
                let mut s = sample("after-func-storm", v);
                s.lateness.p99_us = p;
                s.lateness.max_us = p * 2;
                s.warnings.clear();
                s
            })
            .collect();
        SuiteResult::new(seed, 2, 60_000, None, scenarios)
    }

    #[test]
    fn summary_counts_failed_runs_and_reports_median_and_worst() {
        let mut r = Repeat::default();
        r.add(&suite(1, &[1_000], false));
        r.add(&suite(2, &[3_000], true));
        r.add(&suite(3, &[2_000], false));
        assert!(!r.passed());
        let text = r.render();
        assert!(
            text.starts_with("repeat: 3 run(s), 2 passed, 1 failed (seeds 2)"),
            "{text}"
        );
        let row = text
            .lines()
            .find(|l| l.starts_with("after-func-storm"))
            .unwrap();
        let cols: Vec<&str> = row.split_whitespace().collect();
        assert_eq!(cols[1..], ["2.00ms", "3.00ms", "6.00ms", "0/3"], "{row}");
    }

    #[test]
    fn all_clean_runs_pass() {
        let mut r = Repeat::default();
        r.add(&suite(1, &[500], false));
        r.add(&suite(2, &[700], false));
        assert!(r.passed());
        assert!(r
            .render()
            .starts_with("repeat: 2 run(s), 2 passed, 0 failed\n"));
    }
}
