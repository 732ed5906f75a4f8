//! The scaling table of `--scaling`: every shape's figures at W = 1 and at W = N workers,
//! and each runtime's ratio W=N / W=1 side by side.
//!
//! The ratio is the figure at N workers over the figure at one. For a whole-machine cost per
//! operation (`per_op_ns`, `per_task_ns`, ...) the work is the same at both widths, so 1/N
//! is perfect scaling, 1.0 means the second worker bought nothing and above 1.0 means the
//! workers cost each other more than they add (contention: shared locks, cache lines that
//! move between cores, wake-ups). For latencies and CPU time the ratio says how the figure
//! moves with the workers, not how well it scales. T8 runs W x 1,000 timers and T5_busy and
//! T10 one spinner per worker, so their ratios compare different loads (benches/SHAPES.md,
//! "Scaling").

use std::fmt::Write as _;

use crate::report::{label, num, runtimes_in, unit, Meta, Outcome, Runtime};
use crate::Shape;

/// The ratio `wide / narrow` of two figures, or `-` when either is missing or not positive,
/// or the figure is a correctness count or the hypervisor's steal.
fn ratio(key: &str, narrow: Result<f64, String>, wide: Result<f64, String>) -> String {
    const NOT_SCALED: &[&str] = &["fired", "steal_ms", "fds_left", "timed_out", "dropped"];
    match (narrow, wide) {
        (Ok(n), Ok(w)) if n > 0.0 && w > 0.0 && !NOT_SCALED.contains(&key) => {
            format!("{:.2}", w / n)
        }
        _ => "-".into(),
    }
}

/// Prints, per shape and metric, each runtime's figure at W = 1 and W = `wide` and their
/// ratio (`gort 1`, `gort N`, `gort N/1`, then Tokio's, then each Go's).
pub fn print_table(meta: &Meta, results: &[(&Shape, Vec<Outcome>)], wide: usize) {
    let rts = runtimes_in(results);
    // A runtime's three columns: 9 wide, or as wide as its longest heading (`go1.27 2/1`).
    let width = |rt: Runtime| (rt.name().len() + format!(" {wide}/1").len()).max(9);
    let mut out = String::new();
    let _ = writeln!(out, "{}; scaling W = 1 vs W = {wide}", meta.headline());
    let mut head = format!("{:<24} {:<16} {:<5}", "shape", "metric", "unit");
    for rt in &rts {
        let n = rt.name();
        let w = width(*rt);
        let _ = write!(
            head,
            " {:>w$} {:>w$} {:>w$}",
            format!("{n} 1"),
            format!("{n} {wide}"),
            format!("{n} {wide}/1")
        );
    }
    let _ = writeln!(out, "{head}");
    let mut errors = Vec::new();
    for (shape, outcomes) in results {
        for o in outcomes.iter().filter(|o| o.failed()) {
            let why = o.figures.as_ref().err().map_or("check failed", |e| e);
            let (id, rt) = (shape.id, o.runtime.name());
            errors.push(format!("{id} {rt} W={}: {why}", o.workers));
        }
        for (i, key) in shape.metrics.iter().enumerate() {
            let get = |rt: Runtime, w: usize| {
                outcomes
                    .iter()
                    .find(|o| o.runtime == rt && o.workers == w)
                    .map_or(Err("not run".into()), |o| o.get(key))
            };
            let title = if i == 0 {
                format!("{} {}", shape.id, shape.name)
            } else {
                String::new()
            };
            let mut line = format!("{:<24} {:<16} {:<5}", title, label(key), unit(key));
            for &rt in &rts {
                let (narrow, wide) = (get(rt, 1), get(rt, wide));
                let r = ratio(key, narrow.clone(), wide.clone());
                let w = width(rt);
                let _ = write!(line, " {:>w$} {:>w$} {:>w$}", num(narrow), num(wide), r);
            }
            let _ = writeln!(out, "{line}");
        }
    }
    for e in errors {
        let _ = writeln!(out, "error: {e}");
    }
    print!("{out}");
}
