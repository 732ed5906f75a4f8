//! A token-bucket rate limiter: Go's `golang.org/x/time/rate` on gort's clock and timers
//! (`gort::time::rate`).
//!
//! A [`Limiter`] holds a bucket of up to `burst` tokens, full at first, refilled continuously
//! at `limit` tokens per second. Each event takes one token (or `n`). The three ways to ask
//! differ in what happens when the tokens are not there:
//!
//! | Go                          | gort                                         | without tokens         |
//! |-----------------------------|----------------------------------------------|------------------------|
//! | `lim.Allow()`, `AllowN`     | [`allow`](Limiter::allow), [`allow_n`](Limiter::allow_n) | false, nothing taken |
//! | `lim.Reserve()`, `ReserveN` | [`reserve`](Limiter::reserve), [`reserve_n`](Limiter::reserve_n) | a [`Reservation`] for later: act after its [`delay`](Reservation::delay), or [`cancel`](Reservation::cancel) it |
//! | `lim.Wait(ctx)`, `WaitN`    | [`wait`](Limiter::wait), [`wait_n`](Limiter::wait_n), [`wait_deadline`](Limiter::wait_deadline), [`wait_ctx`](Limiter::wait_ctx) | sleeps until they come |
//! | `rate.Inf`, `rate.Every(d)` | [`Limit::INF`], [`every`]                   |                        |
//! | `SetLimit`, `SetBurst`      | [`set_limit`](Limiter::set_limit), [`set_burst`](Limiter::set_burst) |    |
//!
//! Go's semantics, and where gort differs:
//!
//! - Tokens are counted in `f64` as in Go; a wait is rounded to the nearest nanosecond (Go
//!   truncates), so that float error never grants a token a nanosecond early or late.
//! - A zero [`Limit`] never refills: the tokens in the bucket (full at first) can be used,
//!   and then nothing more (Go instead lowers the burst as they are used). A wait for
//!   tokens that can therefore never come fails at once ([`WaitError::NeverAvailable`]).
//! - The waits are cancel safe: a [`wait`](Limiter::wait) future dropped before it completes
//!   (the losing branch of a `select!`, a [`timeout`](crate::timeout) that fired, an
//!   aborted task) gives its tokens back as Go's `Reservation.Cancel` does. As in Go, only
//!   the tokens that waits queued behind it did not count on come back (so that no window
//!   ever sees more than the burst); beyond Go, the rest comes back once every wait behind
//!   it is gone too. So a wait with a deadline is better told it
//!   ([`wait_deadline`](Limiter::wait_deadline), [`wait_ctx`](Limiter::wait_ctx)): it then
//!   fails at once when it cannot make it, instead of queueing, giving up, and leaving a
//!   hole in the queue that nobody can use while waits behind it remain.
//! - The calls without an instant (`allow`, `reserve`, the waits, `cancel`, `set_limit`,
//!   `set_burst`) read the clock under the limiter's lock and never before the instant the
//!   count stands at. Go reads it before the lock, so under contention a caller can count
//!   at an instant older than one already counted, which moves the count back (Go's rule
//!   for an explicit instant from the past, which the `_at`/`_n` calls keep) and grants the
//!   refill in between twice.
//! - Waiting sleeps on gort's timers ([`sleep_until`](crate::sleep_until)), so a paused
//!   clock ([`pause`](crate::pause), [`advance`](crate::advance)) drives it in tests.
//! - `wait_ctx` takes anything with a deadline and a done channel ([`WaitContext`]), which
//!   `gort::context::Context` is: a wait that would end after the context's deadline fails
//!   at once, and one whose context is canceled returns [`WaitError::Done`] and gives its
//!   tokens back.
//!
//! One limiter is shared by every task that uses it (its methods take `&self`: put it in an
//! `Arc`, or a `static` `LazyLock`). Its state sits behind one short lock that no user code
//! runs under.
//!
//! # Examples
//!
//! A server that serves at most 100 requests per second, with bursts of 20, and answers the
//! rest with "busy" at once:
//!
//! ```
//! use gort::time::rate::{Limit, Limiter};
//! use std::sync::Arc;
//!
//! // A paused clock keeps the example exact: no token refills while it runs.
//! let rt = gort::Builder::new().start_paused(true).build().unwrap();
//! rt.block_on(async {
//!     let listener = gort::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
//!     let addr = listener.local_addr().unwrap();
//!     let limiter = Arc::new(Limiter::new(Limit::per_second(100.0), 20));
//!     gort::spawn(async move {
//!         loop {
//!             let (conn, _) = listener.accept().await.unwrap();
//!             let limiter = limiter.clone();
//!             gort::spawn(async move {
//!                 let reply: &[u8] = if limiter.allow() { b"ok\n" } else { b"busy\n" };
//!                 let _ = conn.write_all(reply).await;
//!             });
//!         }
//!     });
//!     // 30 clients at once: the burst of 20 is served, the others are told to come back.
//!     let mut served = 0;
//!     for _ in 0..30 {
//!         let conn = gort::net::TcpStream::connect(addr).await.unwrap();
//!         let mut buf = [0u8; 8];
//!         let n = conn.read(&mut buf).await.unwrap();
//!         served += usize::from(&buf[..n] == b"ok\n");
//!     }
//!     assert_eq!(served, 20);
//! });
//! ```
//!
//! A client that paces its calls instead, and gives up on a call whose turn would come after
//! its context's deadline:
//!
//! ```
//! use gort::context::{self, Context};
//! use gort::time::rate::{every, Limiter, WaitError};
//! use std::time::Duration;
//!
//! let rt = gort::Builder::new().start_paused(true).build().unwrap();
//! rt.block_on(async {
//!     let limiter = Limiter::new(every(Duration::from_millis(100)), 1); // 10 per second
//!     let start = gort::time::Instant::now();
//!     for _ in 0..5 {
//!         limiter.wait().await.unwrap();
//!     }
//!     assert_eq!(start.elapsed(), Duration::from_millis(400)); // the first one at once
//!
//!     let (ctx, _cancel) = context::with_timeout(&Context::background(), Duration::from_millis(50));
//!     assert_eq!(limiter.wait_ctx(&ctx, 1).await, Err(WaitError::WouldExceedDeadline { n: 1 }));
//!     assert_eq!(start.elapsed(), Duration::from_millis(400)); // failed without waiting
//! });
//! ```

mod bucket;
mod limiter;
mod reservation;
mod wait;

use std::fmt;
use std::time::Duration;

use crate::Instant;

pub use limiter::Limiter;
pub use reservation::Reservation;
pub use wait::{WaitContext, WaitError};

/// The rate a [`Limiter`] refills at, in tokens (events) per second: Go's `rate.Limit`.
///
/// Never negative: [`Limit::per_second`] takes a negative or NaN rate as zero.
///
/// # Examples
///
/// ```
/// use gort::time::rate::{every, Limit};
/// use std::time::Duration;
///
/// assert_eq!(every(Duration::from_millis(100)), Limit::per_second(10.0));
/// assert_eq!(every(Duration::ZERO), Limit::INF);
/// assert_eq!(Limit::per_second(-1.0), Limit::ZERO);
/// ```
#[derive(Clone, Copy, PartialEq, PartialOrd)]
pub struct Limit(f64);

impl Limit {
    /// The infinite limit (Go's `rate.Inf`): every event is allowed at once, whatever the
    /// burst (even zero), and nothing is counted.
    pub const INF: Limit = Limit(f64::MAX);

    /// No refill: only the tokens already in the bucket can be used.
    pub const ZERO: Limit = Limit(0.0);

    /// `r` tokens per second. A negative or NaN `r` is zero; `f64::INFINITY` is [`Limit::INF`].
    pub fn per_second(r: f64) -> Limit {
        if r >= f64::MAX {
            Limit::INF
        } else if r > 0.0 {
            Limit(r)
        } else {
            Limit::ZERO
        }
    }

    /// One token every `interval` (Go's `rate.Every`); a zero interval is [`Limit::INF`].
    pub fn every(interval: Duration) -> Limit {
        if interval.is_zero() {
            Limit::INF
        } else {
            Limit::per_second(1.0 / interval.as_secs_f64())
        }
    }

    /// The rate in tokens per second (`f64::MAX` for [`Limit::INF`]).
    pub fn as_f64(self) -> f64 {
        self.0
    }

    /// Whether this is [`Limit::INF`].
    pub fn is_inf(self) -> bool {
        self.0 == f64::MAX
    }

    /// The tokens that accumulate from `from` to `to` at this rate (Go's
    /// `tokensFromDuration`); none if `to` is not later.
    ///
    /// In nanoseconds as `i64` (saturating: a new bucket counts from `i64::MIN`), then one
    /// correctly rounded division: no `Duration` on the path `allow` takes.
    fn tokens_between(self, from: Instant, to: Instant) -> f64 {
        let nanos = to.as_nanos().saturating_sub(from.as_nanos());
        if self.0 > 0.0 && nanos > 0 {
            nanos as f64 / 1e9 * self.0
        } else {
            0.0
        }
    }

    /// The nanoseconds it takes to accumulate `tokens` (Go's `durationFromTokens`), rounded
    /// to the nearest; `None` when that never happens (a zero limit) or is past `i64::MAX`.
    fn nanos_for(self, tokens: f64) -> Option<i64> {
        if self.0 <= 0.0 {
            return None;
        }
        let nanos = (tokens / self.0 * 1e9).round();
        // `i64::MAX as f64` rounds up to 2^63: every value below it fits in an `i64`.
        (nanos < i64::MAX as f64).then(|| nanos.max(0.0) as i64)
    }
}

impl From<f64> for Limit {
    /// [`Limit::per_second`].
    fn from(r: f64) -> Limit {
        Limit::per_second(r)
    }
}

impl fmt::Debug for Limit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.is_inf() {
            f.write_str("Limit::INF")
        } else {
            write!(f, "Limit({}/s)", self.0)
        }
    }
}

/// One token every `interval`: Go's `rate.Every`; see [`Limit::every`].
///
/// # Examples
///
/// ```
/// use gort::time::rate::{every, Limiter};
/// use std::time::Duration;
///
/// let limiter = Limiter::new(every(Duration::from_secs(2)), 1);
/// assert_eq!(limiter.limit().as_f64(), 0.5);
/// ```
pub fn every(interval: Duration) -> Limit {
    Limit::every(interval)
}
