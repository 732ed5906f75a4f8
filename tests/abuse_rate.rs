//! `gort::time::rate` abused as user code uses it: one limiter hammered from many threads and
//! tasks on the real clock (never more than `burst + rate * t` granted), limits and bursts
//! changed while waits sleep, waits of centuries on a paused clock, extreme limits.

mod support;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use gort::time::rate::{Limit, Limiter, WaitError};
use gort::time::Instant;
use support::within;

/// The most a limiter may grant between `from` and `to`: the burst plus the refill, plus one
/// for float rounding.
fn bound(limit: f64, burst: u32, from: Instant, to: Instant) -> u64 {
    (f64::from(burst) + limit * (to - from).as_secs_f64()).floor() as u64 + 1
}

/// Fails if more than burst + refill since `start` (up to now) were `granted`.
fn assert_within_bound(granted: &AtomicU64, limit: f64, burst: u32, start: Instant, what: &str) {
    let max = bound(limit, burst, start, Instant::now());
    let got = granted.load(Ordering::Relaxed);
    assert!(got <= max, "{what}: {got} granted, at most {max}");
}

#[test]
fn allow_from_many_threads_never_grants_beyond_burst_plus_refill() {
    within(|| {
        // Plain threads on the real clock, contending on the limiter's lock: a caller that
        // read the clock before waiting for the lock counts at an instant older than the
        // last one counted.
        let (rate, burst) = (20_000.0, 10);
        for round in 0..5 {
            let threads = if round % 2 == 0 { 4 } else { 12 };
            let limiter = Arc::new(Limiter::new(Limit::per_second(rate), burst));
            let granted = Arc::new(AtomicU64::new(0));
            let stop = Arc::new(AtomicBool::new(false));
            let start = Instant::now();
            let threads: Vec<_> = (0..threads)
                .map(|_| {
                    let (limiter, granted, stop) = (limiter.clone(), granted.clone(), stop.clone());
                    std::thread::spawn(move || {
                        while !stop.load(Ordering::Relaxed) {
                            if limiter.allow() {
                                granted.fetch_add(1, Ordering::Relaxed);
                            }
                        }
                    })
                })
                .collect();
            std::thread::sleep(Duration::from_millis(200));
            stop.store(true, Ordering::Relaxed);
            for t in threads {
                t.join().unwrap();
            }
            assert_within_bound(&granted, rate, burst, start, &format!("round {round}"));
        }
    });
}

#[test]
fn allow_and_reserve_from_tasks_on_many_ps_never_grant_beyond_burst_plus_refill() {
    within(|| {
        let rt = gort::Builder::new().procs(4).build().unwrap();
        rt.block_on(async {
            let (rate, burst) = (100_000.0, 5);
            let limiter = Arc::new(Limiter::new(Limit::per_second(rate), burst));
            let granted = Arc::new(AtomicU64::new(0));
            let stop = Arc::new(AtomicBool::new(false));
            let start = Instant::now();
            let tasks: Vec<_> = (0..8)
                .map(|i| {
                    let (limiter, granted, stop) = (limiter.clone(), granted.clone(), stop.clone());
                    gort::spawn(async move {
                        let mut n = 0u64;
                        while !stop.load(Ordering::Relaxed) {
                            let ok = if i % 2 == 0 {
                                limiter.allow()
                            } else {
                                // A reservation with no delay is a grant; one with a delay
                                // is given back at once.
                                let r = limiter.reserve();
                                if r.delay().is_zero() {
                                    true
                                } else {
                                    r.cancel();
                                    false
                                }
                            };
                            if ok {
                                granted.fetch_add(1, Ordering::Relaxed);
                            }
                            n += 1;
                            if n % 32 == 0 {
                                gort::yield_now().await;
                            }
                        }
                    })
                })
                .collect();
            gort::time::sleep(Duration::from_millis(200)).await;
            stop.store(true, Ordering::Relaxed);
            for t in tasks {
                t.await.unwrap();
            }
            assert_within_bound(&granted, rate, burst, start, "tasks");
        });
    });
}

#[test]
fn a_wait_of_centuries_on_a_paused_clock_ends_at_its_instant() {
    within(|| {
        let rt = gort::Builder::new()
            .procs(2)
            .start_paused(true)
            .build()
            .unwrap();
        rt.block_on(async {
            let limiter = Limiter::new(Limit::per_second(0.5), u32::MAX);
            let start = Instant::now();
            assert!(limiter.allow_n(start, u32::MAX));
            // u32::MAX tokens at 0.5/s: about 272 years, short of the clock's end.
            limiter.wait_n(u32::MAX).await.unwrap();
            let waited = Instant::now() - start;
            assert_eq!(waited, Duration::from_secs(2 * u64::from(u32::MAX)));
        });
    });
}

#[test]
fn limits_and_bursts_changed_while_waits_sleep_keep_their_times_and_never_panic() {
    within(|| {
        let rt = gort::Builder::new()
            .procs(2)
            .start_paused(true)
            .build()
            .unwrap();
        rt.block_on(async {
            let limiter = Arc::new(Limiter::new(Limit::per_second(10.0), 1));
            let start = Instant::now();
            assert!(limiter.allow());
            let waits: Vec<_> = (0..10)
                .map(|_| {
                    let limiter = limiter.clone();
                    gort::spawn(async move {
                        gort::time::timeout(Duration::from_millis(450), limiter.wait())
                            .await
                            .map(|r| r.map(|()| Instant::now() - start))
                    })
                })
                .collect();
            gort::time::sleep(Duration::from_millis(150)).await;
            // As in Go: a reservation keeps its time to act whatever the limit becomes.
            limiter.set_limit(Limit::INF);
            limiter.set_burst(0);
            assert!(limiter.allow()); // an infinite limit ignores the burst
            limiter.set_limit(Limit::ZERO);
            limiter.set_burst(3);
            let mut ended = Vec::new();
            for w in waits {
                match w.await.unwrap() {
                    Ok(Ok(at)) => ended.push(at),
                    Ok(Err(e)) => panic!("{e}"),
                    Err(_) => {} // timed out: tokens given back under a zero limit
                }
            }
            // Granted at 100, 200, ..., 400 ms (the ones before the 450 ms timeout).
            let mut ms: Vec<u64> = ended.iter().map(|d| d.as_millis() as u64).collect();
            ms.sort_unstable();
            assert_eq!(ms, [100, 200, 300, 400]);
            // As in Go, the debt of the reservations granted at 10/s stays (the six canceled
            // ones gave theirs back; the three used ones, less 0.5 s of refill, did not), and
            // a zero limit never repays it.
            let t = limiter.tokens();
            assert!((t - -2.5).abs() < 1e-9, "{t}");
            gort::time::advance(Duration::from_secs(3600)).await;
            assert_eq!(limiter.tokens(), t);
            assert_eq!(
                limiter.wait_n(4).await,
                Err(WaitError::BurstExceeded { n: 4, burst: 3 })
            );
        });
    });
}

#[test]
fn extreme_limits_neither_panic_nor_grant_wrongly() {
    let now = Instant::now();
    for r in [
        f64::NAN,
        -1.0,
        -0.0,
        f64::NEG_INFINITY,
        f64::MIN_POSITIVE,
        1e-300,
    ] {
        let l = Limiter::new(Limit::per_second(r), 2);
        assert!(l.allow_n(now, 2), "{r}");
        assert!(!l.allow_n(now + Duration::from_secs(1_000_000), 1), "{r}");
        assert!(
            !l.reserve_n(now, 1).ok(),
            "{r}: a wait that never ends is refused"
        );
    }
    for r in [1e300, f64::MAX / 2.0, f64::INFINITY, f64::MAX] {
        let l = Limiter::new(Limit::per_second(r), 2);
        assert!(l.allow_n(now, 2), "{r}");
        // Refilled within a nanosecond (or infinite: not counted at all).
        assert!(l.allow_n(now + Duration::from_nanos(1), 2), "{r}");
        let t = l.tokens_at(now + Duration::from_secs(1));
        assert!(t.is_finite() && t <= 2.0, "{r}: {t}");
        let r2 = l.reserve_n(now + Duration::from_secs(2), 2);
        assert!(r2.ok());
        r2.cancel_at(now + Duration::from_secs(2));
        let t = l.tokens_at(now + Duration::from_secs(3));
        assert!(t.is_finite() && t <= 2.0, "{r}: {t}");
    }
    // A huge n at a finite limit and burst 0: refused, not waited for.
    let l = Limiter::new(Limit::per_second(1.0), 0);
    assert!(!l.allow_n(now, 1));
    assert!(
        l.allow_n(now, 0),
        "zero tokens are always there (Go's AllowN(now, 0))"
    );
    assert!(!l.reserve_n(now, u32::MAX).ok());
}

#[test]
fn waits_whose_context_is_canceled_in_any_order_give_every_token_back() {
    use gort::context::{self, Context};
    within(|| {
        let rt = gort::Builder::new()
            .procs(3)
            .start_paused(true)
            .build()
            .unwrap();
        rt.block_on(async {
            let limiter = Arc::new(Limiter::new(Limit::per_second(10.0), 1));
            assert!(limiter.allow());
            let (ctx, cancel) = context::with_cancel(&Context::background());
            let waits: Vec<_> = (0..10)
                .map(|_| {
                    let (limiter, ctx) = (limiter.clone(), ctx.clone());
                    gort::spawn(async move { limiter.wait_ctx(&ctx, 1).await })
                })
                .collect();
            gort::time::sleep(Duration::from_millis(250)).await;
            cancel.cancel();
            let mut ok = 0;
            for w in waits {
                match w.await.unwrap() {
                    Ok(()) => ok += 1,
                    Err(e) => assert_eq!(e, WaitError::Done),
                }
            }
            assert_eq!(ok, 2, "the waits due at 100 and 200 ms");
            // -10 reserved at 0, 2.5 refilled by 250 ms, 8 given back by the canceled waits,
            // whatever order their tasks ran their cancels in.
            let t = limiter.tokens();
            assert!((t - 0.5).abs() < 1e-9, "{t}");
        });
    });
}

#[test]
fn a_wait_whose_tokens_come_at_its_context_deadline_gets_them() {
    use gort::context::{self, Context};
    within(|| {
        let rt = gort::Builder::new()
            .procs(2)
            .start_paused(true)
            .build()
            .unwrap();
        rt.block_on(async {
            let limiter = Limiter::new(Limit::per_second(1.0), 1);
            assert!(limiter.allow());
            let (ctx, _cancel) =
                context::with_timeout(&Context::background(), Duration::from_secs(1));
            let start = Instant::now();
            // Due exactly at the deadline: allowed (Go: wait <= deadline - now), and when the
            // deadline and the tokens come together, the caller has its tokens.
            assert_eq!(limiter.wait_ctx(&ctx, 1).await, Ok(()));
            assert_eq!(Instant::now() - start, Duration::from_secs(1));
        });
    });
}
