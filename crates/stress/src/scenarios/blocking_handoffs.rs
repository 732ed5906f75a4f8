//! blocking-handoffs: tasks arm timers on their P and then block the thread in
//! `block_in_place` (every P at once, in some rounds), or wait on `spawn_blocking` work, while
//! the timers must still fire on time: the blocked P's heap has to be handed to another thread.

use super::{join_all, Ctx};
use gort::time::after_func;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use std::time::Duration;

/// One line for `--list`.
pub const ABOUT: &str = "timers pending on Ps whose threads block in block_in_place (all Ps at once) or wait \
    on spawn_blocking: handoffp of a P with timers, wakeNetPoller from handoff, stealWork, blocking pool";

/// Runs blocking-handoffs.
pub fn run(ctx: &Arc<Ctx>) {
    let rt = ctx.runtime();
    let procs = ctx.cfg.procs;
    let active = ctx.part(0.8);
    let c = ctx.clone();
    rt.block_on(async move {
        let ctx = c;
        let mut rng = ctx.rng(0);
        let end = ctx.epoch + active;
        let (mut rounds, mut blocked_all) = (0u64, 0u64);
        while std::time::Instant::now() < end {
            rounds += 1;
            // Half the rounds block every P at once; the others block one fewer.
            let all = rng.chance(50);
            let blockers = if all {
                procs
            } else {
                procs.saturating_sub(1).max(1)
            };
            blocked_all += u64::from(all);
            let fired = Arc::new(AtomicU64::new(0));
            let tasks: Vec<_> = (0..blockers)
                .map(|b| {
                    let (ctx, fired) = (ctx.clone(), fired.clone());
                    let seed = rounds * 1_000 + b as u64;
                    gort::spawn(async move { block_with_timers(&ctx, seed, &fired).await })
                })
                .collect();
            let helpers: Vec<_> = (0..procs)
                .map(|h| {
                    let ctx = ctx.clone();
                    let x = rounds * 100 + h as u64;
                    gort::spawn(async move { blocking_pool(&ctx, x).await })
                })
                .collect();
            let armed: u64 = join_all(&ctx, "blocker", tasks).await.into_iter().sum();
            join_all(&ctx, "spawn_blocking waiter", helpers).await;
            // Every callback was due before its task unblocked; give stragglers a moment.
            crate::patience::wait_until(Duration::from_secs(2), Duration::from_millis(2), || {
                fired.load(Relaxed) >= armed
            })
            .await;
            let got = fired.load(Relaxed);
            ctx.violations.check(got == armed, || {
                format!(
                    "round {rounds}: {got} of {armed} callbacks armed before block_in_place fired"
                )
            });
            gort::time::sleep(rng.duration(Duration::from_millis(1), Duration::from_millis(10)))
                .await;
        }
        ctx.note(format!("rounds={rounds} all_ps_blocked={blocked_all}"));
    });
    ctx.finish_runtime(rt);
}

/// Arms a few callbacks and a sleeping task on this P, then blocks the thread for longer than
/// all of them. Returns how many callbacks it armed.
async fn block_with_timers(ctx: &Arc<Ctx>, seed: u64, fired: &Arc<AtomicU64>) -> u64 {
    let mut rng = ctx.rng(seed);
    let n = rng.range(4..12);
    let mut handles = Vec::new();
    for _ in 0..n {
        let d = rng.duration(Duration::from_millis(2), Duration::from_millis(30));
        let due = ctx.now_ns() + d.as_nanos() as u64;
        let (c, f) = (ctx.clone(), fired.clone());
        handles.push(after_func(d, move || {
            c.record_lateness(due, c.now_ns(), "after_func on a blocked P");
            c.counts.fired.fetch_add(1, Relaxed);
            f.fetch_add(1, Relaxed);
        }));
        ctx.counts.started.fetch_add(1, Relaxed);
    }
    // A task that sleeps meanwhile (spawned here, so it starts on this P's run queue).
    let d = rng.duration(Duration::from_millis(2), Duration::from_millis(30));
    let c = ctx.clone();
    let sleeper = gort::spawn(async move {
        let s = gort::time::sleep(d);
        let due = c.ns(s.deadline());
        s.await;
        c.record_lateness(due, c.now_ns(), "sleep beside a blocked P");
        c.counts.fired.fetch_add(1, Relaxed);
    });
    ctx.counts.started.fetch_add(1, Relaxed);
    let block = rng.duration(Duration::from_millis(50), Duration::from_millis(100));
    let token = rng.next_u64();
    let back = gort::block_in_place(move || {
        std::thread::sleep(block);
        token
    });
    ctx.violations.check(back == token, || {
        "block_in_place returned the wrong value".into()
    });
    ctx.counts.ops.fetch_add(1, Relaxed);
    if let Err(e) = sleeper.await {
        ctx.violation(format!("sleeper beside a blocked P did not join: {e}"));
    }
    drop(handles); // handles dropped after the fact: the callbacks have run (or will)
    n
}

/// Waits on `spawn_blocking` work while a timer runs beside it.
async fn blocking_pool(ctx: &Arc<Ctx>, x: u64) {
    let work = gort::spawn_blocking(move || {
        std::thread::sleep(Duration::from_millis(20));
        x * 2
    });
    let s = gort::time::sleep(Duration::from_millis(5));
    let due = ctx.ns(s.deadline());
    s.await;
    ctx.record_lateness(due, ctx.now_ns(), "sleep beside spawn_blocking");
    ctx.counts.started.fetch_add(1, Relaxed);
    ctx.counts.fired.fetch_add(1, Relaxed);
    match work.await {
        Ok(v) => ctx.violations.check(v == x * 2, || {
            format!("spawn_blocking returned {v}, expected {}", x * 2)
        }),
        Err(e) => ctx.violation(format!("spawn_blocking did not join: {e}")),
    }
    ctx.counts.ops.fetch_add(1, Relaxed);
}
