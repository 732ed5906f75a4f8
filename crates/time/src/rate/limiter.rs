//! [`Limiter`]: the public face of a [`Bucket`] under one short lock.

use std::fmt;
use std::time::Duration;

use parking_lot::Mutex;

use super::bucket::Bucket;
use super::reservation::Reservation;
use super::Limit;
use crate::Instant;

/// A token bucket of `burst` tokens, full at first, refilled at `limit` tokens per second:
/// Go's `rate.Limiter`. See the [module docs](super) for the three ways to take tokens.
///
/// Every method takes `&self`; share one limiter between tasks with an `Arc`, or a `static`
/// `LazyLock`.
/// The `*_at` methods take the instant to count at (Go's `AllowN(now, n)`), for callers that
/// already read the clock; the others read [`Instant::now`].
///
/// # Examples
///
/// ```
/// use gort::time::rate::{Limit, Limiter};
/// use gort::time::Instant;
/// use std::time::Duration;
///
/// let limiter = Limiter::new(Limit::per_second(10.0), 3);
/// let t0 = Instant::now();
/// assert!(limiter.allow_n(t0, 3)); // the burst, at once
/// assert!(!limiter.allow_n(t0, 1)); // empty
/// assert!(limiter.allow_n(t0 + Duration::from_millis(100), 1)); // one token per 100 ms
/// ```
pub struct Limiter {
    state: Mutex<Bucket>,
}

impl Limiter {
    /// A limiter that refills at `limit` tokens per second up to `burst` tokens, and starts
    /// full (Go's `rate.NewLimiter(r, b)`). A zero `burst` allows nothing unless `limit` is
    /// [`Limit::INF`].
    ///
    /// # Examples
    ///
    /// ```
    /// use gort::time::rate::{Limit, Limiter};
    ///
    /// let limiter = Limiter::new(Limit::per_second(5.0), 2);
    /// assert_eq!((limiter.limit(), limiter.burst()), (Limit::per_second(5.0), 2));
    /// assert_eq!(limiter.tokens(), 2.0);
    /// ```
    pub fn new(limit: impl Into<Limit>, burst: u32) -> Limiter {
        Limiter {
            state: Mutex::new(Bucket::new(limit.into(), burst)),
        }
    }

    /// The refill rate (Go's `Limit()`).
    pub fn limit(&self) -> Limit {
        self.state.lock().limit
    }

    /// The bucket's size: the most tokens one call can take (Go's `Burst()`).
    pub fn burst(&self) -> u32 {
        self.state.lock().burst
    }

    /// The tokens available now (Go's `Tokens()`); negative while reservations wait.
    pub fn tokens(&self) -> f64 {
        self.tokens_at(Instant::now())
    }

    /// The tokens available at `now` (Go's `TokensAt`), without changing anything.
    pub fn tokens_at(&self, now: Instant) -> f64 {
        self.state.lock().tokens_at(now)
    }

    /// Changes the refill rate from now on (Go's `SetLimit`). Tokens already reserved keep
    /// the time to act they were given.
    ///
    /// # Examples
    ///
    /// ```
    /// use gort::time::rate::{Limit, Limiter};
    ///
    /// let limiter = Limiter::new(Limit::per_second(1.0), 1);
    /// limiter.set_limit(Limit::INF);
    /// assert!((0..1000).all(|_| limiter.allow()));
    /// ```
    pub fn set_limit(&self, limit: impl Into<Limit>) {
        let limit = limit.into();
        self.with_state_now(|st, now| {
            st.advance(now);
            st.limit = limit;
        });
    }

    /// [`set_limit`](Limiter::set_limit) at `now` (Go's `SetLimitAt`): the tokens up to
    /// `now` are counted at the old rate.
    pub fn set_limit_at(&self, now: Instant, limit: impl Into<Limit>) {
        let limit = limit.into();
        self.with_state(|st| {
            st.advance(now);
            st.limit = limit;
        });
    }

    /// Changes the bucket's size from now on (Go's `SetBurst`); tokens above it are dropped.
    ///
    /// # Examples
    ///
    /// ```
    /// use gort::time::rate::{Limit, Limiter};
    ///
    /// let limiter = Limiter::new(Limit::ZERO, 5);
    /// limiter.set_burst(2);
    /// assert!(!limiter.allow_n(gort::time::Instant::now(), 3));
    /// ```
    pub fn set_burst(&self, burst: u32) {
        self.with_state_now(|st, now| st.set_burst(now, burst));
    }

    /// [`set_burst`](Limiter::set_burst) at `now` (Go's `SetBurstAt`).
    pub fn set_burst_at(&self, now: Instant, burst: u32) {
        self.with_state(|st| st.set_burst(now, burst));
    }

    /// Takes one token if there is one now (Go's `Allow`); never waits.
    ///
    /// # Examples
    ///
    /// ```
    /// use gort::time::rate::{Limit, Limiter};
    ///
    /// let limiter = Limiter::new(Limit::per_second(1.0), 2);
    /// assert!(limiter.allow() && limiter.allow());
    /// assert!(!limiter.allow()); // the next one in a second
    /// ```
    pub fn allow(&self) -> bool {
        self.with_state_now(|st, now| st.reserve(now, 1, Duration::ZERO).is_ok())
    }

    /// Takes `n` tokens if they are all there at `now`, else takes none (Go's `AllowN`): for
    /// events to drop or skip beyond the limit.
    pub fn allow_n(&self, now: Instant, n: u32) -> bool {
        self.state.lock().reserve(now, n, Duration::ZERO).is_ok()
    }

    /// Reserves one token now (Go's `Reserve`); see [`reserve_n`](Limiter::reserve_n).
    pub fn reserve(&self) -> Reservation<'_> {
        let grant = self.with_state_now(|st, now| st.reserve(now, 1, Duration::MAX).ok());
        Reservation::new(self, grant)
    }

    /// Reserves `n` tokens at `now` (Go's `ReserveN`): the [`Reservation`] says how long to
    /// wait before acting; its tokens are counted as taken from then on, until
    /// [`cancel`](Reservation::cancel)ed. It is not [`ok`](Reservation::ok) (and takes
    /// nothing) when `n` exceeds the burst or the limit is zero and the bucket is short.
    ///
    /// # Examples
    ///
    /// ```
    /// use gort::time::rate::{Limit, Limiter};
    /// use gort::time::Instant;
    /// use std::time::Duration;
    ///
    /// let limiter = Limiter::new(Limit::per_second(10.0), 2);
    /// let now = Instant::now();
    /// assert_eq!(limiter.reserve_n(now, 2).delay_from(now), Duration::ZERO);
    /// let r = limiter.reserve_n(now, 2);
    /// assert_eq!(r.delay_from(now), Duration::from_millis(200));
    /// assert!(!limiter.reserve_n(now, 3).ok()); // more than the burst
    /// ```
    pub fn reserve_n(&self, now: Instant, n: u32) -> Reservation<'_> {
        let grant = self.state.lock().reserve(now, n, Duration::MAX).ok();
        Reservation::new(self, grant)
    }

    /// Runs `f` on the state under the lock (the lock is never held across user code).
    pub(super) fn with_state<T>(&self, f: impl FnOnce(&mut Bucket) -> T) -> T {
        f(&mut self.state.lock())
    }

    /// Runs `f` on the state under the lock at the clock's `now`, read under the lock and
    /// never before the instant the count stands at. The calls without an explicit instant
    /// go through here: a caller that read the clock before it waited for the lock would
    /// count at an instant older than one already counted, and Go's rule for an instant
    /// from the past (the count moves back to it) would count the refill in between twice
    /// (4 threads calling `allow` for 200 ms at 20,000 a second got 5 tokens beyond the
    /// burst and the refill). The clamp covers a reading that trails another thread's by
    /// up to `gort_timer::CLOCK_TRAIL`.
    pub(super) fn with_state_now<T>(&self, f: impl FnOnce(&mut Bucket, Instant) -> T) -> T {
        let mut st = self.state.lock();
        let now = Instant::now().max(st.last);
        f(&mut st, now)
    }
}

impl fmt::Debug for Limiter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let st = self.state.lock();
        f.debug_struct("Limiter")
            .field("limit", &st.limit)
            .field("burst", &st.burst)
            .field("tokens", &st.tokens)
            .field("last", &st.last)
            .finish()
    }
}
