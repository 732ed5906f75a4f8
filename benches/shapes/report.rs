//! Output of a run: the machine/versions headline, the gort vs Tokio (vs Go) table and the
//! JSON lines read by `benches/run.sh`.
//!
//! JSON lines: first `{"meta":true,...}`, then per shape, metric and runtime
//! `{"runtime":"gort","workers":2,"shape":"T1","name":"start_stop","metric":"per_op_ns","value":12.3}`;
//! `value` is `null` (with an `"error"`) when that runtime's child failed.

use std::fmt::Write as _;
use std::str::FromStr;

use crate::common::Params;
use crate::Shape;

/// A runtime compared in this binary.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Runtime {
    /// This project.
    Gort,
    /// Tokio multi-thread runtime.
    Tokio,
    /// Go 1.19's runtime: the program of `benches/go`, run with `--go PATH`.
    Go,
}

impl Runtime {
    /// Name used on the command line and in JSON.
    pub fn name(self) -> &'static str {
        match self {
            Runtime::Gort => "gort",
            Runtime::Tokio => "tokio",
            Runtime::Go => "go",
        }
    }
}

impl FromStr for Runtime {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "gort" => Ok(Runtime::Gort),
            "tokio" => Ok(Runtime::Tokio),
            "go" => Ok(Runtime::Go),
            _ => Err(format!("unknown runtime {s}")),
        }
    }
}

/// What one child process produced.
#[derive(Debug)]
pub struct Outcome {
    /// Which runtime ran.
    pub runtime: Runtime,
    /// With how many workers (W).
    pub workers: usize,
    /// Figures by key, or why there are none.
    pub figures: Result<Vec<(String, f64)>, String>,
    /// Seconds the child took, start-up included.
    pub secs: f64,
}

impl Outcome {
    /// Whether the child failed or one of its correctness checks did.
    pub fn failed(&self) -> bool {
        match &self.figures {
            Ok(f) => f.iter().any(|(k, _)| k == "check_failed"),
            Err(_) => true,
        }
    }

    /// The figure `key`, or why there is none.
    pub fn get(&self, key: &str) -> Result<f64, String> {
        match &self.figures {
            Ok(f) => f
                .iter()
                .find(|(k, _)| k == key)
                .map(|&(_, v)| v)
                .ok_or_else(|| format!("no figure {key}")),
            Err(e) => Err(e.clone()),
        }
    }
}

/// Combines repeated runs: each figure is the median over the runs, the time their sum;
/// the first failed run (crash, hang or failed check) stands for all.
pub fn median_of(runs: Vec<Outcome>) -> Outcome {
    let secs = runs.iter().map(|o| o.secs).sum();
    let runtime = runs[0].runtime;
    let workers = runs[0].workers;
    let mut ok = Vec::with_capacity(runs.len());
    for o in runs {
        if o.failed() {
            return Outcome { secs, ..o };
        }
        ok.extend(o.figures);
    }
    let figures = ok[0]
        .iter()
        .map(|(k, _)| {
            let vals = ok
                .iter()
                .filter_map(|f| f.iter().find(|(k2, _)| k2 == k).map(|&(_, v)| v))
                .collect();
            (k.clone(), crate::common::median(vals))
        })
        .collect();
    Outcome {
        runtime,
        workers,
        figures: Ok(figures),
        secs,
    }
}

/// The machine and versions a run is reported with.
#[derive(Debug)]
pub struct Meta {
    workers: usize,
    quick: bool,
    cpu: String,
    rustc: String,
    tokio: String,
    commit: String,
}

impl Meta {
    /// Reads the CPU model, `rustc -V`, Tokio's locked version and the git commit.
    pub fn gather(p: &Params) -> Meta {
        let cpu = std::fs::read_to_string("/proc/cpuinfo")
            .ok()
            .and_then(|s| {
                let line = s.lines().find(|l| l.starts_with("model name"))?;
                Some(line.split(':').nth(1)?.trim().to_owned())
            })
            .unwrap_or_else(|| "?".into());
        let cmd = |prog: &str, args: &[&str]| {
            std::process::Command::new(prog)
                .args(args)
                .current_dir(env!("CARGO_MANIFEST_DIR"))
                .output()
                .ok()
                .filter(|o| o.status.success())
                .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
                .unwrap_or_else(|| "?".into())
        };
        let lock = concat!(env!("CARGO_MANIFEST_DIR"), "/Cargo.lock");
        let tokio = std::fs::read_to_string(lock)
            .ok()
            .and_then(|s| {
                let key = "name = \"tokio\"\nversion = \"";
                let at = s.find(key)? + key.len();
                Some(s[at..].split('"').next()?.to_owned())
            })
            .unwrap_or_else(|| "?".into());
        Meta {
            workers: p.workers,
            quick: p.quick,
            cpu,
            rustc: cmd("rustc", &["-V"]),
            tokio,
            commit: cmd("git", &["rev-parse", "--short", "HEAD"]),
        }
    }

    /// One line naming the machine, the versions and the mode.
    pub fn headline(&self) -> String {
        format!(
            "W = {} workers, CPU {}, {}, tokio {}, commit {}, {} run",
            self.workers,
            self.cpu,
            self.rustc,
            self.tokio,
            self.commit,
            if self.quick { "quick" } else { "full" }
        )
    }
}

/// Unit of a metric, from its key's suffix.
pub fn unit(key: &str) -> &'static str {
    match key.rsplit('_').next() {
        Some("ns") => "ns",
        Some("us") => "us",
        Some("ms") => "ms",
        Some("mib") => "MiB",
        _ => "count",
    }
}

/// Metric key without its unit suffix, for the table.
pub fn label(key: &str) -> String {
    let base = match unit(key) {
        "count" => key,
        _ => key.rsplit_once('_').map_or(key, |(b, _)| b),
    };
    base.replace('_', " ")
}

/// Whether a smaller value is better and says something about the runtime (all but the
/// `fired` correctness count and the hypervisor's `steal`).
fn lower_is_better(key: &str) -> bool {
    key != "fired" && key != "steal_ms" && !higher_is_better(key)
}

/// Whether `peer`'s figure `key` means what gort's does. T5's `dropped` does not for Tokio:
/// a Go ticker (and gort's) drops a tick for a receiver a whole period late, while Tokio's
/// interval delivers it late, in a burst, unless it is more than 5 ms late, whatever the
/// `MissedTickBehavior`. Both are charged in the lateness figures.
fn comparable(key: &str, peer: Runtime) -> bool {
    !(key == "dropped" && peer == Runtime::Tokio)
}

/// Whether a larger value is better (T10's ticks received): its ratio is `gort / peer`, so
/// that above 1 still means gort did better.
fn higher_is_better(key: &str) -> bool {
    key == "received"
}

/// `peer / gort` when meaningful (both positive, lower-is-better, comparable); `gort / peer`
/// for a higher-is-better figure.
fn ratio(key: &str, peer: Runtime, gort: Result<f64, String>, p: Result<f64, String>) -> String {
    match (gort, p) {
        (Ok(g), Ok(p)) if higher_is_better(key) && g > 0.0 && p > 0.0 => format!("{:.2}", g / p),
        (Ok(g), Ok(p)) if lower_is_better(key) && comparable(key, peer) && g > 0.0 && p > 0.0 => {
            format!("{:.2}", p / g)
        }
        _ => "-".into(),
    }
}

/// A figure with 3-4 significant digits.
pub fn num(v: Result<f64, String>) -> String {
    match v {
        Ok(v) if v >= 100.0 => format!("{v:.0}"),
        Ok(v) if v >= 10.0 => format!("{v:.1}"),
        Ok(v) => format!("{v:.2}"),
        Err(_) => "ERR".into(),
    }
}

/// Prints the table: gort, then each peer that ran (Tokio, and Go with `--go`), then each
/// peer's ratio `peer / gort` (> 1 = gort faster or leaner).
pub fn print_table(meta: &Meta, results: &[(&Shape, Vec<Outcome>)]) {
    let peers: Vec<Runtime> = [Runtime::Tokio, Runtime::Go]
        .into_iter()
        .filter(|&rt| {
            results
                .iter()
                .any(|(_, os)| os.iter().any(|o| o.runtime == rt))
        })
        .collect();
    let mut out = String::new();
    let _ = writeln!(out, "{}", meta.headline());
    let mut head = format!(
        "{:<24} {:<16} {:<5} {:>10}",
        "shape", "metric", "unit", "gort"
    );
    for rt in &peers {
        let _ = write!(head, " {:>10}", rt.name());
    }
    for rt in &peers {
        let _ = write!(head, " {:>10}", format!("{}/gort", rt.name()));
    }
    let _ = writeln!(out, "{head}");
    let mut errors = Vec::new();
    for (shape, outcomes) in results {
        let by = |rt| outcomes.iter().find(|o| o.runtime == rt);
        for o in outcomes {
            match &o.figures {
                Err(e) => errors.push(format!("{} {}: {e}", shape.id, o.runtime.name())),
                Ok(_) if o.failed() => {
                    errors.push(format!("{} {}: check failed", shape.id, o.runtime.name()))
                }
                Ok(_) => {}
            }
        }
        for (i, key) in shape.metrics.iter().enumerate() {
            let get = |rt| by(rt).map_or(Err("not run".into()), |o: &Outcome| o.get(key));
            let title = if i == 0 {
                format!("{} {}", shape.id, shape.name)
            } else {
                String::new()
            };
            let mut line = format!(
                "{:<24} {:<16} {:<5} {:>10}",
                title,
                label(key),
                unit(key),
                num(get(Runtime::Gort))
            );
            for &rt in &peers {
                let _ = write!(line, " {:>10}", num(get(rt)));
            }
            for &rt in &peers {
                let _ = write!(line, " {:>10}", ratio(key, rt, get(Runtime::Gort), get(rt)));
            }
            let _ = writeln!(out, "{line}");
        }
    }
    for e in errors {
        let _ = writeln!(out, "error: {e}");
    }
    print!("{out}");
}

/// A JSON string literal (the texts here have no control characters but quotes may occur).
fn js(s: &str) -> String {
    format!("\"{}\"", s.replace('\\', "\\\\").replace('"', "\\\""))
}

/// Prints the JSON lines described in the module docs.
pub fn print_json(meta: &Meta, results: &[(&Shape, Vec<Outcome>)]) {
    println!(
        "{{\"meta\":true,\"source\":\"rust\",\"workers\":{},\"quick\":{},\"cpu\":{},\"rustc\":{},\"tokio\":{},\"commit\":{}}}",
        meta.workers,
        meta.quick,
        js(&meta.cpu),
        js(&meta.rustc),
        js(&meta.tokio),
        js(&meta.commit)
    );
    for (shape, outcomes) in results {
        for key in shape.metrics {
            for o in outcomes {
                let value = match o.get(key) {
                    Ok(v) if o.failed() => format!("{v},\"error\":\"check failed\""),
                    Ok(v) if v.is_finite() => format!("{v}"),
                    Ok(_) => "null".into(),
                    Err(e) => format!("null,\"error\":{}", js(&e)),
                };
                println!(
                    "{{\"runtime\":{},\"workers\":{},\"shape\":{},\"name\":{},\"metric\":{},\"value\":{}}}",
                    js(o.runtime.name()),
                    o.workers,
                    js(shape.id),
                    js(shape.name),
                    js(key),
                    value
                );
            }
        }
    }
}
