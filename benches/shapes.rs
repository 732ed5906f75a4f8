//! Benchmark shapes of `benches/SHAPES.md`, gort vs Tokio, in one run.
//!
//! ```text
//! cargo bench --bench shapes -- [FILTER...] [--quick] [--json] [--workers N] [--scaling]
//! ```
//!
//! * `FILTER`: run only shapes whose id, name or group (`timer`, `sched`) contains one of
//!   the words (case-insensitive), e.g. `T3 reset sched`.
//! * `--quick`: counts (and T5/T7 time windows) scaled down about 10x, for a CI smoke run.
//! * `--json`: print JSON lines (one object per shape, metric and runtime, after one `meta`
//!   object) instead of the table; `benches/run.sh` merges them with the Go program's.
//! * Exit status 1 if any child crashed, hung or failed a correctness check (T7's count).
//!
//! Every (shape, runtime) pair runs in a child process (this binary re-executed with
//! `--child ID RUNTIME`), so peak RSS is per runtime and a crash or hang of one runtime
//! (killed after a time limit) costs only its own row. The sub-second shapes, T3_100k and
//! the shapes whose tails are bimodal (T3_1M, T4, N5) run three children per runtime, T5
//! eleven, and each figure is the median over them. The
//! runtimes take turns (gort, tokio, gort, ... with the order rotated each round), so that
//! a noisy spell of the machine falls on all of them, not on one runtime's row. Every
//! runtime uses W = `available_parallelism` workers unless `--workers` says otherwise.
//!
//! * `--reps N`: N rounds per shape instead of each shape's own count (to settle a close
//!   figure).
//! * `--go PATH`: also run the Go program of `benches/go` (built at `PATH`) as a further
//!   runtime, its children taking their turns with the others (`GOMAXPROCS` = W unless
//!   set). Repeatable: one column per Go build, labelled by the version the binary reports
//!   (`PATH -version`: `go1.19`, `go1.27`), in command-line order; `benches/run.sh` passes
//!   one per toolchain it finds.
//! * `--workers N`: W = N for every runtime (gort's procs, Tokio's `worker_threads`, Go's
//!   `GOMAXPROCS`, which it then overrides).
//! * `--scaling`: run every selected shape at W = 1 and at W = `--workers` (default
//!   `available_parallelism`), all in the same interleaved rounds, and print each runtime's
//!   ratio W=N/W=1 (see `scaling`).

#![warn(missing_docs)]

#[path = "shapes/common.rs"]
mod common;
#[path = "shapes/net_gort.rs"]
mod net_gort;
#[path = "shapes/net_tokio.rs"]
mod net_tokio;
#[path = "shapes/report.rs"]
mod report;
#[path = "shapes/rounds.rs"]
mod rounds;
#[path = "shapes/scaling.rs"]
mod scaling;
#[path = "shapes/sched_gort.rs"]
mod sched_gort;
#[path = "shapes/sched_tokio.rs"]
mod sched_tokio;
#[path = "shapes/steal.rs"]
mod steal;
#[path = "shapes/timer_gort.rs"]
mod timer_gort;
#[path = "shapes/timer_tokio.rs"]
mod timer_tokio;

use std::time::Duration;

use common::{Figures, Params};
use report::{Outcome, Runtime};
use rounds::{run_shape, Variant};

/// One workload of SHAPES.md, as run by each runtime.
#[derive(Debug)]
pub struct Shape {
    /// Short id used in filters and JSON (`T3_1M`).
    pub id: &'static str,
    /// Name from SHAPES.md (with its variant).
    pub name: &'static str,
    /// `timer`, `sched` or `net`.
    pub group: &'static str,
    /// Metric keys shown, in order; the unit is the key's suffix (see `report::unit`).
    pub metrics: &'static [&'static str],
    /// Child runs per runtime; each figure is the median over them: 3 for the sub-second
    /// shapes, whose figures are most sensitive to a noisy machine, and for T3_100k; 11 for
    /// T5, whose tails a single run on this VM cannot settle (a plain `thread::sleep` loop
    /// sees its 2,000-sample maximum move between 1.2 and 6.8 ms from run to run), and whose
    /// busy p50 is within a few µs of Go's (5 rounds left it on either side). The
    /// runtimes' runs alternate, so a noisy spell of the machine hits each of them.
    pub reps: usize,
    /// Whether only rounds the hypervisor left alone count (see `steal`): for the shapes
    /// whose figures are wake-up latencies, which a stolen vCPU sets on its own.
    pub quiet: bool,
    /// The gort side.
    pub gort: fn(&Params) -> Figures,
    /// The Tokio side.
    pub tokio: fn(&Params) -> Figures,
}

const PER_OP: &[&str] = &["per_op_ns"];
const FANOUT: &[&str] = &[
    "wall_ms",
    "cpu_ms",
    "late_p50_us",
    "late_p99_us",
    "late_max_us",
    "rss_mib",
];
const COARSE_TICKS: &[&str] = &["late_p50_us", "late_p99_us", "late_max_us", "received"];
const TICKS: &[&str] = &[
    "late_p50_us",
    "late_p99_us",
    "late_max_us",
    "dropped",
    "cpu_ms",
    "steal_ms",
];

/// Every shape, in SHAPES.md order.
pub static SHAPES: &[Shape] = &[
    Shape {
        id: "T1",
        name: "start_stop",
        group: "timer",
        metrics: PER_OP,
        reps: 3,
        quiet: false,
        gort: timer_gort::t1_start_stop,
        tokio: timer_tokio::t1_start_stop,
    },
    Shape {
        id: "T2",
        name: "reset",
        group: "timer",
        metrics: PER_OP,
        reps: 3,
        quiet: false,
        gort: timer_gort::t2_reset,
        tokio: timer_tokio::t2_reset,
    },
    // T2_chan and T2_sleep: Tokio has no channel timer; its T2 (`Sleep::reset`) is the reset
    // a Tokio program writes for both.
    Shape {
        id: "T2_chan",
        name: "reset channel Timer",
        group: "timer",
        metrics: PER_OP,
        reps: 3,
        quiet: false,
        gort: timer_gort::t2_reset_chan,
        tokio: timer_tokio::t2_reset,
    },
    Shape {
        id: "T2_sleep",
        name: "reset Sleep",
        group: "timer",
        metrics: PER_OP,
        reps: 3,
        quiet: false,
        gort: timer_gort::t2_reset_sleep,
        tokio: timer_tokio::t2_reset,
    },
    Shape {
        id: "T3_100k",
        name: "sleep_fanout 100k",
        group: "timer",
        metrics: FANOUT,
        reps: 3,
        quiet: false,
        gort: timer_gort::t3_100k,
        tokio: timer_tokio::t3_100k,
    },
    Shape {
        id: "T3_1M",
        name: "sleep_fanout 1M",
        group: "timer",
        metrics: FANOUT,
        reps: 3,
        quiet: false,
        gort: timer_gort::t3_1m,
        tokio: timer_tokio::t3_1m,
    },
    Shape {
        id: "T4",
        name: "after_func_storm",
        group: "timer",
        metrics: &["last_fired_ms", "cpu_ms", "late_p99_us"],
        reps: 3,
        quiet: false,
        gort: timer_gort::t4_after_func_storm,
        tokio: timer_tokio::t4_after_func_storm,
    },
    Shape {
        id: "T5_idle",
        name: "ticker_jitter idle",
        group: "timer",
        metrics: TICKS,
        reps: 11,
        quiet: true,
        gort: timer_gort::t5_idle,
        tokio: timer_tokio::t5_idle,
    },
    Shape {
        id: "T5_busy",
        name: "ticker_jitter busy",
        group: "timer",
        metrics: TICKS,
        reps: 11,
        quiet: true,
        gort: timer_gort::t5_busy,
        tokio: timer_tokio::t5_busy,
    },
    Shape {
        id: "T6",
        name: "timeout_rpc",
        group: "timer",
        metrics: PER_OP,
        reps: 3,
        quiet: false,
        gort: timer_gort::t6_timeout_rpc,
        tokio: timer_tokio::t6_timeout_rpc,
    },
    Shape {
        id: "T6_ctx",
        name: "context_timeout",
        group: "timer",
        metrics: PER_OP,
        reps: 3,
        quiet: false,
        gort: timer_gort::t6_context_timeout,
        tokio: timer_tokio::t6_timeout_rpc,
    },
    Shape {
        id: "T7",
        name: "mass_cancel",
        group: "timer",
        metrics: &["cpu_ms", "rss_mib", "fired"],
        reps: 1,
        quiet: false,
        gort: timer_gort::t7_mass_cancel,
        tokio: timer_tokio::t7_mass_cancel,
    },
    Shape {
        id: "T8",
        name: "simultaneous",
        group: "timer",
        metrics: &["last_p50_us", "last_max_us"],
        reps: 3,
        quiet: false,
        gort: timer_gort::t8_simultaneous,
        tokio: timer_tokio::t8_simultaneous,
    },
    Shape {
        id: "T9",
        name: "reset_earlier",
        group: "timer",
        metrics: &["per_op_ns", "cpu_ms", "rss_mib"],
        reps: 1,
        quiet: false,
        gort: timer_gort::t9_reset_earlier,
        tokio: timer_tokio::t9_reset_earlier,
    },
    // T9_chan: Tokio has no channel timer; its T9 (`Sleep`s) is what a Tokio program writes.
    Shape {
        id: "T9_chan",
        name: "reset_earlier channel Timers",
        group: "timer",
        metrics: &["per_op_ns", "cpu_ms", "rss_mib"],
        reps: 1,
        quiet: false,
        gort: timer_gort::t9_reset_earlier_chan,
        tokio: timer_tokio::t9_reset_earlier,
    },
    Shape {
        id: "T10_1ms",
        name: "ticker_coarse 1ms slices",
        group: "timer",
        metrics: COARSE_TICKS,
        reps: 3,
        quiet: false,
        gort: timer_gort::t10_slice_1ms,
        tokio: timer_tokio::t10_slice_1ms,
    },
    Shape {
        id: "T10_10ms",
        name: "ticker_coarse 10ms slices",
        group: "timer",
        metrics: COARSE_TICKS,
        reps: 3,
        quiet: false,
        gort: timer_gort::t10_slice_10ms,
        tokio: timer_tokio::t10_slice_10ms,
    },
    Shape {
        id: "R1",
        name: "spawn_many",
        group: "sched",
        metrics: &["per_task_ns"],
        reps: 3,
        quiet: false,
        gort: sched_gort::r1_spawn_many,
        tokio: sched_tokio::r1_spawn_many,
    },
    Shape {
        id: "R2",
        name: "yield_many",
        group: "sched",
        metrics: &["per_yield_ns"],
        reps: 3,
        quiet: false,
        gort: sched_gort::r2_yield_many,
        tokio: sched_tokio::r2_yield_many,
    },
    Shape {
        id: "R3",
        name: "ping_pong",
        group: "sched",
        metrics: &["per_round_trip_ns"],
        reps: 3,
        quiet: false,
        gort: sched_gort::r3_ping_pong,
        tokio: sched_tokio::r3_ping_pong,
    },
    Shape {
        id: "R4",
        name: "chained_spawn",
        group: "sched",
        metrics: &["per_spawn_ns"],
        reps: 3,
        quiet: false,
        gort: sched_gort::r4_chained_spawn,
        tokio: sched_tokio::r4_chained_spawn,
    },
    Shape {
        id: "N1",
        name: "echo_pingpong",
        group: "net",
        metrics: &["per_round_trip_ns"],
        reps: 3,
        quiet: false,
        gort: net_gort::n1_echo_pingpong,
        tokio: net_tokio::n1_echo_pingpong,
    },
    Shape {
        id: "N2",
        name: "echo_fanin",
        group: "net",
        metrics: &["per_round_trip_ns", "cpu_ms"],
        reps: 3,
        quiet: false,
        gort: net_gort::n2_echo_fanin,
        tokio: net_tokio::n2_echo_fanin,
    },
    Shape {
        id: "N3",
        name: "accept_churn",
        group: "net",
        metrics: &["per_conn_ns", "fds_left"],
        reps: 3,
        quiet: false,
        gort: net_gort::n3_accept_churn,
        tokio: net_tokio::n3_accept_churn,
    },
    Shape {
        id: "N4",
        name: "deadline_echo",
        group: "net",
        metrics: &["per_round_trip_ns", "cpu_ms"],
        reps: 3,
        quiet: false,
        gort: net_gort::n4_deadline_echo,
        tokio: net_tokio::n4_deadline_echo,
    },
    Shape {
        id: "N5",
        name: "idle_deadlines",
        group: "net",
        metrics: &[
            "late_p50_us",
            "late_p99_us",
            "late_max_us",
            "cpu_ms",
            "rss_mib",
            "timed_out",
        ],
        reps: 3,
        quiet: false,
        gort: net_gort::n5_idle_deadlines,
        tokio: net_tokio::n5_idle_deadlines,
    },
    Shape {
        id: "N6",
        name: "unix_fanin",
        group: "net",
        metrics: &["per_round_trip_ns", "cpu_ms"],
        reps: 3,
        quiet: false,
        gort: net_gort::n6_unix_fanin,
        tokio: net_tokio::n6_unix_fanin,
    },
];

/// Command line of the parent (table/JSON) and of a child (`--child ID RUNTIME`).
#[derive(Debug, Default)]
struct Opts {
    quick: bool,
    json: bool,
    filters: Vec<String>,
    child: Option<(String, String)>,
    /// The Go program's builds (`--go PATH`, repeatable), one runtime each.
    go: Vec<std::path::PathBuf>,
    /// Rounds per shape instead of each shape's own `reps`.
    reps: Option<usize>,
    /// W for every runtime instead of `available_parallelism`.
    workers: Option<usize>,
    /// Run every shape at W = 1 and at W = `workers` and print the scaling table.
    scaling: bool,
}

fn parse_args() -> Opts {
    let mut o = Opts::default();
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--quick" => o.quick = true,
            "--json" => o.json = true,
            // cargo bench passes --bench to harness = false targets.
            "--bench" => {}
            "--go" => o.go.push(args.next().expect("--go needs a path").into()),
            "--reps" => {
                let n = args.next().and_then(|n| n.parse().ok());
                o.reps = Some(n.filter(|&n| n > 0).expect("--reps needs a count above 0"));
            }
            "--workers" => {
                let n = args.next().and_then(|n| n.parse().ok());
                o.workers = Some(
                    n.filter(|&n| n > 0)
                        .expect("--workers needs a count above 0"),
                );
            }
            "--scaling" => o.scaling = true,
            "--child" => {
                let id = args.next().expect("--child needs a shape id");
                let rt = args.next().expect("--child needs a runtime");
                o.child = Some((id, rt));
            }
            "-h" | "--help" => {
                eprintln!(
                    "usage: shapes [FILTER...] [--quick] [--json] [--go PATH]... [--reps N] \
                     [--workers N] [--scaling]"
                );
                let ids: Vec<_> = SHAPES.iter().map(|s| s.id).collect();
                eprintln!("shapes: {}", ids.join(" "));
                std::process::exit(0);
            }
            f if f.starts_with('-') => panic!("unknown option {f}"),
            f => o.filters.push(f.to_lowercase()),
        }
    }
    o
}

fn selected(s: &Shape, filters: &[String]) -> bool {
    filters.is_empty()
        || filters.iter().any(|f| {
            [s.id, s.name, s.group]
                .iter()
                .any(|k| k.to_lowercase().contains(f.as_str()))
        })
}

/// Child: run one shape on one runtime and print `figure KEY VALUE` lines.
///
/// A panic anywhere (a runtime's worker thread included, where it would leave the shape
/// waiting for ever) ends the child at once, so the table shows `ERR` without the runner's
/// timeout.
fn child(p: &Params, id: &str, rt: &str) {
    let report = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        report(info);
        std::process::exit(101);
    }));
    let shape = SHAPES
        .iter()
        .find(|s| s.id == id)
        .expect("unknown shape id");
    let run = match rt.parse::<Runtime>().expect("unknown runtime") {
        Runtime::Gort => shape.gort,
        Runtime::Tokio => shape.tokio,
        Runtime::Go(_) => panic!("Go children are the Go program's (--go PATH)"),
    };
    let mut figures = run(p);
    figures.push(("rss_mib", common::peak_rss_mib()));
    for (k, v) in figures {
        println!("figure {k} {v}");
    }
}

fn main() {
    let opts = parse_args();
    let workers = opts
        .workers
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
    let params = Params {
        quick: opts.quick,
        workers,
    };
    if let Some((id, rt)) = &opts.child {
        child(&params, id, rt);
        return;
    }
    let limit = Duration::from_secs(if opts.quick { 120 } else { 900 });
    let go = report::GoBin::label_all(&opts.go);
    // What spawn_child gives the Go children: W, unless GOMAXPROCS is set and W is not.
    let gomaxprocs = match std::env::var("GOMAXPROCS") {
        Ok(v) if opts.workers.is_none() && !opts.scaling => v,
        _ if opts.scaling => format!("1 and {workers}"),
        _ => workers.to_string(),
    };
    let meta = report::Meta::gather(&params, &go, gomaxprocs);
    if !opts.json {
        eprintln!("{}", meta.headline());
    }
    let mut runtimes = vec![Runtime::Gort, Runtime::Tokio];
    runtimes.extend(go.iter().map(|&g| Runtime::Go(g)));
    // Plain run: every runtime at W. Scaling run: every runtime at W = 1 and at W.
    let widths: Vec<usize> = if opts.scaling {
        vec![1, workers]
    } else {
        vec![workers]
    };
    let variants: Vec<Variant> = widths
        .iter()
        .flat_map(|&w| {
            runtimes.iter().map(move |&runtime| Variant {
                runtime,
                params: Params {
                    workers: w,
                    ..params
                },
            })
        })
        .collect();
    let mut results = Vec::new();
    for shape in SHAPES.iter().filter(|s| selected(s, &opts.filters)) {
        results.push((shape, run_shape(shape, &variants, &opts, limit)));
    }
    if opts.scaling && !opts.json {
        scaling::print_table(&meta, &results, workers);
    } else if opts.json {
        report::print_json(&meta, &results);
    } else {
        report::print_table(&meta, &results);
    }
    // A crash, hang or failed check of either runtime fails the run (CI smoke test).
    if results.iter().any(|(_, os)| os.iter().any(Outcome::failed)) {
        std::process::exit(1);
    }
}
