//! Ports of Go 1.19's `src/time/tick_test.go`, one test per Go test that applies, named in
//! its doc comment. Timing assertions: exact lower bounds, generous upper bounds.
//!
//! Not ported: TestTickerStopWithDirectInitialization (go#21874; a `Ticker` cannot be built
//! without `Ticker::new`, so there is no zero Ticker to stop).

use std::time::Duration;

use gort_time::{sleep, tick, Instant, Ticker, TickerError};

const MS: Duration = Duration::from_millis(1);

#[path = "support/watchdog.rs"]
mod watchdog;
use watchdog::run;

/// Go: TestTicker. `count/2` ticks of `delta`, reset to `2*delta`, `count/2` more: at least
/// `3 * delta * count/2` in total; after stop no tick arrives.
#[test]
fn ticker_with_reset() {
    run(async {
        let (count, delta) = (10u32, 20 * MS);
        let ticker = Ticker::new(delta);
        let t0 = Instant::now();
        for _ in 0..count / 2 {
            ticker.c().recv().await.unwrap();
        }
        ticker.reset(delta * 2);
        for _ in count / 2..count {
            ticker.c().recv().await.unwrap();
        }
        ticker.stop();
        let dt = t0.elapsed();
        let target = 3 * delta * (count / 2);
        assert!(
            dt >= target,
            "ticks took {dt:?}, expected at least {target:?}"
        );
        assert!(dt < target + Duration::from_secs(20), "ticks took {dt:?}");
        // Now test that the ticker stopped.
        sleep(2 * delta).await;
        assert!(ticker.c().try_recv().is_err(), "Ticker did not shut down");
    });
}

/// Go: TestTeardown. Creating, receiving from and stopping tickers does not deadlock.
#[test]
fn ticker_teardown() {
    run(async {
        for _ in 0..3 {
            let ticker = Ticker::new(20 * MS);
            ticker.c().recv().await.unwrap();
            ticker.stop();
        }
    });
}

/// Go: TestTick. Go returns nil for a non-positive duration; gort panics (documented), since a
/// channel that never delivers would hang its receiver silently.
#[test]
#[should_panic(expected = "gort::time::tick: non-positive period")]
fn tick_zero_panics() {
    run(async {
        let _ = tick(Duration::ZERO);
    });
}

/// Go: TestTick, the positive case: the convenience wrapper ticks one period apart.
#[test]
fn tick_delivers() {
    run(async {
        let start = Instant::now();
        let c = tick(2 * MS);
        let a = c.recv().await.unwrap();
        let b = c.recv().await.unwrap();
        assert!(
            a >= start + 2 * MS,
            "first tick comes one period after creation"
        );
        assert!(b > a);
    });
}

/// Go: TestNewTickerLtZeroDuration.
#[test]
#[should_panic(expected = "gort::time::Ticker::new: non-positive period")]
fn new_ticker_zero_panics() {
    run(async {
        let _ = Ticker::new(Duration::ZERO);
    });
}

/// Go: TestNewTickerLtZeroDuration, the `Result` form.
#[test]
fn try_new_ticker_zero_is_an_error() {
    let e = Ticker::try_new(Duration::ZERO).unwrap_err();
    assert_eq!(e, TickerError::ZeroPeriod);
    assert_eq!(e.to_string(), "non-positive period for a ticker");
    let _: &dyn std::error::Error = &e;
}

/// Go: TestTickerResetLtZeroDuration.
#[test]
#[should_panic(expected = "gort::time::Ticker::reset: non-positive period")]
fn ticker_reset_zero_panics() {
    run(async {
        let tk = Ticker::new(Duration::from_secs(1));
        tk.reset(Duration::ZERO);
    });
}

/// Go 1.15's Ticker.Reset after Stop (go#33184, go#72968): the ticker runs again.
#[test]
fn ticker_reset_after_stop() {
    run(async {
        let tk = Ticker::new(Duration::from_secs(3600));
        tk.stop();
        let before = Instant::now();
        tk.reset(MS);
        let t = tk.c().recv().await.unwrap();
        assert!(t >= before + MS);
    });
}

/// Go: ticks keep the original phase (start + k * period) and a slow receiver gets no
/// backlog: at most one tick is buffered, the rest are dropped.
#[test]
fn ticker_phase_and_dropped_ticks() {
    run(async {
        let period = 2 * MS;
        let tk = Ticker::new(period);
        let a = tk.c().recv().await.unwrap();
        sleep(50 * MS).await; // ~25 ticks due meanwhile
        assert!(tk.c().len() <= 1, "a slow receiver must not get a backlog");
        let b = tk.c().recv().await.unwrap(); // the one buffered (old) tick
        let c = tk.c().recv().await.unwrap();
        for (x, y) in [(a, b), (b, c)] {
            let gap = (y - x).as_nanos();
            assert!(
                gap > 0 && gap % period.as_nanos() == 0,
                "off phase: {x:?} -> {y:?}"
            );
        }
        // After the stall the next tick is a fresh one, not the next in a backlog.
        assert!(c >= b + period);
        assert!(
            c - a > 20 * MS,
            "ticks due during the stall were dropped, not queued"
        );
    });
}
