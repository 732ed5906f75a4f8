//! Edge cases: "never" deadlines, zero durations, use outside a runtime, Sleep::reset,
//! timeout, after_func panics and re-runs.

use std::future::{poll_fn, Future};
use std::pin::pin;
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::Arc;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use gort_sched::Runtime;
use gort_time::{
    after, after_func, sleep, sleep_until, tick, timeout, timeout_at, Elapsed, Instant, Ticker,
    Timer,
};

const MS: Duration = Duration::from_millis(1);

struct Noop;

impl std::task::Wake for Noop {
    fn wake(self: Arc<Self>) {}
}

/// Polls `f` once with a no-op waker (`Waker::noop` needs Rust 1.85; the MSRV is 1.80).
fn poll_once<F: Future>(f: std::pin::Pin<&mut F>) -> Poll<F::Output> {
    f.poll(&mut Context::from_waker(&Waker::from(Arc::new(Noop))))
}

#[test]
fn never_deadlines_register_nothing_and_never_fire() {
    let rt = Runtime::new().unwrap();
    rt.block_on(async {
        let m0 = rt.metrics();
        let mut s = pin!(sleep(Duration::MAX));
        assert!(poll_once(s.as_mut()).is_pending());
        assert_eq!(s.deadline(), Instant::NEVER);
        let t = Timer::new(Duration::MAX);
        let a = after(Duration::MAX);
        let tk = Ticker::new(Duration::MAX);
        let c = tick(Duration::MAX);
        let f = after_func(Duration::MAX, || panic!("never"));
        let mut iv = gort_time::interval_at(Instant::NEVER, Duration::MAX);
        assert!(poll_fn(|cx| Poll::Ready(iv.poll_tick(cx).is_pending())).await);
        let m1 = rt.metrics();
        assert_eq!(m1.timers_pending, m0.timers_pending, "{m1:?}");
        assert_eq!(m1.timers_modified, m0.timers_modified, "{m1:?}");
        let waited = timeout(20 * MS, async {
            gort_chan::select! {
                _ = t.c().recv() => {}
                _ = a.recv() => {}
                _ = tk.c().recv() => {}
                _ = c.recv() => {}
            }
        })
        .await;
        assert_eq!(waited, Err(Elapsed::default()));
        assert!(t.stop(), "never received: stop is true");
        assert!(!t.reset(Duration::MAX), "stopped");
        assert!(!f.stop(), "never pending");
        assert!(poll_once(s.as_mut()).is_pending());
    });
}

#[test]
fn zero_sleep_is_ready_at_once_anywhere_without_a_heap() {
    // Outside any runtime: a due deadline needs no timer.
    assert!(poll_once(pin!(sleep(Duration::ZERO))).is_ready());
    assert!(poll_once(pin!(sleep_until(Instant::now()))).is_ready());
    assert!(poll_once(pin!(sleep_until(Instant::from_nanos(i64::MIN)))).is_ready());
    let rt = Runtime::new().unwrap();
    rt.block_on(async {
        let m0 = rt.metrics();
        for _ in 0..100 {
            sleep(Duration::ZERO).await;
        }
        let mut s = pin!(sleep(Duration::ZERO));
        assert!(s.is_elapsed());
        assert!(poll_once(s.as_mut()).is_ready());
        assert_eq!(rt.metrics().timers_modified, m0.timers_modified);
    });
}

#[test]
#[should_panic(expected = "gort::time::Sleep must be used inside a gort runtime")]
fn sleep_outside_runtime_panics() {
    let _ = poll_once(pin!(sleep(Duration::from_secs(1))));
}

#[test]
#[should_panic(expected = "gort::time::Timer must be used inside a gort runtime")]
fn timer_outside_runtime_panics() {
    let _ = Timer::new(MS);
}

#[test]
#[should_panic(expected = "gort::time::Ticker must be used inside a gort runtime")]
fn ticker_outside_runtime_panics() {
    let _ = Ticker::new(MS);
}

#[test]
#[should_panic(expected = "gort::time::after_func must be used inside a gort runtime")]
fn after_func_outside_runtime_panics() {
    let _ = after_func(MS, || {});
}

#[test]
#[should_panic(expected = "gort::time::after must be used inside a gort runtime")]
fn after_outside_runtime_panics() {
    let _ = after(MS);
}

#[test]
fn sleep_reset_moves_the_deadline_both_ways() {
    Runtime::new().unwrap().block_on(async {
        // Earlier, while registered: completes at the new deadline, not the old one.
        let start = Instant::now();
        let mut s = pin!(sleep(Duration::from_secs(3600)));
        assert!(poll_once(s.as_mut()).is_pending());
        s.as_mut().reset(start + 10 * MS);
        assert_eq!(s.deadline(), start + 10 * MS);
        timeout(Duration::from_secs(10), s.as_mut()).await.unwrap();
        assert!(start.elapsed() >= 10 * MS);
        // After completion it can be reset and awaited again; later, too.
        let again = Instant::now() + 5 * MS;
        s.as_mut().reset(again);
        assert!(!s.is_elapsed());
        s.as_mut().await;
        assert!(Instant::now() >= again);
        // To never: pending, registered nowhere.
        s.as_mut().reset(Instant::NEVER);
        assert!(poll_once(s.as_mut()).is_pending());
    });
}

/// A registered sleep reset to a deadline that has passed (the reset moves its timer without
/// reading the clock) completes at its next poll, and leaves no timer armed in any heap.
#[test]
fn sleep_reset_to_a_passed_deadline_completes_at_once_and_leaves_no_timer() {
    let rt = Runtime::new().unwrap();
    rt.block_on(async {
        let mut s = pin!(sleep(Duration::from_secs(3600)));
        assert!(poll_once(s.as_mut()).is_pending());
        s.as_mut().reset(Instant::now() - 5 * MS);
        assert!(s.is_elapsed());
        assert!(poll_once(s.as_mut()).is_ready());
        // Again, with the timer left to run first: the wake-up it sends is harmless.
        s.as_mut().reset(Instant::now() + Duration::from_secs(3600));
        assert!(poll_once(s.as_mut()).is_pending());
        s.as_mut().reset(Instant::now());
        gort_sched::yield_now().await;
        timeout(Duration::from_secs(10), s.as_mut()).await.unwrap();
    });
    assert_eq!(rt.metrics().timers_pending, 0);
}

#[test]
fn sleep_polled_from_another_task_wakes_the_new_one() {
    Runtime::new().unwrap().block_on(async {
        let mut s = Box::pin(sleep(20 * MS));
        assert!(poll_once(s.as_mut()).is_pending()); // registered with a no-op waker
        let h = gort_sched::spawn(s);
        timeout(Duration::from_secs(10), h).await.unwrap().unwrap();
    });
}

#[test]
fn timeout_fast_future_touches_no_heap() {
    let rt = Runtime::new().unwrap();
    rt.block_on(async {
        let m0 = rt.metrics();
        for i in 0..100 {
            assert_eq!(timeout(Duration::from_secs(1), async { i }).await, Ok(i));
        }
        assert_eq!(rt.metrics().timers_modified, m0.timers_modified);
        let t = timeout_at(Instant::now(), std::future::ready(1));
        assert!(t.deadline() <= Instant::now());
        let _: &std::future::Ready<i32> = t.get_ref();
        assert_eq!(
            t.await,
            Ok(1),
            "the inner future wins even at a passed deadline"
        );
    });
}

#[test]
fn timeout_of_self_waking_future_fires() {
    // tokio#4291: a future that always wakes itself and returns Pending is still timed out.
    Runtime::new().unwrap().block_on(async {
        let busy = poll_fn(|cx: &mut Context<'_>| {
            cx.waker().wake_by_ref();
            Poll::<()>::Pending
        });
        let start = Instant::now();
        let r = timeout(10 * MS, busy).await;
        assert_eq!(r, Err(Elapsed::default()));
        assert!(start.elapsed() >= 10 * MS);
        let e = r.unwrap_err();
        assert_eq!(e.to_string(), "deadline has elapsed");
        let _: &dyn std::error::Error = &e;
    });
}

#[test]
fn after_func_panic_is_counted_not_fatal() {
    let rt = Runtime::new().unwrap();
    rt.block_on(async {
        let before = rt.metrics().task_panics;
        let ran = Arc::new(AtomicUsize::new(0));
        let r = ran.clone();
        let _f = after_func(MS, move || {
            r.fetch_add(1, SeqCst);
            panic!("boom in after_func");
        });
        let deadline = Instant::now() + Duration::from_secs(10);
        while rt.metrics().task_panics == before && Instant::now() < deadline {
            sleep(MS).await;
        }
        assert_eq!(ran.load(SeqCst), 1);
        assert_eq!(rt.metrics().task_panics, before + 1);
        // The runtime still works.
        sleep(MS).await;
    });
}

#[test]
fn after_func_reset_after_fire_runs_again_and_drop_does_not_stop() {
    Runtime::new().unwrap().block_on(async {
        let ran = Arc::new(AtomicUsize::new(0));
        let r = ran.clone();
        let f = after_func(MS, move || {
            r.fetch_add(1, SeqCst);
        });
        wait_for(&ran, 1).await;
        assert!(!f.stop(), "already fired");
        assert!(!f.reset(MS), "not pending: false");
        wait_for(&ran, 2).await;
        assert!(!f.reset(Duration::from_secs(3600)));
        assert!(f.reset(MS), "pending: true");
        drop(f); // does not cancel
        wait_for(&ran, 3).await;
        sleep(10 * MS).await;
        assert_eq!(ran.load(SeqCst), 3, "ran once per arming");
    });
}

async fn wait_for(n: &AtomicUsize, want: usize) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while n.load(SeqCst) < want {
        assert!(Instant::now() < deadline, "after_func did not run");
        sleep(MS).await;
    }
}

#[test]
fn handles_are_debug() {
    Runtime::new().unwrap().block_on(async {
        let t = Timer::new(Duration::from_secs(3600));
        let s = format!(
            "{t:?} {:?} {:?} {:?} {:?}",
            Ticker::new(Duration::from_secs(1)),
            after_func(Duration::MAX, || {}),
            sleep(MS),
            timeout(MS, std::future::ready(1)),
        );
        assert!(
            s.contains("Timer") && s.contains("Armed") && s.contains("Sleep"),
            "{s}"
        );
    });
}

/// Go's `time.Sleep(d > 0)` always parks: a loop of tiny sleeps on a one-P runtime must let
/// the task that ends the loop run.
#[test]
fn a_loop_of_tiny_sleeps_does_not_starve_its_p() {
    use std::sync::atomic::{AtomicBool, Ordering::SeqCst};
    use std::sync::Arc;
    let rt = gort_sched::Builder::new().procs(1).build().unwrap();
    let done = Arc::new(AtomicBool::new(false));
    let d = done.clone();
    let waiter = rt.spawn(async move {
        let d2 = d.clone();
        let _setter = gort_sched::spawn(async move { d2.store(true, SeqCst) });
        let mut spins = 0u64;
        // Bounded, so that a regression fails instead of hanging.
        while !d.load(SeqCst) && spins < 1_000_000 {
            gort_time::sleep(std::time::Duration::from_nanos(1)).await;
            spins += 1;
        }
        spins
    });
    let spins = rt.block_on(waiter).unwrap();
    assert!(
        done.load(SeqCst),
        "the setter never ran: {spins} sleeps never yielded"
    );
}

#[test]
fn overlapping_after_func_firings_run_concurrently_as_in_go() {
    // Go runs each firing in its own goroutine: a reset after a firing whose `f` is still
    // running starts a second run alongside it. The first run waits (bounded) for the second.
    let rt = gort_sched::Builder::new().procs(2).build().unwrap();
    rt.block_on(async {
        let runs = Arc::new(AtomicUsize::new(0));
        let overlapped = Arc::new(AtomicUsize::new(0));
        let (r, o) = (runs.clone(), overlapped.clone());
        let f = after_func(MS, move || {
            if r.fetch_add(1, SeqCst) == 0 {
                let deadline = Instant::now() + Duration::from_secs(10);
                while r.load(SeqCst) < 2 && Instant::now() < deadline {
                    std::thread::yield_now();
                }
                if r.load(SeqCst) >= 2 {
                    o.store(1, SeqCst);
                }
            }
        });
        let deadline = Instant::now() + Duration::from_secs(10);
        while runs.load(SeqCst) == 0 && Instant::now() < deadline {
            sleep(MS).await;
        }
        assert!(!f.reset(MS), "the first arming had fired");
        while runs.load(SeqCst) < 2 && Instant::now() < deadline {
            sleep(MS).await;
        }
        assert_eq!(runs.load(SeqCst), 2);
        while overlapped.load(SeqCst) == 0 && Instant::now() < deadline {
            sleep(MS).await;
        }
        assert_eq!(
            overlapped.load(SeqCst),
            1,
            "the second run waited for the first"
        );
    });
}

#[test]
fn elapsed_converts_to_a_timed_out_io_error() {
    let rt = Runtime::new().unwrap();
    let res: std::io::Result<()> = rt.block_on(async {
        timeout(MS, std::future::pending::<()>()).await?;
        Ok(())
    });
    let err = res.unwrap_err();
    assert_eq!(err.kind(), std::io::ErrorKind::TimedOut);
    assert_eq!(err.to_string(), Elapsed::default().to_string());
    assert!(err.get_ref().is_some_and(|inner| inner.is::<Elapsed>()));
}

/// Sleeps one after another on one P reuse the runtime timers earlier sleeps gave back
/// (gort-timer's `recycle`): a sleep on a reused timer still waits for its own deadline, with
/// none of the last sleep's (fired, stopped while pending, reset) state, and a stopped sleep's
/// timer, once reused, wakes only its new sleeper.
#[test]
fn sleeps_on_reused_timers_keep_their_own_deadlines() {
    let rt = gort_sched::Builder::new().procs(1).build().unwrap();
    rt.block_on(async {
        for i in 0..300u32 {
            // One left pending and dropped (stopped in its heap, kept once the heap lets go),
            // one reset while pending, one that fires.
            let mut stopped = pin!(sleep(Duration::from_secs(3600)));
            assert!(poll_once(stopped.as_mut()).is_pending());
            let mut moved = pin!(sleep(Duration::from_secs(3600)));
            assert!(poll_once(moved.as_mut()).is_pending());
            moved
                .as_mut()
                .reset(Instant::now() + Duration::from_micros(50));
            let d = Duration::from_micros(100 + u64::from(i % 7) * 150);
            let start = Instant::now();
            sleep(d).await;
            assert!(start.elapsed() >= d, "sleep {i} ended early");
            moved.as_mut().await;
        }
    });
    assert_eq!(rt.metrics().timers_pending, 0);
}
