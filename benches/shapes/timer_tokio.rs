//! Timer shapes T1-T9 on Tokio's multi-thread runtime (W workers), written as the closest
//! Tokio idiom for each Go call (SHAPES.md): a `Sleep` polled once stands for a started
//! timer, dropping it for `Stop`, `Sleep::reset` for `Reset`, and a spawned task that
//! sleeps and then runs the callback for `AfterFunc`.

use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::time::{sleep, sleep_until, Instant as TInstant, MissedTickBehavior};

use crate::common::{
    check, coarse_tick_figures, coarse_window, durations, ms, poll_once, spin_for, tick_figures,
    us, Figures, Latch, Meter, Params, Rng, Samples, HOUR, SEED,
};

/// The runtime every Tokio shape runs on: multi-thread, W workers, all drivers.
pub fn runtime(p: &Params) -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(p.workers)
        .enable_all()
        .build()
        .expect("build the tokio runtime")
}

/// Runs `body` as a spawned task (so its own spawns are worker-local, as in a server).
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
    rt.shutdown_background();
    figures
}

/// Spawns `make(t)` for t in 0..w.
fn spawn_each<F, Fut>(w: usize, mut make: F) -> Vec<tokio::task::JoinHandle<()>>
where
    F: FnMut(usize) -> Fut,
    Fut: Future<Output = ()> + Send + 'static,
{
    (0..w).map(|t| tokio::spawn(make(t))).collect()
}

/// Awaits every task, passing a panic on (so a broken shape fails instead of hanging).
async fn join_all(tasks: Vec<tokio::task::JoinHandle<()>>) {
    for t in tasks {
        t.await.expect("a shape task panicked");
    }
}

/// T1: W tasks each start and at once stop N/W one-hour timers.
pub fn t1_start_stop(p: &Params) -> Figures {
    let (per, total) = p.split(p.n(1_000_000));
    let w = p.workers;
    run(p, move || async move {
        let m = Meter::start();
        join_all(spawn_each(w, |_| {
            // Unconstrained: with an exhausted coop budget a Sleep's poll returns Pending
            // without registering, which would turn later iterations into no-ops.
            tokio::task::unconstrained(async move {
                for _ in 0..per {
                    let s = sleep(HOUR);
                    tokio::pin!(s);
                    poll_once(s.as_mut()).await;
                }
            })
        }))
        .await;
        vec![("per_op_ns", m.ns_per(total))]
    })
}

/// T2: W tasks each reset their own registered timer N/W times to one hour ahead.
pub fn t2_reset(p: &Params) -> Figures {
    let (per, total) = p.split(p.n(1_000_000));
    let w = p.workers;
    run(p, move || async move {
        let m = Meter::start();
        join_all(spawn_each(w, |_| {
            tokio::task::unconstrained(async move {
                let s = sleep(HOUR);
                tokio::pin!(s);
                poll_once(s.as_mut()).await;
                for _ in 0..per {
                    s.as_mut().reset(TInstant::now() + HOUR);
                }
            })
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
            tokio::spawn(async move {
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

/// T4: N callbacks due uniformly over the next second, scheduled by W tasks; Tokio has no
/// after_func, so each is a spawned task that sleeps and then runs the callback. Lateness
/// is measured from max(deadline, start of the timer).
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
            tokio::spawn(async move {
                for i in t * per..(t + 1) * per {
                    // Lateness counts from when the timer could fire: its deadline, or
                    // its start if scheduling ran past the deadline.
                    let (f, due) = (f.clone(), Instant::now().max(base + offs[i]));
                    tokio::spawn(async move {
                        sleep_until(due.into()).await;
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

/// T5: one 1 ms interval (Skip, like a Go ticker) read by one task; with `busy`, W other
/// tasks spin on CPU work in 50 µs slices between yields.
pub fn t5_ticker_jitter(p: &Params, busy: bool) -> Figures {
    let ticks = p.pick(2000, 200);
    let w = p.workers;
    run(p, move || async move {
        let stop = Arc::new(AtomicBool::new(false));
        if busy {
            for _ in 0..w {
                let stop = stop.clone();
                tokio::spawn(async move {
                    while !stop.load(Ordering::Relaxed) {
                        spin_for(Duration::from_micros(50));
                        tokio::task::yield_now().await;
                    }
                });
            }
        }
        let period = Duration::from_millis(1);
        let m = Meter::start();
        let t0 = Instant::now();
        let mut iv = tokio::time::interval_at(TInstant::from_std(t0 + period), period);
        iv.set_missed_tick_behavior(MissedTickBehavior::Skip);
        let mut recs = Vec::with_capacity(ticks);
        for _ in 0..ticks {
            let due = iv.tick().await.into_std();
            recs.push((due, Instant::now()));
        }
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

/// T10: one 1 ms interval (Skip) read by one task for a window while W tasks spin on CPU
/// work in slices of `slice` between yields.
pub fn t10_ticker_coarse(p: &Params, slice: Duration) -> Figures {
    let window = coarse_window(p);
    let w = p.workers;
    run(p, move || async move {
        let stop = Arc::new(AtomicBool::new(false));
        for _ in 0..w {
            let stop = stop.clone();
            tokio::spawn(async move {
                while !stop.load(Ordering::Relaxed) {
                    spin_for(slice);
                    tokio::task::yield_now().await;
                }
            });
        }
        let period = Duration::from_millis(1);
        let t0 = Instant::now();
        let mut iv = tokio::time::interval_at(TInstant::from_std(t0 + period), period);
        iv.set_missed_tick_behavior(MissedTickBehavior::Skip);
        let mut recs = Vec::with_capacity(window.as_millis() as usize);
        while t0.elapsed() < window {
            let due = iv.tick().await.into_std();
            recs.push((due, Instant::now()));
        }
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
                let r = tokio::time::timeout(Duration::from_secs(1), tokio::task::yield_now());
                r.await.expect("a one-yield call timed out");
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

/// T7: N timers, each due a random [1 s, 10 s] after it starts (quick: [0.1 s, 1 s]),
/// started by W tasks in chunks of 1,000; a task spawned per chunk (the starter yields after
/// each) stops 90 % of that chunk (every index not divisible by 10, by aborting its task)
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
                            tokio::spawn(async move {
                                sleep(d).await;
                                c.fired.fetch_add(1, Ordering::Relaxed);
                                c.done.arrive();
                            })
                        })
                        .collect();
                    tokio::spawn(async move {
                        for (j, h) in timers.into_iter().enumerate() {
                            if (first + j) % 10 != 0 {
                                h.abort();
                            }
                        }
                    });
                    // Let the stopper run now, not after every chunk was started.
                    tokio::task::yield_now().await;
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

/// T8: W x 1000 timers due at the same instant 50 ms ahead, started from W tasks; the
/// figure is how long after that instant the last one fired (median and max of rounds).
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
                tokio::spawn(async move {
                    for _ in 0..1000 {
                        let s = s.clone();
                        tokio::spawn(async move {
                            sleep_until(due.into()).await;
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
        vec![
            ("last_p50_us", crate::common::median(lasts)),
            ("last_max_us", max),
        ]
    })
}

/// T9: W tasks each own 10,000 registered one-hour timers; N/W times each moves a random
/// one to 50 µs ahead, awaits it, and moves it back to one hour.
pub fn t9_reset_earlier(p: &Params) -> Figures {
    let (per, total) = p.split(p.n(100_000));
    let w = p.workers;
    run(p, move || async move {
        let ready = Arc::new(Latch::new(w));
        let go = Arc::new(Latch::new(1));
        let tasks = spawn_each(w, |t| {
            let (ready, go) = (ready.clone(), go.clone());
            async move {
                let mut timers: Vec<_> = (0..10_000).map(|_| Box::pin(sleep(HOUR))).collect();
                for s in &mut timers {
                    // reset registers the entry with the driver without a poll.
                    s.as_mut().reset(TInstant::now() + HOUR);
                }
                ready.arrive();
                go.wait().await;
                let mut rng = Rng::new(SEED ^ 9 ^ t as u64);
                for _ in 0..per {
                    let s = &mut timers[rng.below(10_000) as usize];
                    s.as_mut()
                        .reset(TInstant::now() + Duration::from_micros(50));
                    s.as_mut().await;
                    s.as_mut().reset(TInstant::now() + HOUR);
                }
            }
        });
        ready.wait().await;
        let m = Meter::start();
        go.arrive();
        join_all(tasks).await;
        vec![("per_op_ns", m.ns_per(total)), ("cpu_ms", ms(m.cpu()))]
    })
}
