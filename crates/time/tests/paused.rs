//! The paused clock: `pause`, `resume`, `advance`, `is_paused`, `Builder::start_paused`, on the
//! multi-P runtime. Every test runs hours of virtual time; the wall-clock bounds are generous
//! (seconds), the virtual instants exact.
#![cfg(not(loom))]

use gort::time::{self, Instant};
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::{Arc, Mutex};
use std::time::Duration;

fn paused_rt(procs: usize) -> gort::Runtime {
    gort::Builder::new()
        .procs(procs)
        .start_paused(true)
        .build()
        .unwrap()
}

const HOUR: Duration = Duration::from_secs(3600);

#[test]
fn an_hour_long_sleep_returns_at_once_exactly_an_hour_later() {
    let rt = paused_rt(2);
    let wall = std::time::Instant::now();
    let slept = rt.block_on(async {
        let start = Instant::now();
        time::sleep(HOUR).await;
        Instant::now() - start
    });
    assert_eq!(slept, HOUR);
    assert!(wall.elapsed() < Duration::from_secs(5));
}

/// Retries at 1 s, 2 s, 4 s, ... capped at 10 min, for an hour: the schedule a real clock
/// would give, to the nanosecond.
#[test]
fn a_one_hour_backoff_schedule_keeps_its_exact_instants() {
    let rt = paused_rt(2);
    let wall = std::time::Instant::now();
    let (attempts, expected) = rt.block_on(async {
        let start = Instant::now();
        let mut attempts = Vec::new();
        let mut expected = Vec::new();
        let mut delay = Duration::from_secs(1);
        let mut at = Duration::ZERO;
        while at + delay <= HOUR {
            time::sleep(delay).await;
            at += delay;
            attempts.push(Instant::now() - start);
            expected.push(at);
            delay = (delay * 2).min(Duration::from_secs(600));
        }
        (attempts, expected)
    });
    assert_eq!(attempts, expected);
    assert!(attempts.len() > 10);
    assert!(wall.elapsed() < Duration::from_secs(5));
}

/// A ticker of one minute received for 24 virtual hours: 1,440 ticks, each the instant it
/// was due.
#[test]
fn a_24_hour_ticker_delivers_every_tick_at_its_instant() {
    let rt = paused_rt(2);
    let wall = std::time::Instant::now();
    rt.block_on(async {
        let period = Duration::from_secs(60);
        let start = Instant::now();
        let ticker = time::Ticker::new(period);
        for i in 1..=24 * 60u32 {
            let t = ticker.c().recv().await.unwrap();
            assert_eq!(t, start + period * i);
            assert_eq!(Instant::now(), t);
        }
    });
    assert!(wall.elapsed() < Duration::from_secs(10));
}

/// 10,000 tasks on 4 Ps each sleep a random time within an hour: each wakes with the clock
/// at exactly its deadline. A jump while a woken task was still runnable would show as a
/// later reading.
#[test]
fn ten_thousand_random_sleeps_each_wake_at_their_deadline() {
    let rt = paused_rt(4);
    let wall = std::time::Instant::now();
    let late = rt.block_on(async {
        let late = Arc::new(AtomicUsize::new(0));
        let mut seed = 0x9e37_79b9_7f4a_7c15_u64;
        let mut hs = Vec::new();
        for _ in 0..10_000 {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            let d = Duration::from_millis(seed % 3_600_000);
            let late = late.clone();
            hs.push(gort::spawn(async move {
                let deadline = Instant::now() + d;
                time::sleep_until(deadline).await;
                if Instant::now() != deadline {
                    late.fetch_add(1, SeqCst);
                }
            }));
        }
        for h in hs {
            h.await.unwrap();
        }
        late.load(SeqCst)
    });
    assert_eq!(late, 0, "tasks saw the clock past their deadline");
    assert!(wall.elapsed() < Duration::from_secs(10));
}

/// Sixteen tasks on four Ps sleep 1-3 ms at a time, 300 times each, so that timers on
/// several heaps come due at every jump and idle Ms run some of them P-less: every task
/// wakes with the clock at its own deadline. Before those runs held the clock, the poller M
/// could find the runtime quiescent while a P-less run held a woken task in its hands, and
/// jump past the instant it was woken for (a few runs in a hundred).
#[test]
fn tasks_woken_by_timers_run_without_a_p_wake_at_their_deadline() {
    for round in 0..20 {
        let rt = paused_rt(4);
        let late = rt.block_on(async {
            let late = Arc::new(AtomicUsize::new(0));
            let hs: Vec<_> = (0..16u64)
                .map(|t| {
                    let late = late.clone();
                    gort::spawn(async move {
                        for i in 0..300u64 {
                            let d = Duration::from_millis(1 + (t + i) % 3);
                            let deadline = Instant::now() + d;
                            time::sleep(d).await;
                            if Instant::now() != deadline {
                                late.fetch_add(1, SeqCst);
                            }
                        }
                    })
                })
                .collect();
            for h in hs {
                h.await.unwrap();
            }
            late.load(SeqCst)
        });
        assert_eq!(late, 0, "round {round}: tasks woke past their deadline");
    }
}

/// While tasks are runnable (yielding, spawning), the clock does not move, even with a
/// timer a millisecond away.
#[test]
fn the_clock_never_jumps_while_a_task_is_runnable() {
    let rt = paused_rt(2);
    rt.block_on(async {
        let sleeper = gort::spawn(async {
            loop {
                time::sleep(Duration::from_millis(1)).await;
            }
        });
        let mut workers = Vec::new();
        for _ in 0..4 {
            workers.push(gort::spawn(async {
                for _ in 0..2_000 {
                    let t = Instant::now();
                    gort::yield_now().await;
                    assert_eq!(Instant::now(), t, "the clock moved past a runnable task");
                }
            }));
        }
        for w in workers {
            w.await.unwrap();
        }
        sleeper.abort();
    });
}

/// `block_on`'s future counts as a task: while it runs (here it blocks its thread for real
/// time), the clock does not jump.
#[test]
fn block_on_holds_the_clock_while_it_runs() {
    let rt = paused_rt(2);
    rt.block_on(async {
        let t = Instant::now();
        let h = gort::spawn(time::sleep(Duration::from_millis(1)));
        std::thread::sleep(Duration::from_millis(50));
        assert_eq!(Instant::now(), t);
        h.await.unwrap();
        assert_eq!(Instant::now(), t + Duration::from_millis(1));
    });
}

/// A blocking closure holds the clock while it runs: a sleeper due in a virtual second
/// wakes only after the closure's real 100 ms.
#[test]
fn a_blocking_closure_holds_the_clock() {
    let rt = paused_rt(2);
    rt.block_on(async {
        let wall = std::time::Instant::now();
        let start = Instant::now();
        let job = gort::spawn_blocking(move || {
            std::thread::sleep(Duration::from_millis(100));
            Instant::now()
        });
        time::sleep(Duration::from_secs(1)).await;
        assert!(wall.elapsed() >= Duration::from_millis(100));
        assert_eq!(
            job.await.unwrap(),
            start,
            "the clock moved under a blocking closure"
        );
    });
}

/// `advance` fires the timers due on the way in deadline order, each at its instant, and
/// stops at the target.
#[test]
fn advance_fires_due_timers_in_order_and_stops_at_the_target() {
    let rt = paused_rt(2);
    rt.block_on(async {
        let start = Instant::now();
        let fired = Arc::new(Mutex::new(Vec::new()));
        for secs in [30u64, 10, 20, 90] {
            let fired = fired.clone();
            gort::spawn(async move {
                time::sleep(Duration::from_secs(secs)).await;
                fired.lock().unwrap().push((secs, Instant::now() - start));
            });
        }
        gort::yield_now().await;
        time::advance(Duration::from_secs(60)).await;
        assert_eq!(Instant::now() - start, Duration::from_secs(60));
        let got = fired.lock().unwrap().clone();
        let want: Vec<_> = [10u64, 20, 30]
            .iter()
            .map(|&s| (s, Duration::from_secs(s)))
            .collect();
        assert_eq!(got, want);
    });
}

/// A 1 s ticker advanced 10 s delivers what Go gives a slow receiver: one value (the first
/// missed tick), then ticks on the phase, never a backlog.
#[test]
fn advancing_past_ticks_leaves_no_backlog() {
    let rt = paused_rt(2);
    rt.block_on(async {
        let start = Instant::now();
        let ticker = time::Ticker::new(Duration::from_secs(1));
        time::advance(Duration::from_secs(10)).await;
        let first = ticker.c().recv().await.unwrap();
        assert_eq!(first, start + Duration::from_secs(1));
        let next = ticker.c().recv().await.unwrap();
        assert_eq!(next, start + Duration::from_secs(11));
        assert_eq!(Instant::now(), next);
    });
}

/// Go 1.23's guarantees hold under a paused clock: a reset after the timer came due but
/// before a receive reports it, and no stale value follows; a stopped ticker sends nothing.
#[test]
fn timer_reset_and_ticker_stop_keep_go_1_23_guarantees() {
    let rt = paused_rt(2);
    rt.block_on(async {
        let start = Instant::now();
        let t = time::Timer::new(Duration::from_secs(1));
        time::advance(Duration::from_secs(2)).await;
        // Due, not received: reset reports that a value could still have been received...
        let stopped_one = t.reset(Duration::from_secs(5));
        // ...and whatever it reports, no stale value (the 1 s one) is received after it.
        let got = t.c().recv().await.unwrap();
        assert_eq!(got, start + Duration::from_secs(7));
        assert_eq!(Instant::now(), got);
        assert!(
            stopped_one,
            "no value of the 1 s arming was received, so reset reports it stopped it"
        );

        let ticker = time::Ticker::new(Duration::from_secs(1));
        time::advance(Duration::from_millis(1500)).await;
        ticker.stop();
        time::advance(Duration::from_secs(5)).await;
        assert!(
            ticker.c().try_recv().is_err(),
            "a stopped ticker sent a stale tick"
        );
    });
}

#[test]
fn after_func_timeout_and_interval_run_on_the_virtual_clock() {
    let rt = paused_rt(2);
    rt.block_on(async {
        let start = Instant::now();
        let at = Arc::new(Mutex::new(None));
        let at2 = at.clone();
        let _f = time::after_func(HOUR, move || {
            *at2.lock().unwrap() = Some(Instant::now());
        });
        let r = time::timeout(2 * HOUR, std::future::pending::<()>()).await;
        assert!(r.is_err());
        assert_eq!(Instant::now() - start, 2 * HOUR);
        assert_eq!(*at.lock().unwrap(), Some(start + HOUR));

        let mut iv = time::interval(Duration::from_secs(60));
        let first = iv.tick().await;
        let second = iv.tick().await;
        assert_eq!(second - first, Duration::from_secs(60));
    });
}

/// Two runtimes in one process: pausing one does not touch the other's clock.
#[test]
fn parallel_runtimes_keep_their_own_clocks() {
    let paused = std::thread::spawn(|| {
        let rt = paused_rt(2);
        rt.block_on(async {
            let start = Instant::now();
            for _ in 0..100 {
                time::sleep(HOUR).await;
            }
            Instant::now() - start
        })
    });
    let real = std::thread::spawn(|| {
        let rt = gort::Builder::new().procs(2).build().unwrap();
        rt.block_on(async {
            assert!(!time::is_paused());
            let wall = std::time::Instant::now();
            let start = Instant::now();
            time::sleep(Duration::from_millis(20)).await;
            let virt = Instant::now() - start;
            let real = wall.elapsed();
            // The real runtime's clock follows the wall clock.
            assert!(virt >= Duration::from_millis(20) && virt < Duration::from_secs(5));
            assert!(real >= Duration::from_millis(20));
        })
    });
    assert_eq!(paused.join().unwrap(), 100 * HOUR);
    real.join().unwrap();
}

#[test]
fn pause_resume_and_is_paused() {
    let rt = gort::Builder::new().procs(2).build().unwrap();
    rt.block_on(async {
        assert!(!time::is_paused());
        time::pause();
        assert!(time::is_paused());
        let frozen = Instant::now();
        std::thread::sleep(Duration::from_millis(5));
        assert_eq!(Instant::now(), frozen);
        time::advance(HOUR).await;
        assert_eq!(Instant::now(), frozen + HOUR);
        time::resume();
        assert!(!time::is_paused());
        // Time runs again, from the paused instant on.
        let t = Instant::now();
        assert!(t >= frozen + HOUR && t < frozen + HOUR + Duration::from_secs(5));
        time::sleep(Duration::from_millis(2)).await;
        assert!(Instant::now() >= t + Duration::from_millis(2));
    });
}

#[test]
#[should_panic(expected = "gort::time::pause must be called from the context of a gort runtime")]
fn pause_outside_a_runtime_panics() {
    time::pause();
}

#[test]
#[should_panic(expected = "the clock is not paused")]
fn advance_on_a_running_clock_panics() {
    let rt = gort::Runtime::new().unwrap();
    rt.block_on(time::advance(Duration::from_secs(1)));
}

/// A task blocked on a socket holds the clock (its peer may live in real time; Go's synctest
/// has the same rule): a read deadline does not fire at once, but `advance` moves the clock
/// past it.
#[test]
fn a_task_blocked_on_a_socket_holds_the_clock_until_advance() {
    let rt = paused_rt(2);
    rt.block_on(async {
        let listener = gort::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let _client = gort::net::TcpStream::connect(addr).await.unwrap();
        let (server, _) = listener.accept().await.unwrap();
        let start = Instant::now();
        server
            .set_read_deadline(Some(start + Duration::from_secs(30)))
            .unwrap();
        let reader = gort::spawn(async move {
            let mut buf = [0u8; 8];
            let r = server.read(&mut buf).await;
            (r.map_err(|e| e.kind()), Instant::now())
        });
        // Let 50 ms of real time pass with block_on parked and every P idle, the reader
        // blocked on its socket and its deadline timer pending: the clock must not jump.
        let (tx, rx) = gort::chan::bounded::<()>(1);
        let outside = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(50));
            tx.try_send(()).unwrap();
        });
        rx.recv().await.unwrap();
        outside.join().unwrap();
        assert!(!reader.is_finished());
        assert_eq!(Instant::now(), start);
        time::advance(Duration::from_secs(60)).await;
        let (r, at) = reader.await.unwrap();
        assert_eq!(r.unwrap_err(), std::io::ErrorKind::TimedOut);
        assert_eq!(at, start + Duration::from_secs(30));
    });
}

mod schedules {
    use super::*;
    use proptest::prelude::*;

    /// One step of a task's random schedule.
    #[derive(Debug, Clone)]
    enum Step {
        Sleep(u64),
        Yield,
        SpawnSleeper(u64),
    }

    fn step() -> impl Strategy<Value = Step> {
        prop_oneof![
            (0u64..5_000).prop_map(Step::Sleep),
            Just(Step::Yield),
            (0u64..5_000).prop_map(Step::SpawnSleeper),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

        /// Random tasks sleeping, yielding and spawning sleepers on a paused 3-P runtime:
        /// every sleep ends with the clock at exactly its deadline (the clock never jumped
        /// while a woken task was runnable), and each task's end is the sum of its sleeps.
        #[test]
        fn every_wake_sees_its_own_deadline(
            tasks in prop::collection::vec(prop::collection::vec(step(), 1..12), 1..12)
        ) {
            let rt = paused_rt(3);
            let bad = rt.block_on(async move {
                let bad = Arc::new(AtomicUsize::new(0));
                let mut hs = Vec::new();
                for steps in tasks {
                    let bad = bad.clone();
                    hs.push(gort::spawn(async move {
                        let start = Instant::now();
                        let mut slept = Duration::ZERO;
                        for s in steps {
                            match s {
                                Step::Sleep(ms) => {
                                    let d = Duration::from_millis(ms);
                                    let deadline = Instant::now() + d;
                                    time::sleep(d).await;
                                    slept += d;
                                    if Instant::now() != deadline {
                                        bad.fetch_add(1, SeqCst);
                                    }
                                }
                                Step::Yield => gort::yield_now().await,
                                Step::SpawnSleeper(ms) => {
                                    let bad = bad.clone();
                                    gort::spawn(async move {
                                        let deadline = Instant::now() + Duration::from_millis(ms);
                                        time::sleep_until(deadline).await;
                                        if Instant::now() != deadline {
                                            bad.fetch_add(1, SeqCst);
                                        }
                                    });
                                }
                            }
                        }
                        if Instant::now() - start != slept {
                            bad.fetch_add(1, SeqCst);
                        }
                    }));
                }
                for h in hs {
                    h.await.unwrap();
                }
                bad.load(SeqCst)
            });
            prop_assert_eq!(bad, 0);
        }
    }
}

/// Four tasks sleep through fixed schedules and log each wake; a ticker and an `after_func`
/// log too. Returns the log: (who, step, time since start in units, rounded).
fn scheduled_log(rt: &gort::Runtime, unit: Duration) -> Vec<(u32, u32, u64)> {
    rt.block_on(async move {
        let start = Instant::now();
        let log = Arc::new(Mutex::new(Vec::new()));
        let units =
            move |t: Instant| ((t - start).as_secs_f64() / unit.as_secs_f64()).round() as u64;
        let schedules: [&[u32]; 4] = [&[1, 2, 3], &[2, 2], &[5], &[1, 1, 1, 1]];
        let mut hs = Vec::new();
        for (who, steps) in schedules.into_iter().enumerate() {
            let log = log.clone();
            hs.push(gort::spawn(async move {
                for (i, n) in steps.iter().enumerate() {
                    time::sleep(unit * *n).await;
                    log.lock()
                        .unwrap()
                        .push((who as u32, i as u32, units(Instant::now())));
                }
            }));
        }
        let log2 = log.clone();
        let _f = time::after_func(unit * 3 + unit / 2, move || {
            log2.lock().unwrap().push((9, 0, units(Instant::now())));
        });
        for h in hs {
            h.await.unwrap();
        }
        time::sleep(unit).await;
        let mut log = log.lock().unwrap().clone();
        // Events due at the same instant may be logged in either order.
        log.sort_by_key(|&(who, step, at)| (at, who, step));
        log
    })
}

/// The same schedules give the same log on a paused clock (in hours, at once) as on the real
/// clock (in tenths of a second); the real run is retried, since a loaded machine may delay
/// a wake-up past the next one.
#[test]
fn a_paused_run_gives_what_a_real_clock_run_gives() {
    let wall = std::time::Instant::now();
    let paused = scheduled_log(&paused_rt(2), HOUR);
    assert!(wall.elapsed() < Duration::from_secs(5));
    let real_rt = gort::Builder::new().procs(2).build().unwrap();
    let tries: Vec<_> = (0..3)
        .map(|_| scheduled_log(&real_rt, Duration::from_millis(100)))
        .take_while(|real| *real != paused)
        .collect();
    assert!(tries.len() < 3, "paused: {paused:?}\nreal: {tries:?}");
}
