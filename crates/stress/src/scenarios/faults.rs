//! faults: panics in tasks, in `block_in_place` and `spawn_blocking` closures and in
//! `after_func` callbacks; tasks aborted mid-sleep; timers dropped by unwinding. The runtime
//! must contain each fault, report it through `JoinError`/`Metrics::task_panics`, release the
//! timers involved, and keep running timers on time.

use super::{join_all, Ctx};
use gort::time::{after_func, Timer};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Once};
use std::time::Duration;

/// One line for `--list`.
pub const ABOUT: &str = "panics in tasks, block_in_place, spawn_blocking and after_func callbacks; tasks aborted \
    mid-sleep: deltimer on drop/abort/unwind, callback panics caught and counted, runtime stays live";

/// Marker in every panic message this scenario causes on purpose (the panic hook hides them).
pub(super) const INJECTED: &str = "gort-stress: injected";

/// Installs (once) a panic hook that stays quiet about injected panics.
pub(super) fn quiet_injected_panics() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let prev = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            let msg = info
                .payload()
                .downcast_ref::<&str>()
                .copied()
                .or_else(|| info.payload().downcast_ref::<String>().map(String::as_str))
                .unwrap_or("");
            if !msg.contains(INJECTED) {
                prev(info);
            }
        }));
    });
}

/// Counts drops: proves an aborted task's future was dropped.
struct DropGuard(Arc<AtomicU64>);

impl Drop for DropGuard {
    fn drop(&mut self) {
        self.0.fetch_add(1, Relaxed);
    }
}

/// Runs faults.
pub fn run(ctx: &Arc<Ctx>) {
    quiet_injected_panics();
    let rt = ctx.runtime();
    let procs = ctx.cfg.procs;
    let active = ctx.part(0.75);
    let c = ctx.clone();
    let expected_panics = rt.block_on(async move {
        let ctx = c;
        let mut rng = ctx.rng(0);
        let end = ctx.epoch + active;
        let mut panics = 0u64;
        let mut rounds = 0u64;
        while std::time::Instant::now() < end {
            rounds += 1;
            panics += task_panics(&ctx, &mut rng, procs * 4).await;
            panics += callback_panics(&ctx, &mut rng, procs * 8).await;
            aborts(&ctx, &mut rng, procs * 16).await;
            // Still live and on time after all that.
            let s = gort::time::sleep(Duration::from_millis(1));
            let due = ctx.ns(s.deadline());
            s.await;
            ctx.record_lateness(due, ctx.now_ns(), "liveness sleep");
            ctx.counts.fired.fetch_add(1, Relaxed);
        }
        ctx.note(format!("rounds={rounds} injected_panics={panics}"));
        panics
    });
    // A callback's panic is counted once the M caught it, after the callback's own count
    // that `callback_panics` waited for: a descheduled M may count the last one later.
    let mut patience = crate::patience::Patience::new(Duration::from_secs(2));
    while rt.metrics().task_panics < expected_panics && !patience.exhausted() {
        std::thread::sleep(Duration::from_millis(1));
    }
    let counted = rt.metrics().task_panics;
    ctx.violations.check(counted == expected_panics, || {
        format!("Metrics::task_panics = {counted}, but {expected_panics} panics were injected")
    });
    ctx.finish_runtime(rt);
}

/// Tasks that panic: plainly, holding a pending timer, inside `block_in_place`, and inside a
/// `spawn_blocking` closure. Each must surface as `JoinError::is_panic`.
async fn task_panics(ctx: &Arc<Ctx>, rng: &mut crate::rng::Rng, n: usize) -> u64 {
    let mut handles = Vec::new();
    for i in 0..n {
        let d = rng.duration(Duration::ZERO, Duration::from_millis(3));
        let h: gort::JoinHandle<()> = match i % 4 {
            0 => gort::spawn(async move {
                gort::time::sleep(d).await;
                panic!("{INJECTED} task panic");
            }),
            1 => gort::spawn(async move {
                let _held = Timer::new(Duration::from_secs(3_600)); // stopped by the unwind
                gort::time::sleep(d).await;
                panic!("{INJECTED} panic while holding a timer");
            }),
            2 => gort::spawn(async move {
                gort::time::sleep(d).await;
                gort::block_in_place(|| panic!("{INJECTED} panic in block_in_place"));
            }),
            _ => {
                let b = gort::spawn_blocking(move || {
                    std::thread::sleep(d);
                    panic!("{INJECTED} panic in spawn_blocking");
                });
                gort::spawn(async move {
                    match b.await {
                        Err(e) if e.is_panic() => {
                            panic!("{INJECTED} propagated spawn_blocking panic")
                        }
                        _ => {}
                    }
                })
            }
        };
        ctx.counts.ops.fetch_add(1, Relaxed);
        handles.push(h);
    }
    let mut panics = 0;
    for (i, h) in handles.into_iter().enumerate() {
        match h.await {
            Err(e) if e.is_panic() => panics += 1,
            Err(e) => ctx.violation(format!(
                "panicking task {i} ended with a non-panic error: {e}"
            )),
            Ok(()) => ctx.violation(format!("task {i} was meant to panic but returned normally")),
        }
    }
    // The spawn_blocking closures panicked too (and each waiter task re-panicked).
    panics + blocking_count(n)
}

/// How many of `n` task_panics cases were spawn_blocking ones (i % 4 == 3).
fn blocking_count(n: usize) -> u64 {
    (0..n).filter(|i| i % 4 == 3).count() as u64
}

/// `n` callbacks that panic interleaved with `n` that count; the counting ones must all run.
async fn callback_panics(ctx: &Arc<Ctx>, rng: &mut crate::rng::Rng, n: usize) -> u64 {
    let ran = Arc::new(AtomicU64::new(0));
    let panicked = Arc::new(AtomicU64::new(0));
    let mut handles = Vec::new();
    for _ in 0..n {
        let d = rng.duration(Duration::ZERO, Duration::from_millis(5));
        let p = panicked.clone();
        handles.push(after_func(d, move || {
            p.fetch_add(1, Relaxed);
            panic!("{INJECTED} after_func panic");
        }));
        let d = rng.duration(Duration::ZERO, Duration::from_millis(5));
        let due = ctx.now_ns() + d.as_nanos() as u64;
        let (c, r) = (ctx.clone(), ran.clone());
        handles.push(after_func(d, move || {
            c.record_lateness(due, c.now_ns(), "after_func beside panicking ones");
            c.counts.fired.fetch_add(1, Relaxed);
            r.fetch_add(1, Relaxed);
        }));
        ctx.counts.started.fetch_add(2, Relaxed);
        ctx.counts.ops.fetch_add(2, Relaxed);
    }
    crate::patience::wait_until(Duration::from_secs(2), Duration::from_millis(1), || {
        ran.load(Relaxed) >= n as u64 && panicked.load(Relaxed) >= n as u64
    })
    .await;
    let (r, p) = (ran.load(Relaxed), panicked.load(Relaxed));
    ctx.violations.check(r == n as u64 && p == n as u64, || {
        format!("of {n}+{n} after_funcs, {r} counting and {p} panicking callbacks ran")
    });
    for h in &handles {
        ctx.violations.check(!h.stop(), || {
            "stop returned true on an after_func that already ran".into()
        });
    }
    p
}

/// Tasks aborted while sleeping (their sleep timers must go), and an abort of a finished task.
async fn aborts(ctx: &Arc<Ctx>, rng: &mut crate::rng::Rng, n: usize) {
    let drops = Arc::new(AtomicU64::new(0));
    let handles: Vec<_> = (0..n)
        .map(|_| {
            let g = DropGuard(drops.clone());
            let d = rng.duration(Duration::from_secs(5), Duration::from_secs(10));
            gort::spawn(async move {
                let _g = g;
                gort::time::sleep(d).await;
            })
        })
        .collect();
    ctx.counts.started.fetch_add(n as u64, Relaxed);
    gort::time::sleep(Duration::from_millis(2)).await; // let them reach their sleeps
    for h in &handles {
        h.abort();
        ctx.counts.stopped.fetch_add(1, Relaxed);
        ctx.counts.ops.fetch_add(1, Relaxed);
    }
    for h in handles {
        match h.await {
            Err(e) if e.is_cancelled() => {}
            Err(e) => ctx.violation(format!(
                "aborted task ended with {e} instead of cancellation"
            )),
            Ok(()) => ctx.violation("a task aborted mid-sleep (5-10 s) completed normally"),
        }
    }
    let dropped = drops.load(Relaxed);
    ctx.violations.check(dropped == n as u64, || {
        format!("{dropped} of {n} aborted tasks dropped their future")
    });
    // Aborting a finished task changes nothing.
    let done = gort::spawn(async { 7u8 });
    while !done.is_finished() {
        gort::yield_now().await;
    }
    done.abort();
    match join_all(ctx, "finished-then-aborted", vec![done])
        .await
        .first()
    {
        Some(7) => {}
        other => ctx.violation(format!(
            "abort after completion changed the result: {other:?}"
        )),
    }
}
