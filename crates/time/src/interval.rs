//! [`Interval`]: tokio-style periodic ticks you await, with a choice of what to do about
//! missed ticks.

use std::future::{poll_fn, Future};
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use crate::{sleep_until, Instant, Sleep};

/// A tick observed later than this after its deadline counts as missed (tokio's tolerance):
/// wake-ups are always a little late, and `Delay` should not drift by that every tick.
const MISSED_TOLERANCE: Duration = Duration::from_millis(5);

/// What an [`Interval`] does when ticks were missed (the consumer was slower than the
/// period). A tick counts as missed when it is taken more than 5 ms after it was due
/// (tokio's tolerance, so that ordinary wake-up latency does not shift a `Delay` schedule).
///
/// Timeline: period 100 ms, ticks due at 0, 100, 200, ...; the consumer takes the tick due at
/// 100 on time, then is busy until 450. What `tick()` returns from then on (due instant, and
/// when it is returned):
///
/// ```text
///          due instants returned        returned at
/// Burst:   200 300 400 500 600 ...      450 450 450 500 600 ...  (catch up, same schedule)
/// Delay:   200 550 650 750 ...          450 550 650 750 ...      (schedule restarts at 450)
/// Skip:    200 500 600 700 ...          450 500 600 700 ...      (missed ones dropped)
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum MissedTickBehavior {
    /// Return every missed tick as fast as possible until caught up, then continue on the
    /// original schedule. The default.
    #[default]
    Burst,
    /// Continue one period after the late tick: the schedule shifts by the delay.
    Delay,
    /// Drop the missed ticks and continue with the next tick of the original schedule.
    Skip,
}

impl MissedTickBehavior {
    /// The deadline after the tick due at `due`, observed (late) at `now`.
    fn next(self, due: Instant, now: Instant, period: Duration) -> Instant {
        match self {
            MissedTickBehavior::Burst => due + period,
            MissedTickBehavior::Delay => now + period,
            MissedTickBehavior::Skip => {
                // The first deadline `due + k * period` after `now`.
                let late = (now - due).as_nanos();
                let p = period.as_nanos();
                let rest = u64::try_from(p - late % p).unwrap_or(u64::MAX);
                now + Duration::from_nanos(rest)
            }
        }
    }
}

/// Ticks every `period`, the FIRST TICK IMMEDIATELY (tokio's `interval`; Go's
/// [`Ticker`](crate::Ticker) waits one period instead).
///
/// # Panics
///
/// If `period` is zero. Polling [`Interval::tick`] panics outside a gort runtime once it has
/// to wait.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// let rt = gort::Runtime::new().unwrap();
/// rt.block_on(async {
///     let start = gort::time::Instant::now();
///     let mut iv = gort::time::interval(Duration::from_millis(2));
///     iv.tick().await; // at once
///     iv.tick().await;
///     iv.tick().await;
///     assert!(start.elapsed() >= Duration::from_millis(4));
/// });
/// ```
#[doc(alias = "NewTicker")]
#[track_caller]
pub fn interval(period: Duration) -> Interval {
    interval_at(Instant::now(), period)
}

/// Ticks at `start`, then every `period` after it.
///
/// # Panics
///
/// If `period` is zero.
#[track_caller]
pub fn interval_at(start: Instant, period: Duration) -> Interval {
    assert!(
        !period.is_zero(),
        "gort::time::interval: `period` must be non-zero"
    );
    Interval {
        sleep: sleep_until(start),
        period,
        missed: MissedTickBehavior::default(),
    }
}

/// Periodic ticks to await: see [`interval`]. Ticks that pile up while the consumer is busy
/// are handled as its [`MissedTickBehavior`] says.
#[derive(Debug)]
pub struct Interval {
    sleep: Sleep,
    period: Duration,
    missed: MissedTickBehavior,
}

impl Interval {
    /// Waits for the next tick and returns the instant it was due.
    pub async fn tick(&mut self) -> Instant {
        poll_fn(|cx| self.poll_tick(cx)).await
    }

    /// Polls for the next tick: the poll-based form of [`tick`](Interval::tick).
    pub fn poll_tick(&mut self, cx: &mut Context<'_>) -> Poll<Instant> {
        // A tick costs a unit of the cooperative budget: an interval behind its schedule
        // (`MissedTickBehavior::Burst`) is ready tick after tick, as a full channel is.
        gort_coop::poll_budgeted(cx, |cx| self.poll_tick_unbudgeted(cx))
    }

    fn poll_tick_unbudgeted(&mut self, cx: &mut Context<'_>) -> Poll<Instant> {
        if Pin::new(&mut self.sleep).poll(cx).is_pending() {
            return Poll::Pending;
        }
        let due = self.sleep.deadline();
        let now = Instant::now();
        let next = if now > due + MISSED_TOLERANCE {
            self.missed.next(due, now, self.period)
        } else {
            due + self.period
        };
        Pin::new(&mut self.sleep).reset(next);
        Poll::Ready(due)
    }

    /// Restarts the schedule: the next tick is due one period from now.
    pub fn reset(&mut self) {
        self.reset_at(Instant::now() + self.period);
    }

    /// Makes the next tick due now.
    pub fn reset_immediately(&mut self) {
        self.reset_at(Instant::now());
    }

    /// Makes the next tick due `after` from now (Tokio's `reset_after`); later ones follow
    /// every period after it. A span past the clock's end saturates at [`Instant::NEVER`].
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// let rt = gort::Builder::new().start_paused(true).build().unwrap();
    /// rt.block_on(async {
    ///     let mut ticks = gort::time::interval(Duration::from_secs(10));
    ///     ticks.tick().await; // the first tick is due at once
    ///     let start = gort::time::Instant::now();
    ///     ticks.reset_after(Duration::from_secs(3));
    ///     assert_eq!(ticks.tick().await, start + Duration::from_secs(3));
    ///     assert_eq!(ticks.tick().await, start + Duration::from_secs(13));
    /// });
    /// ```
    pub fn reset_after(&mut self, after: Duration) {
        self.reset_at(Instant::now() + after);
    }

    /// Makes the next tick due at `deadline`; later ones follow every period after it.
    pub fn reset_at(&mut self, deadline: Instant) {
        Pin::new(&mut self.sleep).reset(deadline);
    }

    /// The missed-tick behaviour (default [`MissedTickBehavior::Burst`]).
    pub fn missed_tick_behavior(&self) -> MissedTickBehavior {
        self.missed
    }

    /// Sets the missed-tick behaviour.
    pub fn set_missed_tick_behavior(&mut self, behavior: MissedTickBehavior) {
        self.missed = behavior;
    }

    /// The period.
    pub fn period(&self) -> Duration {
        self.period
    }
}

/// An `Interval` is a never-ending [`Stream`](futures_core::Stream) of its ticks' due
/// instants, as [`tick`](Interval::tick) returns them.
///
/// # Examples
///
/// ```
/// use futures_core::Stream;
/// use std::pin::Pin;
/// use std::time::Duration;
///
/// let rt = gort::Runtime::new().unwrap();
/// rt.block_on(async {
///     let mut ticks = gort::time::interval(Duration::from_millis(1));
///     let a = std::future::poll_fn(|cx| Pin::new(&mut ticks).poll_next(cx)).await;
///     let b = std::future::poll_fn(|cx| Pin::new(&mut ticks).poll_next(cx)).await;
///     let (a, b) = (a.unwrap(), b.unwrap());
///     assert!(a < b);
/// });
/// ```
impl futures_core::Stream for Interval {
    type Item = Instant;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Instant>> {
        self.get_mut().poll_tick(cx).map(Some)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    fn at(ms: i64) -> Instant {
        Instant::from_nanos(ms * 1_000_000)
    }

    #[test]
    fn next_deadline_per_behavior() {
        // Period 100 ms, the tick due at 200 observed at 450 (the timeline in the docs).
        let (due, now, p) = (at(200), at(450), 100 * MS);
        assert_eq!(MissedTickBehavior::Burst.next(due, now, p), at(300));
        assert_eq!(MissedTickBehavior::Delay.next(due, now, p), at(550));
        assert_eq!(MissedTickBehavior::Skip.next(due, now, p), at(500));
        // Observed exactly on a later tick: Skip continues one period after it.
        assert_eq!(MissedTickBehavior::Skip.next(due, at(400), p), at(500));
        // Saturation: nothing panics near the end of time.
        assert_eq!(
            MissedTickBehavior::Burst.next(Instant::NEVER, Instant::NEVER, Duration::MAX),
            Instant::NEVER
        );
        assert_eq!(
            MissedTickBehavior::Skip.next(at(0), at(1), Duration::MAX),
            Instant::NEVER
        );
    }
}
