//! resize: `set_procs` up and down, from outside the runtime, during a timer storm whose resets
//! mostly move deadlines earlier, so that timers sit on Ps that retire (and move) while they
//! are marked modified-earlier.

use super::timer_storm::{pick_d, Tables};
use super::{join_all, Ctx};
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
    let driver = {
        let (ctx, tables) = (ctx.clone(), tables.clone());
        rt.spawn(async move {
            let (done_tx, done_rx) = gort::chan::unbounded::<()>();
            let workers = procs * 2;
            // Far deadlines first, from several tasks so the timers land on several Ps.
            let creators: Vec<_> = (0..workers)
                .map(|w| {
                    let (ctx, t, done) = (ctx.clone(), tables.clone(), done_rx.clone());
                    gort::spawn(async move {
                        let mut rng = ctx.rng(w as u64);
                        for (k, i) in (w..t.n_af()).step_by(workers).enumerate() {
                            t.make_af(&ctx, i, rng.duration(far / 2, far));
                            if k % 256 == 255 {
                                gort::yield_now().await;
                            }
                        }
                        for i in (w..t.n_ch()).step_by(workers) {
                            t.make_ch(&ctx, i, rng.duration(far / 2, far), &done);
                        }
                    })
                })
                .collect();
            join_all(&ctx, "creator", creators).await;
            let resetters: Vec<_> = (0..workers)
                .map(|w| {
                    let (ctx, t) = (ctx.clone(), tables.clone());
                    gort::spawn(async move {
                        let mut rng = ctx.rng(1_000 + w as u64);
                        let end = ctx.epoch + active;
                        let mut n = 0u64;
                        while std::time::Instant::now() < end {
                            n += 1;
                            if n % 64 == 0 {
                                gort::time::sleep(Duration::from_micros(300)).await;
                            }
                            let (stop, d) = match rng.below(100) {
                                0..=54 => (
                                    false,
                                    rng.duration(Duration::ZERO, Duration::from_millis(30)),
                                ),
                                55..=74 => (false, rng.duration(far / 2, far)),
                                75..=89 => (false, pick_d(&mut rng, far / 2)),
                                _ => (true, Duration::ZERO),
                            };
                            t.random_op(&ctx, &mut rng, 20, stop, d);
                        }
                    })
                })
                .collect();
            join_all(&ctx, "resetter", resetters).await;
            tables.settle(&ctx, done_tx, far).await;
        })
    };
    // Resize from this (non-runtime) thread while the storm runs.
    let mut rng = ctx.rng(99);
    let (mut resizes, mut shrinks, mut current) = (0u64, 0u64, procs);
    let before = rt.metrics().timers_moved;
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
