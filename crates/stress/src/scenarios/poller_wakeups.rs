//! poller-wakeups: while the runtime idles with its poller asleep until a far timer, timers
//! due much earlier are armed (1) inside, by a task woken from another std thread, (2) from a
//! foreign std thread through `Runtime::block_on` (a thread without a P: the timer goes to a
//! P chosen round-robin), and (3) from a blocking-pool thread. Each must wake the poller.

use super::Ctx;
use gort::time::{after_func, AfterFunc, Timer};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::{mpsc, Arc};
use std::time::Duration;

/// One line for `--list`.
pub const ABOUT: &str = "timers earlier than the poller's current wait, armed by a task woken from a std thread, \
    by a foreign thread in block_on (no P) and by a blocking-pool thread: wakeNetPoller/netpollBreak, pollUntil";

/// How long a round may take before its timer counts as never fired.
const ROUND_TIMEOUT: Duration = Duration::from_secs(2);

/// What the std thread asks the runtime to do.
enum Req {
    /// A task sleeps `d`.
    Sleep(Duration),
    /// A blocking-pool thread resets the AfterFunc to `d`.
    BlockingReset(Duration),
}

/// The AfterFunc that is only ever armed from threads without a P.
struct Outside {
    af: AfterFunc,
    /// Due instant of the latest arming (shared with the callback).
    due: Arc<AtomicU64>,
    /// The first reset finds the never-due creation arming still active; later ones find the
    /// previous arming fired.
    first: AtomicBool,
}

impl Outside {
    fn reset(&self, ctx: &Ctx, d: Duration) {
        self.due.store(ctx.now_ns() + d.as_nanos() as u64, Relaxed);
        let active = self.af.reset(d);
        let first = self.first.swap(false, Relaxed);
        ctx.violations.check(!active || first, || {
            "reset of an AfterFunc whose callback ran returned true".into()
        });
        ctx.counts.reset.fetch_add(1, Relaxed);
    }
}

/// Runs poller-wakeups.
pub fn run(ctx: &Arc<Ctx>) {
    let rt = ctx.runtime();
    let active = ctx.part(0.8);
    let (req_tx, req_rx) = gort::chan::unbounded::<Req>();
    let (ack_tx, ack_rx) = mpsc::channel::<()>();
    let outside = new_outside(ctx, &rt, ack_tx.clone());
    let server = rt.spawn(serve(ctx.clone(), req_rx, ack_tx.clone(), outside.clone()));
    drop(ack_tx);
    let mut rounds = [0u64; 3];
    std::thread::scope(|s| {
        let (rt, req, rounds, outside) = (&rt, &req_tx, &mut rounds, &outside);
        s.spawn(move || {
            let end = ctx.epoch + active;
            arm_rounds(ctx, rt, req, &ack_rx, outside, end, rounds);
        });
    });
    ctx.note(format!(
        "rounds task={} block_on={} blocking_pool={}",
        rounds[0], rounds[1], rounds[2]
    ));
    req_tx.close();
    match rt.block_on(server) {
        Ok(stopped) => ctx.violations.check(stopped, || {
            "the far timer was not pending at the end".into()
        }),
        Err(e) => ctx.violation(format!("server task did not join: {e}")),
    }
    let stopped = rt.block_on(async { outside.af.stop() });
    ctx.violations.check(!stopped, || {
        "AfterFunc stop returned true after its last reset fired".into()
    });
    drop(outside);
    ctx.finish_runtime(rt);
}

/// Creates, inside the runtime, the AfterFunc that only threads without a P arm later: never
/// due at first; each firing records its lateness against the latest arming and acks.
fn new_outside(ctx: &Arc<Ctx>, rt: &gort::Runtime, ack: mpsc::Sender<()>) -> Arc<Outside> {
    let due = Arc::new(AtomicU64::new(u64::MAX));
    let (c, due2) = (ctx.clone(), due.clone());
    let af = rt
        .block_on(rt.spawn(async move {
            after_func(Duration::MAX, move || {
                c.record_lateness(
                    due2.load(Relaxed),
                    c.now_ns(),
                    "after_func armed without a P",
                );
                c.counts.fired.fetch_add(1, Relaxed);
                let _ = ack.send(());
            })
        }))
        .expect("gort-stress: creating the AfterFunc failed");
    Arc::new(Outside {
        af,
        due,
        first: AtomicBool::new(true),
    })
}

/// The task that serves the std thread's requests until the request channel closes; a far
/// timer stays armed throughout, so the poller always has a (far) timed wait rather than an
/// infinite one. Returns whether that far timer was still pending at the end.
async fn serve(
    ctx: Arc<Ctx>,
    req_rx: gort::chan::Receiver<Req>,
    ack: mpsc::Sender<()>,
    out: Arc<Outside>,
) -> bool {
    let far = Timer::new(Duration::from_secs(3_600));
    while let Some(req) = req_rx.recv().await {
        match req {
            Req::Sleep(d) => {
                let s = gort::time::sleep(d);
                let due = ctx.ns(s.deadline());
                s.await;
                ctx.record_lateness(due, ctx.now_ns(), "sleep armed inside");
                ctx.counts.fired.fetch_add(1, Relaxed);
                let _ = ack.send(());
            }
            Req::BlockingReset(d) => {
                let (c, o) = (ctx.clone(), out.clone());
                let done = gort::spawn_blocking(move || {
                    // Long enough for every P to go idle first.
                    std::thread::sleep(Duration::from_millis(2));
                    o.reset(&c, d);
                });
                if let Err(e) = done.await {
                    ctx.violation(format!("blocking reset did not join: {e}"));
                }
            }
        }
    }
    far.stop()
}

/// The std thread's rounds until `end`: let the runtime idle (its poller asleep until the far
/// timer), arm one early timer in one of the three ways, and require its ack within
/// `ROUND_TIMEOUT`. Counts the rounds of each way in `rounds`.
fn arm_rounds(
    ctx: &Ctx,
    rt: &gort::Runtime,
    req: &gort::chan::Sender<Req>,
    ack_rx: &mpsc::Receiver<()>,
    outside: &Outside,
    end: std::time::Instant,
    rounds: &mut [u64; 3],
) {
    let mut rng = ctx.rng(0);
    while std::time::Instant::now() < end {
        // Let the runtime go idle: its poller falls asleep until the far timer.
        std::thread::sleep(rng.duration(Duration::from_millis(2), Duration::from_millis(15)));
        let d = rng.duration(Duration::from_micros(200), Duration::from_millis(3));
        let arm = rng.index(3);
        if !arm_one(ctx, rt, req, outside, arm, d) {
            ctx.violation("request channel closed");
            return;
        }
        ctx.counts.started.fetch_add(1, Relaxed);
        ctx.counts.ops.fetch_add(1, Relaxed);
        rounds[arm] += 1;
        if !acked_within(ack_rx, ROUND_TIMEOUT) {
            let how = [
                "by a task",
                "in block_on on a foreign thread",
                "on a blocking-pool thread",
            ][arm];
            ctx.violation(format!(
                "a {d:?} timer armed {how} while the runtime idled did not fire within {ROUND_TIMEOUT:?}"
            ));
        }
    }
}

/// Whether an acknowledgement comes on `rx` within `allowance` of the time the process
/// could run (`patience.rs`).
fn acked_within<T>(rx: &std::sync::mpsc::Receiver<T>, allowance: Duration) -> bool {
    let mut patience = crate::patience::Patience::new(allowance);
    loop {
        match rx.recv_timeout(allowance.min(Duration::from_millis(500))) {
            Ok(_) => return true,
            Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => return false,
            Err(_) if patience.exhausted() => return false,
            Err(_) => {}
        }
    }
}

/// Arms a `d` timer the `arm`th way: 0 a task's sleep, 1 a reset in `block_on` on this
/// foreign thread (no P), 2 a reset on a blocking-pool thread. False if the request channel
/// closed.
fn arm_one(
    ctx: &Ctx,
    rt: &gort::Runtime,
    req: &gort::chan::Sender<Req>,
    outside: &Outside,
    arm: usize,
    d: Duration,
) -> bool {
    match arm {
        0 => req.try_send(Req::Sleep(d)).is_ok(),
        1 => {
            rt.block_on(async { outside.reset(ctx, d) });
            true
        }
        _ => req.try_send(Req::BlockingReset(d)).is_ok(),
    }
}
