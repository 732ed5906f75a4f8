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

/// A tick taken more than this after it was due counts as missed (`MISSED_TOLERANCE` in
/// interval.rs, tokio's 5 ms).
const TOLERANCE: Duration = Duration::from_millis(5);

/// One tick as the consumer saw it.
#[derive(Clone, Copy, Debug)]
struct Tick {
    /// The due instant `tick()` returned.
    due: Instant,
    /// Just before `tick()` was called: `poll_tick` read the clock it judges lateness by
    /// after this.
    asked: Instant,
    /// Just after `tick()` returned: that clock reading was before this.
    seen: Instant,
}

impl Tick {
    /// Taken late beyond the tolerance whatever the clock read: the next tick is placed from
    /// the moment it was taken (`Delay`, `Skip`).
    fn surely_missed(&self) -> bool {
        self.asked > self.due + TOLERANCE
    }

    /// Taken within the tolerance whatever the clock read: the next tick is one period on.
    fn surely_on_time(&self) -> bool {
        self.seen <= self.due + TOLERANCE
    }
}

/// The first tick, due at `start`, then a consumer stall of ~5.5 periods and four ticks after
/// it. On a loaded machine any of them may be taken late, the first too (71 failures in 100
/// runs beside six CPU hogs on two cores when the checks took every tick but the one after
/// the stall for on time), so the checks below place each next tick from what the consumer
/// saw.
async fn after_stall(b: MissedTickBehavior) -> (Instant, Vec<Tick>) {
    let start = Instant::now() + PERIOD;
    let mut iv = interval_at(start, PERIOD);
    iv.set_missed_tick_behavior(b);
    let mut ticks = Vec::new();
    for k in 0..5 {
        if k == 1 {
            sleep(PERIOD * 11 / 2).await;
        }
        let asked = Instant::now();
        let due = iv.tick().await;
        ticks.push(Tick {
            due,
            asked,
            seen: Instant::now(),
        });
    }
    assert_eq!(ticks[0].due, start);
    // The stall outlasts a period and the tolerance: the tick after it is always missed.
    assert!(ticks[1].surely_missed(), "{ticks:?}");
    (start, ticks)
}

#[test]
fn burst_catches_up_on_the_original_schedule() {
    run(async {
        let (start, ticks) = after_stall(MissedTickBehavior::Burst).await;
        for (k, t) in ticks.iter().enumerate() {
            assert_eq!(t.due, start + PERIOD * k as u32, "{ticks:?}");
        }
    });
}

#[test]
fn delay_restarts_one_period_after_the_late_tick() {
    run(async {
        let (_, ticks) = after_stall(MissedTickBehavior::Delay).await;
        for w in ticks.windows(2) {
            let (t, next) = (w[0], w[1].due);
            // One period after the moment `t` was taken when that was late, so never in a
            // burst; one period after its due instant when it was on time.
            let earliest = if t.surely_missed() { t.asked } else { t.due };
            let latest = if t.surely_on_time() { t.due } else { t.seen };
            assert!(
                next >= earliest + PERIOD && next <= latest + PERIOD,
                "{ticks:?}"
            );
        }
    });
}

#[test]
fn skip_drops_missed_ticks_and_keeps_the_phase() {
    run(async {
        let (start, ticks) = after_stall(MissedTickBehavior::Skip).await;
        // The stall lasted 5.5 periods: Burst would return start + 2P after it.
        assert!(
            ticks[2].due >= start + 5 * PERIOD,
            "missed ticks were returned: {ticks:?}"
        );
        for w in ticks.windows(2) {
            let (t, next) = (w[0], w[1].due);
            assert_eq!(
                (next - start).as_nanos() % PERIOD.as_nanos(),
                0,
                "phase lost: {ticks:?}"
            );
            // The first deadline of the schedule after the moment `t` was taken: one period
            // on when that was on time.
            if t.surely_missed() {
                assert!(next > t.asked && next <= t.seen + PERIOD, "{ticks:?}");
            } else if t.surely_on_time() {
                assert_eq!(next, t.due + PERIOD, "{ticks:?}");
            } else {
                assert!(
                    next >= t.due + PERIOD && next <= t.seen + PERIOD,
                    "{ticks:?}"
                );
            }
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
