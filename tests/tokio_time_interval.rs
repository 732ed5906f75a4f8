//! Tokio's `tests/time_interval.rs` and `tests/time_pause.rs`, ported to gort: each test
//! keeps its Tokio name and a comment naming its file, and runs under a watchdog on a runtime
//! of 2 Ps. gort's `Interval` has Tokio's missed-tick behaviours, `Burst` by default.
//! `time::advance` is gort's paused clock, which returns once the runtime is quiescent at the
//! new instant (like Go's synctest; `gort::time::advance`'s docs).
//!
//! Skipped: `pause_time_in_main_threads` and `pause_time_in_spawn_threads` (Tokio allows a
//! paused clock on a current-thread runtime only; gort's runs on any number of Ps);
//! `paused_time_join_unix_datagram_and_sleep` and `..._spawn_...` (they need Tokio's
//! auto-advance past a pending socket read; a task blocked on a socket holds gort's clock:
//! README, "The paused clock"); the `Stream` adapters' `stream_with_interval_*` (they test
//! tokio-stream's `IntervalStream`).

#[path = "support/mock_task.rs"]
mod mock_task;
mod support;

use gort::time::{self, Instant, Interval, MissedTickBehavior, Sleep};
use mock_task::{mock, ms, rt_test, Mock};
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

fn poll_next(interval: &mut Mock<Interval>) -> Poll<Instant> {
    interval.enter(|cx, mut i| i.poll_tick(cx))
}

/// Tokio's `check_interval_poll!`: one ready tick at `start` plus each delta, then pending.
fn check(i: &mut Mock<Interval>, start: Instant, deltas: &[u64]) {
    for &d in deltas {
        assert_eq!(poll_next(i), Poll::Ready(start + ms(d)), "tick at +{d} ms");
    }
    assert!(poll_next(i).is_pending(), "a tick after {deltas:?}");
}

// time_interval.rs
#[test]
#[should_panic]
fn interval_zero_duration() {
    let rt = gort::Builder::new().procs(1).build().unwrap();
    rt.block_on(async {
        let _ = time::interval_at(Instant::now(), ms(0));
    });
}

/// The start of the schedule tests: 1 ms past `start`, an interval of 300 ms from `start`,
/// its first tick taken, as in Tokio's.
async fn started(behavior: MissedTickBehavior) -> (Instant, Mock<Interval>) {
    let start = Instant::now();
    time::advance(ms(1)).await;
    let mut i = mock(time::interval_at(start, ms(300)));
    i.fut.set_missed_tick_behavior(behavior);
    check(&mut i, start, &[0]);
    time::advance(ms(100)).await;
    check(&mut i, start, &[]);
    time::advance(ms(200)).await;
    check(&mut i, start, &[300]);
    (start, i)
}

// time_interval.rs
#[test]
fn burst() {
    rt_test(2, true, || async {
        let (start, mut i) = started(MissedTickBehavior::Burst).await;
        assert_eq!(i.fut.missed_tick_behavior(), MissedTickBehavior::Burst);
        time::advance(ms(650)).await;
        check(&mut i, start, &[600, 900]);
        time::advance(ms(200)).await;
        check(&mut i, start, &[]);
        time::advance(ms(100)).await;
        check(&mut i, start, &[1200]);
        time::advance(ms(250)).await;
        check(&mut i, start, &[1500]);
        time::advance(ms(300)).await;
        check(&mut i, start, &[1800]);
    });
}

// time_interval.rs
#[test]
fn delay() {
    rt_test(2, true, || async {
        let (start, mut i) = started(MissedTickBehavior::Delay).await;
        time::advance(ms(650)).await;
        check(&mut i, start, &[600]);
        time::advance(ms(100)).await;
        check(&mut i, start, &[]);
        time::advance(ms(201)).await;
        check(&mut i, start, &[1251]);
        time::advance(ms(300)).await;
        check(&mut i, start, &[1551]);
        time::advance(ms(300)).await;
        check(&mut i, start, &[1851]);
    });
}

// time_interval.rs
#[test]
fn skip() {
    rt_test(2, true, || async {
        let (start, mut i) = started(MissedTickBehavior::Skip).await;
        time::advance(ms(650)).await;
        check(&mut i, start, &[600]);
        time::advance(ms(250)).await;
        check(&mut i, start, &[1200]);
        time::advance(ms(300)).await;
        check(&mut i, start, &[1500]);
        time::advance(ms(300)).await;
        check(&mut i, start, &[1800]);
    });
}

// time_interval.rs
#[test]
fn reset_doesnt_panic_max_duration() {
    rt_test(2, false, || async {
        let mut interval = time::interval(Duration::MAX);
        interval.reset();
    });
}

// time_interval.rs
#[test]
fn reset_after_doesnt_panic_max_duration() {
    rt_test(2, false, || async {
        let mut interval = time::interval(ms(1));
        interval.reset_after(Duration::MAX);
    });
}

// time_interval.rs
#[test]
fn reset() {
    rt_test(2, true, || async {
        let (start, mut i) = started(MissedTickBehavior::Burst).await;
        time::advance(ms(100)).await;
        check(&mut i, start, &[]);
        i.fut.reset();
        time::advance(ms(250)).await;
        check(&mut i, start, &[]);
        time::advance(ms(50)).await;
        check(&mut i, start, &[701]);
        time::advance(ms(300)).await;
        check(&mut i, start, &[1001]);
    });
}

// time_interval.rs
#[test]
fn reset_immediately() {
    rt_test(2, true, || async {
        let (start, mut i) = started(MissedTickBehavior::Burst).await;
        time::advance(ms(100)).await;
        check(&mut i, start, &[]);
        i.fut.reset_immediately();
        check(&mut i, start, &[401]);
        time::advance(ms(100)).await;
        check(&mut i, start, &[]);
        time::advance(ms(200)).await;
        check(&mut i, start, &[701]);
    });
}

// time_interval.rs
#[test]
fn reset_after() {
    rt_test(2, true, || async {
        let (start, mut i) = started(MissedTickBehavior::Burst).await;
        time::advance(ms(100)).await;
        check(&mut i, start, &[]);
        i.fut.reset_after(ms(20));
        time::advance(ms(20)).await;
        check(&mut i, start, &[421]);
        time::advance(ms(100)).await;
        check(&mut i, start, &[]);
        time::advance(ms(200)).await;
        check(&mut i, start, &[721]);
    });
}

// time_interval.rs
#[test]
fn reset_at() {
    rt_test(2, true, || async {
        let (start, mut i) = started(MissedTickBehavior::Burst).await;
        time::advance(ms(100)).await;
        check(&mut i, start, &[]);
        i.fut.reset_at(Instant::now() + ms(40));
        time::advance(ms(40)).await;
        check(&mut i, start, &[441]);
        time::advance(ms(100)).await;
        check(&mut i, start, &[]);
        time::advance(ms(200)).await;
        check(&mut i, start, &[741]);
    });
}

// time_interval.rs
#[test]
fn reset_at_bigger_than_interval() {
    rt_test(2, true, || async {
        let (start, mut i) = started(MissedTickBehavior::Burst).await;
        time::advance(ms(100)).await;
        check(&mut i, start, &[]);
        i.fut.reset_at(Instant::now() + ms(1000));
        for _ in 0..3 {
            time::advance(ms(300)).await;
            check(&mut i, start, &[]);
        }
        time::advance(ms(100)).await;
        check(&mut i, start, &[1401]);
        time::advance(ms(300)).await;
        check(&mut i, start, &[1701]);
    });
}

// time_interval.rs
#[test]
fn interval_doesnt_panic_max_duration_when_polling() {
    rt_test(2, false, || async {
        let mut t = mock(time::interval(Duration::MAX));
        assert!(poll_next(&mut t).is_ready());
        assert!(poll_next(&mut t).is_pending());
    });
}

// time_pause.rs
#[test]
fn pause_time_in_main() {
    rt_test(1, false, || async { time::pause() });
}

// time_pause.rs
#[test]
fn pause_time_in_task() {
    rt_test(1, false, || async {
        gort::spawn(async { time::pause() }).await.unwrap();
    });
}

/// 10,000 paused sleeps of a seeded pseudo-random length under a second; their times.
fn paused_time_stress_run() -> Vec<Duration> {
    let rt = support::paused(1);
    rt.block_on(async {
        let mut seed = 1u64;
        let mut times = vec![];
        let start = Instant::now();
        for _ in 0..10_000 {
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            time::sleep(Duration::from_nanos((seed >> 33) % 1_000_000_000)).await;
            times.push(start.elapsed());
        }
        times
    })
}

// time_pause.rs (a seeded LCG for Tokio's seeded `StdRng`)
#[test]
fn paused_time_is_deterministic() {
    support::within(|| assert_eq!(paused_time_stress_run(), paused_time_stress_run()));
}

// time_pause.rs
#[test]
fn advance_after_poll() {
    rt_test(2, true, || async {
        time::sleep(ms(1)).await;
        let start = Instant::now();
        let mut sleep = mock(time::sleep_until(start + ms(300)));
        assert!(sleep.poll().is_pending());
        let before = Instant::now();
        time::advance(ms(100)).await;
        assert_elapsed!(before, ms(100));
        assert!(sleep.poll().is_pending());
    });
}

// time_pause.rs
#[test]
fn sleep_no_poll() {
    rt_test(2, true, || async {
        let start = Instant::now();
        time::advance(ms(1)).await;
        let mut sleep = mock(time::sleep_until(start + ms(300)));
        let before = Instant::now();
        time::advance(ms(100)).await;
        assert_elapsed!(before, ms(100));
        assert!(sleep.poll().is_pending());
    });
}

/// Tokio's `Tester`: polls (or not) a sleep, then advances the clock inside the same poll.
struct Tester {
    sleep: Pin<Box<Sleep>>,
    advance: Option<Pin<Box<dyn Future<Output = ()> + Send>>>,
    before: Option<Instant>,
    poll: bool,
}

impl Future for Tester {
    type Output = ();
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if self.advance.is_none() {
            if self.poll {
                assert!(self.sleep.as_mut().poll(cx).is_pending());
            }
            self.before = Some(Instant::now());
            self.advance = Some(Box::pin(time::advance(ms(100))));
        }
        if self
            .advance
            .as_mut()
            .unwrap()
            .as_mut()
            .poll(cx)
            .is_pending()
        {
            return Poll::Pending;
        }
        assert_elapsed!(self.before.unwrap(), ms(100));
        assert!(self.sleep.as_mut().poll(cx).is_pending());
        Poll::Ready(())
    }
}

// time_pause.rs
#[test]
fn sleep_same_task() {
    rt_test(2, true, || async {
        let start = Instant::now();
        time::advance(ms(1)).await;
        let sleep = Box::pin(time::sleep_until(start + ms(300)));
        Tester {
            sleep,
            advance: None,
            before: None,
            poll: true,
        }
        .await;
    });
}

// time_pause.rs
#[test]
fn sleep_same_task_no_poll() {
    rt_test(2, true, || async {
        let start = Instant::now();
        time::advance(ms(1)).await;
        let sleep = Box::pin(time::sleep_until(start + ms(300)));
        Tester {
            sleep,
            advance: None,
            before: None,
            poll: false,
        }
        .await;
    });
}

// time_pause.rs
#[test]
fn interval() {
    rt_test(2, true, || async {
        let start = Instant::now();
        time::advance(ms(1)).await;
        let mut i = mock(time::interval_at(start, ms(300)));
        check(&mut i, start, &[0]);
        for (by, ticks) in [
            (100, &[][..]),
            (200, &[300]),
            (400, &[600]),
            (500, &[900, 1200]),
        ] {
            let before = Instant::now();
            time::advance(ms(by)).await;
            assert_elapsed!(before, ms(by));
            check(&mut i, start, ticks);
        }
    });
}

// time_pause.rs (and test_time_advance_3ms_and_change, exact_1ms_advance: the same spans)
#[test]
fn test_time_advance_sub_ms() {
    rt_test(2, true, || async {
        for dur in [
            Duration::from_micros(51_592),
            Duration::from_micros(1),
            Duration::from_micros(3_141_592),
            Duration::from_micros(3_123_456),
            ms(1),
            ms(1),
        ] {
            let now = Instant::now();
            time::advance(dur).await;
            assert_eq!(now.elapsed(), dur);
        }
    });
}

// time_pause.rs
#[test]
fn regression_3710_with_submillis_advance() {
    rt_test(2, true, || async {
        let start = Instant::now();
        time::advance(ms(1)).await;
        let mut sleep = mock(time::sleep_until(start + Duration::from_secs(60)));
        assert!(sleep.poll().is_pending());
        let before = Instant::now();
        let dur = Duration::from_micros(51_592);
        time::advance(dur).await;
        assert_eq!(before.elapsed(), dur);
        assert!(sleep.poll().is_pending());
    });
}

// time_pause.rs
#[test]
fn advance_once_with_timer() {
    rt_test(2, true, || async {
        let mut sleep = mock(time::sleep(ms(1)));
        assert!(sleep.poll().is_pending());
        time::advance(Duration::from_micros(250)).await;
        assert!(sleep.poll().is_pending());
        time::advance(Duration::from_micros(1500)).await;
        assert!(sleep.is_woken());
        assert!(sleep.poll().is_ready());
    });
}

// time_pause.rs
#[test]
fn advance_multi_with_timer() {
    rt_test(2, true, || async {
        let mut sleep = mock(time::sleep(ms(1)));
        assert!(sleep.poll().is_pending());
        for _ in 0..3 {
            time::advance(Duration::from_micros(250)).await;
            assert!(sleep.poll().is_pending());
        }
        time::advance(Duration::from_micros(250)).await;
        assert!(sleep.is_woken());
        assert!(sleep.poll().is_ready());
    });
}
