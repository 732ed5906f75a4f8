//! Timer shapes T1-T9 on gort (procs = W), with the Go call of SHAPES.md where gort has it:
//! `after_func(..).stop()`, `AfterFunc::reset`, `Ticker`, `timeout`. T1, T2 and T9 use
//! after_func timers because they always sit in a P's heap (a channel `Timer` may be kept
//! out of the heap while nobody waits on its channel, which would not measure the heap);
//! T2_chan and T2_sleep reset a channel `Timer` and a `Sleep`, the two resets users write.

use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use gort::time::{after_func, sleep_until, AfterFunc, Instant as GInstant, Ticker, Timer};

use crate::common::{
    check, coarse_tick_figures, coarse_window, durations, median, ms, poll_once, spin_for,
    tick_figures, us, Figures, Latch, Meter, Params, Rng, Samples, Signal, HOUR, SEED,
};

/// The runtime every gort shape runs on: procs = W.
pub fn runtime(p: &Params) -> gort::Runtime {
    gort::Builder::new()
        .procs(p.workers)
        .build()
        .expect("build the gort runtime")
}

/// Runs `body` as a spawned task (so its own spawns go to the local run queue, as in a
/// server).
pub fn run<F, Fut>(p: &Params, body: F) -> Figures
where
    F: FnOnce() -> Fut,
    Fut: Future<Output = Figures> + Send + 'static,
{
    let rt = runtime(p);
    let figures = rt
        .block_on(rt.spawn(body()))
        .expect("the shape's root task panicked");
    // Pending hour-long timers and parked tasks are not part of the figure.
    rt.shutdown_timeout(Duration::from_millis(100));
    figures
}

/// Spawns a detached task, like Go's `go` statement.
pub fn go<F>(fut: F)
where
    F: Future<Output = ()> + Send + 'static,
{
    drop(gort::spawn(fut));
}

/// Spawns `make(t)` for t in 0..w.
fn spawn_each<F, Fut>(w: usize, mut make: F) -> Vec<gort::JoinHandle<()>>
where
    F: FnMut(usize) -> Fut,
    Fut: Future<Output = ()> + Send + 'static,
{
    (0..w).map(|t| gort::spawn(make(t))).collect()
}

/// Awaits every task, passing a panic on (so a broken shape fails instead of hanging).
async fn join_all(tasks: Vec<gort::JoinHandle<()>>) {
    for t in tasks {
        t.await.expect("a shape task panicked");
    }
}

/// Time left until `due` (zero if passed), for the Duration-taking Go-style calls.
fn until(due: Instant) -> Duration {
    due.saturating_duration_since(Instant::now())
}

/// T1: W tasks each start and at once stop N/W one-hour after_func timers.
pub fn t1_start_stop(p: &Params) -> Figures {
    let (per, total) = p.split(p.n(1_000_000));
    let w = p.workers;
    run(p, move || async move {
        let m = Meter::start();
        join_all(spawn_each(w, |_| async move {
            for _ in 0..per {
                assert!(
                    after_func(HOUR, || {}).stop(),
                    "stop of a fresh timer failed"
                );
            }
        }))
        .await;
        vec![("per_op_ns", m.ns_per(total))]
    })
}

/// T2: W tasks each reset their own armed timer N/W times to one hour ahead.
pub fn t2_reset(p: &Params) -> Figures {
    reset_each(p, || after_func(HOUR, || {}))
}

/// T2_chan: T2 on a channel `Timer` (Go's `time.NewTimer`), nobody receiving: the reset of a
/// `select!` loop's timeout between receives.
pub fn t2_reset_chan(p: &Params) -> Figures {
    reset_each(p, || Timer::new(HOUR))
}

/// What T2 and T2_chan reset: an `AfterFunc` or a channel `Timer`.
trait Resettable: Send + 'static {
    fn reset(&self, d: Duration) -> bool;
    fn stop(&self) -> bool;
}

impl Resettable for AfterFunc {
    fn reset(&self, d: Duration) -> bool {
        AfterFunc::reset(self, d)
    }
    fn stop(&self) -> bool {
        AfterFunc::stop(self)
    }
}

impl Resettable for Timer {
    fn reset(&self, d: Duration) -> bool {
        Timer::reset(self, d)
    }
    fn stop(&self) -> bool {
        Timer::stop(self)
    }
}

/// W tasks each make a timer with `make`, reset it N/W times to one hour ahead, and stop it.
fn reset_each<T: Resettable>(p: &Params, make: fn() -> T) -> Figures {
    let (per, total) = p.split(p.n(1_000_000));
    let w = p.workers;
    run(p, move || async move {
        let m = Meter::start();
        join_all(spawn_each(w, move |_| async move {
            let t = make();
            for _ in 0..per {
                t.reset(HOUR);
            }
            assert!(t.stop(), "the reset timer was not active");
        }))
        .await;
        vec![("per_op_ns", m.ns_per(total))]
    })
}

/// T2_sleep: T2 on a pinned `Sleep` that has registered (polled once), reset to an hour
/// from now (Tokio's T2).
pub fn t2_reset_sleep(p: &Params) -> Figures {
    let (per, total) = p.split(p.n(1_000_000));
    let w = p.workers;
    run(p, move || async move {
        let m = Meter::start();
        join_all(spawn_each(w, |_| async move {
            let mut s = std::pin::pin!(sleep_until(GInstant::now() + HOUR));
            poll_once(s.as_mut()).await;
            for _ in 0..per {
                s.as_mut().reset(GInstant::now() + HOUR);
            }
        }))
        .await;
        vec![("per_op_ns", m.ns_per(total))]
    })
}

/// What the K sleeping tasks of T3 (and the callbacks of T4) report into.
struct Fanout {
    late: Samples,
    done: Latch,
}

/// T3: K tasks each sleep a random 1..1000 ms and record their lateness.
pub fn t3_sleep_fanout(p: &Params, k: usize) -> Figures {
    let ds = durations(
        SEED ^ 3,
        k,
        Duration::from_millis(1),
        Duration::from_millis(1000),
    );
    run(p, move || async move {
        let f = Arc::new(Fanout {
            late: Samples::new(k),
            done: Latch::new(k),
        });
        let m = Meter::start();
        for (i, d) in ds.into_iter().enumerate() {
            let f = f.clone();
            go(async move {
                let due = Instant::now() + d;
                sleep_until(due.into()).await;
                f.late.record(i, due, Instant::now());
                f.done.arrive();
            });
        }
        f.done.wait().await;
        let (wall, cpu) = (m.wall(), m.cpu());
        let [p50, p99, max] = f.late.percentiles_us();
        vec![
            ("wall_ms", ms(wall)),
            ("cpu_ms", ms(cpu)),
            ("late_p50_us", p50),
            ("late_p99_us", p99),
            ("late_max_us", max),
        ]
    })
}

/// T3 with K = 100,000 (10,000 quick).
pub fn t3_100k(p: &Params) -> Figures {
    t3_sleep_fanout(p, p.n(100_000))
}

/// T3 with K = 1,000,000 (100,000 quick).
pub fn t3_1m(p: &Params) -> Figures {
    t3_sleep_fanout(p, p.n(1_000_000))
}

/// T4: N after_func callbacks due uniformly over the next second, scheduled by W tasks.
/// Lateness is measured from max(deadline, start of the timer).
pub fn t4_after_func_storm(p: &Params) -> Figures {
    let (per, n) = p.split(p.n(1_000_000));
    let w = p.workers;
    let offs = Arc::new(durations(
        SEED ^ 4,
        n,
        Duration::ZERO,
        Duration::from_nanos(999_999_999),
    ));
    run(p, move || async move {
        let f = Arc::new(Fanout {
            late: Samples::new(n),
            done: Latch::new(n),
        });
        let m = Meter::start();
        let base = Instant::now();
        for t in 0..w {
            let (f, offs) = (f.clone(), offs.clone());
            go(async move {
                for i in t * per..(t + 1) * per {
                    // Lateness counts from when the timer could fire: its deadline, or
                    // its start if scheduling ran past the deadline.
                    let now = Instant::now();
                    let (f, due) = (f.clone(), now.max(base + offs[i]));
                    // The handle is dropped: an after_func keeps running without it.
                    after_func(due - now, move || {
                        f.late.record(i, due, Instant::now());
                        f.done.arrive();
                    });
                }
            });
        }
        f.done.wait().await;
        let (wall, cpu) = (m.wall(), m.cpu());
        vec![
            ("last_fired_ms", ms(wall)),
            ("cpu_ms", ms(cpu)),
            ("late_p99_us", f.late.percentiles_us()[1]),
        ]
    })
}

/// T5: one 1 ms `Ticker` read by one task; with `busy`, W other tasks spin on CPU work in
/// 50 µs slices between yields.
pub fn t5_ticker_jitter(p: &Params, busy: bool) -> Figures {
    let ticks = p.pick(2000, 200);
    let w = p.workers;
    run(p, move || async move {
        let stop = Arc::new(AtomicBool::new(false));
        if busy {
            for _ in 0..w {
                let stop = stop.clone();
                go(async move {
                    while !stop.load(Ordering::Relaxed) {
                        spin_for(Duration::from_micros(50));
                        gort::yield_now().await;
                    }
                });
            }
        }
        let period = Duration::from_millis(1);
        let m = Meter::start();
        let t0 = Instant::now();
        let ticker = Ticker::new(period);
        let mut recs = Vec::with_capacity(ticks);
        for _ in 0..ticks {
            let due = ticker.c().recv().await.expect("the ticker channel closed");
            recs.push((Instant::from(due), Instant::now()));
        }
        ticker.stop();
        stop.store(true, Ordering::Relaxed);
        let mut figures = tick_figures(t0, period, &recs);
        figures.push(("cpu_ms", ms(m.cpu())));
        figures
    })
}

/// T5 on an idle runtime.
pub fn t5_idle(p: &Params) -> Figures {
    t5_ticker_jitter(p, false)
}

/// T5 while W tasks spin.
pub fn t5_busy(p: &Params) -> Figures {
    t5_ticker_jitter(p, true)
}

/// T10: one 1 ms `Ticker` read by one task for a window while W tasks spin on CPU work in
/// slices of `slice` between yields: a task woken by a timer must not wait behind tasks
/// that yield only every `slice`.
pub fn t10_ticker_coarse(p: &Params, slice: Duration) -> Figures {
    let window = coarse_window(p);
    let w = p.workers;
    run(p, move || async move {
        let stop = Arc::new(AtomicBool::new(false));
        for _ in 0..w {
            let stop = stop.clone();
            go(async move {
                while !stop.load(Ordering::Relaxed) {
                    spin_for(slice);
                    gort::yield_now().await;
                }
            });
        }
        let period = Duration::from_millis(1);
        let t0 = Instant::now();
        let ticker = Ticker::new(period);
        let mut recs = Vec::with_capacity(window.as_millis() as usize);
        while t0.elapsed() < window {
            let due = ticker.c().recv().await.expect("the ticker channel closed");
            recs.push((Instant::from(due), Instant::now()));
        }
        ticker.stop();
        stop.store(true, Ordering::Relaxed);
        coarse_tick_figures(t0, period, &recs)
    })
}

/// T10 with 1 ms slices.
pub fn t10_slice_1ms(p: &Params) -> Figures {
    t10_ticker_coarse(p, Duration::from_millis(1))
}

/// T10 with 10 ms slices.
pub fn t10_slice_10ms(p: &Params) -> Figures {
    t10_ticker_coarse(p, Duration::from_millis(10))
}

/// T6: N calls wrapped in a 1 s timeout, each completing after one yield, over W tasks.
pub fn t6_timeout_rpc(p: &Params) -> Figures {
    let (per, total) = p.split(p.n(1_000_000));
    let w = p.workers;
    run(p, move || async move {
        let m = Meter::start();
        join_all(spawn_each(w, |_| async move {
            for _ in 0..per {
                let r = gort::time::timeout(Duration::from_secs(1), gort::yield_now()).await;
                assert!(r.is_ok(), "a one-yield call timed out");
            }
        }))
        .await;
        vec![("per_op_ns", m.ns_per(total))]
    })
}

/// T6_ctx: T6 with Go's idiom instead of a timeout future: each call gets a
/// `context::with_timeout(1 s)` (one after_func timer on the per-P heaps), runs one yield,
/// checks the context, and cancels it (stopping the timer). Go's row is the same code with
/// `context.WithTimeout`; Tokio's is T6's `timeout`.
pub fn t6_context_timeout(p: &Params) -> Figures {
    let (per, total) = p.split(p.n(1_000_000));
    let w = p.workers;
    run(p, move || async move {
        let m = Meter::start();
        join_all(spawn_each(w, |_| async move {
            let bg = gort::context::Context::background();
            for _ in 0..per {
                let (ctx, cancel) = gort::context::with_timeout(&bg, Duration::from_secs(1));
                gort::yield_now().await;
                assert!(ctx.err().is_none(), "a one-yield call timed out");
                cancel.cancel();
            }
        }))
        .await;
        vec![("per_op_ns", m.ns_per(total))]
    })
}

/// Counters of T7.
struct MassCancel {
    fired: AtomicU64,
    done: Latch,
}

/// T7: N after_func timers, each due a random [1 s, 10 s] after it starts (quick:
/// [0.1 s, 1 s]), started by W tasks in chunks of 1,000; a task spawned per chunk (the
/// starter yields after each) stops 90 % of that chunk (every index not divisible by 10)
/// while later chunks are started; the rest fire. The figure is CPU time, peak RSS and the
/// count fired.
pub fn t7_mass_cancel(p: &Params) -> Figures {
    const CHUNK: usize = 1000;
    let (per, n) = p.split(p.n(1_000_000));
    let w = p.workers;
    let (lo, hi) = p.pick((1000, 10_000), (100, 1000));
    let (lo, hi) = (Duration::from_millis(lo), Duration::from_millis(hi));
    let ds = Arc::new(durations(SEED ^ 7, n, lo, hi));
    let kept = (0..n).step_by(10).count();
    run(p, move || async move {
        let c = Arc::new(MassCancel {
            fired: AtomicU64::new(0),
            done: Latch::new(kept),
        });
        let m = Meter::start();
        join_all(spawn_each(w, |t| {
            let (c, ds) = (c.clone(), ds.clone());
            async move {
                let end = (t + 1) * per;
                for first in (t * per..end).step_by(CHUNK) {
                    let timers: Vec<_> = (first..(first + CHUNK).min(end))
                        .map(|i| {
                            let (c, d) = (c.clone(), ds[i]);
                            after_func(d, move || {
                                c.fired.fetch_add(1, Ordering::Relaxed);
                                c.done.arrive();
                            })
                        })
                        .collect();
                    go(async move {
                        for (j, h) in timers.into_iter().enumerate() {
                            if (first + j) % 10 != 0 {
                                h.stop();
                            }
                        }
                    });
                    // Let the stopper run now, not after every chunk was started.
                    gort::yield_now().await;
                }
            }
        }))
        .await;
        let started = Instant::now();
        c.done.wait().await;
        // Anything stopped too late would fire by the last deadline.
        sleep_until((started + hi + Duration::from_millis(20)).into()).await;
        let fired = c.fired.load(Ordering::Relaxed) as usize;
        let mut figures = vec![("cpu_ms", ms(m.cpu())), ("fired", fired as f64)];
        check(&mut figures, fired == kept, || {
            format!("fired {fired}, expected {kept}")
        });
        figures
    })
}

/// State of one T8 round.
struct Simultaneous {
    origin: Instant,
    last_ns: AtomicU64,
    done: Latch,
}

/// T8: W x 1000 after_func timers due at the same instant 50 ms ahead, started from W
/// tasks; the figure is how long after that instant the last one fired (median and max of
/// rounds).
pub fn t8_simultaneous(p: &Params) -> Figures {
    let rounds = p.pick(10, 3);
    let w = p.workers;
    run(p, move || async move {
        let mut lasts = Vec::with_capacity(rounds);
        for _ in 0..rounds {
            let s = Arc::new(Simultaneous {
                origin: Instant::now(),
                last_ns: AtomicU64::new(0),
                done: Latch::new(w * 1000),
            });
            let due = s.origin + Duration::from_millis(50);
            for _ in 0..w {
                let s = s.clone();
                go(async move {
                    for _ in 0..1000 {
                        let s = s.clone();
                        after_func(until(due), move || {
                            let at = s.origin.elapsed().as_nanos() as u64;
                            s.last_ns.fetch_max(at, Ordering::Relaxed);
                            s.done.arrive();
                        });
                    }
                });
            }
            s.done.wait().await;
            let last = s.origin + Duration::from_nanos(s.last_ns.load(Ordering::Relaxed));
            lasts.push(us(last.saturating_duration_since(due)));
        }
        let max = lasts.iter().copied().fold(0.0, f64::max);
        vec![("last_p50_us", median(lasts)), ("last_max_us", max)]
    })
}

/// T9_chan: T9 with channel `Timer`s (Go's `time.NewTimer`): N/W times each task resets a
/// random one of its 10,000 to 50 µs, receives its value, and resets it back to one hour.
pub fn t9_reset_earlier_chan(p: &Params) -> Figures {
    let (per, total) = p.split(p.n(100_000));
    let w = p.workers;
    run(p, move || async move {
        let m = measure_after_setup(w, move |t, start| async move {
            let timers: Vec<Timer> = (0..10_000).map(|_| Timer::new(HOUR)).collect();
            start.arrive_and_wait().await;
            let mut rng = Rng::new(SEED ^ 9 ^ t as u64);
            for _ in 0..per {
                let t = &timers[rng.below(10_000) as usize];
                t.reset(Duration::from_micros(50));
                t.c().recv().await.expect("the timer's value");
                t.reset(HOUR);
            }
        })
        .await;
        vec![("per_op_ns", m.ns_per(total)), ("cpu_ms", ms(m.cpu()))]
    })
}

/// T9: W tasks each own 10,000 one-hour after_func timers; N/W times each resets a random
/// one to 50 µs, waits for its callback, and resets it back to one hour.
pub fn t9_reset_earlier(p: &Params) -> Figures {
    let (per, total) = p.split(p.n(100_000));
    let w = p.workers;
    run(p, move || async move {
        let m = measure_after_setup(w, move |t, start| async move {
            let fired = Arc::new(Signal::default());
            let timers: Vec<AfterFunc> = (0..10_000)
                .map(|_| {
                    let fired = fired.clone();
                    after_func(HOUR, move || fired.notify())
                })
                .collect();
            start.arrive_and_wait().await;
            let mut rng = Rng::new(SEED ^ 9 ^ t as u64);
            for _ in 0..per {
                let af = &timers[rng.below(10_000) as usize];
                af.reset(Duration::from_micros(50));
                fired.wait().await;
                af.reset(HOUR);
            }
            for af in &timers {
                af.stop();
            }
        })
        .await;
        vec![("per_op_ns", m.ns_per(total)), ("cpu_ms", ms(m.cpu()))]
    })
}

/// Where a task of [`measure_after_setup`] ends its setup and waits for the others'.
struct Start {
    ready: Arc<Latch>,
    go: Arc<Latch>,
}

impl Start {
    async fn arrive_and_wait(&self) {
        self.ready.arrive();
        self.go.wait().await;
    }
}

/// Spawns W tasks made by `task(t, start)`, each of which sets up, then awaits
/// `start.arrive_and_wait()`; the meter runs from the release of all of them to the last end.
async fn measure_after_setup<F, Fut>(w: usize, task: F) -> Meter
where
    F: Fn(usize, Start) -> Fut,
    Fut: Future<Output = ()> + Send + 'static,
{
    let ready = Arc::new(Latch::new(w));
    let go = Arc::new(Latch::new(1));
    let tasks = spawn_each(w, |t| {
        task(
            t,
            Start {
                ready: ready.clone(),
                go: go.clone(),
            },
        )
    });
    ready.wait().await;
    let m = Meter::start();
    go.arrive();
    join_all(tasks).await;
    m
}
