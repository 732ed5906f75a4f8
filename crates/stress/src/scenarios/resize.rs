//! resize: `set_procs` up and down, from outside the runtime, during a timer storm whose resets
//! mostly move deadlines earlier, so that timers sit on Ps that retire (and move) while they
//! are marked modified-earlier.

use super::timer_storm::{pick_d, Tables};
use super::{join_all, Ctx};
use crate::rng::Rng;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::time::Duration;

/// One line for `--list`.
pub const ABOUT: &str = "set_procs up/down every few ms during a storm of far timers reset earlier: \
    procresize, moveTimers of Waiting/ModifiedEarlier/Deleted timers, timerModifiedEarliest on retired Ps";

/// Runs resize.
pub fn run(ctx: &Arc<Ctx>) {
    let rt = ctx.runtime();
    let procs = ctx.cfg.procs;
    let max_procs = (procs * 2).max(2);
    let active = ctx.part(0.6);
    let n_af = ctx.scaled(40_000.0, 1_000, 300_000) as usize;
    let n_ch = (n_af / 20).clamp(100, 5_000);
    let far = active.max(Duration::from_millis(50));
    ctx.note(format!(
        "after_funcs={n_af} channel_timers={n_ch} procs=1..={max_procs} active={active:?}"
    ));
    let tables = Tables::new(n_af, n_ch);
    let driver = rt.spawn(storm(ctx.clone(), tables.clone(), procs * 2, far, active));
    // Resize from this (non-runtime) thread while the storm runs.
    let before = rt.metrics().timers_moved;
    let (resizes, shrinks) = resize_until_done(ctx, &rt, &driver, procs, max_procs);
    rt.set_procs(procs);
    if let Err(e) = rt.block_on(driver) {
        ctx.violation(format!("the storm driver did not join: {e}"));
    }
    let moved = rt.metrics().timers_moved - before;
    ctx.note(format!(
        "resizes={resizes} shrinks={shrinks} timers_moved={moved}"
    ));
    if shrinks > 5 && moved == 0 {
        ctx.warn(format!(
            "{shrinks} shrinking resizes moved no timer (metrics.timers_moved == 0)"
        ));
    }
    ctx.finish_runtime(rt);
}

/// Sets a random procs count in `1..=max_procs` every few ms until `driver` finishes; each
/// `set_procs` must take effect at once. Returns (resizes, shrinking resizes).
fn resize_until_done(
    ctx: &Ctx,
    rt: &gort::Runtime,
    driver: &gort::JoinHandle<()>,
    procs: usize,
    max_procs: usize,
) -> (u64, u64) {
    let mut rng = ctx.rng(99);
    let (mut resizes, mut shrinks, mut current) = (0u64, 0u64, procs);
    while !driver.is_finished() {
        std::thread::sleep(rng.duration(Duration::from_millis(2), Duration::from_millis(30)));
        let n = rng.range(1..max_procs as u64 + 1) as usize;
        if n < current {
            shrinks += 1;
        }
        rt.set_procs(n);
        ctx.violations.check(rt.procs() == n, || {
            format!("set_procs({n}) left procs() = {}", rt.procs())
        });
        current = n;
        resizes += 1;
        ctx.counts.ops.fetch_add(1, Relaxed);
    }
    (resizes, shrinks)
}

/// The storm, inside the runtime: `workers` tasks create far timers, then `workers` tasks
/// reset and stop them until `active` has passed, then every arming must settle.
async fn storm(
    ctx: Arc<Ctx>,
    tables: Arc<Tables>,
    workers: usize,
    far: Duration,
    active: Duration,
) {
    let (done_tx, done_rx) = gort::chan::unbounded::<()>();
    // Far deadlines first, from several tasks so the timers land on several Ps.
    let creators: Vec<_> = (0..workers)
        .map(|w| {
            let (ctx, t, done) = (ctx.clone(), tables.clone(), done_rx.clone());
            gort::spawn(async move { create_far(&ctx, &t, w, workers, far, &done).await })
        })
        .collect();
    join_all(&ctx, "creator", creators).await;
    let resetters: Vec<_> = (0..workers)
        .map(|w| {
            let (ctx, t) = (ctx.clone(), tables.clone());
            gort::spawn(async move { reset_until(&ctx, &t, w, far, active).await })
        })
        .collect();
    join_all(&ctx, "resetter", resetters).await;
    tables.settle(&ctx, done_tx, far).await;
}

/// Creator `w`'s share of the timers (every `workers`th), each due in `far / 2..far`, so that
/// they are still pending when the resets move them; yields every 256 after_funcs.
async fn create_far(
    ctx: &Arc<Ctx>,
    t: &Tables,
    w: usize,
    workers: usize,
    far: Duration,
    done: &gort::chan::Receiver<()>,
) {
    let mut rng = ctx.rng(w as u64);
    for (k, i) in (w..t.n_af()).step_by(workers).enumerate() {
        t.make_af(ctx, i, rng.duration(far / 2, far));
        if k % 256 == 255 {
            gort::yield_now().await;
        }
    }
    for i in (w..t.n_ch()).step_by(workers) {
        t.make_ch(ctx, i, rng.duration(far / 2, far), done);
    }
}

/// Resetter `w`: random stops and resets until `active` has passed since the epoch, mostly
/// moving deadlines earlier (so that timers are modified-earlier when their P retires); sleeps
/// briefly every 64 operations.
async fn reset_until(ctx: &Arc<Ctx>, t: &Tables, w: usize, far: Duration, active: Duration) {
    let mut rng = ctx.rng(1_000 + w as u64);
    let end = ctx.epoch + active;
    let mut n = 0u64;
    while std::time::Instant::now() < end {
        n += 1;
        if n % 64 == 0 {
            gort::time::sleep(Duration::from_micros(300)).await;
        }
        let (stop, d) = pick_op(&mut rng, far);
        t.random_op(ctx, &mut rng, 20, stop, d);
    }
}

/// One resetter operation: 55% a reset to within 30 ms (earlier than the far deadlines), 20%
/// a reset to another far deadline, 15% the storm's own pick up to `far / 2`, 10% a stop.
/// Returns (stop, reset duration).
fn pick_op(rng: &mut Rng, far: Duration) -> (bool, Duration) {
    match rng.below(100) {
        0..=54 => (
            false,
            rng.duration(Duration::ZERO, Duration::from_millis(30)),
        ),
        55..=74 => (false, rng.duration(far / 2, far)),
        75..=89 => (false, pick_d(rng, far / 2)),
        _ => (true, Duration::ZERO),
    }
}
