//! Ports of golang.org/x/time's `rate/rate_test.go` (the 2025 version, with `TokensAt` checks
//! and a fake clock), one test per Go test, named in its doc comment. Go's calls at explicit
//! instants (`AllowN(t, n)`, `reserveN(t, n, max)`, `CancelAt(t)`, `SetLimitAt(t, r)`) are
//! gort's `allow_n`, `reserve_n`, `cancel_at`, `set_limit_at` at `t0 + k*d`; Go's fake clock
//! (`testTime`, for `WaitN` and TestLongRunningQPS) is gort's paused clock, under which
//! `Instant::now()` moves only by sleeps and `advance`, so the delays are exact.
//!
//! Where gort differs:
//! - `Every(-1)` has no counterpart (a `Duration` is never negative).
//! - Go's private `reserveN(t, n, maxReserve)` with a finite `maxReserve` (TestReserveMax, and
//!   the last refusal of TestReserveJumpBack) is public in gort only as a wait with a deadline
//!   (`wait_deadline`), at the clock's instant: TestReserveMax runs so on a paused clock, and
//!   TestReserveJumpBack's refusal at a past instant is an `allow_n` there (the maximum wait
//!   is zero instead of `d`: refused all the same, and it too must change nothing).
//!
//! Not ported: the benchmarks (speed is measured by `benches/probes/rateprobe.rs`).
#![cfg(not(loom))]

use std::sync::atomic::{AtomicU32, Ordering::SeqCst};
use std::sync::Arc;
use std::time::Duration;

use gort::context::{self, Context};
use gort::sync::WaitGroup;
use gort::time::rate::{every, Limit, Limiter, Reservation};
use gort::time::Instant;

#[path = "support/watchdog.rs"]
mod watchdog;

/// Go's `d`: the unit of every instant and delay below.
const D: Duration = Duration::from_millis(100);

/// Go's `t0`..`t9`: `t(k)` is `t0 + k*d`, `t0` one instant fixed for the test binary.
fn t(k: u32) -> Instant {
    static T0: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();
    *T0.get_or_init(Instant::now) + D * k
}

/// Runs `f` on a fresh 2-P runtime whose clock is paused from the start.
fn paused<F>(f: F) -> F::Output
where
    F: std::future::Future + Send + 'static,
    F::Output: Send + 'static,
{
    watchdog::run_with(2, true, f)
}

/// Go: TestLimit.
#[test]
fn limit() {
    assert!(
        Limit::per_second(10.0) != Limit::INF,
        "Limit(10) == Inf should be false"
    );
}

/// Whether `a` is within a relative 1e-9 of `b` (Go's `closeEnough`, without its missing
/// absolute value, which let any `a < b` pass).
fn close_enough(a: Limit, b: Limit) -> bool {
    (a.as_f64() / b.as_f64() - 1.0).abs() < 1e-9
}

/// Go: TestEvery (but `Every(-1)`, see the file's doc).
#[test]
fn every_() {
    let ns = Duration::from_nanos;
    let cases = [
        (Duration::ZERO, Limit::INF),
        (ns(1), Limit::per_second(1e9)),
        (Duration::from_micros(1), Limit::per_second(1e6)),
        (Duration::from_millis(1), Limit::per_second(1e3)),
        (Duration::from_millis(10), Limit::per_second(100.0)),
        (Duration::from_millis(100), Limit::per_second(10.0)),
        (Duration::from_secs(1), Limit::per_second(1.0)),
        (Duration::from_secs(2), Limit::per_second(0.5)),
        (Duration::from_millis(2500), Limit::per_second(0.4)),
        (Duration::from_secs(4), Limit::per_second(0.25)),
        (Duration::from_secs(10), Limit::per_second(0.1)),
        (
            ns(i64::MAX as u64),
            Limit::per_second(1e9 / i64::MAX as f64),
        ),
    ];
    for (interval, lim) in cases {
        let got = every(interval);
        assert!(
            close_enough(got, lim),
            "every({interval:?}) = {got:?} want {lim:?}"
        );
    }
}

/// Go's `allow`: at `t(k)`, `toks` tokens are there, and `allow_n(n)` answers `ok`.
struct Allow {
    t: u32,
    toks: f64,
    n: u32,
    ok: bool,
}

const fn allow(t: u32, toks: f64, n: u32, ok: bool) -> Allow {
    Allow { t, toks, n, ok }
}

/// Go's `run`.
fn run(lim: &Limiter, allows: &[Allow]) {
    for (i, a) in allows.iter().enumerate() {
        let toks = lim.tokens_at(t(a.t));
        assert_eq!(toks, a.toks, "step {i}: lim.tokens_at(t{})", a.t);
        let ok = lim.allow_n(t(a.t), a.n);
        assert_eq!(ok, a.ok, "step {i}: lim.allow_n(t{}, {})", a.t, a.n);
    }
}

/// Go: TestLimiterBurst1.
#[test]
fn limiter_burst1() {
    run(
        &Limiter::new(10.0, 1),
        &[
            allow(0, 1.0, 1, true),
            allow(0, 0.0, 1, false),
            allow(0, 0.0, 1, false),
            allow(1, 1.0, 1, true),
            allow(1, 0.0, 1, false),
            allow(1, 0.0, 1, false),
            allow(2, 1.0, 2, false), // burst size is 1, so n=2 always fails
            allow(2, 1.0, 1, true),
            allow(2, 0.0, 1, false),
        ],
    );
}

/// Go: TestLimiterBurst3.
#[test]
fn limiter_burst3() {
    run(
        &Limiter::new(10.0, 3),
        &[
            allow(0, 3.0, 2, true),
            allow(0, 1.0, 2, false),
            allow(0, 1.0, 1, true),
            allow(0, 0.0, 1, false),
            allow(1, 1.0, 4, false),
            allow(2, 2.0, 1, true),
            allow(3, 2.0, 1, true),
            allow(4, 2.0, 1, true),
            allow(4, 1.0, 1, true),
            allow(4, 0.0, 1, false),
            allow(4, 0.0, 1, false),
            allow(9, 3.0, 3, true),
            allow(9, 0.0, 0, true),
        ],
    );
}

/// Go: TestLimiterJumpBackwards. An instant before the last one counted moves the count back
/// to it, without refill.
#[test]
fn limiter_jump_backwards() {
    run(
        &Limiter::new(10.0, 3),
        &[
            allow(1, 3.0, 1, true), // start at t1
            allow(0, 2.0, 1, true), // jump back to t0, two tokens remain
            allow(0, 1.0, 1, true),
            allow(0, 0.0, 1, false),
            allow(0, 0.0, 1, false),
            allow(1, 1.0, 1, true), // got a token
            allow(1, 0.0, 1, false),
            allow(1, 0.0, 1, false),
            allow(2, 1.0, 1, true), // got another token
            allow(2, 0.0, 1, false),
            allow(2, 0.0, 1, false),
        ],
    );
}

/// Go: TestLimiter_noTruncationErrors (go#34861).
#[test]
fn limiter_no_truncation_errors() {
    assert!(Limiter::new(0.7692307692307693, 1).allow(), "expected true");
}

/// Go: TestSimultaneousRequests. 15 tasks ask at once of a bucket of 5 refilled at 1/s: 5
/// get a token (the paused clock keeps the refill out of it).
#[test]
fn simultaneous_requests() {
    paused(async {
        const LIMIT: f64 = 1.0;
        const BURST: u32 = 5;
        const NUM_REQUESTS: u32 = 15;
        let wg = WaitGroup::new();
        let num_ok = Arc::new(AtomicU32::new(0));
        // Very slow replenishing bucket.
        let lim = Arc::new(Limiter::new(LIMIT, BURST));
        wg.add(NUM_REQUESTS as isize);
        for _ in 0..NUM_REQUESTS {
            let (wg, num_ok, lim) = (wg.clone(), num_ok.clone(), lim.clone());
            gort::spawn(async move {
                if lim.allow() {
                    num_ok.fetch_add(1, SeqCst);
                }
                wg.done();
            });
        }
        wg.wait().await;
        assert_eq!(num_ok.load(SeqCst), BURST, "numOK");
    });
}

/// Go: TestLongRunningQPS. 5 (paused-clock) seconds of `allow` every 2 ms at 100/s, burst 100:
/// never more than the burst plus the refill, and within 0.1% of it.
#[test]
fn long_running_qps() {
    paused(async {
        const LIMIT: f64 = 100.0;
        const BURST: u32 = 100;
        let lim = Limiter::new(LIMIT, BURST);
        let mut num_ok = 0u32;
        let start = Instant::now();
        let end = start + Duration::from_secs(5);
        while Instant::now() < end {
            if lim.allow() {
                num_ok += 1;
            }
            // This will still offer ~500 requests per second.
            gort::time::advance(Duration::from_millis(2)).await;
        }
        let elapsed = start.elapsed();
        let ideal = f64::from(BURST) + LIMIT * elapsed.as_secs_f64();
        // We should never get more requests than allowed.
        assert!(
            f64::from(num_ok) <= ideal + 1.0,
            "numOK = {num_ok}, want at most {} (ideal {ideal})",
            ideal + 1.0
        );
        // We should get very close to the number of requests allowed.
        assert!(
            f64::from(num_ok) >= (0.999 * ideal).floor(),
            "numOK = {num_ok}, want at least {} (ideal {ideal})",
            (0.999 * ideal).floor()
        );
    });
}

/// Go: TestLongRunningQPS as x/time had it before its fake clock (2015-2023): 5 real seconds
/// of tasks spawned every 2 ms, each calling `allow` once, on a 2-P runtime. The upper bound
/// is Go's, exact: never more than the burst plus the refill (plus the one token Go allows
/// for rounding). The lower bound is generous (90% of the ideal, Go's is 99.9%): a stall of
/// the loaded machine near the end leaves tokens unused that the ideal counts.
#[test]
fn long_running_qps_real_clock() {
    watchdog::run_with(2, false, async {
        const LIMIT: f64 = 100.0;
        const BURST: u32 = 100;
        let num_ok = Arc::new(AtomicU32::new(0));
        let lim = Arc::new(Limiter::new(LIMIT, BURST));
        let wg = WaitGroup::new();
        let start = Instant::now();
        let end = start + Duration::from_secs(5);
        while Instant::now() < end {
            wg.add(1);
            let (num_ok, lim, wg) = (num_ok.clone(), lim.clone(), wg.clone());
            gort::spawn(async move {
                if lim.allow() {
                    num_ok.fetch_add(1, SeqCst);
                }
                wg.done();
            });
            // This will still offer ~500 requests per second.
            gort::time::sleep(Duration::from_millis(2)).await;
        }
        wg.wait().await;
        let elapsed = start.elapsed();
        let ideal = f64::from(BURST) + LIMIT * elapsed.as_secs_f64();
        let num_ok = f64::from(num_ok.load(SeqCst));
        // We should never get more requests than allowed.
        assert!(num_ok <= ideal + 1.0, "numOK = {num_ok}, ideal {ideal}");
        // We should get close to the number of requests allowed.
        assert!(num_ok >= 0.9 * ideal, "numOK = {num_ok}, ideal {ideal}");
    });
}

/// Go's `dFromDuration` and `dSince`: an instant in multiples of `d` since `t0`, rounded to
/// the nearest.
fn d_since(at: Instant) -> i64 {
    let nanos = at.duration_since(t(0)).as_nanos() as i64;
    (nanos + D.as_nanos() as i64 / 2) / D.as_nanos() as i64
}

/// A reservation a test may drop: Go's tests drop most of theirs (the tokens stay taken).
struct Reserved<'a>(Reservation<'a>);

/// Go's `runReserve`: `reserve_n(t(at), n)` is `ok` and, if so, acts at `t(act)`.
fn run_reserve(lim: &Limiter, at: u32, n: u32, act: u32, ok: bool) -> Reserved<'_> {
    let r = lim.reserve_n(t(at), n);
    let got = r.time_to_act().map(d_since);
    let want = ok.then_some(i64::from(act));
    assert_eq!(
        got, want,
        "lim.reserve_n(t{at}, {n}) acts at t{got:?}, want t{want:?}"
    );
    Reserved(r)
}

/// Go: TestSimpleReserve.
#[test]
fn simple_reserve() {
    let lim = Limiter::new(10.0, 2);
    run_reserve(&lim, 0, 2, 0, true);
    run_reserve(&lim, 0, 2, 2, true);
    run_reserve(&lim, 3, 2, 4, true);
}

/// Go: TestMix.
#[test]
fn mix() {
    let lim = Limiter::new(10.0, 2);
    run_reserve(&lim, 0, 3, 1, false); // should return false because n > Burst
    run_reserve(&lim, 0, 2, 0, true);
    run(&lim, &[allow(1, 1.0, 2, false)]); // not enough tokens - don't allow
    run_reserve(&lim, 1, 2, 2, true);
    run(&lim, &[allow(1, -1.0, 1, false)]); // negative tokens - don't allow
    run(&lim, &[allow(3, 1.0, 1, true)]);
}

/// Go: TestCancelInvalid.
#[test]
fn cancel_invalid() {
    let lim = Limiter::new(10.0, 2);
    run_reserve(&lim, 0, 2, 0, true);
    let r = run_reserve(&lim, 0, 3, 3, false);
    r.0.cancel_at(t(0)); // should have no effect
    run_reserve(&lim, 0, 2, 2, true); // did not get extra tokens
}

/// Go: TestCancelLast.
#[test]
fn cancel_last() {
    let lim = Limiter::new(10.0, 2);
    run_reserve(&lim, 0, 2, 0, true);
    let r = run_reserve(&lim, 0, 2, 2, true);
    r.0.cancel_at(t(1)); // got 2 tokens back
    run_reserve(&lim, 1, 2, 2, true);
}

/// Go: TestCancelTooLate.
#[test]
fn cancel_too_late() {
    let lim = Limiter::new(10.0, 2);
    run_reserve(&lim, 0, 2, 0, true);
    let r = run_reserve(&lim, 0, 2, 2, true);
    r.0.cancel_at(t(3)); // too late to cancel - should have no effect
    run_reserve(&lim, 3, 2, 4, true);
}

/// Go: TestCancel0Tokens.
#[test]
fn cancel0_tokens() {
    let lim = Limiter::new(10.0, 2);
    run_reserve(&lim, 0, 2, 0, true);
    let r = run_reserve(&lim, 0, 1, 1, true);
    run_reserve(&lim, 0, 1, 2, true);
    r.0.cancel_at(t(0)); // got 0 tokens back
    run_reserve(&lim, 0, 1, 3, true);
}

/// Go: TestCancel1Token.
#[test]
fn cancel1_token() {
    let lim = Limiter::new(10.0, 2);
    run_reserve(&lim, 0, 2, 0, true);
    let r = run_reserve(&lim, 0, 2, 2, true);
    run_reserve(&lim, 0, 1, 3, true);
    r.0.cancel_at(t(2)); // got 1 token back
    run_reserve(&lim, 2, 2, 4, true);
}

/// Go: TestCancelMulti.
#[test]
fn cancel_multi() {
    let lim = Limiter::new(10.0, 4);
    run_reserve(&lim, 0, 4, 0, true);
    let r_a = run_reserve(&lim, 0, 3, 3, true);
    run_reserve(&lim, 0, 1, 4, true);
    let r_c = run_reserve(&lim, 0, 1, 5, true);
    r_c.0.cancel_at(t(1)); // get 1 token back
    r_a.0.cancel_at(t(1)); // get 2 tokens back, as if C was never reserved
    run_reserve(&lim, 1, 3, 5, true);
}

/// Go: TestReserveJumpBack. The last refusal is an `allow_n` (see the file's doc).
#[test]
fn reserve_jump_back() {
    let lim = Limiter::new(10.0, 2);
    run_reserve(&lim, 1, 2, 1, true); // start at t1
    run_reserve(&lim, 0, 1, 1, true); // should violate Limit,Burst
    run_reserve(&lim, 2, 2, 3, true);
    // burst size is 2, so n=3 always fails, and the state of lim should not be changed
    run_reserve(&lim, 0, 3, 0, false);
    run_reserve(&lim, 2, 1, 4, true);
    // the wait allowed is not enough so it fails, and the state of lim should not be changed
    assert!(!lim.allow_n(t(0), 2));
    run_reserve(&lim, 2, 1, 5, true);
}

/// Go: TestReserveJumpBackCancel.
#[test]
fn reserve_jump_back_cancel() {
    let lim = Limiter::new(10.0, 2);
    run_reserve(&lim, 1, 2, 1, true); // start at t1
    let r = run_reserve(&lim, 1, 2, 3, true);
    run_reserve(&lim, 1, 1, 4, true);
    r.0.cancel_at(t(0)); // cancel at t0, get 1 token back
    run_reserve(&lim, 1, 2, 4, true); // should violate Limit,Burst
}

/// Go: TestReserveSetLimit.
#[test]
fn reserve_set_limit() {
    let lim = Limiter::new(5.0, 2);
    run_reserve(&lim, 0, 2, 0, true);
    run_reserve(&lim, 0, 2, 4, true);
    lim.set_limit_at(t(2), 10.0);
    run_reserve(&lim, 2, 1, 4, true); // violates Limit and Burst
}

/// Go: TestReserveSetBurst.
#[test]
fn reserve_set_burst() {
    let lim = Limiter::new(5.0, 2);
    run_reserve(&lim, 0, 2, 0, true);
    run_reserve(&lim, 0, 2, 4, true);
    lim.set_burst_at(t(3), 4);
    run_reserve(&lim, 0, 4, 9, true); // violates Limit and Burst
}

/// Go: TestReserveSetLimitCancel.
#[test]
fn reserve_set_limit_cancel() {
    let lim = Limiter::new(5.0, 2);
    run_reserve(&lim, 0, 2, 0, true);
    let r = run_reserve(&lim, 0, 2, 4, true);
    lim.set_limit_at(t(2), 10.0);
    r.0.cancel_at(t(2)); // 2 tokens back
    run_reserve(&lim, 2, 2, 3, true);
}

/// Go: TestReserveMax, as waits with a deadline `d` after the start on a paused clock: the
/// burst at once, one token at `t1` (within `d`), and the next one (due at `t2`) refused at
/// once, taking nothing.
#[test]
fn reserve_max() {
    paused(async {
        let lim = Limiter::new(10.0, 2);
        let start = Instant::now();
        let max = start + D;
        lim.wait_deadline(2, max).await.unwrap();
        assert_eq!(start.elapsed(), Duration::ZERO);
        lim.wait_deadline(1, max).await.unwrap(); // reserve for close future
        assert_eq!(start.elapsed(), D);
        let late = lim.wait_deadline(1, max).await; // time to act too far in the future
        assert!(late.is_err(), "{late:?}");
        assert_eq!(start.elapsed(), D, "refused at once");
        assert_eq!(lim.tokens(), 0.0, "took nothing");
    });
}

/// Go's `runWait` on the paused clock: `wait_ctx(ctx, n)` succeeds (`ok`) after `delay`
/// multiples of `d` (Go's `waitDelayOk`: no less, and at most 150% rounded up; exact here).
async fn run_wait(lim: &Limiter, name: &str, ctx: &Context, n: u32, delay: u32, ok: bool) {
    let start = Instant::now();
    let err = lim.wait_ctx(ctx, n).await;
    let got = d_since(t(0) + start.elapsed());
    let (want, max) = (i64::from(delay), i64::from((delay * 3).div_ceil(2)));
    assert!(
        err.is_ok() == ok && (want..=max).contains(&got),
        "lim.wait_ctx({name}, {n}) = {err:?} with delay {:?}; want ok={ok} with delay {:?}",
        start.elapsed(),
        D * delay
    );
}

/// Go: TestWaitSimple.
#[test]
fn wait_simple() {
    paused(async {
        let lim = Limiter::new(10.0, 3);
        let bg = Context::background();
        let (ctx, cancel) = context::with_cancel(&bg);
        cancel.cancel();
        run_wait(&lim, "already-cancelled", &ctx, 1, 0, false).await;
        run_wait(&lim, "exceed-burst-error", &bg, 4, 0, false).await;
        run_wait(&lim, "act-now", &bg, 2, 0, true).await;
        run_wait(&lim, "act-later", &bg, 3, 2, true).await;
    });
}

/// Go: TestWaitCancel. A wait canceled after `d` fails then, and its tokens come back: the
/// next wait of 2 acts at once.
#[test]
fn wait_cancel() {
    paused(async {
        let lim = Limiter::new(10.0, 3);
        let (ctx, cancel) = context::with_cancel(&Context::background());
        run_wait(&lim, "act-now", &ctx, 2, 0, true).await; // after this lim.tokens = 1
        gort::spawn(async move {
            gort::time::sleep(D).await;
            cancel.cancel();
        });
        run_wait(&lim, "will-cancel", &ctx, 3, 1, false).await;
        // should get 3 tokens back, and have lim.tokens = 2
        assert_eq!(lim.tokens(), 2.0, "{lim:?}");
        let bg = Context::background();
        run_wait(&lim, "act-now-after-cancel", &bg, 2, 0, true).await;
    });
}

/// Go: TestWaitTimeout. A wait whose tokens would come after the context's deadline fails
/// at once.
#[test]
fn wait_timeout() {
    paused(async {
        let lim = Limiter::new(10.0, 3);
        let (ctx, cancel) = context::with_timeout(&Context::background(), D);
        let _cancel = cancel.drop_guard(); // Go's defer cancel()
        run_wait(&lim, "act-now", &ctx, 2, 0, true).await;
        run_wait(&lim, "w-timeout-err", &ctx, 3, 0, false).await;
    });
}

/// Go: TestWaitInf. An infinite limit ignores the burst, even zero.
#[test]
fn wait_inf() {
    paused(async {
        let lim = Limiter::new(Limit::INF, 0);
        let bg = Context::background();
        run_wait(&lim, "exceed-burst-no-error", &bg, 3, 0, true).await;
    });
}

/// Go: TestZeroLimit. A zero limit's bucket starts full and is not refilled.
#[test]
fn zero_limit() {
    let r = Limiter::new(0.0, 1);
    assert!(r.allow(), "Limit(0, 1) want true when first used");
    assert!(!r.allow(), "Limit(0, 1) want false when already used");
}

/// Go: TestSetAfterZeroLimit. A limit raised from zero refills from then on: a token in `d` at
/// 10/s.
#[test]
fn set_after_zero_limit() {
    paused(async {
        let lim = Limiter::new(0.0, 1);
        // The limiter should start off full, so even though our rate limit is 0, our first
        // request should be allowed…
        assert!(lim.allow(), "Limit(0, 1) want true when first used");
        // …the token bucket is not being replenished though, so the second request should
        // not succeed
        assert!(!lim.allow(), "Limit(0, 1) want false when already used");
        lim.set_limit(10.0);
        // We set the limit to 10/s so expect to get another token in 100ms
        let bg = Context::background();
        run_wait(&lim, "wait-after-set-nonzero-after-zero", &bg, 1, 1, true).await;
    });
}

/// Go: TestTinyLimit (go#71154). At 1e-10 tokens a second the bucket's one token is used and
/// no other comes (the wait for it overflows a duration: it never comes).
#[test]
fn tiny_limit() {
    let lim = Limiter::new(1e-10, 1);
    // The limiter starts with 1 burst token, so the first request should succeed
    assert!(lim.allow(), "Limit(1e-10, 1) want true when first used");
    // The limiter should not have replenished the token bucket yet, so the second request
    // should fail
    assert!(!lim.allow(), "Limit(1e-10, 1) want false when already used");
}
