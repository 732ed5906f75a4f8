//! [`Reservation`]: tokens taken now for an event later (Go's `rate.Reservation`).

use std::fmt;
use std::time::Duration;

use super::bucket::Grant;
use super::limiter::Limiter;
use crate::Instant;

/// Tokens a [`Limiter`] granted for an event that may happen after a delay (Go's
/// `rate.Reservation`), from [`Limiter::reserve`] or [`Limiter::reserve_n`].
///
/// The tokens count as taken from the moment of the reservation: the holder waits for
/// [`delay`](Reservation::delay) and acts, or gives them back with
/// [`cancel`](Reservation::cancel). Dropping a reservation does not give them back (the
/// holder may act without keeping it), as in Go.
///
/// # Examples
///
/// ```
/// use gort::time::rate::{Limit, Limiter};
/// use std::time::Duration;
///
/// let rt = gort::Builder::new().start_paused(true).build().unwrap();
/// rt.block_on(async {
///     let limiter = Limiter::new(Limit::per_second(2.0), 1);
///     assert!(limiter.allow());
///     let r = limiter.reserve();
///     assert!(r.ok());
///     assert_eq!(r.delay(), Duration::from_millis(500));
///     gort::time::sleep(r.delay()).await;
///     // ... act ...
/// });
/// ```
#[must_use = "a reservation takes tokens: wait for its delay and act, or cancel it"]
pub struct Reservation<'a> {
    limiter: &'a Limiter,
    grant: Option<Grant>,
}

impl<'a> Reservation<'a> {
    pub(super) fn new(limiter: &'a Limiter, grant: Option<Grant>) -> Self {
        Reservation { limiter, grant }
    }

    /// Whether the tokens were granted (Go's `OK`): false when more than the burst was
    /// asked for, or the limit is zero and the bucket is short. A reservation that is not
    /// ok took nothing; its delay is [`Duration::MAX`] and cancelling it does nothing.
    pub fn ok(&self) -> bool {
        self.grant.is_some()
    }

    /// The instant the holder may act at, if [`ok`](Reservation::ok).
    pub fn time_to_act(&self) -> Option<Instant> {
        self.grant.map(|g| g.time_to_act)
    }

    /// How long to wait from now before acting (Go's `Delay`): zero means at once,
    /// [`Duration::MAX`] that the reservation is not [`ok`](Reservation::ok).
    pub fn delay(&self) -> Duration {
        self.delay_from(Instant::now())
    }

    /// How long to wait from `now` before acting (Go's `DelayFrom`).
    pub fn delay_from(&self, now: Instant) -> Duration {
        match self.grant {
            Some(g) => g.time_to_act.duration_since(now),
            None => Duration::MAX,
        }
    }

    /// Gives the tokens back now: the holder will not act (Go's `Cancel`). Nothing comes
    /// back once the time to act has passed, so a reservation with no delay is spent as
    /// soon as the clock moves; see [`cancel_at`](Reservation::cancel_at).
    ///
    /// # Examples
    ///
    /// ```
    /// use gort::time::rate::{Limit, Limiter};
    /// use gort::time::Instant;
    ///
    /// let limiter = Limiter::new(Limit::per_second(1.0), 2);
    /// let now = Instant::now();
    /// assert!(limiter.allow_n(now, 2));
    /// let r = limiter.reserve_n(now, 2); // due in 2 s
    /// assert_eq!(limiter.tokens_at(now), -2.0);
    /// r.cancel_at(now); // changed our mind
    /// assert_eq!(limiter.tokens_at(now), 0.0);
    /// ```
    pub fn cancel(self) {
        if let Some(grant) = self.grant {
            self.limiter
                .with_state_now(|st, now| st.cancel(&grant, now));
        }
    }

    /// Gives the tokens back as of `now` (Go's `CancelAt`), as far as other reservations
    /// allow: the tokens that reservations made after this one were granted stay taken
    /// (until those are canceled too: then they come back). Nothing is given back once the
    /// time to act has passed (the holder may have acted).
    pub fn cancel_at(self, now: Instant) {
        if let Some(grant) = self.grant {
            self.limiter.with_state(|st| st.cancel(&grant, now));
        }
    }
}

impl fmt::Debug for Reservation<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Reservation")
            .field("ok", &self.ok())
            .field("time_to_act", &self.time_to_act())
            .field("tokens", &self.grant.map_or(0, |g| g.tokens))
            .finish()
    }
}
