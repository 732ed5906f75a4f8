//! paused-clock: a runtime started paused (`gort::time::pause`'s clock), whose clock moves only
//! by jumps when it is quiescent, under tasks on every P that sleep, yield, spawn sleepers,
//! reset channel `Timer`s, arm `after_func`s and read `Ticker`s through hours of virtual time.
//! Every wake must see the clock at exactly its deadline: a jump while a woken task waits to
//! run, or while a thread without a P holds a task it woke, shows as a wake past it; so do
//! `advance` and `timeout` returning anywhere but at their instant.

use super::{join_all, Ctx};
use crate::rng::Rng;
use gort::time::{after_func, Instant, Ticker, Timer};
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::time::Duration;

/// One line for `--list`.
pub const ABOUT: &str = "a paused runtime: tasks on every P sleep, yield, spawn sleepers, reset Timers, arm after_funcs, \
    advance, time out and read Tickers through hours of virtual time; every wake sees the clock at exactly its deadline (quiescence, jumps)";

/// Steps of one task in a round.
const STEPS: usize = 12;

/// The longest virtual wait of a step.
const MAX_WAIT: Duration = Duration::from_secs(600);

/// Runs paused-clock.
pub fn run(ctx: &Arc<Ctx>) {
    let rt = ctx.paused_runtime();
    let tasks = ctx.cfg.procs as u64 * 8;
    let end = ctx.epoch + ctx.part(0.9);
    let c = ctx.clone();
    let rounds = rt.block_on(async move {
        let mut round = 0u64;
        while std::time::Instant::now() < end {
            let handles: Vec<_> = (0..tasks)
                .map(|t| gort::spawn(task(c.clone(), c.rng(round * tasks + t))))
                .collect();
            join_all(&c, "paused task", handles).await;
            round += 1;
        }
        round
    });
    ctx.note(format!("rounds={rounds} tasks per round={tasks}"));
    ctx.finish_runtime(rt);
}

/// One task's round: `STEPS` random steps; at the end its virtual time must be the sum of
/// its waits (no step took longer than its deadline, none ended early).
async fn task(ctx: Arc<Ctx>, mut rng: Rng) {
    let start = Instant::now();
    let mut waited = Duration::ZERO;
    for _ in 0..STEPS {
        let d = rng.duration(Duration::ZERO, MAX_WAIT);
        ctx.counts.ops.fetch_add(1, Relaxed);
        waited += match rng.index(8) {
            0 => sleep(&ctx, d).await,
            1 => {
                gort::yield_now().await;
                Duration::ZERO
            }
            2 => {
                gort::spawn(sleeper(ctx.clone(), d));
                Duration::ZERO
            }
            3 => reset_timer(&ctx, d).await,
            4 => fire_after_func(&ctx, d).await,
            5 => advance(&ctx, d).await,
            6 => time_out(&ctx, d, rng.chance(50)).await,
            _ => read_ticker(&ctx, d / 8 + Duration::from_millis(1)).await,
        };
    }
    let took = Instant::now() - start;
    ctx.violations.check(took == waited, || {
        format!("a task's waits summed to {waited:?} of virtual time, the clock moved {took:?}")
    });
}

/// Checks that an expiry due at `due` is seen with the clock at exactly `due`.
fn seen_at(ctx: &Ctx, due: Instant, what: &str) {
    let now = Instant::now();
    ctx.record_lateness(ctx.ns(due), ctx.ns(now), what);
    ctx.counts.fired.fetch_add(1, Relaxed);
    if now > due {
        ctx.violation(format!(
            "{what} woke {:?} past its deadline on a paused clock",
            now - due
        ));
    }
}

/// `v - due` in ns, signed.
fn off(ctx: &Ctx, v: Instant, due: Instant) -> i64 {
    ctx.ns(v) as i64 - ctx.ns(due) as i64
}

async fn sleep(ctx: &Ctx, d: Duration) -> Duration {
    let due = Instant::now() + d;
    ctx.counts.started.fetch_add(1, Relaxed);
    gort::time::sleep_until(due).await;
    seen_at(ctx, due, "a sleep");
    d
}

/// A detached task's sleep, which nobody waits for: the round may end first.
async fn sleeper(ctx: Arc<Ctx>, d: Duration) {
    sleep(&ctx, d).await;
}

/// A channel `Timer` armed for an hour, reset to `d` (true: the hour's arming was stopped),
/// and received: its value is its due instant.
async fn reset_timer(ctx: &Ctx, d: Duration) -> Duration {
    let t = Timer::new(Duration::from_secs(3_600));
    let due = Instant::now() + d;
    ctx.counts.started.fetch_add(1, Relaxed);
    ctx.counts.reset.fetch_add(1, Relaxed);
    ctx.violations.check(t.reset(d), || {
        "reset of an unexpired hour-long Timer returned false".into()
    });
    match t.c().recv().await {
        Some(v) => ctx.violations.check(v == due, || {
            format!("a Timer's value was {:?} off its due instant", v - due)
        }),
        None => ctx.violation("a Timer's channel closed"),
    }
    seen_at(ctx, due, "a reset Timer");
    d
}

/// An `after_func` due in `d`, whose callback checks the clock and tells the task.
async fn fire_after_func(ctx: &Arc<Ctx>, d: Duration) -> Duration {
    let (tx, rx) = gort::chan::bounded::<()>(1);
    let due = Instant::now() + d;
    let c = ctx.clone();
    ctx.counts.started.fetch_add(1, Relaxed);
    let _af = after_func(d, move || {
        seen_at(&c, due, "an after_func callback");
        let _ = tx.try_send(());
    });
    if rx.recv().await.is_none() {
        ctx.violation("an after_func's callback never ran");
    }
    d
}

/// `advance(d)`: it returns with the clock at exactly `d` later, whatever the other tasks'
/// timers (those due on the way fire first; the clock does not pass the target).
async fn advance(ctx: &Ctx, d: Duration) -> Duration {
    let due = Instant::now() + d;
    ctx.counts.started.fetch_add(1, Relaxed);
    gort::time::advance(d).await;
    seen_at(ctx, due, "an advance");
    d
}

/// `timeout(d, ..)` around a sleep of twice `d` (it elapses at `d`) or of half `d` (it
/// completes then).
async fn time_out(ctx: &Ctx, d: Duration, elapses: bool) -> Duration {
    let inner = if elapses { d * 2 } else { d / 2 };
    let start = Instant::now();
    ctx.counts.started.fetch_add(1, Relaxed);
    let r = gort::time::timeout(d, gort::time::sleep(inner)).await;
    let took = if elapses { d } else { inner };
    ctx.violations
        .check(r.is_err() == (elapses && inner > d), || {
            format!("timeout({d:?}) around a sleep of {inner:?} gave {r:?}")
        });
    seen_at(ctx, start + took, "a timeout");
    took
}

/// Three ticks of a `Ticker` of `period`: each value is its due instant on the grid, seen
/// with the clock at that instant.
async fn read_ticker(ctx: &Ctx, period: Duration) -> Duration {
    let t0 = Instant::now();
    let ticker = Ticker::new(period);
    ctx.counts.started.fetch_add(1, Relaxed);
    for k in 1..=3 {
        let due = t0 + period * k;
        match ticker.c().recv().await {
            Some(v) => ctx.violations.check(v == due, || {
                format!(
                    "tick {k} of a {period:?} Ticker was {} ns off its grid",
                    off(ctx, v, due)
                )
            }),
            None => ctx.violation("a Ticker's channel closed"),
        }
        seen_at(ctx, due, "a tick");
    }
    ticker.stop();
    period * 3
}
