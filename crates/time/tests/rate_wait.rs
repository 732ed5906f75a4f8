//! `gort::time::rate`'s waits on the real multi-P runtime: Go's `TestWait*` cases, many tasks
//! sharing one limiter, and cancel safety (a wait dropped by `select!` or `timeout`, or whose
//! context is canceled, gives its tokens back). Under a paused clock the instants are exact;
//! the one real-clock test has generous bounds.
#![cfg(not(loom))]

use gort::context::{self, Context};
use gort::time::rate::{Limit, Limiter, WaitError};
use gort::time::{self, Instant};
use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering::SeqCst};
use std::sync::Arc;
use std::time::Duration;

const D: Duration = Duration::from_millis(100);

fn paused_rt(procs: usize) -> gort::Runtime {
    gort::Builder::new()
        .procs(procs)
        .start_paused(true)
        .build()
        .unwrap()
}

fn lim(r: f64, b: u32) -> Limiter {
    Limiter::new(Limit::per_second(r), b)
}

/// Runs `f` and returns its output and the virtual time it took.
async fn timed<T>(f: impl Future<Output = T>) -> (T, Duration) {
    let start = Instant::now();
    let out = f.await;
    (out, start.elapsed())
}

#[test]
fn wait_futures_are_send() {
    fn send<T: Send>(_: T) {}
    let l = lim(1.0, 1);
    let ctx = Context::background();
    send(l.wait());
    send(l.wait_n(2));
    send(l.wait_ctx(&ctx, 1));
}

#[test]
fn wait_simple() {
    // Go's TestWaitSimple.
    paused_rt(2).block_on(async {
        let l = lim(10.0, 3);
        let (done, cancel) = context::with_cancel(&Context::background());
        cancel.cancel();
        assert_eq!(
            timed(l.wait_ctx(&done, 1)).await,
            (Err(WaitError::Done), Duration::ZERO)
        );
        assert_eq!(l.tokens(), 3.0); // nothing taken

        let over = WaitError::BurstExceeded { n: 4, burst: 3 };
        assert_eq!(
            timed(l.wait_n(4)).await,
            (Err(over.clone()), Duration::ZERO)
        );
        assert_eq!(
            over.to_string(),
            "rate: wait(n=4) exceeds limiter's burst 3"
        );

        assert_eq!(timed(l.wait_n(2)).await, (Ok(()), Duration::ZERO));
        assert_eq!(timed(l.wait_n(3)).await, (Ok(()), 2 * D));
    });
}

#[test]
fn wait_ctx_canceled_midway_gives_its_tokens_back() {
    // Go's TestWaitCancel.
    paused_rt(2).block_on(async {
        let l = lim(10.0, 3);
        let (ctx, cancel) = context::with_cancel(&Context::background());
        assert_eq!(timed(l.wait_ctx(&ctx, 2)).await, (Ok(()), Duration::ZERO));
        gort::spawn(async move {
            time::sleep(D).await;
            cancel.cancel();
        });
        // 1 token left, 3 wanted: due at 2d, canceled at d.
        assert_eq!(timed(l.wait_ctx(&ctx, 3)).await, (Err(WaitError::Done), D));
        assert_eq!(ctx.err(), Some(context::Error::Canceled));
        // The 3 tokens are back: 1 left + 1 refilled in d.
        assert!((l.tokens() - 2.0).abs() < 1e-9, "{}", l.tokens());
        let bg = Context::background();
        assert_eq!(timed(l.wait_ctx(&bg, 2)).await, (Ok(()), Duration::ZERO));
    });
}

#[test]
fn wait_ctx_that_would_pass_the_deadline_fails_at_once() {
    // Go's TestWaitTimeout.
    paused_rt(2).block_on(async {
        let l = lim(10.0, 3);
        let (ctx, _cancel) = context::with_timeout(&Context::background(), D);
        assert_eq!(timed(l.wait_ctx(&ctx, 2)).await, (Ok(()), Duration::ZERO));
        let late = WaitError::WouldExceedDeadline { n: 3 };
        assert_eq!(
            timed(l.wait_ctx(&ctx, 3)).await,
            (Err(late), Duration::ZERO)
        );
        assert_eq!(l.tokens(), 1.0); // nothing taken
                                     // One that fits before the deadline waits for it.
        assert_eq!(timed(l.wait_ctx(&ctx, 2)).await, (Ok(()), D));
    });
}

#[test]
fn wait_at_an_infinite_limit_ignores_the_burst() {
    paused_rt(1).block_on(async {
        let l = Limiter::new(Limit::INF, 0);
        assert_eq!(timed(l.wait_n(3)).await, (Ok(()), Duration::ZERO));
    });
}

#[test]
fn wait_at_a_zero_limit_fails_once_the_bucket_is_empty() {
    paused_rt(1).block_on(async {
        let l = Limiter::new(Limit::ZERO, 2);
        assert_eq!(l.wait_n(2).await, Ok(()));
        assert_eq!(
            timed(l.wait()).await,
            (Err(WaitError::NeverAvailable { n: 1 }), Duration::ZERO)
        );
    });
}

#[test]
fn set_limit_mid_stream_changes_the_pace_of_later_waits() {
    paused_rt(2).block_on(async {
        let l = lim(10.0, 1);
        let start = Instant::now();
        for _ in 0..3 {
            l.wait().await.unwrap();
        }
        assert_eq!(start.elapsed(), 2 * D);
        l.set_limit(Limit::per_second(2.0));
        for _ in 0..2 {
            l.wait().await.unwrap();
        }
        assert_eq!(start.elapsed(), 2 * D + Duration::from_secs(1));
    });
}

/// `tasks` tasks loop on `wait()` on one limiter; after the clock advanced `t`, exactly
/// `floor(r*t) + burst` have been granted, whatever the number of tasks and Ps.
fn many_waiters_get_tokens_at_the_limits_pace(
    procs: usize,
    tasks: usize,
    r: f64,
    burst: u32,
    checkpoints: &[Duration],
) {
    paused_rt(procs).block_on(async {
        let l = Arc::new(lim(r, burst));
        let granted = Arc::new(AtomicU64::new(0));
        let start = Instant::now();
        for _ in 0..tasks {
            let (l, granted) = (l.clone(), granted.clone());
            gort::spawn(async move {
                loop {
                    l.wait().await.unwrap();
                    granted.fetch_add(1, SeqCst);
                }
            });
        }
        for &at in checkpoints {
            time::advance(at - start.elapsed()).await;
            let want = (r * at.as_secs_f64()).floor() as u64 + u64::from(burst);
            assert_eq!(
                granted.load(SeqCst),
                want,
                "granted by {at:?} (r={r}, burst={burst}, {tasks} tasks)"
            );
        }
    });
}

#[test]
fn many_waiters_share_the_rate_on_whole_instants() {
    let at = [0, 100, 1000, 2500, 10_000].map(Duration::from_millis);
    many_waiters_get_tokens_at_the_limits_pace(2, 8, 10.0, 3, &at);
    many_waiters_get_tokens_at_the_limits_pace(4, 32, 10.0, 1, &at);
}

#[test]
fn many_waiters_share_an_odd_rate() {
    // 3 per second: token times are not whole nanoseconds; check between them.
    let at = [50, 1100, 5050, 20_100].map(Duration::from_millis);
    many_waiters_get_tokens_at_the_limits_pace(2, 5, 3.0, 2, &at);
}

#[test]
fn a_wait_that_loses_a_select_gives_its_tokens_back() {
    paused_rt(2).block_on(async {
        let l = lim(4.0, 4);
        l.wait_n(4).await.unwrap(); // empty at 0
        let (tx, rx) = gort::chan::bounded::<()>(0);
        gort::spawn(async move {
            time::sleep(Duration::from_millis(250)).await;
            tx.send(()).await.unwrap();
        });
        let won = gort::select! {
            r = l.wait_n(4) => panic!("the wait won: {r:?}"),
            _ = rx.recv() => Instant::now(),
        };
        let _ = won;
        // 1 token refilled in 250 ms; the 4 reserved are back.
        assert!((l.tokens() - 1.0).abs() < 1e-9, "{}", l.tokens());
        // So 4 tokens come at 1 s, as if the lost wait never was.
        assert_eq!(
            timed(l.wait_n(4)).await,
            (Ok(()), Duration::from_millis(750))
        );
    });
}

#[test]
fn a_wait_under_a_timeout_that_fires_leaves_the_limiter_consistent() {
    paused_rt(2).block_on(async {
        let l = Arc::new(lim(2.0, 3));
        l.wait_n(3).await.unwrap(); // empty at 0
                                    // A queued waiter behind the one that will time out keeps its place.
        let behind = {
            let l = l.clone();
            gort::spawn(async move { timed(l.wait_n(1)).await })
        };
        time::advance(Duration::ZERO).await; // it runs and blocks in its wait
                                             // Due at 0.5 + 1.5 = 2 s: gives up at 1 s.
        let r = time::timeout(Duration::from_secs(1), l.wait_n(3)).await;
        assert!(r.is_err());
        // The waiter behind was due at 0.5 s; the 3 tokens of the wait that gave up come
        // back whole (nobody reserved after it): at 1 s, 2 refilled - 1 taken = 1.
        let (got, took) = behind.await.unwrap();
        assert_eq!((got, took), (Ok(()), Duration::from_millis(500)));
        assert!((l.tokens() - 1.0).abs() < 1e-9, "{}", l.tokens());
        // And the pace goes on from there: 3 tokens at 2 s.
        assert_eq!(timed(l.wait_n(3)).await, (Ok(()), Duration::from_secs(1)));
    });
}

#[test]
fn a_dropped_wait_behind_others_gives_back_only_the_tokens_nobody_counted_on() {
    paused_rt(2).block_on(async {
        let l = Arc::new(lim(2.0, 2));
        l.wait_n(2).await.unwrap(); // empty at 0
        let first = {
            let l = l.clone();
            gort::spawn(async move { l.wait_n(2).await }) // due at 1 s
        };
        time::advance(Duration::ZERO).await; // it runs and blocks in its wait
        let second = {
            let l = l.clone();
            gort::spawn(async move { timed(l.wait_n(1)).await }) // due at 1.5 s
        };
        time::advance(Duration::ZERO).await; // it runs and blocks in its wait
        time::advance(Duration::from_millis(250)).await;
        first.abort();
        assert!(first.await.unwrap_err().is_cancelled());
        // `second` counted on the tokens that refill from 1 s to 1.5 s: one of the two
        // stays taken. At 0.25 s: -3 + 0.5 refilled + 1 given back.
        assert!((l.tokens() + 1.5).abs() < 1e-9, "{}", l.tokens());
        let (got, took) = second.await.unwrap();
        assert_eq!((got, took), (Ok(()), Duration::from_millis(1500)));
        // -1.5 + 2.5 refilled by 1.5 s: the token kept for `second` was its own (Go's
        // rule keeps the reservation times that were handed out; it never grants early).
        assert!((l.tokens() - 1.0).abs() < 1e-9, "{}", l.tokens());
    });
}

/// A spike of waiters that all give up, the first queued first: Go's rule alone gives back
/// only the last one's token (each earlier one's is counted on by those behind it) and the
/// next wait would come at 600 ms; once the last is gone, those before it give theirs back in
/// turn, and the limiter is as if nobody had waited.
#[test]
fn a_spike_of_waits_that_all_give_up_leaves_nothing_taken() {
    paused_rt(2).block_on(async {
        let l = Arc::new(lim(10.0, 1));
        let start = Instant::now();
        assert!(l.allow()); // empty at 0
        let mut spike = gort::JoinSet::new();
        for i in 0..5u64 {
            let l = l.clone();
            spike.spawn(async move {
                // Queued in order (due at 100 ms .. 500 ms), giving up in the same order.
                time::sleep(Duration::from_micros(i)).await;
                time::timeout(Duration::from_millis(50), l.wait()).await
            });
        }
        while let Some(r) = spike.join_next().await {
            assert!(r.unwrap().is_err());
        }
        // At about 50 ms: 0.5 refilled, nothing taken.
        assert!((l.tokens() - 0.5).abs() < 1e-3, "{}", l.tokens());
        l.wait().await.unwrap();
        assert_eq!(start.elapsed(), Duration::from_millis(100));
    });
}

const CHURN_R: f64 = 20.0;
const CHURN_BURST: u32 = 3;

/// 16 tasks make 30 attempts each to get 1 to 3 tokens with a random patience (0-400 ms):
/// under a `timeout` (`deadline_aware` false: many waits are dropped midway, before and
/// behind others) or by `wait_deadline` (a failure is immediate; the task then sleeps out its
/// patience). Returns the grants, (virtual instant, tokens), sorted, and when the last task
/// finished.
fn churn(seed: u64, deadline_aware: bool) -> (Vec<(Duration, u32)>, Duration) {
    paused_rt(2).block_on(async move {
        let l = Arc::new(lim(CHURN_R, CHURN_BURST));
        let grants = Arc::new(std::sync::Mutex::new(Vec::new()));
        let start = Instant::now();
        let mut set = gort::JoinSet::new();
        for task in 0..16u64 {
            let (l, grants) = (l.clone(), grants.clone());
            set.spawn(async move {
                let mut x = (seed << 32 | task).wrapping_mul(0x9E37_79B9) | 1; // xorshift64, never 0
                for _ in 0..30 {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    let n = 1 + (x % 3) as u32;
                    let patience = Duration::from_millis((x >> 8) % 400);
                    let got = if deadline_aware {
                        let r = l.wait_deadline(n, Instant::now() + patience).await;
                        if r.is_err() {
                            time::sleep(patience).await;
                        }
                        r.is_ok()
                    } else {
                        time::timeout(patience, l.wait_n(n)).await.is_ok()
                    };
                    if got {
                        grants.lock().unwrap().push((Instant::now() - start, n));
                    }
                }
            });
        }
        while let Some(r) = set.join_next().await {
            r.unwrap();
        }
        let mut all = std::mem::take(&mut *grants.lock().unwrap());
        all.sort();
        (all, start.elapsed())
    })
}

/// The token bucket's bound in every window: at most `burst + r*(t2 - t1)` tokens granted at
/// instants in `[t1, t2]`.
#[track_caller]
fn assert_within_bucket(grants: &[(Duration, u32)], what: &str) {
    for i in 0..grants.len() {
        let mut total = 0;
        for &(at, n) in &grants[i..] {
            total += n;
            let bound = f64::from(CHURN_BURST) + CHURN_R * (at - grants[i].0).as_secs_f64();
            assert!(
                f64::from(total) <= bound + 1e-6,
                "{what}: {total} tokens in [{:?}, {at:?}]",
                grants[i].0
            );
        }
    }
}

/// What the cancels of dropped waits give back never lets the limiter grant more than the
/// burst plus the refill in any window (Go's rule: only the tokens no later wait counted on).
#[test]
fn waits_dropped_midway_never_grant_beyond_the_bucket_in_any_window() {
    for seed in 1..=4 {
        let (grants, _) = churn(seed, false);
        assert!(!grants.is_empty(), "seed {seed}: nothing granted");
        assert_within_bucket(&grants, &format!("timeout, seed {seed}"));
    }
}

/// Told their deadline, waits that cannot make it take nothing, and the rate is used: at
/// least 3/4 of `burst + r*T` tokens granted (all but one in the 4 runs seen, where the same
/// attempts under `timeout` got 5 to 7 tokens of about 140: TIMERS.md, "gort::time::rate").
#[test]
fn deadline_aware_waits_use_the_rate() {
    for seed in 1..=4 {
        let (grants, took) = churn(seed, true);
        assert_within_bucket(&grants, &format!("wait_deadline, seed {seed}"));
        let granted: u32 = grants.iter().map(|g| g.1).sum();
        let capacity = f64::from(CHURN_BURST) + CHURN_R * took.as_secs_f64();
        assert!(
            f64::from(granted) >= 0.75 * capacity,
            "seed {seed}: {granted} of {capacity:.0}"
        );
    }
}

#[test]
fn waits_keep_the_pace_on_the_real_clock() {
    // Generous bounds: 20 waits at 100/s after a burst of 1 take at least 190 ms.
    let rt = gort::Runtime::new().unwrap();
    rt.block_on(async {
        let l = lim(100.0, 1);
        let start = std::time::Instant::now();
        for _ in 0..20 {
            l.wait().await.unwrap();
        }
        let took = start.elapsed();
        assert!(took >= Duration::from_millis(189), "{took:?}");
        assert!(took < Duration::from_secs(10), "{took:?}");
    });
}
