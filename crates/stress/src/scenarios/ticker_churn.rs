//! ticker-churn: tickers reset (new period) and stopped by other tasks while their receivers are
//! slow, so that ticks are dropped, re-phased and cut off.

use super::{join_all, Ctx, DEBUG_SLOWDOWN};
use crate::check::{Attribution, TimerBook};
use gort::time::Ticker;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// One line for `--list`.
pub const ABOUT: &str =
    "tickers reset/stopped from other tasks while receivers are slow: periodic runOneTimer \
    re-arm (phase kept, missed ticks skipped), modtimer on periodic timers, tick dropping";

struct TkEntry {
    id: u64,
    ticker: Ticker,
    book: Mutex<TimerBook>,
    /// Current period in nanoseconds, 0 while stopped.
    period_ns: std::sync::atomic::AtomicU64,
}

/// How far a tick may trail the previous receive after a long sleep before it counts as a
/// replayed backlog: one period plus this much scheduling lateness.
fn backlog_tolerance() -> Duration {
    Duration::from_millis(if cfg!(debug_assertions) {
        50 * DEBUG_SLOWDOWN
    } else {
        50
    })
}

fn pick_period(rng: &mut crate::rng::Rng) -> Duration {
    rng.duration(Duration::from_millis(1), Duration::from_millis(20))
}

/// Runs ticker-churn.
pub fn run(ctx: &Arc<Ctx>) {
    let rt = ctx.runtime();
    let procs = ctx.cfg.procs;
    let active = ctx.part(0.8);
    let k = ctx.scaled(40.0, 16, 256) as usize;
    ctx.note(format!("tickers={k} periods=1..20ms active={active:?}"));
    let c = ctx.clone();
    rt.block_on(async move {
        let ctx = c;
        let mut rng = ctx.rng(0);
        let entries: Arc<Vec<Arc<TkEntry>>> = Arc::new(
            (0..k as u64)
                .map(|id| {
                    let p = pick_period(&mut rng);
                    let before = ctx.now_ns();
                    let ticker = Ticker::new(p);
                    let after = ctx.now_ns();
                    let pn = p.as_nanos() as u64;
                    ctx.counts.started.fetch_add(1, Relaxed);
                    Arc::new(TkEntry {
                        id,
                        ticker,
                        book: Mutex::new(TimerBook::new(id, before, after, pn, pn)),
                        period_ns: pn.into(),
                    })
                })
                .collect(),
        );
        let (done_tx, done_rx) = gort::chan::unbounded::<()>();
        let receivers: Vec<_> = entries
            .iter()
            .map(|e| gort::spawn(receive(ctx.clone(), e.clone(), done_rx.clone())))
            .collect();
        let controllers: Vec<_> = (0..procs * 2)
            .map(|w| {
                let (ctx, entries) = (ctx.clone(), entries.clone());
                gort::spawn(async move { control(&ctx, &entries, w, active).await })
            })
            .collect();
        join_all(&ctx, "controller", controllers).await;
        done_tx.close();
        join_all(&ctx, "receiver", receivers).await;
        // Stop everything; after stop returns no tick may be received.
        for e in entries.iter() {
            let mut b = e.book.lock().unwrap();
            e.ticker.stop();
            b.on_stop(None, ctx.now_ns(), &ctx.violations);
        }
        gort::time::sleep(Duration::from_millis(30)).await;
        let now = ctx.now_ns();
        for e in entries.iter() {
            if let Ok(v) = e.ticker.c().try_recv() {
                ctx.violation(format!(
                    "ticker {}: tick {:?} received after stop returned",
                    e.id, v
                ));
            }
            e.book.lock().unwrap().finish(now, &ctx.violations);
        }
    });
    ctx.finish_runtime(rt);
}

/// Resets (new period) or stops random tickers every few milliseconds.
async fn control(ctx: &Arc<Ctx>, entries: &[Arc<TkEntry>], w: usize, active: Duration) {
    let mut rng = ctx.rng(1_000 + w as u64);
    let end = ctx.epoch + active;
    while std::time::Instant::now() < end {
        gort::time::sleep(rng.duration(Duration::from_micros(200), Duration::from_millis(4))).await;
        let e = &entries[rng.index(entries.len())];
        let mut b = e.book.lock().unwrap();
        let before = ctx.now_ns();
        if rng.chance(25) {
            e.ticker.stop();
            b.on_stop(None, ctx.now_ns(), &ctx.violations);
            e.period_ns.store(0, Relaxed);
            ctx.counts.stopped.fetch_add(1, Relaxed);
        } else {
            let p = pick_period(&mut rng);
            e.ticker.reset(p);
            let after = ctx.now_ns();
            let pn = p.as_nanos() as u64;
            b.on_reset(None, before, after, pn, pn, &ctx.violations);
            e.period_ns.store(pn, Relaxed);
            ctx.counts.reset.fetch_add(1, Relaxed);
        }
        ctx.counts.ops.fetch_add(1, Relaxed);
    }
}

enum Event {
    Tick(Option<gort::time::Instant>),
    Done,
}

/// A slow receiver: sometimes sleeps (short, or long enough for many ticks to drop) between
/// receives. After a long sleep it receives twice in a row: the first tick may be old (the
/// one buffered tick), the second must not be a replayed backlog.
async fn receive(ctx: Arc<Ctx>, e: Arc<TkEntry>, done: gort::chan::Receiver<()>) {
    let mut rng = ctx.rng(10_000 + e.id);
    loop {
        let long_sleep = match rng.below(10) {
            0..=3 => {
                let p = Duration::from_nanos(e.period_ns.load(Relaxed).max(1_000_000));
                gort::time::sleep(rng.duration(Duration::ZERO, p * 3)).await;
                false
            }
            4 => {
                gort::time::sleep(
                    rng.duration(Duration::from_millis(60), Duration::from_millis(150)),
                )
                .await;
                true
            }
            _ => false,
        };
        let mut takes = if long_sleep { 2 } else { 1 };
        let mut prev: Option<(u64, u64)> = None; // (seen, ops) of the first of two receives
        while takes > 0 {
            takes -= 1;
            let ops = e.book.lock().unwrap().ops();
            let start = ctx.now_ns();
            let ev = gort::select! {
                v = e.ticker.c().recv() => Event::Tick(v),
                _ = done.recv() => Event::Done,
            };
            let v = match ev {
                Event::Tick(Some(v)) => v,
                Event::Tick(None) => {
                    ctx.violation(format!("ticker {}: channel closed", e.id));
                    return;
                }
                Event::Done => return,
            };
            let seen = ctx.now_ns();
            let v_ns = ctx.ns(v);
            ctx.counts.fired.fetch_add(1, Relaxed);
            let (attr, ops_now) = {
                let mut b = e.book.lock().unwrap();
                (b.on_value(v_ns, ops, &ctx.violations), b.ops())
            };
            if attr == Attribution::Violation {
                continue;
            }
            if start <= v_ns {
                ctx.record_lateness(v_ns, seen, "tick");
            }
            let period = e.period_ns.load(Relaxed);
            if let Some((prev_seen, prev_ops)) = prev {
                let tol = period + backlog_tolerance().as_nanos() as u64;
                if prev_ops == ops && ops_now == ops && period > 0 && v_ns + tol < prev_seen {
                    ctx.timing_violation(format!(
                        "ticker {}: tick due {} ms before the previous receive: a backlog was replayed",
                        e.id,
                        (prev_seen - v_ns) / 1_000_000
                    ));
                }
            }
            prev = Some((seen, ops));
        }
    }
}
