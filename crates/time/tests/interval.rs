//! `Interval`: first tick immediate, and Burst / Delay / Skip after a stalled consumer,
//! checked on the due instants it returns (exact), with generous real-time bounds only.

use std::time::Duration;

use gort_sched::Runtime;
use gort_time::{interval, interval_at, sleep, Instant, MissedTickBehavior};

const MS: Duration = Duration::from_millis(1);
const PERIOD: Duration = Duration::from_millis(20);

fn run<F: std::future::Future>(f: F) -> F::Output {
    Runtime::new().unwrap().block_on(f)
}

#[test]
fn first_tick_is_immediate_then_one_period_apart() {
    run(async {
        let start = Instant::now();
        let mut iv = interval(PERIOD);
        assert_eq!(iv.period(), PERIOD);
        assert_eq!(iv.missed_tick_behavior(), MissedTickBehavior::Burst);
        let t0 = iv.tick().await;
        assert!(start.elapsed() < Duration::from_secs(5));
        let t1 = iv.tick().await;
        let t2 = iv.tick().await;
        assert_eq!(t1, t0 + PERIOD);
        assert_eq!(t2, t0 + 2 * PERIOD);
        assert!(Instant::now() >= t2);
    });
}

/// Ticks due at `start`, then a consumer stall of ~5.5 periods; returns the ticks after it.
async fn after_stall(b: MissedTickBehavior) -> (Instant, Vec<(Instant, Instant)>) {
    let start = Instant::now() + PERIOD;
    let mut iv = interval_at(start, PERIOD);
    iv.set_missed_tick_behavior(b);
    assert_eq!(iv.tick().await, start);
    sleep(PERIOD * 11 / 2).await;
    let mut ticks = Vec::new();
    for _ in 0..4 {
        let due = iv.tick().await;
        ticks.push((due, Instant::now()));
    }
    (start, ticks)
}

#[test]
fn burst_catches_up_on_the_original_schedule() {
    run(async {
        let (start, ticks) = after_stall(MissedTickBehavior::Burst).await;
        for (k, (due, _)) in ticks.iter().enumerate() {
            assert_eq!(*due, start + PERIOD * (k as u32 + 1), "{ticks:?}");
        }
    });
}

#[test]
fn delay_restarts_one_period_after_the_late_tick() {
    run(async {
        let (start, ticks) = after_stall(MissedTickBehavior::Delay).await;
        assert_eq!(
            ticks[0].0,
            start + PERIOD,
            "the first missed tick is returned late"
        );
        for w in ticks.windows(2) {
            let ((_, seen), (due, _)) = (w[0], w[1]);
            // Each next tick is due one period after the (late) moment the previous one was
            // taken: after that moment, so never in a burst.
            assert!(due > seen, "{ticks:?}");
            assert!(due <= seen + PERIOD + Duration::from_secs(5), "{ticks:?}");
        }
    });
}

#[test]
fn skip_drops_missed_ticks_and_keeps_the_phase() {
    run(async {
        let (start, ticks) = after_stall(MissedTickBehavior::Skip).await;
        assert_eq!(ticks[0].0, start + PERIOD);
        let next = ticks[1].0;
        // The stall lasted 5.5 periods: Burst would return start + 2P next.
        assert!(
            next >= start + 5 * PERIOD,
            "missed ticks were returned: {ticks:?}"
        );
        assert_eq!(
            (next - start).as_nanos() % PERIOD.as_nanos(),
            0,
            "phase lost: {ticks:?}"
        );
        for w in ticks[1..].windows(2) {
            assert_eq!(w[1].0, w[0].0 + PERIOD, "{ticks:?}");
        }
    });
}

#[test]
fn reset_variants() {
    run(async {
        let mut iv = interval(Duration::from_secs(3600));
        iv.tick().await;
        let before = Instant::now();
        iv.reset_immediately();
        let t = iv.tick().await;
        assert!(t <= Instant::now() && t >= before);
        iv.reset_at(Instant::now() + 5 * MS);
        let due = iv.tick().await;
        assert!(Instant::now() >= due);
        let before = Instant::now();
        iv.reset();
        let mut s = std::pin::pin!(iv.tick());
        let r = gort_time::timeout(10 * MS, s.as_mut()).await;
        assert!(
            r.is_err(),
            "reset() makes the next tick one (hour-long) period away"
        );
        assert!(before.elapsed() >= 10 * MS);
    });
}

#[test]
#[should_panic(expected = "gort::time::interval: `period` must be non-zero")]
fn zero_period_panics() {
    let _ = interval(Duration::ZERO);
}
