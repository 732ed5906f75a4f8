//! after-func-storm: up to a million callbacks with deadlines spread over the next second
//! (bench shape T4), some stopped before they run, some reset after they ran.

use super::{join_all, Ctx};
use gort::time::{after_func, AfterFunc};
use std::sync::atomic::{AtomicU64, AtomicU8, Ordering::Relaxed};
use std::sync::Arc;
use std::time::Duration;

/// One line for `--list`.
pub const ABOUT: &str = "up to 1M after_func callbacks due within max(1 s, n/300k s) (shape T4), 10% stopped, 5% reset after \
    firing: addtimer from many Ps, runtimer/runOneTimer, dropped handles keep running, never early";

/// What each timer is for.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// Handle dropped at once; must fire exactly once.
    Plain,
    /// Stopped by another task; fires once unless the stop returned true.
    Stopped,
    /// Reset after its callback ran; must then run again.
    Refire,
}

struct Shared {
    fires: Vec<AtomicU8>,
    /// Earliest due instant of the current arming, ns.
    due: Vec<AtomicU64>,
    last_seen: AtomicU64,
}

/// The timers a creator keeps handles to (the `Stopped` and `Refire` ones), by index.
type Kept = Vec<(usize, Kind, AfterFunc)>;

/// Runs after-func-storm.
pub fn run(ctx: &Arc<Ctx>) {
    let rt = ctx.runtime();
    let procs = ctx.cfg.procs;
    // Deadlines spread over max(n / 300k s, min(1 s, half the budget)): at most 300k
    // callbacks per second of it, and at least 1 s unless the budget is shorter.
    let n = ctx.scaled(120_000.0, 2_000, 1_000_000) as usize;
    let span = Duration::from_secs_f64(n as f64 / 300_000.0)
        .max(Duration::from_secs(1).min(ctx.part(0.5)));
    ctx.note(format!("callbacks={n} deadlines uniform over {span:?}"));
    let sh = Arc::new(Shared {
        fires: (0..n).map(|_| AtomicU8::new(0)).collect(),
        due: (0..n).map(|_| AtomicU64::new(0)).collect(),
        last_seen: AtomicU64::new(0),
    });
    rt.block_on(storm(ctx.clone(), sh, procs * 2, n, span));
    ctx.finish_runtime(rt);
}

/// The storm, inside the runtime: `creators` tasks create the `n` timers, then one task stops
/// the `Stopped` ones and one re-arms the `Refire` ones; every callback must then have run
/// exactly as often as its timer's history says. The kept handles live to the end.
async fn storm(ctx: Arc<Ctx>, sh: Arc<Shared>, creators: usize, n: usize, span: Duration) {
    let t0 = ctx.now_ns();
    let made: Vec<_> = (0..creators)
        .map(|w| {
            let (ctx, sh) = (ctx.clone(), sh.clone());
            gort::spawn(async move { create(&ctx, &sh, w, creators, n, span).await })
        })
        .collect();
    let kept: Kept = join_all(&ctx, "creator", made)
        .await
        .into_iter()
        .flatten()
        .collect();
    ctx.note(format!("created in {} ms", (ctx.now_ns() - t0) / 1_000_000));
    // Stop the Stopped ones (most before they are due) and re-arm the Refire ones once
    // their first callback ran, from one task per kind.
    let expected = Arc::new((0..n).map(|_| AtomicU8::new(1)).collect::<Vec<_>>());
    let (stoppers, refirers): (Kept, Kept) = kept.into_iter().partition(|k| k.1 == Kind::Stopped);
    let stop_task = gort::spawn(stop_all(ctx.clone(), expected.clone(), stoppers));
    let refire_task = gort::spawn(refire_all(
        ctx.clone(),
        sh.clone(),
        expected.clone(),
        refirers,
    ));
    let handles = join_all(&ctx, "stopper", vec![stop_task]).await;
    let handles2 = join_all(&ctx, "refirer", vec![refire_task]).await;
    await_fires(&sh, &expected, span).await;
    gort::time::sleep(Duration::from_millis(20)).await; // let a duplicate show up
    check_fire_counts(&ctx, &sh, &expected);
    let last = sh.last_seen.load(Relaxed);
    ctx.note(format!(
        "last callback {} ms after the first creation",
        last.saturating_sub(t0) / 1_000_000
    ));
    drop((handles, handles2));
}

/// Stops each of `stoppers`: a stop that returns true means the callback will never run, so
/// its expected count drops to 0; false means it ran or is running, and still counts once.
async fn stop_all(ctx: Arc<Ctx>, expected: Arc<Vec<AtomicU8>>, stoppers: Kept) -> Kept {
    for (i, _, h) in &stoppers {
        // true: it will never run; false: it ran or is running (counted below).
        let r = h.stop();
        ctx.counts.stopped.fetch_add(1, Relaxed);
        if r {
            expected[*i].store(0, Relaxed);
        }
    }
    stoppers
}

/// Re-arms each of `refirers` once its first callback ran: that reset must return false (the
/// arming it replaces already fired) and the callback must then run a second time.
async fn refire_all(
    ctx: Arc<Ctx>,
    sh: Arc<Shared>,
    expected: Arc<Vec<AtomicU8>>,
    refirers: Kept,
) -> Kept {
    let mut rng = ctx.rng(7);
    for (i, _, h) in &refirers {
        while sh.fires[*i].load(Relaxed) == 0 {
            gort::time::sleep(Duration::from_millis(2)).await;
        }
        let d = rng.duration(Duration::ZERO, Duration::from_millis(20));
        sh.due[*i].store(ctx.now_ns() + d.as_nanos() as u64, Relaxed);
        let r = h.reset(d);
        ctx.violations.check(!r, || {
            format!("after_func {i}: reset after its callback ran returned true")
        });
        ctx.counts.reset.fetch_add(1, Relaxed);
        expected[*i].store(2, Relaxed);
    }
    refirers
}

/// Waits until as many callbacks ran as expected in all, or until 3 s past the deadline span
/// of the time the process could run (a lost callback then shows up as a wrong count rather
/// than a hang).
async fn await_fires(sh: &Shared, expected: &[AtomicU8], span: Duration) {
    let want: u64 = expected.iter().map(|e| u64::from(e.load(Relaxed))).sum();
    let allowance = span + Duration::from_secs(3);
    crate::patience::wait_until(allowance, Duration::from_millis(5), || {
        sh.fires
            .iter()
            .map(|f| u64::from(f.load(Relaxed)))
            .sum::<u64>()
            >= want
    })
    .await;
}

/// Every callback ran exactly its expected number of times; reports the first ten misses
/// one by one and the rest as a count.
fn check_fire_counts(ctx: &Ctx, sh: &Shared, expected: &[AtomicU8]) {
    let mut bad = 0u64;
    for (i, want) in expected.iter().enumerate() {
        let (got, want) = (sh.fires[i].load(Relaxed), want.load(Relaxed));
        if got != want {
            bad += 1;
            if bad <= 10 {
                ctx.violation(format!(
                    "after_func {i}: callback ran {got} times, expected {want}"
                ));
            }
        }
    }
    if bad > 10 {
        ctx.violation(format!(
            "... {} more after_funcs with a wrong callback count",
            bad - 10
        ));
    }
}

/// Creates creator `w`'s share of timers as fast as it can (yielding every 256, as a
/// cooperative task must for due timers to run); returns the handles it keeps.
async fn create(
    ctx: &Arc<Ctx>,
    sh: &Arc<Shared>,
    w: usize,
    creators: usize,
    n: usize,
    span: Duration,
) -> Kept {
    let mut rng = ctx.rng(w as u64);
    let mut kept = Vec::new();
    for (k, i) in (w..n).step_by(creators).enumerate() {
        if k % 256 == 255 {
            gort::yield_now().await;
        }
        let kind = match rng.below(100) {
            0..=9 => Kind::Stopped,
            10..=14 => Kind::Refire,
            _ => Kind::Plain,
        };
        let d = rng.duration(Duration::ZERO, span);
        sh.due[i].store(ctx.now_ns() + d.as_nanos() as u64, Relaxed);
        let (c, s) = (ctx.clone(), sh.clone());
        let h = after_func(d, move || {
            let now = c.now_ns();
            let due = s.due[i].load(Relaxed);
            if now < due {
                c.violation(format!(
                    "after_func {i}: callback ran {} µs before its deadline",
                    (due - now) / 1_000
                ));
            } else {
                c.record_lateness(due, now, "after_func");
            }
            s.last_seen.fetch_max(now, Relaxed);
            c.counts.fired.fetch_add(1, Relaxed);
            s.fires[i].fetch_add(1, Relaxed);
        });
        ctx.counts.started.fetch_add(1, Relaxed);
        ctx.counts.ops.fetch_add(1, Relaxed);
        if kind == Kind::Plain {
            drop(h); // an AfterFunc keeps running when its handle is dropped
        } else {
            kept.push((i, kind, h));
        }
    }
    kept
}
