//! ticker-churn: tickers reset (new period) and stopped by other tasks while their receivers are
//! slow, so that ticks are dropped, re-phased and cut off.

use super::{join_all, Ctx, DEBUG_SLOWDOWN};
use crate::check::{Attribution, TimerBook};
use crate::rng::Rng;
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
    rt.block_on(churn(ctx.clone(), k, procs * 2, active));
    ctx.finish_runtime(rt);
}

/// The churn, inside the runtime: `k` tickers, one slow receiver each, and `controllers`
/// tasks that reset and stop them until `active` has passed; then every ticker is stopped
/// and checked.
async fn churn(ctx: Arc<Ctx>, k: usize, controllers: usize, active: Duration) {
    let entries = new_tickers(&ctx, k);
    let (done_tx, done_rx) = gort::chan::unbounded::<()>();
    let receivers: Vec<_> = entries
        .iter()
        .map(|e| gort::spawn(receive(ctx.clone(), e.clone(), done_rx.clone())))
        .collect();
    let controllers: Vec<_> = (0..controllers)
        .map(|w| {
            let (ctx, entries) = (ctx.clone(), entries.clone());
            gort::spawn(async move { control(&ctx, &entries, w, active).await })
        })
        .collect();
    join_all(&ctx, "controller", controllers).await;
    done_tx.close();
    join_all(&ctx, "receiver", receivers).await;
    stop_and_check(&ctx, &entries).await;
}

/// `k` tickers with random periods, each with a book that knows its arming window.
fn new_tickers(ctx: &Ctx, k: usize) -> Arc<Vec<Arc<TkEntry>>> {
    let mut rng = ctx.rng(0);
    Arc::new(
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
    )
}

/// Stops every ticker; after `stop` returns no tick may be received (none is buffered 30 ms
/// later), and each book runs its final check.
async fn stop_and_check(ctx: &Ctx, entries: &[Arc<TkEntry>]) {
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
        let long_sleep = dawdle(&mut rng, &e).await;
        let mut takes = if long_sleep { 2 } else { 1 };
        let mut prev: Option<(u64, u64)> = None; // (seen, ops) of the first of two receives
        while takes > 0 {
            takes -= 1;
            let tick = match receive_tick(&ctx, &e, &done).await {
                Received::Tick(tick) => tick,
                Received::Disowned => continue,
                Received::Stop => return,
            };
            check_no_backlog(&ctx, &e, prev, &tick);
            prev = Some((tick.seen, tick.ops));
        }
    }
}

/// The receiver's pause before receiving: 40% a sleep of up to three periods, 10% a sleep
/// of 60-150 ms (many ticks dropped), else none. True after the long one.
async fn dawdle(rng: &mut Rng, e: &TkEntry) -> bool {
    match rng.below(10) {
        0..=3 => {
            let p = Duration::from_nanos(e.period_ns.load(Relaxed).max(1_000_000));
            gort::time::sleep(rng.duration(Duration::ZERO, p * 3)).await;
            false
        }
        4 => {
            gort::time::sleep(rng.duration(Duration::from_millis(60), Duration::from_millis(150)))
                .await;
            true
        }
        _ => false,
    }
}

/// One tick as its receiver saw it, all in ns of the scenario's clock.
struct Tick {
    /// When it was received.
    seen: u64,
    /// The book's operation count before the receive began.
    ops: u64,
    /// The tick's value.
    v_ns: u64,
    /// The book's operation count right after booking the tick.
    ops_now: u64,
}

/// What one receive on a ticker ended with.
enum Received {
    /// A tick its book attributes to an arming.
    Tick(Tick),
    /// A tick its book disowned (already a violation): nothing more to check.
    Disowned,
    /// The run is over, or the ticker's channel closed (a violation): the receiver stops.
    Stop,
}

/// Receives one tick (or the end of the run) and books it; the lateness of a tick whose due
/// time came after the receive began is recorded (an older one was buffered, not late).
async fn receive_tick(ctx: &Ctx, e: &TkEntry, done: &gort::chan::Receiver<()>) -> Received {
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
            return Received::Stop;
        }
        Event::Done => return Received::Stop,
    };
    let seen = ctx.now_ns();
    let v_ns = ctx.ns(v);
    ctx.counts.fired.fetch_add(1, Relaxed);
    let (attr, ops_now) = {
        let mut b = e.book.lock().unwrap();
        (b.on_value(v_ns, ops, &ctx.violations), b.ops())
    };
    if attr == Attribution::Violation {
        return Received::Disowned;
    }
    if start <= v_ns {
        ctx.record_lateness(v_ns, seen, "tick");
    }
    Received::Tick(Tick {
        seen,
        ops,
        v_ns,
        ops_now,
    })
}

/// The second of two back-to-back receives must not be a replayed backlog: unless the ticker
/// was reset or stopped meanwhile, its tick is due no more than one period (plus
/// [`backlog_tolerance`]) before the first receive.
fn check_no_backlog(ctx: &Ctx, e: &TkEntry, prev: Option<(u64, u64)>, tick: &Tick) {
    let period = e.period_ns.load(Relaxed);
    let Some((prev_seen, prev_ops)) = prev else {
        return;
    };
    let (ops, v_ns) = (tick.ops, tick.v_ns);
    let tol = period + backlog_tolerance().as_nanos() as u64;
    if prev_ops == ops && tick.ops_now == ops && period > 0 && v_ns + tol < prev_seen {
        ctx.timing_violation(format!(
            "ticker {}: tick due {} ms before the previous receive: a backlog was replayed",
            e.id,
            (prev_seen - v_ns) / 1_000_000
        ));
    }
}
