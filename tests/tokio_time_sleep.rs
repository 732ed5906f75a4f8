//! Tokio's `tests/time_sleep.rs` and `tests/time_timeout.rs`, ported to gort: each test keeps
//! its Tokio name and a comment naming its file, and runs under a watchdog on a runtime of 2
//! Ps (Tokio's `#[tokio::test]` runs one thread). `time::pause` and `advance` are gort's
//! paused clock; gort's `advance` returns once the runtime is quiescent at the new instant
//! (like Go's synctest), a documented difference that these tests do not see.

#[path = "support/mock_task.rs"]
mod mock_task;
mod support;

use gort::time::{self, Instant, Sleep};
use mock_task::{mock, ms, rt_test};
use std::future::{pending, Future};
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering::SeqCst};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Wake, Waker};
use std::time::Duration;
use tokio::sync::oneshot;

fn noop_cx() -> Context<'static> {
    Context::from_waker(futures::task::noop_waker_ref())
}

// time_sleep.rs (gort's `is_elapsed` reads the clock: a sleep until now is elapsed before
// its first poll, where Tokio's waits for its timer to fire: `Sleep::is_elapsed`'s docs)
#[test]
fn immediate_sleep() {
    rt_test(2, true, || async {
        let now = Instant::now();
        let mut sleep = std::pin::pin!(time::sleep_until(now));
        assert!(sleep.is_elapsed());
        sleep.as_mut().await;
        assert_elapsed!(now, ms(0));
        assert!(sleep.is_elapsed());
    });
}

// time_sleep.rs
#[test]
fn is_elapsed() {
    rt_test(2, false, || async {
        time::pause();
        let mut sleep = std::pin::pin!(time::sleep(ms(10)));
        assert!(!sleep.is_elapsed());
        assert!(futures::poll!(sleep.as_mut()).is_pending());
        assert!(!sleep.is_elapsed());
        sleep.as_mut().await;
        assert!(sleep.is_elapsed());
    });
}

// time_sleep.rs
#[test]
fn delayed_sleep_level_0() {
    rt_test(2, false, || async {
        time::pause();
        for i in [1, 10, 60] {
            let now = Instant::now();
            time::sleep_until(now + ms(i)).await;
            assert_elapsed!(now, ms(i));
        }
    });
}

// time_sleep.rs
#[test]
fn sub_ms_delayed_sleep() {
    rt_test(2, false, || async {
        time::pause();
        for _ in 0..5 {
            let now = Instant::now();
            time::sleep_until(now + ms(1) + Duration::new(0, 1)).await;
            assert_elapsed!(now, ms(1));
        }
    });
}

// time_sleep.rs
#[test]
fn delayed_sleep_wrapping_level_0() {
    rt_test(2, false, || async {
        time::pause();
        time::sleep(ms(5)).await;
        let now = Instant::now();
        time::sleep_until(now + ms(60)).await;
        assert_elapsed!(now, ms(60));
    });
}

// time_sleep.rs
#[test]
fn reset_future_sleep_before_fire() {
    rt_test(2, false, || async {
        time::pause();
        let now = Instant::now();
        let mut sleep = mock(time::sleep_until(now + ms(100)));
        assert!(sleep.poll().is_pending());
        let mut sleep = sleep.into_inner();
        sleep.as_mut().reset(Instant::now() + ms(200));
        sleep.await;
        assert_elapsed!(now, ms(200));
    });
}

// time_sleep.rs
#[test]
fn reset_past_sleep_before_turn() {
    rt_test(2, false, || async {
        time::pause();
        let now = Instant::now();
        let mut sleep = mock(time::sleep_until(now + ms(100)));
        assert!(sleep.poll().is_pending());
        let mut sleep = sleep.into_inner();
        sleep.as_mut().reset(now + ms(80));
        sleep.await;
        assert_elapsed!(now, ms(80));
    });
}

// time_sleep.rs
#[test]
fn reset_past_sleep_before_fire() {
    rt_test(2, false, || async {
        time::pause();
        let now = Instant::now();
        let mut sleep = mock(time::sleep_until(now + ms(100)));
        assert!(sleep.poll().is_pending());
        let mut sleep = sleep.into_inner();
        time::sleep(ms(10)).await;
        sleep.as_mut().reset(now + ms(80));
        sleep.await;
        assert_elapsed!(now, ms(80));
    });
}

// time_sleep.rs
#[test]
fn reset_future_sleep_after_fire() {
    rt_test(2, false, || async {
        time::pause();
        let now = Instant::now();
        let mut sleep = Box::pin(time::sleep_until(now + ms(100)));
        sleep.as_mut().await;
        assert_elapsed!(now, ms(100));
        sleep.as_mut().reset(now + ms(110));
        sleep.await;
        assert_elapsed!(now, ms(110));
    });
}

// time_sleep.rs
#[test]
fn reset_sleep_to_past() {
    rt_test(2, false, || async {
        time::pause();
        let now = Instant::now();
        let mut sleep = mock(time::sleep_until(now + ms(100)));
        assert!(sleep.poll().is_pending());
        time::sleep(ms(50)).await;
        assert!(!sleep.is_woken());
        sleep.fut.as_mut().reset(now + ms(40));
        assert!(sleep.poll().is_ready());
    });
}

// time_sleep.rs (gort's `sleep_until` panics when polled outside a runtime, not when made:
// `gort::time::sleep_until`'s docs)
#[test]
#[should_panic]
fn creating_sleep_outside_of_context() {
    let mut fut = Box::pin(time::sleep_until(Instant::now() + ms(500)));
    let _ = fut.as_mut().poll(&mut noop_cx());
}

// time_sleep.rs
#[test]
fn greater_than_max() {
    const YR_5: u64 = 5 * 365 * 24 * 60 * 60 * 1000;
    rt_test(2, false, || async {
        time::pause();
        time::sleep_until(Instant::now() + ms(YR_5)).await;
    });
}

// time_sleep.rs
#[test]
fn short_sleeps() {
    rt_test(2, false, || async {
        for _ in 0..1000 {
            time::sleep(ms(0)).await;
        }
    });
}

// time_sleep.rs
#[test]
fn multi_long_sleeps() {
    rt_test(2, false, || async {
        time::pause();
        for _ in 0..5u32 {
            time::sleep(Duration::from_secs(365 * 24 * 3600)).await;
        }
        let deadline = Instant::now() + Duration::from_secs(10 * 365 * 24 * 3600);
        time::sleep_until(deadline).await;
        assert!(Instant::now() >= deadline);
    });
}

// time_sleep.rs
#[test]
fn long_sleeps() {
    rt_test(2, false, || async {
        time::pause();
        let deadline = Instant::now() + Duration::from_secs(10 * 365 * 24 * 3600);
        time::sleep_until(deadline).await;
        assert!(Instant::now() >= deadline);
        assert!(Instant::now() <= deadline + ms(1));
    });
}

// time_sleep.rs
#[test]
fn reset_after_firing() {
    rt_test(2, false, || async {
        let mut timer = std::pin::pin!(time::sleep(ms(1)));
        let deadline = timer.deadline();
        timer.as_mut().await;
        assert!(timer.as_mut().poll(&mut noop_cx()).is_ready());
        timer
            .as_mut()
            .reset(Instant::now() + Duration::from_secs(600));
        assert_ne!(deadline, timer.deadline());
        assert!(timer.as_mut().poll(&mut noop_cx()).is_pending());
        assert!(timer.as_mut().poll(&mut noop_cx()).is_pending());
    });
}

// time_sleep.rs `exactly_max` and `no_out_of_bounds_close_to_max`: skipped. A sleep of
// `Duration::MAX` (or `MAX - 1 ms`) saturates at `Instant::NEVER` and never completes, also
// under a paused clock (`gort::time::sleep`'s docs); Tokio's paused clock jumps to it. What
// gort does instead: the sleep stays pending while the clock jumps past other timers.
#[test]
fn exactly_max() {
    rt_test(2, false, || async {
        time::pause();
        let start = Instant::now();
        tokio::select! {
            biased;
            _ = time::sleep(Duration::MAX) => panic!("a sleep until NEVER completed"),
            _ = time::sleep(Duration::from_secs(3600)) => {}
        }
        assert_eq!(start.elapsed(), Duration::from_secs(3600));
    });
}

// time_sleep.rs
#[test]
fn issue_5183() {
    rt_test(2, false, || async {
        time::pause();
        let big = Duration::from_secs(u64::MAX / 10);
        tokio::select! {
            biased;
            _ = time::sleep(big) => {}
            _ = time::sleep(Duration::from_nanos(1)) => {}
        }
    });
}

// time_sleep.rs (see `exactly_max`)
#[test]
fn no_out_of_bounds_close_to_max() {
    rt_test(2, false, || async {
        time::pause();
        let mut sleep = std::pin::pin!(time::sleep(Duration::MAX - ms(1)));
        assert!(futures::poll!(sleep.as_mut()).is_pending());
        time::advance(Duration::from_secs(10 * 365 * 24 * 3600)).await;
        assert!(futures::poll!(sleep.as_mut()).is_pending());
    });
}

// time_sleep.rs
#[test]
fn long_wait_sleep_does_not_break_other_timers() {
    rt_test(2, true, || async {
        gort::spawn(time::sleep(ms(10 << 36)));
        time::advance(ms((1 << 30) - 1)).await;
        let start = Instant::now();
        time::sleep(ms(10)).await;
        assert_elapsed!(start, ms(10));
    });
}

// time_sleep.rs
#[test]
fn long_wait_sleep_does_not_corrupt_wheel() {
    rt_test(2, true, || async {
        gort::spawn(time::sleep(ms(10 << 36)));
        time::advance(ms((1 << 30) - 1)).await;
        let mut first = Box::pin(time::sleep(ms(10)));
        assert!(futures::poll!(first.as_mut()).is_pending());
        let mut second = Box::pin(time::sleep(ms(20)));
        assert!(futures::poll!(second.as_mut()).is_pending());
        time::advance(ms(30)).await;
        drop(first);
        time::advance(ms(1 << 31)).await;
        drop(second);
    });
}

// time_sleep.rs
#[test]
fn drop_after_reschedule_at_new_scheduled_time() {
    rt_test(2, false, || async {
        time::pause();
        let start = Instant::now();
        let mut a = Box::pin(time::sleep(ms(5)));
        let mut b = Box::pin(time::sleep(ms(5)));
        let mut c = Box::pin(time::sleep(ms(10)));
        let _ = futures::poll!(&mut a);
        let _ = futures::poll!(&mut b);
        let _ = futures::poll!(&mut c);
        b.as_mut().reset(start + ms(10));
        a.await;
        drop(b);
    });
}

type Sleeps = Arc<Mutex<Vec<Pin<Box<Sleep>>>>>;

/// A waker that drops every timer of the list when woken (`drop_from_wake`).
struct DropWaker(Arc<AtomicBool>, Sleeps);

impl Wake for DropWaker {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref()
    }
    fn wake_by_ref(self: &Arc<Self>) {
        let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            *self.1.lock().expect("panic in lock") = Vec::new()
        }));
        if result.is_err() {
            self.0.store(true, SeqCst);
        }
    }
}

// time_sleep.rs
#[test]
fn drop_from_wake() {
    rt_test(2, false, || async {
        let panicked = Arc::new(AtomicBool::new(false));
        let list: Sleeps = Arc::default();
        let waker = Waker::from(Arc::new(DropWaker(panicked.clone(), list.clone())));
        time::pause();
        {
            let mut lock = list.lock().unwrap();
            for _ in 0..100 {
                let mut timer = Box::pin(time::sleep(ms(10)));
                let _ = timer.as_mut().poll(&mut Context::from_waker(&waker));
                lock.push(timer);
            }
        }
        time::sleep(ms(11)).await;
        assert!(!panicked.load(SeqCst), "panicked when dropping timers");
    });
}

/// A waker whose drop drops a timer (`drop_from_waker_drop`).
struct TimerOwner {
    secondary: Mutex<Option<Pin<Box<Sleep>>>>,
}

impl Wake for TimerOwner {
    fn wake(self: Arc<Self>) {}
}

impl Drop for TimerOwner {
    fn drop(&mut self) {
        drop(self.secondary.lock().unwrap().take());
    }
}

// time_sleep.rs
#[test]
fn drop_from_waker_drop() {
    rt_test(2, false, || async {
        let mut secondary = Box::pin(time::sleep(Duration::from_secs(3600)));
        assert!(secondary.as_mut().poll(&mut noop_cx()).is_pending());
        let waker = Waker::from(Arc::new(TimerOwner {
            secondary: Mutex::new(Some(secondary)),
        }));
        let mut primary = Box::pin(time::sleep(Duration::from_secs(3600)));
        assert!(primary
            .as_mut()
            .poll(&mut Context::from_waker(&waker))
            .is_pending());
        drop(waker);
        drop(primary);
    });
}

// time_timeout.rs
#[test]
fn simultaneous_deadline_future_completion() {
    rt_test(2, false, || async {
        let mut fut = mock(time::timeout_at(Instant::now(), async {}));
        assert!(matches!(fut.poll(), Poll::Ready(Ok(()))));
    });
}

// time_timeout.rs
#[test]
fn completed_future_past_deadline() {
    rt_test(2, false, || async {
        let mut fut = mock(time::timeout_at(Instant::now() - ms(1000), async {}));
        assert!(matches!(fut.poll(), Poll::Ready(Ok(()))));
    });
}

// time_timeout.rs
#[test]
fn future_and_deadline_in_future() {
    rt_test(2, false, || async {
        time::pause();
        let (tx, rx) = oneshot::channel();
        let mut fut = mock(time::timeout_at(Instant::now() + ms(100), rx));
        assert!(fut.poll().is_pending());
        time::advance(ms(90)).await;
        assert!(fut.poll().is_pending());
        tx.send(()).unwrap();
        assert!(fut.is_woken());
        assert!(matches!(fut.poll(), Poll::Ready(Ok(Ok(())))));
    });
}

// time_timeout.rs
#[test]
fn future_and_timeout_in_future() {
    rt_test(2, false, || async {
        time::pause();
        let (tx, rx) = oneshot::channel();
        let mut fut = mock(time::timeout(ms(100), rx));
        assert!(fut.poll().is_pending());
        time::advance(ms(90)).await;
        assert!(fut.poll().is_pending());
        tx.send(()).unwrap();
        assert!(matches!(fut.poll(), Poll::Ready(Ok(Ok(())))));
    });
}

// time_timeout.rs
#[test]
fn very_large_timeout() {
    rt_test(2, false, || async {
        time::pause();
        let (tx, rx) = oneshot::channel();
        let mut fut = mock(time::timeout(Duration::MAX, rx));
        assert!(fut.poll().is_pending());
        time::advance(Duration::from_secs(86400 * 365 * 10)).await;
        assert!(fut.poll().is_pending());
        tx.send(()).unwrap();
        assert!(matches!(fut.poll(), Poll::Ready(Ok(Ok(())))));
    });
}

// time_timeout.rs
#[test]
fn deadline_now_elapses() {
    rt_test(2, false, || async {
        time::pause();
        let mut fut = mock(time::timeout_at(Instant::now(), pending::<()>()));
        time::advance(ms(1)).await;
        assert!(matches!(fut.poll(), Poll::Ready(Err(_))));
    });
}

// time_timeout.rs
#[test]
fn deadline_future_elapses() {
    rt_test(2, false, || async {
        time::pause();
        let mut fut = mock(time::timeout_at(Instant::now() + ms(300), pending::<()>()));
        assert!(fut.poll().is_pending());
        time::advance(ms(301)).await;
        assert!(fut.is_woken());
        assert!(matches!(fut.poll(), Poll::Ready(Err(_))));
    });
}

// time_timeout.rs (the always-ready operation is `gort::task::consume_budget`: Tokio's
// `io::empty` spends Tokio's budget, which gort's runtime does not set: README)
#[test]
fn timeout_is_not_exhausted_by_future() {
    rt_test(2, false, || async {
        let fut = time::timeout(ms(1), async {
            loop {
                gort::task::consume_budget().await;
            }
        });
        assert!(fut.await.is_err());
    });
}
