//! gort::time's Go 1.23 timer contract under races, checked property-style: many random rounds
//! on real threads, two runtimes (one of 2 Ps), the seed printed on failure
//! (`GORT_TIME_RACES_SEED=<seed>` replays one).
//!
//! Each round drives one timer with `stop`/`reset` from a task of runtime `a`, a plain thread
//! (in `a`'s context) and a task of runtime `b`, one operation at a time (a lock orders them,
//! so that each result can be checked against a known history), while receivers on both
//! runtimes and on a plain thread take its values concurrently. The checks:
//!
//! - `stop`/`reset` return true exactly when no value of the current arming has been or can
//!   still be received: the values received in all equal the armings that ended with false
//!   (one each for a `Timer`, one run of `f` for an `after_func`), and an operation on a
//!   stopped timer returns false;
//! - after either returns, no earlier value is received: a receive that starts after
//!   operation `e` returned gets a value of an arming `>= e`;
//! - a value is the instant the timer was due (within the window its arming's clock reading
//!   could fall in), on the ticker's phase, and a ticker's values are increasing.

mod time_races_common;

use std::sync::atomic::{AtomicU64, Ordering::SeqCst};
use std::sync::Arc;
use std::time::Duration;

use gort::time::{Ticker, Timer};
use gort_timer::{nanotime_exact, CLOCK_TRAIL};
use time_races_common::*;

fn timer_round(seed: u64) {
    let (a, b) = runtimes();
    let mut rng = Rng(seed);
    let d0 = short(&mut rng);
    let before = nanotime_exact();
    let timer = Arc::new({
        let _g = a.handle().enter();
        Timer::new(d0)
    });
    let d = d0.as_nanos() as i64;
    let w = Window {
        lo: before + d - CLOCK_TRAIL,
        hi: nanotime_exact() + d,
        period: 0,
    };
    let shared = Shared::new(w);
    let rxs = receivers(&a, &b, &shared, timer.c());
    let (t, s) = (timer.clone(), shared.clone());
    control(&a, &b, seed, 300, move |rng| {
        if rng.below(10) < 7 {
            let d = short(rng);
            s.operate(Some(d), false, || t.reset(d));
        } else {
            s.operate(None, false, || t.stop());
        }
    });
    shared.operate(None, false, || timer.stop());
    shared.done.store(true, SeqCst);
    let got: Vec<_> = rxs.into_iter().flat_map(|r| r.join().unwrap()).collect();
    let h = shared.history.lock().unwrap();
    for &(e, v) in &got {
        check_value(&h, e, v);
    }
    assert_eq!(
        got.len() as u64,
        h.expected,
        "values received vs armings whose stop/reset returned false ({} operations)",
        h.ops.len()
    );
    assert!(timer.c().try_recv().is_err(), "a value after the last stop");
}

#[test]
fn timer_stop_and_reset_results_match_the_values_received_across_threads_and_runtimes() {
    rounds("timer", timer_round);
}

fn ticker_round(seed: u64) {
    let (a, b) = runtimes();
    let mut rng = Rng(seed);
    let p0 = period(&mut rng);
    let before = nanotime_exact();
    let ticker = Arc::new({
        let _g = a.handle().enter();
        Ticker::new(p0)
    });
    let p = p0.as_nanos() as i64;
    let w = Window {
        lo: before + p - CLOCK_TRAIL,
        hi: nanotime_exact() + p,
        period: p,
    };
    let shared = Shared::new(w);
    let rxs = receivers(&a, &b, &shared, ticker.c());
    let (t, s) = (ticker.clone(), shared.clone());
    control(&a, &b, seed, 3000, move |rng| {
        // A ticker's stop and reset return nothing: recorded as "was live" (false), so
        // `expected` is not checked, only the values.
        if rng.below(10) < 7 {
            let p = period(rng);
            s.operate(Some(p), true, || {
                t.reset(p);
                false
            });
        } else {
            s.operate(None, true, || {
                t.stop();
                false
            });
        }
    });
    shared.operate(None, true, || {
        ticker.stop();
        false
    });
    shared.done.store(true, SeqCst);
    let got: Vec<_> = rxs.into_iter().map(|r| r.join().unwrap()).collect();
    let h = shared.history.lock().unwrap();
    for one in &got {
        check_increasing(&h, one);
    }
    for &(e, v) in got.iter().flatten() {
        check_value(&h, e, v);
    }
    assert!(ticker.c().try_recv().is_err(), "a tick after the last stop");
}

/// A ticker's period: 20 µs to 500 µs, so that several ticks race each operation.
fn period(rng: &mut Rng) -> Duration {
    Duration::from_micros(20 + rng.below(480))
}

#[test]
fn ticker_stop_and_reset_racing_the_ticks_let_no_old_tick_through() {
    rounds("ticker", ticker_round);
}

fn after_func_round(seed: u64) {
    let (a, b) = runtimes();
    let mut rng = Rng(seed);
    let d0 = short(&mut rng);
    let runs = Arc::new(AtomicU64::new(0));
    let af = Arc::new({
        let _g = a.handle().enter();
        let runs = runs.clone();
        gort::time::after_func(d0, move || {
            // Every other run takes a while, so that operations and firings overlap it.
            if runs.fetch_add(1, SeqCst) % 2 == 0 {
                std::thread::sleep(Duration::from_micros(100));
            }
        })
    });
    let w = Window {
        lo: 0,
        hi: 0,
        period: 0,
    };
    let shared = Shared::new(w);
    let (f, s) = (af.clone(), shared.clone());
    control(&a, &b, seed, 300, move |rng| {
        if rng.below(10) < 7 {
            let d = short(rng);
            s.operate(Some(d), false, || f.reset(d));
        } else {
            s.operate(None, false, || f.stop());
        }
    });
    shared.operate(None, false, || af.stop());
    let expected = shared.history.lock().unwrap().expected;
    // A false result means `f` ran or is queued to run: wait for the queued runs.
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while runs.load(SeqCst) < expected && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(1));
    }
    std::thread::sleep(Duration::from_millis(5));
    assert_eq!(
        runs.load(SeqCst),
        expected,
        "runs of f vs armings whose stop/reset returned false"
    );
}

#[test]
fn after_func_stop_and_reset_results_match_the_runs_of_f() {
    rounds("after_func", after_func_round);
}
