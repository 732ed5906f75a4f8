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

/// Runs after-func-storm.
pub fn run(ctx: &Arc<Ctx>) {
    let rt = ctx.runtime();
    let procs = ctx.cfg.procs;
    // Deadlines spread over at least 1 s and at most 300k callbacks per second of it.
    let n = ctx.scaled(120_000.0, 2_000, 1_000_000) as usize;
    let span = Duration::from_secs_f64(n as f64 / 300_000.0)
        .max(Duration::from_secs(1).min(ctx.part(0.5)));
    ctx.note(format!("callbacks={n} deadlines uniform over {span:?}"));
    let sh = Arc::new(Shared {
        fires: (0..n).map(|_| AtomicU8::new(0)).collect(),
        due: (0..n).map(|_| AtomicU64::new(0)).collect(),
        last_seen: AtomicU64::new(0),
    });
    let c = ctx.clone();
    rt.block_on(async move {
        let ctx = c;
        let creators = procs * 2;
        let t0 = ctx.now_ns();
        let made: Vec<_> = (0..creators)
            .map(|w| {
                let (ctx, sh) = (ctx.clone(), sh.clone());
                gort::spawn(async move { create(&ctx, &sh, w, creators, n, span).await })
            })
            .collect();
        let kept: Vec<(usize, Kind, AfterFunc)> = join_all(&ctx, "creator", made)
            .await
            .into_iter()
            .flatten()
            .collect();
        ctx.note(format!("created in {} ms", (ctx.now_ns() - t0) / 1_000_000));
        // Stop the Stopped ones (most before they are due) and re-arm the Refire ones once
        // their first callback ran, from one task per kind.
        let expected = Arc::new((0..n).map(|_| AtomicU8::new(1)).collect::<Vec<_>>());
        let (stoppers, refirers): (Vec<_>, Vec<_>) =
            kept.into_iter().partition(|k| k.1 == Kind::Stopped);
        let stop_task = {
            let (ctx, expected) = (ctx.clone(), expected.clone());
            gort::spawn(async move {
                for (i, _, h) in &stoppers {
                    // true: it will never run; false: it ran or is running (counted below).
                    let r = h.stop();
                    ctx.counts.stopped.fetch_add(1, Relaxed);
                    if r {
                        expected[*i].store(0, Relaxed);
                    }
                }
                stoppers
            })
        };
        let refire_task = {
            let (ctx, sh, expected) = (ctx.clone(), sh.clone(), expected.clone());
            gort::spawn(async move {
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
            })
        };
        let handles = join_all(&ctx, "stopper", vec![stop_task]).await;
        let handles2 = join_all(&ctx, "refirer", vec![refire_task]).await;
        let want: u64 = expected.iter().map(|e| u64::from(e.load(Relaxed))).sum();
        let give_up = std::time::Instant::now() + span + Duration::from_secs(3);
        loop {
            let got: u64 = sh.fires.iter().map(|f| u64::from(f.load(Relaxed))).sum();
            if got >= want || std::time::Instant::now() > give_up {
                break;
            }
            gort::time::sleep(Duration::from_millis(5)).await;
        }
        gort::time::sleep(Duration::from_millis(20)).await; // let a duplicate show up
        let mut bad = 0u64;
        for i in 0..n {
            let (got, want) = (sh.fires[i].load(Relaxed), expected[i].load(Relaxed));
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
        let last = sh.last_seen.load(Relaxed);
        ctx.note(format!(
            "last callback {} ms after the first creation",
            last.saturating_sub(t0) / 1_000_000
        ));
        drop((handles, handles2));
    });
    ctx.finish_runtime(rt);
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
) -> Vec<(usize, Kind, AfterFunc)> {
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
