//! `gort::time::rate` at fixed instants: Go's `rate_test.go` cases (`allow_n`, `reserve_n`,
//! `cancel_at`, `set_limit_at`, `set_burst_at`, `Every`, `Inf`, a zero limit), and `allow_n`
//! against an exact model in a proptest. No runtime and no clock: every call names its instant.
#![cfg(not(loom))]

use gort::time::rate::{every, Limit, Limiter};
use gort::time::Instant;
use std::time::Duration;

/// Go's `d`: the tests step time in tenths of a second.
const D: Duration = Duration::from_millis(100);

/// Go's `t0`..`t9`: `t(k)` is `t0 + k*d`.
fn t(k: u32) -> Instant {
    Instant::from_nanos(1_000_000_000_000) + D * k
}

fn lim(r: f64, b: u32) -> Limiter {
    Limiter::new(Limit::per_second(r), b)
}

/// Go's `run`: `(at, n, ok)` steps of `allow_n`.
#[track_caller]
fn run(l: &Limiter, steps: &[(u32, u32, bool)]) {
    for (i, &(at, n, ok)) in steps.iter().enumerate() {
        assert_eq!(l.allow_n(t(at), n), ok, "step {i}: allow_n(t{at}, {n})");
    }
}

/// Go's `runReserve`: reserves `n` at `t(at)`; checks ok and the time to act `t(act)`.
#[track_caller]
fn reserve(l: &Limiter, at: u32, n: u32, act: u32, ok: bool) -> gort::time::rate::Reservation<'_> {
    let r = l.reserve_n(t(at), n);
    assert_eq!(r.ok(), ok, "reserve_n(t{at}, {n}).ok()");
    if ok {
        assert_eq!(
            r.time_to_act(),
            Some(t(act)),
            "reserve_n(t{at}, {n}) acts at"
        );
        assert_eq!(r.delay_from(t(at)), D * (act - at));
    } else {
        assert_eq!(r.delay_from(t(at)), Duration::MAX);
    }
    r
}

#[test]
fn every_converts_an_interval_to_a_limit() {
    let close = |a: Limit, b: f64| (a.as_f64() / b - 1.0).abs() < 1e-9;
    assert_eq!(every(Duration::ZERO), Limit::INF);
    for (d, want) in [
        (Duration::from_nanos(1), 1e9),
        (Duration::from_micros(1), 1e6),
        (Duration::from_millis(1), 1e3),
        (Duration::from_millis(10), 100.0),
        (Duration::from_millis(100), 10.0),
        (Duration::from_secs(1), 1.0),
        (Duration::from_secs(2), 0.5),
        (Duration::from_millis(2500), 0.4),
        (Duration::from_secs(10), 0.1),
        (Duration::from_nanos(i64::MAX as u64), 1e9 / i64::MAX as f64),
    ] {
        assert!(close(every(d), want), "every({d:?}) = {:?}", every(d));
    }
    assert!(Limit::per_second(10.0) != Limit::INF);
    assert_eq!(Limit::per_second(f64::INFINITY), Limit::INF);
    assert_eq!(Limit::per_second(f64::NAN), Limit::ZERO);
}

#[test]
fn burst_1() {
    run(
        &lim(10.0, 1),
        &[
            (0, 1, true),
            (0, 1, false),
            (0, 1, false),
            (1, 1, true),
            (1, 1, false),
            (1, 1, false),
            (2, 2, false), // more than the burst always fails
            (2, 1, true),
            (2, 1, false),
        ],
    );
}

#[test]
fn burst_3() {
    run(
        &lim(10.0, 3),
        &[
            (0, 2, true),
            (0, 2, false),
            (0, 1, true),
            (0, 1, false),
            (1, 4, false),
            (2, 1, true),
            (3, 1, true),
            (4, 1, true),
            (4, 1, true),
            (4, 1, false),
            (4, 1, false),
            (9, 3, true),
            (9, 0, true),
        ],
    );
}

#[test]
fn jump_backwards_counts_no_refill_and_moves_the_count_back() {
    run(
        &lim(10.0, 3),
        &[
            (1, 1, true), // start at t1
            (0, 1, true), // back to t0: two tokens remain
            (0, 1, true),
            (0, 1, false),
            (0, 1, false),
            (1, 1, true), // one refilled since t0
            (1, 1, false),
            (1, 1, false),
            (2, 1, true),
            (2, 1, false),
            (2, 1, false),
        ],
    );
}

#[test]
fn no_truncation_error_at_an_odd_rate() {
    // go#34861: a rate whose token time is not a whole number of nanoseconds.
    assert!(lim(0.769_230_769_230_769_3, 1).allow());
}

#[test]
fn simultaneous_allows_grant_exactly_the_burst() {
    // Go's TestSimultaneousRequests, on threads: 15 at once, 5 in the bucket, 1 per second.
    let l = lim(1.0, 5);
    let now = Instant::now();
    let granted: usize = std::thread::scope(|s| {
        let hs: Vec<_> = (0..15).map(|_| s.spawn(|| l.allow_n(now, 1))).collect();
        hs.into_iter().map(|h| usize::from(h.join().unwrap())).sum()
    });
    assert_eq!(granted, 5);
}

#[test]
fn simple_reserve() {
    let l = lim(10.0, 2);
    let _ = reserve(&l, 0, 2, 0, true);
    let _ = reserve(&l, 0, 2, 2, true);
    let _ = reserve(&l, 3, 2, 4, true);
}

#[test]
fn reserve_mixed_with_allow() {
    let l = lim(10.0, 2);
    let _ = reserve(&l, 0, 3, 0, false); // more than the burst
    let _ = reserve(&l, 0, 2, 0, true);
    run(&l, &[(1, 2, false)]); // one token is not two
    let _ = reserve(&l, 1, 2, 2, true);
    run(&l, &[(1, 1, false)]); // negative tokens
    run(&l, &[(3, 1, true)]);
}

#[test]
fn cancel_of_a_refused_reservation_gives_nothing() {
    let l = lim(10.0, 2);
    let _ = reserve(&l, 0, 2, 0, true);
    reserve(&l, 0, 3, 3, false).cancel_at(t(0));
    let _ = reserve(&l, 0, 2, 2, true);
}

#[test]
fn cancel_of_the_last_reservation_gives_all_its_tokens() {
    let l = lim(10.0, 2);
    let _ = reserve(&l, 0, 2, 0, true);
    reserve(&l, 0, 2, 2, true).cancel_at(t(1));
    let _ = reserve(&l, 1, 2, 2, true);
}

#[test]
fn cancel_after_the_time_to_act_gives_nothing() {
    let l = lim(10.0, 2);
    let _ = reserve(&l, 0, 2, 0, true);
    reserve(&l, 0, 2, 2, true).cancel_at(t(3));
    let _ = reserve(&l, 3, 2, 4, true);
}

#[test]
fn cancel_gives_back_only_what_later_reservations_did_not_count_on() {
    // 0 tokens back: the later reservation counted on this one's token.
    let l = lim(10.0, 2);
    let _ = reserve(&l, 0, 2, 0, true);
    let r = reserve(&l, 0, 1, 1, true);
    let _ = reserve(&l, 0, 1, 2, true);
    r.cancel_at(t(0));
    let _ = reserve(&l, 0, 1, 3, true);

    // 1 token of 2 back.
    let l = lim(10.0, 2);
    let _ = reserve(&l, 0, 2, 0, true);
    let r = reserve(&l, 0, 2, 2, true);
    let _ = reserve(&l, 0, 1, 3, true);
    r.cancel_at(t(2));
    let _ = reserve(&l, 2, 2, 4, true);
}

#[test]
fn cancel_of_several_reservations() {
    let l = lim(10.0, 4);
    let _ = reserve(&l, 0, 4, 0, true);
    let a = reserve(&l, 0, 3, 3, true);
    let _ = reserve(&l, 0, 1, 4, true);
    let c = reserve(&l, 0, 1, 5, true);
    c.cancel_at(t(1)); // 1 back
    a.cancel_at(t(1)); // 2 back, as if c was never reserved
    let _ = reserve(&l, 1, 3, 5, true);
}

#[test]
fn reserve_and_cancel_at_instants_from_the_past() {
    let l = lim(10.0, 2);
    let _ = reserve(&l, 1, 2, 1, true); // start at t1
    let _ = reserve(&l, 0, 1, 1, true); // back to t0
    let _ = reserve(&l, 2, 2, 3, true);

    let l = lim(10.0, 2);
    let _ = reserve(&l, 1, 2, 1, true);
    let r = reserve(&l, 1, 2, 3, true);
    let _ = reserve(&l, 1, 1, 4, true);
    r.cancel_at(t(0)); // 1 back
    let _ = reserve(&l, 1, 2, 4, true);
}

#[test]
fn set_limit_and_set_burst_mid_stream() {
    let l = lim(5.0, 2);
    let _ = reserve(&l, 0, 2, 0, true);
    let _ = reserve(&l, 0, 2, 4, true);
    l.set_limit_at(t(2), Limit::per_second(10.0));
    let _ = reserve(&l, 2, 1, 4, true); // the new rate from t2 on
    assert_eq!(l.limit(), Limit::per_second(10.0));

    let l = lim(5.0, 2);
    let _ = reserve(&l, 0, 2, 0, true);
    let _ = reserve(&l, 0, 2, 4, true);
    l.set_burst_at(t(3), 4);
    let _ = reserve(&l, 0, 4, 9, true);
    assert_eq!(l.burst(), 4);

    let l = lim(5.0, 2);
    let _ = reserve(&l, 0, 2, 0, true);
    let r = reserve(&l, 0, 2, 4, true);
    l.set_limit_at(t(2), Limit::per_second(10.0));
    r.cancel_at(t(2)); // 2 back
    let _ = reserve(&l, 2, 2, 3, true);
}

#[test]
fn set_burst_drops_tokens_above_it() {
    let l = lim(1.0, 5);
    l.set_burst_at(t(0), 2);
    assert_eq!(l.tokens_at(t(0)), 2.0);
    run(&l, &[(0, 3, false), (0, 2, true), (0, 1, false)]);
}

#[test]
fn infinite_limit_allows_everything_whatever_the_burst() {
    let l = Limiter::new(Limit::INF, 0);
    run(&l, &[(0, 1, true), (0, 1000, true), (0, u32::MAX, true)]);
    let r = l.reserve_n(t(0), 7);
    assert_eq!(r.delay_from(t(0)), Duration::ZERO);
    r.cancel_at(t(0)); // nothing was counted, nothing is given back
    l.set_limit_at(t(0), Limit::per_second(1.0));
    run(&l, &[(0, 1, false)]); // burst 0
}

#[test]
fn zero_limit_uses_the_bucket_then_never_refills() {
    let l = lim(0.0, 1);
    assert!(l.allow());
    assert!(!l.allow());
    assert!(!l.allow_n(t(9) + Duration::from_secs(3600), 1));
    let r = l.reserve();
    assert!(!r.ok());
    assert_eq!(r.delay(), Duration::MAX);

    // A reservation taken from a zero-limit bucket is given back by cancel.
    let l = lim(0.0, 3);
    let r = l.reserve_n(t(0), 2);
    assert_eq!(r.delay_from(t(0)), Duration::ZERO);
    assert_eq!(l.tokens_at(t(5)), 1.0);
    r.cancel_at(t(0));
    assert_eq!(l.tokens_at(t(5)), 3.0);
}

#[test]
fn tokens_refill_continuously_up_to_the_burst() {
    let l = lim(10.0, 3);
    assert!(l.allow_n(t(0), 3));
    assert_eq!(l.tokens_at(t(0)), 0.0);
    assert!((l.tokens_at(t(0) + Duration::from_millis(150)) - 1.5).abs() < 1e-12);
    assert_eq!(l.tokens_at(t(9)), 3.0);
    let _ = l.reserve_n(t(0), 2);
    assert!((l.tokens_at(t(0)) + 2.0).abs() < 1e-12); // owed to a reservation
}

#[test]
fn limiter_is_shared_by_reference() {
    let l = lim(1.0, 1);
    let dbg = format!("{l:?}");
    assert!(dbg.contains("Limiter") && dbg.contains("burst: 1"), "{dbg}");
    assert_eq!(format!("{:?}", Limit::INF), "Limit::INF");
}

/// `allow_n` against an exact model. Times are on a grid of 1/512 s and rates are whole
/// tokens per second, so that every token count is a multiple of 1/512 well inside `f64`'s
/// precision: the limiter's floats must then agree with exact arithmetic to the last bit.
mod model {
    use super::*;
    use proptest::prelude::*;

    /// 1/512 s: the largest power-of-two fraction of a second that is a whole number of ns.
    const TICK_NS: i64 = 1_953_125;

    /// Tokens scaled by 512 (one tick at 1 token/s is one unit), as exact integers.
    struct Model {
        rate: i128,
        burst: i128,
        tokens: i128,
        last: Option<i64>,
    }

    impl Model {
        fn at(&self, tick: i64) -> i128 {
            let Some(last) = self.last else {
                return self.burst * 512;
            };
            let elapsed = i128::from((tick - last.min(tick)).max(0));
            (self.tokens + self.rate * elapsed).min(self.burst * 512)
        }
        fn allow(&mut self, tick: i64, n: u32) -> bool {
            if i128::from(n) > self.burst {
                return false;
            }
            let left = self.at(tick) - i128::from(n) * 512;
            if left < 0 {
                return false;
            }
            self.tokens = left;
            self.last = Some(tick);
            true
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

        #[test]
        fn allow_n_matches_exact_arithmetic(
            rate in 0u32..1000,
            burst in 0u32..50,
            steps in prop::collection::vec((0i64..4096, 0u32..8), 1..200),
        ) {
            let l = Limiter::new(Limit::per_second(f64::from(rate)), burst);
            let mut m = Model { rate: rate.into(), burst: burst.into(), tokens: 0, last: None };
            let t0 = 1_000 * 512 * TICK_NS;
            for (tick, n) in steps {
                let now = Instant::from_nanos(t0 + tick * TICK_NS);
                prop_assert_eq!(l.allow_n(now, n), m.allow(tick, n), "allow_n(tick {}, {})", tick, n);
                prop_assert_eq!(l.tokens_at(now), m.at(tick) as f64 / 512.0);
            }
        }

        /// Reservations made and canceled in any order at increasing instants: the grants
        /// that stand (not canceled, or canceled too late) never put more than
        /// `burst + r*(t2 - t1)` tokens in any window `[t1, t2]`. This is what Go's partial
        /// give-back protects, and what gort's chained give-back must not break.
        #[test]
        fn reserve_and_cancel_keep_every_window_within_the_bucket(
            rate in 1u32..50,
            burst in 1u32..6,
            ops in prop::collection::vec(
                (0u64..150_000_000, 1u32..5, any::<bool>(), any::<prop::sample::Index>()),
                1..150,
            ),
        ) {
            let l = Limiter::new(Limit::per_second(f64::from(rate)), burst);
            let mut now = Instant::from_nanos(5_000_000_000);
            let mut outstanding = Vec::new();
            let mut stands: Vec<(Instant, u32)> = Vec::new();
            for (gap, n, cancel, pick) in ops {
                now += Duration::from_nanos(gap);
                if cancel && !outstanding.is_empty() {
                    let (slot, r): (usize, gort::time::rate::Reservation<'_>) =
                        outstanding.swap_remove(pick.index(outstanding.len()));
                    if stands[slot].0 >= now {
                        stands[slot].1 = 0; // given back in time: never acts
                    }
                    r.cancel_at(now);
                } else {
                    let r = l.reserve_n(now, n);
                    if let Some(at) = r.time_to_act() {
                        stands.push((at, n));
                        outstanding.push((stands.len() - 1, r));
                    }
                }
            }
            stands.retain(|g| g.1 > 0);
            stands.sort();
            for i in 0..stands.len() {
                let mut total = 0;
                for &(at, n) in &stands[i..] {
                    total += n;
                    let bound = f64::from(burst) + f64::from(rate) * (at - stands[i].0).as_secs_f64();
                    prop_assert!(f64::from(total) <= bound + 1e-6,
                        "{} tokens in [{:?}, {:?}]", total, stands[i].0, at);
                }
            }
        }

        /// At any instants and rates: over any prefix, the tokens granted never exceed the
        /// burst plus what the rate refilled (Go's TestLongRunningQPS bound, exactly).
        #[test]
        fn allow_n_never_grants_more_than_burst_plus_refill(
            rate in 0.01f64..5000.0,
            burst in 1u32..20,
            gaps in prop::collection::vec((0u64..50_000_000, 1u32..4), 1..300),
        ) {
            let l = Limiter::new(Limit::per_second(rate), burst);
            let t0 = Instant::from_nanos(7_777_777_777);
            let (mut now, mut granted) = (t0, 0u64);
            for (gap, n) in gaps {
                now += Duration::from_nanos(gap);
                if l.allow_n(now, n) {
                    granted += u64::from(n);
                }
                let bound = f64::from(burst) + rate * (now - t0).as_secs_f64();
                prop_assert!(granted as f64 <= bound + 1e-6, "{} granted, bound {}", granted, bound);
            }
        }
    }
}
