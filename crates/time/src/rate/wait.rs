//! Waiting for tokens: [`Limiter::wait`], [`Limiter::wait_n`], [`Limiter::wait_deadline`],
//! [`Limiter::wait_ctx`] (Go's `Wait`/`WaitN`), cancel safe.

use std::error::Error as StdError;
use std::fmt;
use std::future::{poll_fn, Future};
use std::pin::pin;
use std::task::Poll;
use std::time::Duration;

use gort_chan::Receiver;

use super::bucket::{Grant, Refusal};
use super::limiter::Limiter;
use crate::{sleep_until, Instant};

/// What [`Limiter::wait_ctx`] needs of a context: its deadline and its done channel.
/// `gort::context::Context` implements it (the context crate builds on this one, so the
/// limiter names it through this trait).
pub trait WaitContext: Sync {
    /// The instant the context will be done at, if it has one.
    fn deadline(&self) -> Option<Instant>;
    /// A channel that yields or closes once the context is done.
    fn done(&self) -> &Receiver<()>;
    /// Whether the context is done already.
    fn is_done(&self) -> bool;
}

/// Why a wait for tokens failed. Every failure but [`Done`](WaitError::Done) is reported at
/// once, without waiting and without taking any token.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum WaitError {
    /// More tokens than the burst were asked for: the bucket never holds that many (an
    /// infinite limit ignores the burst).
    BurstExceeded {
        /// Tokens asked for.
        n: u32,
        /// The limiter's burst.
        burst: u32,
    },
    /// The tokens would come after the deadline (the context's, or
    /// [`wait_deadline`](Limiter::wait_deadline)'s).
    WouldExceedDeadline {
        /// Tokens asked for.
        n: u32,
    },
    /// The tokens would never come: the limit is zero and the bucket holds too few.
    NeverAvailable {
        /// Tokens asked for.
        n: u32,
    },
    /// The context was done first (see its `err()` for why); the reserved tokens were given
    /// back.
    Done,
}

impl fmt::Display for WaitError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            WaitError::BurstExceeded { n, burst } => {
                write!(f, "rate: wait(n={n}) exceeds limiter's burst {burst}")
            }
            WaitError::WouldExceedDeadline { n } => {
                write!(f, "rate: wait(n={n}) would exceed context deadline")
            }
            WaitError::NeverAvailable { n } => {
                write!(
                    f,
                    "rate: wait(n={n}) can never be satisfied at a zero limit"
                )
            }
            WaitError::Done => f.write_str("rate: context done before the tokens came"),
        }
    }
}

impl StdError for WaitError {}

impl Limiter {
    /// Waits until one token is available and takes it: [`wait_n(1)`](Limiter::wait_n).
    ///
    /// # Examples
    ///
    /// ```
    /// use gort::time::rate::{Limit, Limiter};
    /// use std::time::Duration;
    ///
    /// let rt = gort::Builder::new().start_paused(true).build().unwrap();
    /// rt.block_on(async {
    ///     let limiter = Limiter::new(Limit::per_second(10.0), 1);
    ///     let start = gort::time::Instant::now();
    ///     for _ in 0..11 {
    ///         limiter.wait().await.unwrap();
    ///     }
    ///     assert_eq!(start.elapsed(), Duration::from_secs(1));
    /// });
    /// ```
    pub async fn wait(&self) -> Result<(), WaitError> {
        self.wait_n(1).await
    }

    /// Waits until `n` tokens are available and takes them (Go's `WaitN` without a
    /// context). Fails at once if `n` exceeds the burst (unless the limit is infinite) or the
    /// tokens can never come (a zero limit).
    ///
    /// Cancel safe: dropped before it completes, it gives back the tokens it reserved (Go's
    /// `Reservation.Cancel`). So it composes with [`timeout`](crate::timeout) and `select!`.
    /// But a wait dropped while later waits queue behind it gives back only the tokens they
    /// did not count on (Go's rule, which keeps the burst bound in every window; the rest
    /// comes back once they are gone too): under many waits that give up midway, the useful
    /// rate falls. A wait with a deadline is better
    /// told it, with [`wait_deadline`](Limiter::wait_deadline) or
    /// [`wait_ctx`](Limiter::wait_ctx): one that cannot make it then fails at once, taking
    /// nothing.
    ///
    /// ```
    /// use gort::time::rate::{Limit, Limiter};
    /// use std::time::Duration;
    ///
    /// let rt = gort::Builder::new().start_paused(true).build().unwrap();
    /// rt.block_on(async {
    ///     let limiter = Limiter::new(Limit::per_second(1.0), 3);
    ///     limiter.wait_n(3).await.unwrap(); // the whole burst
    ///     let late = gort::time::timeout(Duration::from_millis(500), limiter.wait_n(2)).await;
    ///     assert!(late.is_err()); // its 2 tokens would take 2 s: given back at 0.5 s
    ///     assert_eq!(limiter.tokens(), 0.5);
    /// });
    /// ```
    pub async fn wait_n(&self, n: u32) -> Result<(), WaitError> {
        self.wait_for(n, None, None).await
    }

    /// Waits until `n` tokens are available and takes them, if that is by `deadline`; fails at
    /// once with [`WaitError::WouldExceedDeadline`], taking nothing, if it is not (Go's
    /// `WaitN` with a context deadline, without the context). It never waits past
    /// `deadline`, so it needs no [`timeout`](crate::timeout) around it.
    ///
    /// # Examples
    ///
    /// ```
    /// use gort::time::rate::{Limit, Limiter, WaitError};
    /// use gort::time::Instant;
    /// use std::time::Duration;
    ///
    /// let rt = gort::Builder::new().start_paused(true).build().unwrap();
    /// rt.block_on(async {
    ///     let limiter = Limiter::new(Limit::per_second(10.0), 1);
    ///     let soon = Instant::now() + Duration::from_millis(150);
    ///     assert_eq!(limiter.wait_deadline(1, soon).await, Ok(())); // at once
    ///     assert_eq!(limiter.wait_deadline(1, soon).await, Ok(())); // at 100 ms
    ///     let late = WaitError::WouldExceedDeadline { n: 1 };
    ///     assert_eq!(limiter.wait_deadline(1, soon).await, Err(late)); // 200 ms > 150 ms
    ///     assert_eq!(Instant::now(), soon - Duration::from_millis(50)); // failed at once
    /// });
    /// ```
    pub async fn wait_deadline(&self, n: u32, deadline: Instant) -> Result<(), WaitError> {
        self.wait_for(n, Some(deadline), None).await
    }

    /// Waits until `n` tokens are available and takes them, within the context `ctx` (Go's
    /// `WaitN(ctx, n)`): fails at once, taking nothing, if `ctx` is done already or the
    /// tokens would come after its deadline; returns [`WaitError::Done`], giving the tokens
    /// back, if `ctx` is canceled meanwhile.
    ///
    /// # Examples
    ///
    /// ```
    /// use gort::context::{self, Context};
    /// use gort::time::rate::{Limit, Limiter, WaitError};
    /// use std::time::Duration;
    ///
    /// let rt = gort::Builder::new().start_paused(true).build().unwrap();
    /// rt.block_on(async {
    ///     let limiter = Limiter::new(Limit::per_second(1.0), 1);
    ///     let (ctx, cancel) = context::with_cancel(&Context::background());
    ///     limiter.wait_ctx(&ctx, 1).await.unwrap();
    ///     gort::spawn(async move {
    ///         gort::time::sleep(Duration::from_millis(300)).await;
    ///         cancel.cancel();
    ///     });
    ///     assert_eq!(limiter.wait_ctx(&ctx, 1).await, Err(WaitError::Done));
    ///     assert_eq!(ctx.err(), Some(context::Error::Canceled));
    ///     // The token given back: 0.3 s of refill, as if it was never asked for.
    ///     assert!((limiter.tokens() - 0.3).abs() < 1e-9);
    /// });
    /// ```
    pub async fn wait_ctx(&self, ctx: &impl WaitContext, n: u32) -> Result<(), WaitError> {
        if ctx.is_done() {
            return Err(WaitError::Done);
        }
        self.wait_for(n, ctx.deadline(), Some(ctx.done())).await
    }

    async fn wait_for(
        &self,
        n: u32,
        deadline: Option<Instant>,
        done: Option<&Receiver<()>>,
    ) -> Result<(), WaitError> {
        let (grant, burst, now) = self.with_state_now(|st, now| {
            let max_wait = deadline.map_or(Duration::MAX, |d| d.duration_since(now));
            (st.reserve(now, n, max_wait), st.burst, now)
        });
        let grant = grant.map_err(|refusal| match refusal {
            Refusal::Burst => WaitError::BurstExceeded { n, burst },
            Refusal::Never => WaitError::NeverAvailable { n },
            Refusal::TooLate => WaitError::WouldExceedDeadline { n },
        })?;
        if grant.time_to_act <= now {
            return Ok(());
        }
        let held = Held {
            limiter: self,
            grant: Some(grant),
        };
        let mut sleep = pin!(sleep_until(grant.time_to_act));
        let mut done = pin!(done.map(Receiver::recv));
        let tokens_came = poll_fn(|cx| {
            // The tokens first: when both are ready, the caller has its tokens.
            if sleep.as_mut().poll(cx).is_ready() {
                return Poll::Ready(true);
            }
            match done.as_mut().as_pin_mut().map(|done| done.poll(cx)) {
                Some(Poll::Ready(_)) => Poll::Ready(false),
                _ => Poll::Pending,
            }
        })
        .await;
        if tokens_came {
            held.used();
            Ok(())
        } else {
            Err(WaitError::Done) // `held` gives the tokens back
        }
    }
}

/// Reserved tokens a wait has not used yet: dropped (the wait canceled, or its future
/// dropped), it gives them back as of the instant of the drop.
struct Held<'a> {
    limiter: &'a Limiter,
    grant: Option<Grant>,
}

impl Held<'_> {
    fn used(mut self) {
        self.grant = None;
    }
}

impl Drop for Held<'_> {
    fn drop(&mut self) {
        if let Some(grant) = self.grant.take() {
            self.limiter
                .with_state_now(|st, now| st.cancel(&grant, now));
        }
    }
}
