//! Output of a run: the machine/versions headline, the gort vs Tokio (vs each Go) table and
//! the JSON lines read by `benches/run.sh`.
//!
//! JSON lines: first `{"meta":true,...}` (with `"go":"go1.19.8 + go1.27.3"` and
//! `"gomaxprocs"` when Go ran), then per shape, metric and runtime
//! `{"runtime":"gort","workers":2,"shape":"T1","name":"start_stop","metric":"per_op_ns","value":12.3}`;
//! a Go runtime is named by its label (`go1.19`, `go1.27`); `value` is `null` (with an
//! `"error"`) when that runtime's child failed.

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
    /// A Go runtime: the program of `benches/go` built by one Go toolchain, run with
    /// `--go PATH` (repeatable: Go 1.19, the design gort ports, and Go 1.27, what a Go
    /// user runs today).
    Go(GoBin),
}

/// One build of the Go program (`--go PATH`) and the label of its column.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GoBin {
    /// The binary.
    pub path: &'static std::path::Path,
    /// `runtime.Version()` of the toolchain that built it (`go1.27.3`), as the binary's
    /// `-version` prints it.
    pub version: &'static str,
    /// The column's and the JSON lines' name: the major.minor version (`go1.27`), made
    /// unique among the `--go` binaries.
    pub label: &'static str,
}

impl GoBin {
    /// Asks each binary its version (`PATH -version`) and labels it `goX.Y`, or `go` when
    /// it cannot say; a label already taken gets `-2`, `-3`, ... appended. The strings live
    /// as long as the run (leaked once, a few bytes).
    pub fn label_all(paths: &[std::path::PathBuf]) -> Vec<GoBin> {
        let mut bins: Vec<GoBin> = Vec::new();
        for path in paths {
            let version = std::process::Command::new(path)
                .arg("-version")
                .output()
                .ok()
                .filter(|o| o.status.success())
                .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
                .filter(|v| !v.is_empty())
                .unwrap_or_else(|| "go?".into());
            let base = short_version(&version);
            let mut label = base.clone();
            let mut k = 2;
            while bins.iter().any(|b| b.label == label) {
                label = format!("{base}-{k}");
                k += 1;
            }
            bins.push(GoBin {
                path: Box::leak(path.clone().into_boxed_path()),
                version: Box::leak(version.into_boxed_str()),
                label: Box::leak(label.into_boxed_str()),
            });
        }
        bins
    }
}

/// `go1.27.3` -> `go1.27`; a version of another form (`devel ...`) -> `go`.
fn short_version(v: &str) -> String {
    let Some(rest) = v.strip_prefix("go") else {
        return "go".into();
    };
    let mut parts = rest.split('.');
    match (parts.next(), parts.next()) {
        (Some(major), Some(minor)) if !major.is_empty() && !minor.is_empty() => {
            let minor: String = minor.chars().take_while(char::is_ascii_digit).collect();
            format!("go{major}.{minor}")
        }
        _ => "go".into(),
    }
}

impl Runtime {
    /// Name used on the command line (gort, tokio) and in the table and JSON (the Go
    /// binaries' labels).
    pub fn name(self) -> &'static str {
        match self {
            Runtime::Gort => "gort",
            Runtime::Tokio => "tokio",
            Runtime::Go(g) => g.label,
        }
    }
}

/// The runtimes that ran in `results`, in the order they ran in (gort, Tokio, then each
/// `--go` binary in command-line order).
pub fn runtimes_in(results: &[(&Shape, Vec<Outcome>)]) -> Vec<Runtime> {
    let mut rts: Vec<Runtime> = Vec::new();
    for o in results.iter().flat_map(|(_, os)| os) {
        if !rts.contains(&o.runtime) {
            rts.push(o.runtime);
        }
    }
    rts
}

impl FromStr for Runtime {
    type Err = String;
    /// The runtimes a child of this binary runs (a Go child is the Go program's).
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "gort" => Ok(Runtime::Gort),
            "tokio" => Ok(Runtime::Tokio),
            _ => Err(format!(
                "unknown runtime {s} (Go children are the Go program's)"
            )),
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
    /// The `--go` binaries' full versions and the `GOMAXPROCS` their children get.
    go: Option<(String, String)>,
}

impl Meta {
    /// Reads the CPU model, `rustc -V`, Tokio's locked version and the git commit; `go` are
    /// the `--go` binaries and `gomaxprocs` what their children get.
    pub fn gather(p: &Params, go: &[GoBin], gomaxprocs: String) -> Meta {
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
            go: (!go.is_empty()).then(|| {
                let versions: Vec<&str> = go.iter().map(|g| g.version).collect();
                (versions.join(" + "), gomaxprocs)
            }),
        }
    }

    /// One line naming the machine, the versions and the mode.
    pub fn headline(&self) -> String {
        let mut line = format!(
            "W = {} workers, CPU {}, {}, tokio {}, commit {}, {} run",
            self.workers,
            self.cpu,
            self.rustc,
            self.tokio,
            self.commit,
            if self.quick { "quick" } else { "full" }
        );
        if let Some((versions, procs)) = &self.go {
            let _ = write!(line, ", {versions} (GOMAXPROCS {procs})");
        }
        line
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
    let peers: Vec<Runtime> = runtimes_in(results)
        .into_iter()
        .filter(|&rt| rt != Runtime::Gort)
        .collect();
    // Each peer's figure and ratio columns, at least 10 wide, wider for a long label.
    let fig_w = |rt: Runtime| rt.name().len().max(10);
    let ratio_w = |rt: Runtime| (rt.name().len() + 5).max(10);
    let mut out = String::new();
    let _ = writeln!(out, "{}", meta.headline());
    let mut head = format!(
        "{:<24} {:<16} {:<5} {:>10}",
        "shape", "metric", "unit", "gort"
    );
    for &rt in &peers {
        let _ = write!(head, " {:>w$}", rt.name(), w = fig_w(rt));
    }
    for &rt in &peers {
        let _ = write!(
            head,
            " {:>w$}",
            format!("{}/gort", rt.name()),
            w = ratio_w(rt)
        );
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
                let _ = write!(line, " {:>w$}", num(get(rt)), w = fig_w(rt));
            }
            for &rt in &peers {
                let r = ratio(key, rt, get(Runtime::Gort), get(rt));
                let _ = write!(line, " {:>w$}", r, w = ratio_w(rt));
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
    let go = meta.go.as_ref().map_or(String::new(), |(versions, procs)| {
        format!(",\"go\":{},\"gomaxprocs\":{}", js(versions), js(procs))
    });
    println!(
        "{{\"meta\":true,\"source\":\"rust\",\"workers\":{},\"quick\":{},\"cpu\":{},\"rustc\":{},\"tokio\":{},\"commit\":{}{go}}}",
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
