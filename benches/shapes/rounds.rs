//! Child processes and rounds: each (shape, runtime, W) runs in a child process (this binary
//! re-executed with `--child ID RUNTIME --workers W`, or a Go build's `-child ID`), in
//! rounds in which every variant takes its turn, and each figure is the median over the rounds.

use std::io::Read;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::common::Params;
use crate::report::{self, Outcome, Runtime};
use crate::{steal, Opts, Shape};

/// Parent: run `shape` on `rt` in a child process, killing it after `limit`.
fn spawn_child(shape: &Shape, rt: Runtime, opts: &Opts, p: &Params, limit: Duration) -> Outcome {
    let mut cmd = match rt {
        Runtime::Go(go) => {
            let mut cmd = Command::new(go.path);
            cmd.args(["-child", shape.id]);
            if opts.quick {
                cmd.arg("-quick");
            }
            // An explicit W (--workers, --scaling) overrides GOMAXPROCS; otherwise the
            // environment's, if set, stands.
            if opts.workers.is_some() || opts.scaling || std::env::var_os("GOMAXPROCS").is_none() {
                cmd.env("GOMAXPROCS", p.workers.to_string());
            }
            cmd
        }
        Runtime::Gort | Runtime::Tokio => {
            let mut cmd = Command::new(std::env::current_exe().expect("current_exe"));
            cmd.args(["--child", shape.id, rt.name()]);
            cmd.args(["--workers", &p.workers.to_string()]);
            if opts.quick {
                cmd.arg("--quick");
            }
            cmd
        }
    };
    let mut proc = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("re-execute the bench binary");
    let start = Instant::now();
    let stolen = steal::Meter::start();
    let status = loop {
        if let Some(st) = proc.try_wait().expect("wait for the child") {
            break Ok(st);
        }
        if start.elapsed() > limit {
            let _ = proc.kill();
            let _ = proc.wait();
            break Err(format!("killed after {} s", limit.as_secs()));
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let steal_ms = stolen.ms();
    let mut out = String::new();
    if let Some(mut o) = proc.stdout.take() {
        let _ = o.read_to_string(&mut out);
    }
    let figures = status.and_then(|st| {
        if !st.success() {
            return Err(format!("child failed: {st}"));
        }
        let mut figures: Vec<(String, f64)> = out
            .lines()
            .filter_map(|l| {
                let mut w = l.strip_prefix("figure ")?.split(' ');
                Some((w.next()?.to_owned(), w.next()?.parse().ok()?))
            })
            .collect();
        figures.push(("steal_ms".into(), steal_ms));
        Ok(figures)
    });
    Outcome {
        runtime: rt,
        workers: p.workers,
        figures,
        secs: start.elapsed().as_secs_f64(),
    }
}

/// One column of a run: a runtime at a number of workers.
#[derive(Clone, Copy, Debug)]
pub struct Variant {
    /// Which runtime.
    pub runtime: Runtime,
    /// Its parameters (W among them).
    pub params: Params,
}

/// Runs `shape` on every variant, in rounds, and returns each variant's median outcome.
pub fn run_shape(
    shape: &Shape,
    variants: &[Variant],
    opts: &Opts,
    limit: Duration,
) -> Vec<Outcome> {
    // Round r runs every variant once, starting with variants[r % n]. A `quiet` shape
    // keeps running rounds until `reps` of them were quiet (or 3 x reps were run), and
    // then keeps the quietest `reps`.
    let n = variants.len();
    let reps = opts.reps.unwrap_or(shape.reps);
    let max_rounds = if shape.quiet { 3 * reps } else { reps };
    let mut rounds: Vec<Vec<Outcome>> = Vec::new();
    while rounds.len() < max_rounds && rounds.iter().filter(|r| steal::quiet(r)).count() < reps {
        let mut round: Vec<Option<Outcome>> = variants.iter().map(|_| None).collect();
        for k in 0..n {
            let i = (rounds.len() + k) % n;
            let v = variants[i];
            round[i] = Some(spawn_child(shape, v.runtime, opts, &v.params, limit));
        }
        rounds.push(round.into_iter().flatten().collect());
    }
    if rounds.len() > reps {
        eprintln!(
            "  {:<8} {} rounds run for {} quiet ones (no child losing over {} % to steal)",
            shape.id,
            rounds.len(),
            reps,
            steal::QUIET_PERCENT
        );
    }
    rounds.sort_by_key(|r| steal::worst(r));
    rounds.truncate(reps);
    let mut runs: Vec<Vec<Outcome>> = variants.iter().map(|_| Vec::new()).collect();
    for round in rounds {
        for (i, o) in round.into_iter().enumerate() {
            runs[i].push(o);
        }
    }
    runs.into_iter()
        .map(|r| {
            let o = report::median_of(r);
            eprintln!(
                "  {:<8} {:<6} W={:<3} {:>7.1} s",
                shape.id,
                o.runtime.name(),
                o.workers,
                o.secs
            );
            o
        })
        .collect()
}
