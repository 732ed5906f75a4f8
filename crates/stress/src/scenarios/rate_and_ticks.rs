//! rate-and-ticks: the time toolkit nobody else stresses, on a runtime started paused (time
//! is virtual and exact, so the checks are exact too). Each round runs, side by side on every
//! P:
//! - tasks sharing one `gort::time::rate::Limiter` ([`limiter`]): every call is replayed on a
//!   serial model, and the tokens used over any window stay within `burst + rate·window`;
//! - tasks reading `Interval`s with each `MissedTickBehavior`, sometimes sleeping past several
//!   periods: each tick's value and the instant it is seen follow Tokio's rules exactly;
//! - tasks calling a `singleflight::Group` on a few keys at once, some giving up midway: one
//!   run per key at a time, every caller gets the result of the run it joined (which was in
//!   flight when it called), `shared` says whether the run had more than one caller, and a
//!   call after a run ended starts a new one.

use super::{join_all, Ctx};
use crate::rng::Rng;
use gort::sync::singleflight::Group;
use gort::time::{interval_at, sleep, Instant, MissedTickBehavior};
use std::collections::HashMap;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::Duration;

mod limiter;

/// One line for `--list`.
pub const ABOUT: &str = "a paused runtime: tasks on every P share a rate::Limiter (allow_n, reserve_n + cancel, wait_n, \
    wait_deadline, timed-out waits, wait_ctx canceled, set_limit/set_burst), every call replayed on a serial model and the window bound checked; \
    Intervals (Burst, Delay, Skip) read late or reset follow Tokio's rules exactly; singleflight with callers giving up: one run per key, every caller its result";

/// Ticks read per `Interval` task per round.
const TICKS: usize = 16;

/// Calls per singleflight task per round, and its keys.
const CALLS: usize = 12;
const KEYS: u64 = 4;

/// Tokio's tolerance: a tick taken more than this after its deadline counts as missed.
const MISSED_TOLERANCE: Duration = Duration::from_millis(5);

/// Runs rate-and-ticks.
pub fn run(ctx: &Arc<Ctx>) {
    let rt = ctx.paused_runtime();
    let tasks = ctx.cfg.procs as u64 * 4;
    let end = ctx.epoch + ctx.part(0.9);
    let c = ctx.clone();
    let (rounds, calls) = rt.block_on(async move {
        let sh = limiter::Shared::new(tasks);
        let (mut round, mut calls) = (0u64, 0usize);
        while std::time::Instant::now() < end {
            calls += one_round(&c, &sh, tasks, round).await;
            round += 1;
        }
        (round, calls)
    });
    ctx.note(format!(
        "rounds={rounds} limiter calls={calls} tasks per kind per round={tasks}"
    ));
    ctx.finish_runtime(rt);
}

/// A round: the three kinds of task, `tasks` of each, joined; then the limiter's log is
/// replayed and the flights checked. Returns the limiter calls of the round.
async fn one_round(ctx: &Arc<Ctx>, sh: &Arc<limiter::Shared>, tasks: u64, round: u64) -> usize {
    let mut rng = ctx.rng(round << 20);
    let (limit, burst) = sh.start_round(&mut rng).await;
    let period = Duration::from_secs_f64(1.0 / limit.as_f64());
    let flights = Arc::new(Flights::default());
    let mut handles = Vec::new();
    for k in 0..tasks {
        let seed = |kind: u64| ctx.rng((round << 20) | (kind << 16) | (k + 1));
        handles.push(gort::spawn(limiter::task(
            ctx.clone(),
            sh.clone(),
            k,
            period,
            seed(0),
        )));
        handles.push(gort::spawn(ticks(ctx.clone(), seed(1))));
        handles.push(gort::spawn(caller(ctx.clone(), flights.clone(), seed(2))));
    }
    // A third of the rounds change the burst midway: the window bound is then checked with
    // the highest. Another third change the limit too: reservations keep the time to act
    // they were given at the old rate (Go's `SetLimit`), so tokens used after a change can
    // exceed any one rate's bound; the replay alone checks those rounds.
    let (changes, limits) = match rng.index(3) {
        0 => (0, false),
        kind => (rng.range(1..4) as usize, kind == 2),
    };
    let top = sh.change_midway(rng, period, changes, limits).await;
    join_all(ctx, "rate-and-ticks", handles).await;
    flights.drain().await;
    flights.check(ctx);
    let bound = (!limits).then_some((limit, burst.max(top)));
    limiter::check_round(ctx, sh, bound)
}

/// Tokio's next deadline after the tick due at `due`, taken at `now`.
fn tokio_next(b: MissedTickBehavior, due: Instant, now: Instant, period: Duration) -> Instant {
    if now <= due + MISSED_TOLERANCE {
        return due + period;
    }
    match b {
        MissedTickBehavior::Burst => due + period,
        MissedTickBehavior::Delay => now + period,
        MissedTickBehavior::Skip => {
            let late = (now - due).as_nanos() % period.as_nanos();
            now + period - Duration::from_nanos(late as u64)
        }
    }
}

/// An `Interval` with a random behaviour and period, read `TICKS` times with random sleeps
/// (some past several periods) and an occasional `reset`/`reset_immediately` between: each
/// value is the model's deadline, seen at exactly `max(deadline, the instant tick() was
/// called)`.
async fn ticks(ctx: Arc<Ctx>, mut rng: Rng) {
    let behavior = [
        MissedTickBehavior::Burst,
        MissedTickBehavior::Delay,
        MissedTickBehavior::Skip,
    ][rng.index(3)];
    let period = rng.duration(Duration::from_millis(1), Duration::from_millis(50));
    let start = Instant::now() + rng.duration(Duration::ZERO, period);
    let mut iv = interval_at(start, period);
    iv.set_missed_tick_behavior(behavior);
    let mut due = start;
    for k in 0..TICKS {
        if rng.chance(40) {
            sleep(rng.duration(Duration::ZERO, period * 4)).await;
        }
        match rng.below(20) {
            0 => {
                iv.reset(); // the next tick one period from now
                due = Instant::now() + period;
            }
            1 => {
                iv.reset_immediately();
                due = Instant::now();
            }
            _ => {}
        }
        let called = Instant::now();
        let v = iv.tick().await;
        let seen = Instant::now();
        ctx.counts.ops.fetch_add(1, Relaxed);
        ctx.counts.fired.fetch_add(1, Relaxed);
        ctx.violations.check(v == due, || {
            format!("{behavior:?} interval of {period:?}: tick {k} was due {v:?}, Tokio's rule says {due:?}")
        });
        let expect_seen = due.max(called);
        ctx.violations.check(seen == expect_seen, || {
            format!("{behavior:?} interval of {period:?}: tick {k} (due {due:?}, tick() called at {called:?}) seen at {seen:?}, not {expect_seen:?}")
        });
        due = tokio_next(behavior, due, seen, period);
    }
}

/// The runs and calls of a round's singleflight group.
#[derive(Default)]
struct Flights {
    group: Group<u64, u64>,
    next_run: AtomicU64,
    /// Runs executing now, per key: never more than one.
    active: [AtomicU32; KEYS as usize],
    /// Runs executing now, all keys.
    running: AtomicU64,
    /// Per run: key, start and end instants.
    runs: Mutex<HashMap<u64, (u64, Instant, Instant)>>,
    /// Per call: key, call instant, run whose result it got, `shared`.
    calls: Mutex<Vec<(u64, Instant, u64, bool)>>,
    /// Calls whose caller left (a timeout dropped the future): key, call instant.
    left: Mutex<Vec<(u64, Instant)>>,
}

fn take<T>(m: &Mutex<Vec<T>>) -> Vec<T> {
    std::mem::take(&mut *m.lock().unwrap_or_else(|e| e.into_inner()))
}

impl Flights {
    /// Waits (virtual time) for the runs whose callers all left, and for their keys to be
    /// freed (in the same poll as the run's end: before the clock moves again).
    async fn drain(&self) {
        while self.running.load(Relaxed) > 0 {
            sleep(Duration::from_millis(1)).await;
        }
        sleep(Duration::from_micros(1)).await;
    }

    /// Every call got the result of a run of its key that was in flight when it called;
    /// `shared` says whether that run had more than one caller (callers that left count:
    /// exactly, when none left at the instant a run started or ended, where it is
    /// ambiguous which run they joined); every run had a caller.
    fn check(&self, ctx: &Ctx) {
        let runs = std::mem::take(&mut *self.runs.lock().unwrap_or_else(|e| e.into_inner()));
        let (calls, left) = (take(&self.calls), take(&self.left));
        let mut callers: HashMap<u64, u32> = HashMap::new();
        for &(_, _, run, _) in &calls {
            *callers.entry(run).or_default() += 1;
        }
        // Per run: callers that left inside its flight, and at its edges.
        let left_in = |&(key, start, end): &(u64, Instant, Instant)| {
            let of_key = left.iter().filter(|l| l.0 == key);
            let inside = of_key.clone().filter(|l| start < l.1 && l.1 < end).count() as u32;
            let edges = of_key.filter(|l| l.1 == start || l.1 == end).count();
            (inside, edges)
        };
        for &(key, at, run, shared) in &calls {
            let Some(flight) = runs.get(&run) else {
                ctx.violation(format!(
                    "singleflight: a call for key {key} got run {run}, which never ran"
                ));
                continue;
            };
            let (rkey, start, end) = *flight;
            ctx.violations.check(rkey == key && start <= at && at <= end, || {
                format!("singleflight: a call for key {key} at {at:?} got run {run} of key {rkey}, in flight {start:?}..{end:?}")
            });
            let (inside, edges) = left_in(flight);
            let many = callers[&run] + inside > 1;
            ctx.violations.check(shared == many || (edges > 0 && shared), || {
                format!(
                    "singleflight: run {run} had {} callers ({inside} of them left), a caller got shared={shared}",
                    callers[&run] + inside
                )
            });
        }
        for (run, flight) in &runs {
            let (inside, edges) = left_in(flight);
            ctx.violations
                .check(callers.contains_key(run) || inside > 0 || edges > 0, || {
                    format!("singleflight: run {run} of key {} had no caller", flight.0)
                });
        }
        let in_flight = self.group.in_flight();
        ctx.violations.check(in_flight == 0, || {
            format!("singleflight: {in_flight} keys in flight after the round")
        });
    }
}

/// `CALLS` calls on random keys at random virtual instants, a quarter of them given up
/// after 0-10 ms; each run sleeps a while.
async fn caller(ctx: Arc<Ctx>, fl: Arc<Flights>, mut rng: Rng) {
    for _ in 0..CALLS {
        sleep(rng.duration(Duration::ZERO, Duration::from_millis(20))).await;
        let key = rng.below(KEYS);
        let work_for = rng.duration(Duration::from_millis(1), Duration::from_millis(10));
        let patience = rng
            .chance(25)
            .then(|| rng.duration(Duration::ZERO, Duration::from_millis(10)));
        let at = Instant::now();
        let (c, f) = (ctx.clone(), fl.clone());
        let call = fl.group.call(key, move || run_flight(c, f, key, work_for));
        ctx.counts.ops.fetch_add(1, Relaxed);
        let result = match patience {
            None => call.await,
            Some(p) => match gort::time::timeout(p, call).await {
                Ok(r) => r,
                Err(_) => {
                    fl.left
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .push((key, at));
                    ctx.counts.stopped.fetch_add(1, Relaxed);
                    continue;
                }
            },
        };
        match result {
            Ok((run, shared)) => fl
                .calls
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .push((key, at, run, shared)),
            Err(e) => ctx.violation(format!("singleflight: a call for key {key} failed: {e}")),
        }
    }
}

/// One run of key `key`: alone for its key while it runs; returns its id.
async fn run_flight(ctx: Arc<Ctx>, fl: Arc<Flights>, key: u64, work_for: Duration) -> u64 {
    let run = fl.next_run.fetch_add(1, Relaxed);
    fl.running.fetch_add(1, Relaxed);
    let start = Instant::now();
    let before = fl.active[key as usize].fetch_add(1, Relaxed);
    ctx.violations.check(before == 0, || {
        format!("singleflight: run {run} of key {key} started while {before} other runs of it were executing")
    });
    ctx.counts.started.fetch_add(1, Relaxed);
    sleep(work_for).await;
    let end = Instant::now();
    fl.runs
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .insert(run, (key, start, end));
    fl.active[key as usize].fetch_sub(1, Relaxed);
    fl.running.fetch_sub(1, Relaxed);
    run
}
