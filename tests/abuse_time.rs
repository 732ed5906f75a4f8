//! gort::time at its edges, as user code reaches them by mistake or on purpose: durations of
//! zero and `Duration::MAX`, deadlines at the ends of the clock, one timer reset from many
//! threads, a callback that panics every time it runs. The rule each test checks: no hang, no
//! spin, no abort, and a clear panic where Go or Tokio panic.

mod support;

use support::{within, WATCHDOG};

use std::future::Future;
use std::pin::pin;
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::{mpsc, Arc, Barrier};
use std::task::{Context, Poll};
use std::time::Duration;

use gort::time::Instant;

fn rt() -> gort::Runtime {
    gort::Builder::new().procs(2).build().unwrap()
}

/// The panic message of `f`, which must panic.
fn panic_of(f: impl FnOnce()) -> String {
    let p = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).expect_err("no panic");
    p.downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| p.downcast_ref::<String>().cloned())
        .unwrap_or_default()
}

/// Polls `f` once with a no-op waker.
fn poll_once<F: Future>(f: std::pin::Pin<&mut F>) -> Poll<F::Output> {
    f.poll(&mut Context::from_waker(futures::task::noop_waker_ref()))
}

#[test]
fn sleeps_and_timers_of_duration_max_wait_and_drop_cleanly() {
    within(|| {
        let rt = rt();
        rt.block_on(async {
            let mut s = pin!(gort::time::sleep(Duration::MAX));
            assert!(poll_once(s.as_mut()).is_pending());
            assert!(s.deadline().is_never() || s.deadline() > Instant::now());
            let r = gort::time::timeout(Duration::from_millis(5), s).await;
            assert!(r.is_err());
            assert!(gort::time::timeout(Duration::MAX, async { 1 }).await == Ok(1));
            let slow = gort::time::timeout(Duration::MAX, gort::time::sleep(Duration::MAX));
            assert!(gort::time::timeout(Duration::from_millis(5), slow)
                .await
                .is_err());
            let t = gort::time::Timer::new(Duration::MAX);
            assert!(t.c().try_recv().is_err());
            assert!(t.reset(Duration::from_millis(1)));
            t.c().recv().await.unwrap();
            let rx = gort::time::after(Duration::MAX);
            assert!(rx.try_recv().is_err());
            let f = gort::time::after_func(Duration::MAX, || panic!("must never run"));
            assert!(f.reset(Duration::MAX) || !f.stop());
            let (ctx, _cancel) =
                gort::context::with_timeout(&gort::context::Context::background(), Duration::MAX);
            assert!(ctx.err().is_none());
        });
        drop(rt);
    });
}

#[test]
fn deadlines_at_the_ends_of_the_clock_fire_at_once_or_never() {
    within(|| {
        let rt = rt();
        rt.block_on(async {
            for past in [
                Instant::from_nanos(i64::MIN),
                Instant::from_nanos(-1),
                Instant::from_nanos(0),
                Instant::now() - Duration::MAX,
                Instant::now() - Duration::from_secs(1 << 40),
            ] {
                gort::time::sleep_until(past).await;
                assert!(gort::time::timeout_at(past, async { 2 }).await == Ok(2));
                let r = gort::time::timeout_at(past, std::future::pending::<()>()).await;
                assert!(r.is_err());
                let mut s = pin!(gort::time::sleep(Duration::from_secs(3600)));
                assert!(poll_once(s.as_mut()).is_pending());
                s.as_mut().reset(past);
                s.await;
            }
            let mut s = pin!(gort::time::sleep(Duration::from_millis(1)));
            assert!(poll_once(s.as_mut()).is_pending());
            s.as_mut().reset(Instant::from_nanos(i64::MAX));
            let r = gort::time::timeout(Duration::from_millis(5), s).await;
            assert!(r.is_err(), "a sleep reset to the end of time fired");
        });
        drop(rt);
    });
}

#[test]
fn zero_periods_panic_with_a_clear_message() {
    within(|| {
        let rt = rt();
        let _g = rt.handle().enter();
        let msg = panic_of(|| drop(gort::time::Ticker::new(Duration::ZERO)));
        assert!(msg.contains("non-positive"), "{msg:?}");
        let msg = panic_of(|| drop(gort::time::interval(Duration::ZERO)));
        assert!(msg.contains("non-zero"), "{msg:?}");
        let msg = panic_of(|| drop(gort::time::interval_at(Instant::now(), Duration::ZERO)));
        assert!(msg.contains("non-zero"), "{msg:?}");
        let t = gort::time::Ticker::new(Duration::from_millis(1));
        let msg = panic_of(|| t.reset(Duration::ZERO));
        assert!(msg.contains("non-positive"), "{msg:?}");
        assert!(gort::time::Ticker::try_new(Duration::ZERO).is_err());
        // Go's time.Tick(0) returns nil instead of panicking; gort's says what it does.
        drop(t);
    });
}

#[test]
fn zero_timeouts_and_sleeps_return_the_ready_value_or_elapse_at_once() {
    within(|| {
        let rt = rt();
        rt.block_on(async {
            assert_eq!(
                gort::time::timeout(Duration::ZERO, async { 3 }).await,
                Ok(3)
            );
            let r = gort::time::timeout(Duration::ZERO, std::future::pending::<()>()).await;
            assert!(r.is_err());
            gort::time::sleep(Duration::ZERO).await;
            let t = gort::time::Timer::new(Duration::ZERO);
            t.c().recv().await.unwrap();
            let (tx, rx) = gort::chan::bounded(1);
            let _f = gort::time::after_func(Duration::ZERO, move || {
                let _ = tx.try_send(());
            });
            rx.recv().await.unwrap();
        });
    });
}

#[test]
fn interval_at_the_start_of_time_catches_up_without_hanging() {
    within(|| {
        let rt = rt();
        rt.block_on(async {
            use gort::time::MissedTickBehavior::*;
            for behavior in [Burst, Delay, Skip] {
                let mut iv =
                    gort::time::interval_at(Instant::from_nanos(i64::MIN), Duration::from_nanos(1));
                iv.set_missed_tick_behavior(behavior);
                for _ in 0..1000 {
                    iv.tick().await;
                }
                let mut iv = gort::time::interval(Duration::MAX);
                iv.tick().await;
                let r = gort::time::timeout(Duration::from_millis(2), iv.tick()).await;
                assert!(r.is_err(), "{behavior:?}");
            }
        });
    });
}

#[test]
fn one_timer_reset_and_stopped_from_many_threads_at_once_stays_consistent() {
    within(|| {
        let rt = rt();
        let timer = {
            let _g = rt.handle().enter();
            Arc::new(gort::time::Timer::new(Duration::from_secs(3600)))
        };
        let start = Arc::new(Barrier::new(8));
        let threads: Vec<_> = (0..8)
            .map(|i| {
                let (timer, start, h) = (timer.clone(), start.clone(), rt.handle().clone());
                std::thread::spawn(move || {
                    let _g = h.enter();
                    start.wait();
                    for j in 0..5_000u64 {
                        match (i + j) % 3 {
                            0 => drop(timer.reset(Duration::from_micros(j % 50))),
                            1 => drop(timer.stop()),
                            _ => drop(timer.c().try_recv()),
                        }
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        // Whatever the race left, one more reset delivers exactly one value.
        let g = rt.handle().enter();
        timer.stop();
        while timer.c().try_recv().is_ok() {}
        timer.reset(Duration::from_millis(1));
        drop(g);
        rt.block_on(async {
            timer.c().recv().await.unwrap();
            let r = gort::time::timeout(Duration::from_millis(20), timer.c().recv()).await;
            assert!(r.is_err(), "a second value after one reset");
        });
        drop(timer);
        drop(rt);
    });
}

#[test]
fn an_after_func_that_always_panics_reset_in_a_loop_kills_no_m() {
    within(|| {
        let rt = gort::Builder::new().procs(1).build().unwrap();
        let runs = Arc::new(AtomicUsize::new(0));
        let seen = runs.clone();
        let f = {
            let _g = rt.handle().enter();
            gort::time::after_func(Duration::ZERO, move || {
                seen.fetch_add(1, SeqCst);
                panic!("test: this callback always panics");
            })
        };
        {
            let _g = rt.handle().enter();
            for i in 0..2_000u64 {
                f.reset(Duration::from_micros(i % 3));
                if i % 100 == 0 {
                    std::thread::sleep(Duration::from_millis(1));
                }
            }
        }
        let start = std::time::Instant::now();
        while runs.load(SeqCst) == 0 {
            assert!(start.elapsed() < WATCHDOG);
            std::thread::sleep(Duration::from_millis(1));
        }
        assert_eq!(rt.block_on(rt.spawn(async { 4 })).unwrap(), 4);
        assert!(rt.metrics().task_panics >= 1, "{:?}", rt.metrics());
        drop(f);
        drop(rt);
    });
}

#[test]
fn a_callback_resetting_and_stopping_its_own_timer_does_not_deadlock() {
    within(|| {
        let rt = gort::Builder::new().procs(1).build().unwrap();
        let (tx, rx) = mpsc::channel();
        let cell: Arc<std::sync::OnceLock<gort::time::AfterFunc>> = Arc::default();
        let inner = cell.clone();
        let runs = Arc::new(AtomicUsize::new(0));
        let f = {
            let _g = rt.handle().enter();
            gort::time::after_func(Duration::from_millis(20), move || {
                let own = inner.get().unwrap();
                if runs.fetch_add(1, SeqCst) < 50 {
                    own.reset(Duration::ZERO);
                } else {
                    own.stop();
                    let _ = tx.send(());
                }
            })
        };
        assert!(cell.set(f).is_ok());
        rx.recv_timeout(WATCHDOG)
            .expect("a self-resetting callback hung");
        drop(rt);
    });
}

/// `advance(Duration::MAX)` used to wait for ever: its target saturated to `Instant::NEVER`,
/// a deadline that never comes. It panics now, as Tokio's does, and the clock stays usable.
#[test]
fn advancing_a_paused_clock_past_its_end_panics_clearly() {
    within(|| {
        let rt = gort::Builder::new().procs(1).build().unwrap();
        rt.block_on(async {
            gort::time::pause();
            let before = Instant::now();
            let err = gort::spawn(gort::time::advance(Duration::MAX))
                .await
                .unwrap_err();
            let msg = err.into_panic();
            let msg = msg.downcast_ref::<String>().cloned().unwrap_or_default();
            assert!(msg.contains("past its end"), "{msg:?}");
            assert_eq!(Instant::now(), before, "a refused advance moved the clock");
            gort::time::sleep(Duration::from_secs(5)).await; // auto-advance still works
            gort::time::advance(Duration::from_secs(3600)).await;
            assert!(Instant::now() - before >= Duration::from_secs(3605));
        });
    });
}

#[test]
fn a_paused_clock_advanced_far_past_tiny_periods_returns() {
    within(|| {
        let rt = gort::Builder::new()
            .procs(2)
            .start_paused(true)
            .build()
            .unwrap();
        rt.block_on(async {
            // Nobody receives: Go 1.23's channel timers stay out of the heaps.
            let idle = gort::time::Ticker::new(Duration::from_nanos(1));
            let begun = std::time::Instant::now();
            gort::time::advance(Duration::from_secs(3600)).await;
            assert!(idle.c().try_recv().is_ok());
            // Somebody receives, and an interval and an after_func re-armed in a loop.
            let busy = gort::time::Ticker::new(Duration::from_micros(1));
            let receiver = gort::spawn(async move {
                let mut n = 0u64;
                while busy.c().recv().await.is_some() {
                    n += 1;
                    if n == 100 {
                        break;
                    }
                }
                n
            });
            let mut iv = gort::time::interval(Duration::from_nanos(1));
            iv.set_missed_tick_behavior(gort::time::MissedTickBehavior::Burst);
            let burst = gort::spawn(async move {
                for _ in 0..1000 {
                    iv.tick().await;
                }
            });
            gort::time::advance(Duration::from_secs(1)).await;
            assert_eq!(receiver.await.unwrap(), 100);
            burst.await.unwrap();
            let wall = begun.elapsed();
            assert!(wall < Duration::from_secs(20), "{wall:?}");
        });
    });
}

#[test]
fn a_sleep_and_timers_moved_to_another_runtime_after_theirs_is_dropped() {
    within(|| {
        let a = gort::Builder::new().procs(1).build().unwrap();
        let b = gort::Builder::new().procs(1).build().unwrap();
        // Armed on A's heap by a first poll, then A is dropped with it inside.
        let (sleep, timer) = a.block_on(async {
            let mut s = Box::pin(gort::time::sleep(Duration::from_millis(30)));
            assert!(poll_once(s.as_mut()).is_pending());
            let t = gort::time::Timer::new(Duration::from_millis(30));
            (s, t)
        });
        drop(a);
        let begun = std::time::Instant::now();
        let (mut sleep2, timer2) = {
            let a2 = gort::Builder::new().procs(1).build().unwrap();
            let pair = a2.block_on(async {
                let mut s = Box::pin(gort::time::sleep(Duration::from_secs(3600)));
                assert!(poll_once(s.as_mut()).is_pending());
                let t = gort::time::Timer::new(Duration::from_secs(3600));
                (s, t)
            });
            drop(a2);
            pair
        };
        let timer_value = b.block_on(async move {
            sleep.await;
            // Reset (not just polled) on B after A is gone.
            sleep2
                .as_mut()
                .reset(Instant::now() + Duration::from_millis(5));
            sleep2.await;
            timer2.reset(Duration::from_millis(5));
            let _ = gort::time::timeout(Duration::from_secs(5), timer2.c().recv())
                .await
                .expect("a timer reset on another runtime never fired");
            gort::time::timeout(Duration::from_secs(5), timer.c().recv()).await
        });
        assert!(begun.elapsed() < Duration::from_secs(10));
        // The channel timer's runtime is gone: documented to close its channel (no value),
        // not to hang; a value is fine too if it fired first.
        assert!(timer_value.is_ok(), "the receive hung: {timer_value:?}");
        drop(b);
    });
}

/// Futures first polled (armed, their waker registered) in one task, then moved to another
/// that awaits them: the second task's waker must replace the first's, or the wake-up is lost.
#[test]
fn timer_futures_moved_to_another_task_after_their_first_poll_wake_it() {
    within(|| {
        let rt = gort::Builder::new().procs(2).build().unwrap();
        rt.block_on(async {
            for round in 0..50u64 {
                let d = Duration::from_millis(1 + round % 3);
                let (tx, rx) = gort::chan::bounded(1);
                let first = gort::spawn(async move {
                    let mut s = Box::pin(gort::time::sleep(d));
                    let mut t = Box::pin(gort::time::timeout(d, std::future::pending::<()>()));
                    let mut iv = gort::time::interval(d);
                    iv.tick().await;
                    std::future::poll_fn(|cx| {
                        assert!(s.as_mut().poll(cx).is_pending());
                        assert!(t.as_mut().poll(cx).is_pending());
                        assert!(iv.poll_tick(cx).is_pending());
                        Poll::Ready(())
                    })
                    .await;
                    tx.send((s, t, iv)).await.unwrap();
                    // This task ends: its waker, still in the timers, wakes nobody useful.
                });
                let second = gort::spawn(async move {
                    let (s, t, mut iv) = rx.recv().await.unwrap();
                    s.await;
                    assert!(t.await.is_err());
                    iv.tick().await;
                });
                first.await.unwrap();
                gort::time::timeout(Duration::from_secs(5), second)
                    .await
                    .expect("a moved timer future lost its wake-up")
                    .unwrap();
            }
        });
    });
}

/// Documented in `after_func`: armed through a handle whose runtime is gone, it does not
/// panic (nothing waits on it), and `f` is dropped unrun, at the latest with the handle.
#[test]
fn an_after_func_armed_on_a_dropped_runtime_drops_its_function_unrun() {
    within(|| {
        let rt = rt();
        let handle = rt.handle().clone();
        drop(rt);
        let captured = Arc::new(AtomicUsize::new(0));
        let c = captured.clone();
        let f = {
            let _g = handle.enter();
            gort::time::after_func(Duration::from_millis(1), move || {
                c.fetch_add(1, SeqCst);
            })
        };
        std::thread::sleep(Duration::from_millis(20));
        assert_eq!(captured.load(SeqCst), 0, "ran on a dropped runtime");
        drop(f);
        drop(handle);
        assert_eq!(Arc::strong_count(&captured), 1, "f outlived the handle");
    });
}

#[test]
fn tickers_and_intervals_of_extreme_periods_neither_panic_nor_spin() {
    within(|| {
        let rt = rt();
        rt.block_on(async {
            use gort::time::MissedTickBehavior::*;
            let t = gort::time::Ticker::new(Duration::MAX);
            t.reset(Duration::from_nanos(u64::MAX));
            t.reset(Duration::from_nanos(1));
            t.c().recv().await.unwrap();
            t.reset(Duration::MAX);
            while t.c().try_recv().is_ok() {}
            let r = gort::time::timeout(Duration::from_millis(5), t.c().recv()).await;
            assert!(r.is_err(), "a ticker reset to Duration::MAX ticked");
            for behavior in [Burst, Delay, Skip] {
                for period in [
                    Duration::MAX,
                    Duration::from_nanos(i64::MAX as u64),
                    Duration::from_secs(1 << 40),
                ] {
                    let mut iv = gort::time::interval(period);
                    iv.set_missed_tick_behavior(behavior);
                    iv.tick().await;
                    iv.reset_at(Instant::from_nanos(i64::MIN));
                    iv.tick().await;
                    iv.reset_immediately();
                    iv.tick().await;
                    let r = gort::time::timeout(Duration::from_millis(2), iv.tick()).await;
                    assert!(r.is_err(), "{behavior:?} {period:?}");
                    iv.reset();
                }
                let mut iv = gort::time::interval_at(
                    Instant::now() - Duration::from_secs(1 << 30),
                    Duration::from_nanos(3),
                );
                iv.set_missed_tick_behavior(behavior);
                for _ in 0..100 {
                    iv.tick().await;
                }
            }
        });
    });
}

/// Captured by an `after_func`'s function: stops and resets that same timer when dropped.
struct ReArmsOnDrop(
    Arc<std::sync::OnceLock<gort::time::AfterFunc>>,
    Arc<AtomicUsize>,
);

impl Drop for ReArmsOnDrop {
    fn drop(&mut self) {
        self.1.fetch_add(1, SeqCst);
        if let Some(f) = self.0.get() {
            let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                f.reset(Duration::from_millis(1));
                f.stop();
                f.reset(Duration::from_secs(3600));
            }));
        }
    }
}

/// The function's captures are dropped by `stop` (the payload rule: at once). Their `Drop`
/// touching the same timer must find it in a settled status, not a transient one or a held
/// lock, or it would spin or deadlock.
#[test]
fn an_after_funcs_captures_that_rearm_it_when_dropped() {
    within(|| {
        let rt = gort::Builder::new().procs(2).build().unwrap();
        let _g = rt.handle().enter();
        for _ in 0..50 {
            let cell: Arc<std::sync::OnceLock<gort::time::AfterFunc>> = Arc::default();
            let drops = Arc::new(AtomicUsize::new(0));
            let guard = ReArmsOnDrop(cell.clone(), drops.clone());
            let f = gort::time::after_func(Duration::from_secs(3600), move || {
                let _keep = &guard;
            });
            assert!(cell.set(f).is_ok());
            let f = cell.get().unwrap();
            f.stop();
            f.reset(Duration::from_millis(1));
            std::thread::sleep(Duration::from_millis(3));
            f.stop();
            // The cycle (the cell holds the handle, the function holds the cell) is the
            // test's own; break it.
            drop(cell);
        }
        drop(_g);
        drop(rt);
    });
}
