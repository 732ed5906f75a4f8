//! The scenarios, their shared context, and the runner that measures and checks each one.
//!
//! Every scenario builds its own runtime with [`Ctx::runtime`], drives a workload against it
//! while recording into the context (violations, lateness, counters), and hands the runtime to
//! [`Ctx::finish_runtime`], which checks that the timer heaps drain before dropping it. The
//! runner ([`run`]) adds the checks every scenario shares: lateness bounds, memory back near
//! baseline, and no panic escaping the scenario.

mod after_func_storm;
mod blocking_handoffs;
mod channel_mesh;
mod checks;
mod coarse_load;
mod context_trees;
mod faults;
mod net_deadlines;
mod paused_clock;
mod poller_wakeups;
mod rate_and_ticks;
mod resize;
mod sleep_fanout;
mod task_sets;
mod ticker_churn;
mod timer_storm;

use crate::check::Violations;
use crate::cli::Fault;
use crate::report::{LatenessBound, ScenarioResult, TimerCounts};
use crate::rng::Rng;
use crate::stats::{self, CpuTime, Histogram, MachineCpu, RssSampler, Timeline};
use checks::{build_bound, check_lateness, check_memory, memory_report};
pub(crate) use checks::{external_load, CONTENDED};
use std::collections::BTreeMap;
use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// A scenario: its name, its share of the run, its promise and its body.
#[derive(Debug, Clone, Copy)]
pub struct Scenario {
    /// Name for `--scenario`.
    pub name: &'static str,
    /// Relative share of `--duration`.
    pub weight: u32,
    /// One line: what it exercises.
    pub about: &'static str,
    /// Lateness bound in release builds (debug builds multiply it by [`DEBUG_SLOWDOWN`]).
    pub bound: LatenessBound,
    /// The body.
    pub run: fn(&Arc<Ctx>),
}

/// Factor on lateness bounds in unoptimised builds (the integration tests run those).
pub const DEBUG_SLOWDOWN: u64 = 4;

const fn bound(p99_ms: u64, max_ms: u64) -> LatenessBound {
    LatenessBound {
        p99_us: p99_ms * 1_000,
        max_us: max_ms * 1_000,
    }
}

/// Every scenario, in run order.
pub const ALL: [Scenario; 15] = [
    Scenario {
        name: "timer-storm",
        weight: 3,
        about: timer_storm::ABOUT,
        bound: bound(100, 2_000),
        run: timer_storm::run,
    },
    Scenario {
        name: "ticker-churn",
        weight: 1,
        about: ticker_churn::ABOUT,
        bound: bound(50, 1_000),
        run: ticker_churn::run,
    },
    Scenario {
        name: "after-func-storm",
        weight: 2,
        about: after_func_storm::ABOUT,
        bound: bound(100, 2_000),
        run: after_func_storm::run,
    },
    Scenario {
        name: "sleep-fanout",
        weight: 3,
        about: sleep_fanout::ABOUT,
        bound: bound(150, 2_000),
        run: sleep_fanout::run,
    },
    Scenario {
        name: "channel-mesh",
        weight: 1,
        about: channel_mesh::ABOUT,
        bound: bound(50, 1_000),
        run: channel_mesh::run,
    },
    Scenario {
        name: "resize",
        weight: 2,
        about: resize::ABOUT,
        bound: bound(100, 2_000),
        run: resize::run,
    },
    Scenario {
        name: "poller-wakeups",
        weight: 1,
        about: poller_wakeups::ABOUT,
        bound: bound(20, 500),
        run: poller_wakeups::run,
    },
    Scenario {
        name: "blocking-handoffs",
        weight: 1,
        about: blocking_handoffs::ABOUT,
        bound: bound(50, 1_000),
        run: blocking_handoffs::run,
    },
    Scenario {
        name: "net-deadlines",
        weight: 2,
        about: net_deadlines::ABOUT,
        bound: bound(50, 1_000),
        run: net_deadlines::run,
    },
    Scenario {
        name: "faults",
        weight: 1,
        about: faults::ABOUT,
        bound: bound(50, 1_000),
        run: faults::run,
    },
    Scenario {
        name: "coarse-load",
        weight: 1,
        about: coarse_load::ABOUT,
        bound: bound(20, 250),
        run: coarse_load::run,
    },
    Scenario {
        name: "paused-clock",
        weight: 1,
        about: paused_clock::ABOUT,
        bound: bound(0, 0),
        run: paused_clock::run,
    },
    Scenario {
        name: "context-trees",
        weight: 1,
        about: context_trees::ABOUT,
        bound: bound(50, 1_000),
        run: context_trees::run,
    },
    Scenario {
        name: "rate-and-ticks",
        weight: 1,
        about: rate_and_ticks::ABOUT,
        bound: bound(0, 0),
        run: rate_and_ticks::run,
    },
    Scenario {
        name: "task-sets",
        weight: 1,
        about: task_sets::ABOUT,
        bound: bound(50, 1_000),
        run: task_sets::run,
    },
];

/// Looks a scenario up by name.
pub fn find(name: &str) -> Option<&'static Scenario> {
    ALL.iter().find(|s| s.name == name)
}

/// Settings shared by every scenario of a run.
#[derive(Debug, Clone, Copy)]
pub struct Config {
    /// Ps per runtime.
    pub procs: usize,
    /// Run seed.
    pub seed: u64,
    /// Injected bookkeeping fault.
    pub fault: Option<Fault>,
}

/// Operation counters of a scenario (all relaxed: they are statistics).
#[derive(Debug, Default)]
pub struct Counters {
    /// Scenario-specific operations.
    pub ops: AtomicU64,
    /// First armings.
    pub started: AtomicU64,
    /// Expiries observed.
    pub fired: AtomicU64,
    /// Stop calls.
    pub stopped: AtomicU64,
    /// Reset calls.
    pub reset: AtomicU64,
}

impl Counters {
    fn snapshot(&self) -> TimerCounts {
        TimerCounts {
            started: self.started.load(Relaxed),
            fired: self.fired.load(Relaxed),
            stopped: self.stopped.load(Relaxed),
            reset: self.reset.load(Relaxed),
        }
    }
}

/// What a scenario records into; shared with its tasks through an `Arc`.
#[derive(Debug)]
pub struct Ctx {
    /// Scenario name.
    pub name: &'static str,
    /// Run settings.
    pub cfg: Config,
    /// This scenario's share of the run's duration.
    pub budget: Duration,
    /// Origin of the scenario's nanosecond timestamps.
    pub epoch: std::time::Instant,
    /// Invariant violations.
    pub violations: Violations,
    /// Lateness of expiries.
    pub lateness: Histogram,
    /// Lateness over time.
    pub timeline: Timeline,
    /// Operation counters.
    pub counts: Counters,
    notes: Mutex<Vec<String>>,
    warnings: Mutex<Vec<String>>,
    timing: Mutex<Vec<String>>,
    metrics: Mutex<BTreeMap<String, u64>>,
    fault_pending: AtomicBool,
}

impl Ctx {
    fn new(name: &'static str, cfg: Config, budget: Duration) -> Self {
        Ctx {
            name,
            cfg,
            budget,
            epoch: std::time::Instant::now(),
            violations: Violations::default(),
            lateness: Histogram::default(),
            timeline: Timeline::new(budget.mul_f64(1.5).max(Duration::from_millis(100))),
            counts: Counters::default(),
            notes: Mutex::default(),
            warnings: Mutex::default(),
            timing: Mutex::default(),
            metrics: Mutex::default(),
            fault_pending: AtomicBool::new(cfg.fault == Some(Fault::DropFire)),
        }
    }

    /// The random stream of this scenario's task `index`.
    pub fn rng(&self, index: u64) -> Rng {
        Rng::derive(self.cfg.seed, self.name, index)
    }

    /// A `budget`-proportional count: `per_sec` per second of budget, within `[min, max]`.
    pub fn scaled(&self, per_sec: f64, min: u64, max: u64) -> u64 {
        ((self.budget.as_secs_f64() * per_sec) as u64).clamp(min, max)
    }

    /// A fraction of the budget.
    pub fn part(&self, fraction: f64) -> Duration {
        self.budget.mul_f64(fraction)
    }

    /// Nanoseconds since the epoch of a runtime instant.
    pub fn ns(&self, t: gort::time::Instant) -> u64 {
        let t: std::time::Instant = t.into();
        t.saturating_duration_since(self.epoch).as_nanos() as u64
    }

    /// Nanoseconds since the epoch, on the runtime's clock.
    pub fn now_ns(&self) -> u64 {
        self.ns(gort::time::Instant::now())
    }

    /// Records that an expiry due at `due_ns` was observed at `seen_ns`. An observation before
    /// the due instant is a violation (timers never fire early).
    pub fn record_lateness(&self, due_ns: u64, seen_ns: u64, what: &str) {
        if seen_ns < due_ns {
            self.violations.report(format!(
                "{what} observed {} ns before it was due",
                due_ns - seen_ns
            ));
            return;
        }
        let late_us = (seen_ns - due_ns) / 1_000;
        self.lateness.record(late_us);
        self.timeline.record(seen_ns, late_us);
    }

    /// Records a violation.
    pub fn violation(&self, message: impl Into<String>) {
        self.violations.report(message);
    }

    /// Records a violation of a timing tolerance: counted only if the machine was not
    /// contended by other processes during the scenario (see [`CONTENDED`]), else a warning.
    pub fn timing_violation(&self, message: impl Into<String>) {
        let mut t = self.timing.lock().unwrap_or_else(|e| e.into_inner());
        if t.len() < 25 {
            t.push(message.into());
        }
    }

    /// Records a warning (reported, but not a failure).
    pub fn warn(&self, message: impl Into<String>) {
        self.warnings
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(message.into());
    }

    /// Records a parameter or figure for the report.
    pub fn note(&self, message: impl Into<String>) {
        self.notes
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(message.into());
    }

    /// With `--inject-fault drop-fire`: true exactly once, telling the caller to forget the
    /// expiry it just observed.
    pub fn take_drop_fire_fault(&self) -> bool {
        self.fault_pending.load(Relaxed) && self.fault_pending.swap(false, Relaxed)
    }

    /// The scenario's runtime: `--procs` Ps.
    pub fn runtime(&self) -> gort::Runtime {
        let rt = gort::Builder::new()
            .procs(self.cfg.procs)
            .build()
            .expect("gort-stress: cannot build a runtime");
        crate::watchdog::watch(&rt);
        rt
    }

    /// A runtime of `--procs` Ps started with its clock paused (`gort::time::pause`): time
    /// moves only by jumps, so the scenario's checks can be exact.
    pub fn paused_runtime(&self) -> gort::Runtime {
        let rt = gort::Builder::new()
            .procs(self.cfg.procs)
            .start_paused(true)
            .build()
            .expect("gort-stress: cannot build a paused runtime");
        crate::watchdog::watch(&rt);
        rt
    }

    /// Ends a scenario's runtime: waits (3 s of the time this process could run, nudging
    /// every P: `patience.rs`) for the timer heaps to drain (`timers_pending == 0`, then
    /// `timers_deleted == 0`) and for every task to be gone, records the final metrics, and
    /// drops the runtime.
    pub fn finish_runtime(&self, rt: gort::Runtime) {
        crate::watchdog::phase("finish_runtime: waiting for the heaps to drain");
        let at_end = rt.metrics();
        self.store_metrics(&at_end, &rt.proc_metrics());
        let mut patience = crate::patience::Patience::new(Duration::from_secs(3));
        let mut m = at_end;
        while (m.timers_pending > 0 || m.timers_deleted > 0 || m.tasks_alive > 0)
            && !patience.exhausted()
        {
            // Short sleeps on every P run each P's checkTimers, which removes deleted entries.
            let procs = rt.procs();
            rt.block_on(async move {
                let nudges: Vec<_> = (0..procs * 4)
                    .map(|_| {
                        gort::spawn(async {
                            gort::yield_now().await;
                            gort::time::sleep(Duration::from_micros(200)).await;
                        })
                    })
                    .collect();
                for n in nudges {
                    let _ = n.await;
                }
            });
            std::thread::sleep(Duration::from_millis(10));
            m = rt.metrics();
        }
        self.violations.check(m.timers_pending == 0, || {
            format!(
                "{} timers still pending in the heaps 3 s after the scenario ended",
                m.timers_pending
            )
        });
        self.violations.check(m.timers_deleted == 0, || {
            format!(
                "{} deleted timers still in the heaps after 3 s of idle nudging",
                m.timers_deleted
            )
        });
        self.violations.check(m.tasks_alive == 0, || {
            format!("{} tasks still alive after the scenario", m.tasks_alive)
        });
        self.note(format!(
            "drained: pending={} deleted={} alive={}",
            m.timers_pending, m.timers_deleted, m.tasks_alive
        ));
        crate::watchdog::unwatch();
        // Named after `unwatch` (which clears the phase with the runtime's handle): a hang
        // report then says the shutdown, not the drain, was where it stopped.
        crate::watchdog::phase("finish_runtime: shutting the runtime down");
        let t = std::time::Instant::now();
        rt.shutdown_timeout(Duration::from_secs(5));
        crate::watchdog::phase("");
        let took = t.elapsed();
        if took > Duration::from_secs(1) {
            self.warn(format!("runtime shutdown took {took:?}"));
        }
    }

    fn store_metrics(&self, m: &gort::Metrics, procs: &[gort::runtime::ProcMetrics]) {
        let mut map = self.metrics.lock().unwrap_or_else(|e| e.into_inner());
        for (k, v) in [
            ("procs", m.procs as u64),
            ("tasks_spawned", m.tasks_spawned),
            ("tasks_alive", m.tasks_alive),
            ("task_panics", m.task_panics),
            ("timers_pending", m.timers_pending),
            ("timers_deleted", m.timers_deleted),
            ("timers_fired", m.timers_fired),
            ("timers_stopped", m.timers_stopped),
            ("timers_modified", m.timers_modified),
            ("timers_moved", m.timers_moved),
            ("tasks_stolen", m.tasks_stolen),
            ("poller_wakeups", m.poller_wakeups),
            ("poller_wakeups_timer", m.poller_wakeups_timer),
            ("poller_wakeups_io", m.poller_wakeups_io),
            ("poller_wakeups_break", m.poller_wakeups_break),
        ] {
            map.insert(k.to_string(), v);
        }
        for (i, n) in m.timer_lateness.iter().enumerate() {
            map.insert(format!("{LATENESS_KEY}{i:02}"), *n);
        }
        for p in procs {
            map.insert(format!("{BUSY_KEY}{:02}", p.id), p.busy.as_millis() as u64);
        }
    }
}

/// Prefix of the metrics keys of each P's busy time in ms (`..._00` for P 0, see
/// `gort::runtime::ProcMetrics::busy`).
pub const BUSY_KEY: &str = "busy_ms_p";

/// Prefix of the metrics keys of the runtime's lateness histogram buckets (`..._00` to
/// `..._15`, see `gort::Metrics::timer_lateness`).
pub const LATENESS_KEY: &str = "timer_lateness_";

/// The factor lateness bounds are multiplied by: `DEBUG_SLOWDOWN` in a debug build, else 1.
pub fn bound_scale() -> u64 {
    if cfg!(debug_assertions) {
        DEBUG_SLOWDOWN
    } else {
        1
    }
}

/// Runs one scenario with `budget` and returns what it measured and found.
pub fn run(
    def: &Scenario,
    cfg: Config,
    budget: Duration,
    on_start: impl FnOnce(&Arc<Ctx>),
) -> ScenarioResult {
    stats::trim_heap();
    let baseline = stats::rss().current;
    let heap = stats::heap_stats();
    let hwm_reset = stats::reset_peak_rss();
    let sampler = RssSampler::start(Duration::from_millis(20));
    let cpu0 = CpuTime::now();
    let machine0 = MachineCpu::now();
    let ctx = Arc::new(Ctx::new(def.name, cfg, budget));
    on_start(&ctx);
    run_catching_panic(def, &ctx);
    let wall = ctx.epoch.elapsed();
    let cpu = CpuTime::now().since(cpu0);
    let others = external_load(MachineCpu::now().since(machine0), cpu, wall);
    let memory = memory_report(baseline, heap, hwm_reset, sampler);
    check_memory(&ctx, memory);
    let lateness = ctx.lateness.summary();
    let bound = build_bound(def.bound);
    check_lateness(&ctx, &lateness, bound, others);
    let take =
        |m: &Mutex<Vec<String>>| std::mem::take(&mut *m.lock().unwrap_or_else(|e| e.into_inner()));
    let metrics = std::mem::take(&mut *ctx.metrics.lock().unwrap_or_else(|e| e.into_inner()));
    ScenarioResult {
        name: def.name.to_string(),
        wall_ms: wall.as_secs_f64() * 1e3,
        ops: ctx.counts.ops.load(Relaxed),
        timers: ctx.counts.snapshot(),
        lateness,
        bound: Some(bound),
        timeline: ctx.timeline.snapshot(),
        memory,
        cpu_user_ms: cpu.user.as_secs_f64() * 1e3,
        cpu_system_ms: cpu.system.as_secs_f64() * 1e3,
        others_cpu: others,
        metrics,
        violation_count: ctx.violations.count(),
        violations: ctx.violations.messages(),
        warnings: take(&ctx.warnings),
        notes: take(&ctx.notes),
    }
}

/// Runs the scenario's body; a panic escaping it is a violation (with its message), not the
/// end of the suite.
fn run_catching_panic(def: &Scenario, ctx: &Arc<Ctx>) {
    let outcome = std::panic::catch_unwind(AssertUnwindSafe(|| (def.run)(ctx)));
    if let Err(p) = outcome {
        let msg = p
            .downcast_ref::<String>()
            .map(String::as_str)
            .or_else(|| p.downcast_ref::<&str>().copied())
            .unwrap_or("non-string panic");
        ctx.violation(format!("the scenario panicked: {msg}"));
    }
}

/// Splits `total` among `scenarios` by weight.
pub fn budgets(scenarios: &[&Scenario], total: Duration) -> Vec<Duration> {
    let sum: u32 = scenarios.iter().map(|s| s.weight).sum::<u32>().max(1);
    scenarios
        .iter()
        .map(|s| total.mul_f64(f64::from(s.weight) / f64::from(sum)))
        .collect()
}

/// Waits for every handle; a task that panicked or was cancelled is a violation.
pub async fn join_all<T>(ctx: &Ctx, what: &str, handles: Vec<gort::JoinHandle<T>>) -> Vec<T> {
    let mut out = Vec::with_capacity(handles.len());
    for h in handles {
        match h.await {
            Ok(v) => out.push(v),
            Err(e) => ctx.violation(format!("{what} task did not join: {e}")),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn registry_matches_the_cli_names() {
        let names: Vec<&str> = ALL.iter().map(|s| s.name).collect();
        assert_eq!(names, crate::cli::SCENARIO_NAMES);
        assert!(ALL
            .iter()
            .all(|s| s.bound.p99_us <= s.bound.max_us && !s.about.is_empty()));
    }

    #[test]
    fn budgets_split_by_weight() {
        let picked: Vec<&Scenario> = ALL.iter().take(2).collect();
        let b = budgets(&picked, Duration::from_secs(8));
        assert_eq!(b, [Duration::from_secs(6), Duration::from_secs(2)]);
    }
}
