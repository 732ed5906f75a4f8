//! sleep-fanout: up to a million tasks each sleeping a random duration (bench shape T3).

use super::{join_all, Ctx};
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::time::Duration;

/// One line for `--list`.
pub const ABOUT: &str = "up to 1M tasks each sleep a random 1 ms..max(k/200k s, 50 ms) (shape T3, span stretched to stay under capacity): mass addtimer, heap growth, \
    runtimer waking tasks onto run queues, stealWork of timers and tasks, wake-ups never early";

/// Runs sleep-fanout.
pub fn run(ctx: &Arc<Ctx>) {
    let rt = ctx.runtime();
    let procs = ctx.cfg.procs;
    // Wake-ups are spread at most 200k per second of span, so that 2 cores are busy but not
    // overloaded (an overloaded run measures backlog, not timer lateness).
    let k = ctx.scaled(80_000.0, 1_000, 1_000_000);
    let span = Duration::from_secs_f64(k as f64 / 200_000.0).max(Duration::from_millis(50));
    ctx.note(format!("tasks={k} sleeps uniform in [1ms, {span:?}]"));
    let c = ctx.clone();
    rt.block_on(async move {
        let ctx = c;
        let t0 = std::time::Instant::now();
        // Spawn from several tasks, so the sleeps start on every P.
        let spawners: Vec<_> = (0..procs as u64)
            .map(|w| {
                let ctx = ctx.clone();
                gort::spawn(async move {
                    let mut rng = ctx.rng(w);
                    let mut handles = Vec::with_capacity((k / procs as u64 + 1) as usize);
                    for (n, _) in (w..k).step_by(procs).enumerate() {
                        if n % 256 == 255 {
                            gort::yield_now().await; // let due sleepers run meanwhile
                        }
                        let d = rng.duration(Duration::from_millis(1), span);
                        let c = ctx.clone();
                        handles.push(gort::spawn(async move {
                            let ctx = c;
                            let s = gort::time::sleep(d);
                            let due = ctx.ns(s.deadline());
                            s.await;
                            ctx.record_lateness(due, ctx.now_ns(), "sleep");
                            ctx.counts.fired.fetch_add(1, Relaxed);
                        }));
                        ctx.counts.started.fetch_add(1, Relaxed);
                        ctx.counts.ops.fetch_add(1, Relaxed);
                    }
                    handles
                })
            })
            .collect();
        let handles: Vec<_> = join_all(&ctx, "spawner", spawners)
            .await
            .into_iter()
            .flatten()
            .collect();
        ctx.note(format!("spawned in {} ms", t0.elapsed().as_millis()));
        let joined = join_all(&ctx, "sleeper", handles).await.len() as u64;
        ctx.violations
            .check(joined == k, || format!("{joined} of {k} sleepers joined"));
        let woke = ctx.counts.fired.load(Relaxed);
        ctx.violations
            .check(woke == k, || format!("{woke} of {k} sleepers woke"));
        ctx.note(format!("all woke after {} ms", t0.elapsed().as_millis()));
    });
    ctx.finish_runtime(rt);
}
