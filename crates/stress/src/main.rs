//! `gort-stress`: gort's scheduler and timer stress suite.
//!
//! ```text
//! cargo run --release -p gort-stress                      # every scenario, about a minute
//! cargo run --release -p gort-stress -- --duration 5s     # the CI-sized run
//! cargo run --release -p gort-stress -- -s timer-storm --seed 42 --report out/
//! cargo run --release -p gort-stress -- --repeat 10       # ten runs, fresh seeds, a summary
//! ```
//!
//! Each scenario runs on its own runtime and checks invariants while it runs (see
//! `design/STRESS.md`); the run prints a table and exits with 1 if any invariant broke,
//! naming the seed that replays its random choices.

#![warn(missing_docs)]

mod check;
mod cli;
mod patience;
mod progress;
mod repeat;
mod report;
mod rng;
mod scenarios;
mod stats;
mod watchdog;

use clap::Parser;
use cli::Args;
use report::SuiteResult;
use scenarios::{Config, Scenario};
use std::process::ExitCode;

fn main() -> ExitCode {
    let args = Args::parse();
    if args.list {
        for s in &scenarios::ALL {
            println!("{:<18} {}", s.name, s.about);
        }
        return ExitCode::SUCCESS;
    }
    let procs = args
        .procs
        .map(usize::from)
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
    let mut picked: Vec<&'static Scenario> = Vec::new();
    for name in &args.scenarios {
        let s = scenarios::find(name).expect("clap only accepts known scenario names");
        if !picked.iter().any(|p| p.name == s.name) {
            picked.push(s);
        }
    }
    if picked.is_empty() {
        picked = scenarios::ALL.iter().collect();
    }
    let mut runs = repeat::Repeat::default();
    for run in 1..=args.repeat {
        if args.repeat > 1 {
            eprintln!("gort-stress: run {run} of {}", args.repeat);
        }
        let seed = args.seed.unwrap_or_else(rng::Rng::fresh_seed);
        let suite = run_suite(&args, &picked, procs, seed);
        if let Err(code) = print_results(&args, &suite, run) {
            return code;
        }
        runs.add(&suite);
    }
    if args.repeat > 1 {
        let summary = runs.render();
        if args.json {
            eprint!("{summary}");
        } else {
            print!("{summary}");
        }
    }
    if runs.passed() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    }
}

/// Runs every picked scenario once with `seed`.
fn run_suite(args: &Args, picked: &[&'static Scenario], procs: usize, seed: u64) -> SuiteResult {
    let fault = args.inject_fault;
    eprintln!(
        "gort-stress: seed {seed}, {} scenario(s), duration {:?}, {procs} Ps per runtime{}",
        picked.len(),
        args.duration,
        fault.map_or(String::new(), |f| format!(
            ", injected fault {} (test-only)",
            f.name()
        )),
    );
    let cfg = Config { procs, seed, fault };
    let budgets = scenarios::budgets(picked, args.duration);
    let (steal_at_start, started) = (report::host::StealClock::now(), std::time::Instant::now());
    let mut progress = progress::Progress::new(args.duration);
    let mut results = Vec::new();
    for (def, budget) in picked.iter().zip(budgets) {
        let dog = watchdog::Watchdog::arm(def.name, budget, seed);
        let r = scenarios::run(def, cfg, budget, |ctx| progress.start(ctx, budget));
        dog.disarm();
        let line = format!(
            "{:<18} {:>8.0} ms  {} violation(s)",
            r.name, r.wall_ms, r.violation_count
        );
        progress.finish_one(&line, budget);
        results.push(r);
    }
    progress.finish();
    let host = report::host::HostInfo::gather(
        report::host::StealClock::now().since(steal_at_start),
        started.elapsed(),
    );
    let mut suite = SuiteResult::new(
        seed,
        procs,
        args.duration.as_millis() as u64,
        fault.map(|f| f.name().into()),
        results,
    );
    suite.host = Some(host);
    suite
}

/// Prints run number `run`'s table (and JSON, and report); `Err` with the exit code when the
/// report cannot be written. With `--repeat`, each run's JSON is one line and its report goes
/// to `DIR/run-N/index.html` (or `x-run-N.html` next to a file `x.html`).
fn print_results(args: &Args, suite: &SuiteResult, run: u32) -> Result<(), ExitCode> {
    let table = report::table::render(suite);
    if args.json {
        if args.repeat > 1 {
            println!("{}", report::json::render_line(suite));
        } else {
            println!("{}", report::json::render(suite));
        }
        eprint!("{table}");
    } else {
        print!("{table}");
    }
    if let Some(target) = &args.report {
        let path = report::html::page_path(target, (args.repeat > 1).then_some(run));
        match report::html::write(suite, &path) {
            Ok(()) => eprintln!("gort-stress: report written to {}", path.display()),
            Err(e) => {
                eprintln!(
                    "gort-stress: cannot write the report to {}: {e}",
                    path.display()
                );
                return Err(ExitCode::from(2));
            }
        }
    }
    if !suite.passed {
        eprintln!(
            "gort-stress: {} invariant violation(s); replay with --seed {}",
            suite.violations, suite.seed
        );
    }
    Ok(())
}
