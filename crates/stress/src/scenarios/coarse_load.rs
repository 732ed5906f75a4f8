//! coarse-load: timers and work conservation under CPU-bound tasks. Rounds of two kinds, picked
//! at random:
//!
//! - *coarse*: one task per P spins on the clock in slices of S (100 µs, 1 ms or 10 ms, picked
//!   per round) with `yield_now` between slices, while a 1 ms `Ticker`, `sleep`s, `after_func`s
//!   and channel `Timer`s are used beside them (bench shape T10). Every expiry must reach its
//!   task no earlier than its deadline and within about one slice of it: the time beyond one
//!   slice is the scenario's lateness, held to its bound.
//! - *hand-off* (2 Ps or more): a task spawns another, or wakes one through a `gort::chan`
//!   channel, and then computes for 30-100 ms without yielding while the other Ps idle. The
//!   other task sits in the computing P's stealable `runnext`; a spinning thief or sysmon (about
//!   every 10 ms while a P idles) must take it, so it starts before the computation ends; the
//!   delay beyond sysmon's 10 ms is the scenario's lateness.

use super::{join_all, Ctx};
use crate::check::{Attribution, TimerBook};
use crate::rng::Rng;
use crate::stats::{HistSummary, Histogram};
use gort::time::{after_func, Ticker, Timer};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed, Ordering::SeqCst};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// One line for `--list`.
pub const ABOUT: &str = "a 1 ms ticker, sleeps, after_funcs and channel timers beside one task per P spinning \
    in slices of 100 µs-10 ms between yields (shape T10: each within ~one slice); a task spawned or woken by a \
    task that then computes 30-100 ms starts meanwhile (stealable runnext: spinning thief or sysmon)";

/// The spinners' slice lengths; each coarse round picks one.
const SLICES: [Duration; 3] = [
    Duration::from_micros(100),
    Duration::from_millis(1),
    Duration::from_millis(10),
];

/// sysmon's longest sleep while it finds nothing to do: a task left in a computing P's
/// `runnext` while a P idles waits about this long for sysmon to take it.
const SYSMON_TICK: Duration = Duration::from_millis(10);

/// What the scenario measured beside its lateness: the raw lateness per slice length and the
/// hand-off delays (the scenario's histogram holds only the time beyond the allowance).
#[derive(Debug, Default)]
struct Figures {
    /// Deadline to task, per entry of [`SLICES`].
    late: [Histogram; 3],
    /// Coarse rounds per entry of [`SLICES`].
    rounds: [AtomicU64; 3],
    /// Spawn/wake to start of the hand-off probes.
    delay: Histogram,
    /// Probes by kind: spawned, woken through a channel.
    spawned: AtomicU64,
    woken: AtomicU64,
    /// Probes whose task started within 1 ms (a spinning thief, most likely; sysmon's look
    /// comes later).
    fast: AtomicU64,
}

impl Figures {
    fn note(&self, ctx: &Ctx) {
        for (i, s) in SLICES.iter().enumerate() {
            let h = self.late[i].summary();
            ctx.note(format!(
                "slice {s:?}: {} rounds, {}",
                self.rounds[i].load(Relaxed),
                describe(&h)
            ));
        }
        if ctx.cfg.procs < 2 {
            ctx.note("hand-off rounds skipped: they need 2 Ps or more");
            return;
        }
        ctx.note(format!(
            "hand-off: {} spawned, {} woken; spawn/wake to start {}; {} started within 1 ms \
             (a spinning thief), the others later (sysmon's backstop)",
            self.spawned.load(Relaxed),
            self.woken.load(Relaxed),
            describe(&self.delay.summary()),
            self.fast.load(Relaxed)
        ));
    }
}

fn describe(h: &HistSummary) -> String {
    format!(
        "n={} p50 {} µs, p90 {} µs, p99 {} µs, max {} µs",
        h.count, h.p50_us, h.p90_us, h.p99_us, h.max_us
    )
}

/// Runs coarse-load.
pub fn run(ctx: &Arc<Ctx>) {
    let rt = ctx.runtime();
    let active = ctx.part(0.85);
    let figures = Arc::new(Figures::default());
    let (c, f) = (ctx.clone(), figures.clone());
    rt.block_on(async move {
        let (ctx, fig) = (c, f);
        let mut rng = ctx.rng(0);
        let end = ctx.epoch + active;
        let mut round = 0u64;
        while Instant::now() < end {
            round += 1;
            if ctx.cfg.procs >= 2 && rng.chance(40) {
                handoff_round(&ctx, &fig, &mut rng).await;
            } else {
                coarse_round(&ctx, &fig, round, &mut rng, end).await;
            }
        }
    });
    figures.note(ctx);
    ctx.finish_runtime(rt);
}

/// Checks an expiry due at `due_ns` and seen at `seen_ns` by a task beside spinners in slices
/// of `SLICES[slot]`: never early; its lateness goes to the slice's figures, and the part
/// beyond one slice to the scenario's lateness (held to its bound, with the suite's rule for
/// a loaded machine).
fn observe(ctx: &Ctx, fig: &Figures, slot: usize, due_ns: u64, seen_ns: u64, what: &str) {
    if seen_ns >= due_ns {
        fig.late[slot].record((seen_ns - due_ns) / 1_000);
    }
    let allowance = SLICES[slot].as_nanos() as u64;
    // Below `due_ns` record_lateness reports the early expiry; above, it records the excess.
    let allowed = due_ns.saturating_add(allowance).min(seen_ns.max(due_ns));
    ctx.record_lateness(allowed, seen_ns, what);
    ctx.counts.fired.fetch_add(1, Relaxed);
}

/// One coarse round: a spinner per P in slices of a random length, timer users beside them.
async fn coarse_round(ctx: &Arc<Ctx>, fig: &Arc<Figures>, round: u64, rng: &mut Rng, end: Instant) {
    let slot = rng.index(SLICES.len());
    fig.rounds[slot].fetch_add(1, Relaxed);
    let left = end.saturating_duration_since(Instant::now());
    let length = rng
        .duration(Duration::from_millis(100), Duration::from_millis(300))
        .min(left)
        .max(Duration::from_millis(30));
    let stop = Arc::new(AtomicBool::new(false));
    let spinners: Vec<_> = (0..ctx.cfg.procs)
        .map(|_| {
            let (ctx, stop) = (ctx.clone(), stop.clone());
            gort::spawn(async move { spin_in_slices(&ctx, SLICES[slot], &stop).await })
        })
        .collect();
    let until = Instant::now() + length;
    let seed = round * 1_000;
    let (c, f) = (ctx.clone(), fig.clone());
    let mut users = vec![gort::spawn(async move {
        read_ticker(&c, &f, slot, until, seed).await
    })];
    for k in 1..=ctx.cfg.procs as u64 * 2 {
        let (c, f) = (ctx.clone(), fig.clone());
        users.push(gort::spawn(async move {
            let mut rng = c.rng(seed + k);
            if k % 2 == 0 {
                sleep_loop(&c, &f, slot, until, &mut rng).await
            } else {
                channel_timer_loop(&c, &f, slot, until, &mut rng, seed + k).await
            }
        }));
    }
    let (c, f) = (ctx.clone(), fig.clone());
    users.push(gort::spawn(async move {
        after_func_loop(&c, &f, slot, until, seed + 999).await
    }));
    join_all(ctx, "timer user", users).await;
    stop.store(true, Relaxed);
    join_all(ctx, "spinner", spinners).await;
}

/// Spins on the clock for `slice` and yields, until `stop`.
async fn spin_in_slices(ctx: &Ctx, slice: Duration, stop: &AtomicBool) {
    while !stop.load(Relaxed) {
        let end = Instant::now() + slice;
        while Instant::now() < end {
            std::hint::spin_loop();
        }
        ctx.counts.ops.fetch_add(1, Relaxed);
        gort::yield_now().await;
    }
}

/// Reads a 1 ms ticker until `until`, each tick booked (right phase, increasing, nothing
/// after `stop`); a tick due after its receive began is observed (an older one was buffered
/// while the reader worked, not late).
async fn read_ticker(ctx: &Ctx, fig: &Figures, slot: usize, until: Instant, id: u64) {
    let period = Duration::from_millis(1);
    let pn = period.as_nanos() as u64;
    let before = ctx.now_ns();
    let ticker = Ticker::new(period);
    let mut book = TimerBook::new(id, before, ctx.now_ns(), pn, pn);
    ctx.counts.started.fetch_add(1, Relaxed);
    while Instant::now() < until {
        let ops = book.ops();
        let start = ctx.now_ns();
        let Some(v) = ticker.c().recv().await else {
            ctx.violation(format!("ticker {id}: channel closed"));
            return;
        };
        let (seen, v_ns) = (ctx.now_ns(), ctx.ns(v));
        let attr = book.on_value(v_ns, ops, &ctx.violations);
        if attr != Attribution::Violation && start <= v_ns {
            observe(ctx, fig, slot, v_ns, seen, "tick");
        }
    }
    ticker.stop();
    book.on_stop(None, ctx.now_ns(), &ctx.violations);
    ctx.counts.stopped.fetch_add(1, Relaxed);
    if ticker.c().try_recv().is_ok() {
        ctx.violation(format!(
            "ticker {id}: a tick was received after stop returned"
        ));
    }
    book.finish(ctx.now_ns(), &ctx.violations);
}

/// Sleeps random short durations (50 µs - 5 ms) until `until`.
async fn sleep_loop(ctx: &Ctx, fig: &Figures, slot: usize, until: Instant, rng: &mut Rng) {
    while Instant::now() < until {
        let s =
            gort::time::sleep(rng.duration(Duration::from_micros(50), Duration::from_millis(5)));
        let due = ctx.ns(s.deadline());
        ctx.counts.started.fetch_add(1, Relaxed);
        s.await;
        observe(ctx, fig, slot, due, ctx.now_ns(), "sleep");
    }
}

/// Waits on channel `Timer`s of random short durations (0 - 5 ms) until `until`, each booked:
/// its value is the due instant of its one arming.
async fn channel_timer_loop(
    ctx: &Ctx,
    fig: &Figures,
    slot: usize,
    until: Instant,
    rng: &mut Rng,
    id: u64,
) {
    while Instant::now() < until {
        let d = rng.duration(Duration::ZERO, Duration::from_millis(5));
        let before = ctx.now_ns();
        let timer = Timer::new(d);
        let dn = d.as_nanos() as u64;
        let mut book = TimerBook::new(id, before, ctx.now_ns(), dn, 0);
        ctx.counts.started.fetch_add(1, Relaxed);
        let Some(v) = timer.c().recv().await else {
            ctx.violation(format!("timer {id}: channel closed"));
            return;
        };
        let (seen, v_ns) = (ctx.now_ns(), ctx.ns(v));
        if book.on_value(v_ns, 0, &ctx.violations) != Attribution::Violation {
            observe(ctx, fig, slot, v_ns, seen, "channel timer");
        }
        book.finish(ctx.now_ns(), &ctx.violations);
    }
}

/// Arms 4 after_funcs (0 - 4 ms) every 5 ms until `until`; every callback must run, none
/// before the low end of its arming window.
async fn after_func_loop(
    ctx: &Arc<Ctx>,
    fig: &Arc<Figures>,
    slot: usize,
    until: Instant,
    seed: u64,
) {
    let mut rng = ctx.rng(seed);
    let fired = Arc::new(AtomicU64::new(0));
    let mut armed = 0u64;
    while Instant::now() < until {
        for _ in 0..4 {
            let d = rng.duration(Duration::ZERO, Duration::from_millis(4));
            let due = ctx.now_ns() + d.as_nanos() as u64;
            let (c, f, n) = (ctx.clone(), fig.clone(), fired.clone());
            // The handle is dropped: the callback must still run.
            drop(after_func(d, move || {
                observe(&c, &f, slot, due, c.now_ns(), "after_func");
                n.fetch_add(1, Relaxed);
            }));
            armed += 1;
            ctx.counts.started.fetch_add(1, Relaxed);
        }
        gort::time::sleep(Duration::from_millis(5)).await;
    }
    crate::patience::wait_until(Duration::from_secs(2), Duration::from_millis(2), || {
        fired.load(Relaxed) >= armed
    })
    .await;
    let got = fired.load(Relaxed);
    ctx.violations.check(got == armed, || {
        format!("{got} of {armed} after_funcs armed beside the spinners ran within 2 s")
    });
}

/// One hand-off round: 2-4 probes in a row, each on a runtime otherwise idle.
async fn handoff_round(ctx: &Arc<Ctx>, fig: &Arc<Figures>, rng: &mut Rng) {
    for _ in 0..rng.range(2..5) {
        let wake = rng.chance(50);
        let compute = rng.duration(Duration::from_millis(30), Duration::from_millis(100));
        let (c, f) = (ctx.clone(), fig.clone());
        let probe = gort::spawn(async move { handoff_probe(&c, &f, wake, compute).await });
        join_all(ctx, "hand-off probe", vec![probe]).await;
        // Let the Ps go idle again between probes.
        gort::time::sleep(rng.duration(Duration::from_millis(1), Duration::from_millis(5))).await;
    }
}

/// Spawns a task, or wakes one blocked on a channel, then computes without yielding for
/// `compute` (or until the task started): it must start meanwhile, within about sysmon's
/// tick; the delay beyond that tick is the scenario's lateness.
async fn handoff_probe(ctx: &Arc<Ctx>, fig: &Figures, wake: bool, compute: Duration) {
    let started = Arc::new(AtomicU64::new(0));
    let (s, c) = (started.clone(), ctx.clone());
    let (at, task) = if wake {
        let (tx, rx) = gort::chan::bounded::<()>(1);
        let waiting = Arc::new(AtomicBool::new(false));
        let w = waiting.clone();
        let task = gort::spawn(async move {
            w.store(true, SeqCst);
            let _ = rx.recv().await;
            s.store(c.now_ns().max(1), SeqCst);
        });
        // Let it run (here, from runnext) and block in `recv`.
        while !waiting.load(SeqCst) {
            gort::yield_now().await;
        }
        gort::yield_now().await;
        let at = ctx.now_ns();
        if tx.try_send(()).is_err() {
            ctx.violation("hand-off probe: a send on an empty bounded(1) channel failed");
        }
        fig.woken.fetch_add(1, Relaxed);
        (at, task)
    } else {
        let at = ctx.now_ns();
        let task = gort::spawn(async move { s.store(c.now_ns().max(1), SeqCst) });
        fig.spawned.fetch_add(1, Relaxed);
        (at, task)
    };
    ctx.counts.started.fetch_add(1, Relaxed);
    let began = Instant::now();
    while started.load(SeqCst) == 0 && began.elapsed() < compute {
        std::hint::spin_loop();
    }
    let in_time = started.load(SeqCst) != 0;
    join_all(ctx, "hand-off task", vec![task]).await;
    let start = started.load(SeqCst);
    if !in_time {
        let what = if wake { "woken" } else { "spawned" };
        ctx.timing_violation(format!(
            "a task {what} by a task that then computed {compute:?} without yielding did not \
             start meanwhile although a P was idle (it started {} µs after)",
            start.saturating_sub(at) / 1_000
        ));
    }
    let delay = start.saturating_sub(at);
    fig.delay.record(delay / 1_000);
    if delay < 1_000_000 {
        fig.fast.fetch_add(1, Relaxed);
    }
    let allowed = at
        .saturating_add(SYSMON_TICK.as_nanos() as u64)
        .min(start.max(at));
    ctx.record_lateness(allowed, start.max(at), "hand-off");
    ctx.counts.ops.fetch_add(1, Relaxed);
}
