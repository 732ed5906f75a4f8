//! The end-of-run table: one row per scenario, then each scenario's violations and warnings.

use super::{fmt_bytes, fmt_count, fmt_us, ScenarioResult, SuiteResult};
use std::fmt::Write as _;

const HEADERS: [&str; 14] = [
    "scenario",
    "ops",
    "started",
    "fired",
    "stopped",
    "reset",
    "p50",
    "p99",
    "max",
    "bound p99",
    "peak RSS",
    "end-base",
    "CPU",
    "violations",
];

/// Renders the results table (plain text, aligned columns).
pub fn render(suite: &SuiteResult) -> String {
    let rows: Vec<[String; 14]> = suite.scenarios.iter().map(row).collect();
    let mut out = aligned_table(&rows);
    write_findings(&mut out, &suite.scenarios);
    out.push_str(&verdict(suite));
    out.push('\n');
    out
}

/// One scenario's cells, in the order of [`HEADERS`].
fn row(s: &ScenarioResult) -> [String; 14] {
    let l = &s.lateness;
    [
        s.name.clone(),
        fmt_count(s.ops),
        fmt_count(s.timers.started),
        fmt_count(s.timers.fired),
        fmt_count(s.timers.stopped),
        fmt_count(s.timers.reset),
        fmt_us(l.p50_us),
        fmt_us(l.p99_us),
        fmt_us(l.max_us),
        s.bound.map_or("-".into(), |b| fmt_us(b.p99_us)),
        fmt_bytes(s.memory.peak),
        signed_bytes(s.memory.end as i64 - s.memory.baseline as i64),
        format!("{:.2}s", (s.cpu_user_ms + s.cpu_system_ms) / 1e3),
        s.violation_count.to_string(),
    ]
}

/// The header, a rule, and the rows, each column as wide as its widest cell: the first
/// column left-aligned, the numbers right-aligned.
fn aligned_table(rows: &[[String; 14]]) -> String {
    let mut widths = HEADERS.map(|h| h.chars().count());
    for r in rows {
        for (w, c) in widths.iter_mut().zip(r) {
            *w = (*w).max(c.chars().count());
        }
    }
    let mut out = String::new();
    write_line(&mut out, &HEADERS.map(String::from), &widths);
    let total: usize = widths.iter().sum::<usize>() + 2 * (widths.len() - 1);
    out.push_str(&"-".repeat(total));
    out.push('\n');
    for r in rows {
        write_line(&mut out, r, &widths);
    }
    out
}

/// One line of [`aligned_table`].
fn write_line(out: &mut String, cells: &[String], widths: &[usize]) {
    for (i, (c, w)) in cells.iter().zip(widths).enumerate() {
        let pad = w - c.chars().count();
        if i == 0 {
            let _ = write!(out, "{c}{}", " ".repeat(pad));
        } else {
            let _ = write!(out, "  {}{c}", " ".repeat(pad));
        }
    }
    out.push('\n');
}

/// Every scenario's violations, then its warnings, one a line.
fn write_findings(out: &mut String, scenarios: &[ScenarioResult]) {
    for s in scenarios {
        for v in &s.violations {
            let _ = writeln!(out, "violation [{}]: {v}", s.name);
        }
        for w in &s.warnings {
            let _ = writeln!(out, "warning   [{}]: {w}", s.name);
        }
    }
}

/// The last line: PASS, or FAIL with the seed that replays the run.
fn verdict(suite: &SuiteResult) -> String {
    if suite.passed {
        format!("PASS: no invariant violations (seed {})", suite.seed)
    } else {
        format!(
            "FAIL: {} invariant violation(s); replay with --seed {}",
            suite.violations, suite.seed
        )
    }
}

fn signed_bytes(d: i64) -> String {
    if d < 0 {
        format!("-{}", fmt_bytes(d.unsigned_abs()))
    } else {
        format!("+{}", fmt_bytes(d as u64))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::tests::sample;

    #[test]
    fn table_has_a_row_per_scenario_and_a_verdict() {
        let suite = SuiteResult::new(
            77,
            2,
            1000,
            None,
            vec![sample("timer-storm", &[]), sample("faults", &["lost fire"])],
        );
        let t = render(&suite);
        let lines: Vec<&str> = t.lines().collect();
        assert!(lines[0].starts_with("scenario"));
        assert!(lines[2].starts_with("timer-storm") && lines[3].starts_with("faults"));
        // Columns line up: every row is as wide as the header.
        let width = lines[0].chars().count();
        assert!(lines[2..4].iter().all(|l| l.chars().count() == width));
        assert!(t.contains("violation [faults]: lost fire"));
        assert!(t.contains("2.50M") && t.contains("45.00ms") && t.contains("+2.0MiB"));
        assert!(t.trim_end().ends_with("replay with --seed 77"));
    }

    #[test]
    fn passing_suite_says_pass() {
        let t = render(&SuiteResult::new(5, 1, 1, None, vec![sample("x", &[])]));
        assert!(t.contains("PASS"));
    }
}
