//! [`Limiter`]: the bucket's state and the operations that take, give back or reshape its
//! tokens, each under one short lock.

use std::fmt;
use std::time::Duration;

use parking_lot::Mutex;

use super::reservation::Reservation;
use super::Limit;
use crate::Instant;

/// A token bucket of `burst` tokens, full at first, refilled at `limit` tokens per second:
/// Go's `rate.Limiter`. See the [module docs](super) for the three ways to take tokens.
///
/// Every method takes `&self`; share one limiter between tasks with an `Arc` or a `static`.
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
    state: Mutex<State>,
}

/// What Go's `Limiter` holds under its mutex.
#[derive(Clone, Copy, Debug)]
pub(super) struct State {
    pub(super) limit: Limit,
    pub(super) burst: u32,
    /// The tokens at `last` (negative while reservations wait for tokens to come).
    tokens: f64,
    /// The last instant `tokens` was counted at.
    last: Instant,
    /// The latest instant any reservation acts at (past or future): how [`State::cancel`]
    /// knows how many later reservations counted on the tokens of the one it cancels.
    last_event: Instant,
}

/// A new limiter counts its (full) bucket from so long ago that any refill is capped.
const LONG_AGO: Instant = Instant::from_nanos(i64::MIN);

/// Tokens granted by a reservation, and when they may be used.
#[derive(Clone, Copy, Debug)]
pub(super) struct Grant {
    pub(super) tokens: u32,
    pub(super) time_to_act: Instant,
    /// The limit when granted: cancel gives back what this rate would have refilled.
    pub(super) limit: Limit,
}

/// Why a reservation was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Refusal {
    /// More tokens than the burst: the bucket never holds that many.
    Burst,
    /// The tokens never come: a zero limit (or a wait too long to represent).
    Never,
    /// The tokens come after the longest wait the caller accepts.
    TooLate,
}

impl State {
    /// The tokens at `now`: those at `last` plus the refill since, capped at the burst
    /// (Go's `advance`). A `now` before `last` (an explicit instant from the past) counts no
    /// refill, and the caller then moves `last` back to it, as Go does.
    fn tokens_at(&self, now: Instant) -> f64 {
        let elapsed = now.duration_since(self.last.min(now));
        (self.tokens + self.limit.tokens_in(elapsed)).min(f64::from(self.burst))
    }

    /// Brings the count up to `now` (before a change of limit, burst or tokens).
    fn advance(&mut self, now: Instant) {
        self.tokens = self.tokens_at(now);
        self.last = now;
    }

    /// Go's `reserveN`: takes `n` tokens at `now`, to be used once they have all come, if
    /// that is within `max_wait`; refuses and changes nothing otherwise.
    pub(super) fn reserve(
        &mut self,
        now: Instant,
        n: u32,
        max_wait: Duration,
    ) -> Result<Grant, Refusal> {
        if self.limit.is_inf() {
            // Nothing is counted under an infinite limit, and the burst does not apply.
            return Ok(Grant {
                tokens: n,
                time_to_act: now,
                limit: self.limit,
            });
        }
        if n > self.burst {
            return Err(Refusal::Burst);
        }
        let left = self.tokens_at(now) - f64::from(n);
        let wait = if left < 0.0 {
            self.limit.time_for(-left).ok_or(Refusal::Never)?
        } else {
            Duration::ZERO
        };
        if wait > max_wait {
            return Err(Refusal::TooLate);
        }
        let time_to_act = now + wait;
        self.tokens = left;
        self.last = now;
        self.last_event = time_to_act;
        Ok(Grant {
            tokens: n,
            time_to_act,
            limit: self.limit,
        })
    }

    /// Go's `CancelAt`: gives back the tokens of `grant` that no later reservation has
    /// counted on, unless its time to act has passed (the tokens are taken as used then).
    pub(super) fn cancel(&mut self, grant: &Grant, now: Instant) {
        if self.limit.is_inf() || grant.limit.is_inf() || grant.tokens == 0 {
            return; // nothing was counted
        }
        if grant.time_to_act < now {
            return; // too late: the holder may have acted
        }
        // Reservations made after this one act up to `last_event`, and were granted the
        // tokens that refill between this one's time to act and theirs: those stay taken.
        let counted_on = grant
            .limit
            .tokens_in(self.last_event.duration_since(grant.time_to_act));
        let restore = f64::from(grant.tokens) - counted_on;
        if restore <= 0.0 {
            return;
        }
        self.advance(now);
        self.tokens = (self.tokens + restore).min(f64::from(self.burst));
        if grant.time_to_act == self.last_event {
            // It was the latest reservation: the latest event is the one before it, if that
            // is still to come.
            let prev = grant
                .limit
                .time_for(f64::from(grant.tokens))
                .and_then(|back| grant.time_to_act.checked_sub(back));
            if let Some(prev) = prev.filter(|&p| p >= now) {
                self.last_event = prev;
            }
        }
    }
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
            state: Mutex::new(State {
                limit: limit.into(),
                burst,
                tokens: f64::from(burst),
                last: LONG_AGO,
                last_event: LONG_AGO,
            }),
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
        self.set_limit_at(Instant::now(), limit);
    }

    /// [`set_limit`](Limiter::set_limit) at `now` (Go's `SetLimitAt`): the tokens up to
    /// `now` are counted at the old rate.
    pub fn set_limit_at(&self, now: Instant, limit: impl Into<Limit>) {
        let limit = limit.into();
        let mut st = self.state.lock();
        st.advance(now);
        st.limit = limit;
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
        self.set_burst_at(Instant::now(), burst);
    }

    /// [`set_burst`](Limiter::set_burst) at `now` (Go's `SetBurstAt`).
    pub fn set_burst_at(&self, now: Instant, burst: u32) {
        let mut st = self.state.lock();
        st.advance(now);
        st.burst = burst;
        st.tokens = st.tokens.min(f64::from(burst));
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
        self.allow_n(Instant::now(), 1)
    }

    /// Takes `n` tokens if they are all there at `now`, else takes none (Go's `AllowN`): for
    /// events to drop or skip beyond the limit.
    pub fn allow_n(&self, now: Instant, n: u32) -> bool {
        self.state.lock().reserve(now, n, Duration::ZERO).is_ok()
    }

    /// Reserves one token now (Go's `Reserve`); see [`reserve_n`](Limiter::reserve_n).
    pub fn reserve(&self) -> Reservation<'_> {
        self.reserve_n(Instant::now(), 1)
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
    pub(super) fn with_state<T>(&self, f: impl FnOnce(&mut State) -> T) -> T {
        f(&mut self.state.lock())
    }
}

impl fmt::Debug for Limiter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let st = *self.state.lock();
        f.debug_struct("Limiter")
            .field("limit", &st.limit)
            .field("burst", &st.burst)
            .field("tokens", &st.tokens)
            .field("last", &st.last)
            .finish()
    }
}
