//! [`Ticker`] and [`tick`]: periodic values on a channel (Go's `time.Ticker`, `time.Tick`).

use std::fmt;
use std::time::Duration;

use gort_chan::Receiver;

use crate::arming::Periodic;
use crate::chan_timer::{Handle, Kind};
use crate::runtime_timer::nanos;
use crate::Instant;

/// Why a [`Ticker`] could not be made.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum TickerError {
    /// The period was zero.
    ZeroPeriod,
}

impl fmt::Display for TickerError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TickerError::ZeroPeriod => f.write_str("non-positive period for a ticker"),
        }
    }
}

impl std::error::Error for TickerError {}

/// Sends the current due instant on [`c`](Ticker::c) every period (Go's `time.Ticker`, with
/// Go 1.23 semantics).
///
/// - The first tick comes one period after creation (Go; unlike [`interval`](crate::interval),
///   whose first tick is immediate).
/// - Ticks stay on the original phase (`start + k * period`) however late they are delivered.
///   A receiver that falls behind loses ticks: the channel holds at most one, so there is no
///   backlog. After a pause, a receiver gets the oldest missed tick's instant at once, then
///   the next tick of the phase after now (Go 1.23).
/// - An unread ticker costs nothing: as in Go 1.23, it is in a timer heap only while a
///   receiver waits on its channel.
/// - After [`stop`](Ticker::stop) or [`reset`](Ticker::reset) returns, no tick of the earlier
///   configuration is received (a buffered one is discarded).
/// - Dropping the `Ticker` stops it (unless a clone of its receiver is still alive).
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// let rt = gort::Runtime::new().unwrap();
/// rt.block_on(async {
///     let t = gort::time::Ticker::new(Duration::from_millis(2));
///     let a = t.c().recv().await.unwrap();
///     let b = t.c().recv().await.unwrap();
///     assert!(b > a);
///     t.stop();
/// });
/// ```
#[doc(alias = "NewTicker")]
pub struct Ticker {
    core: Handle<Periodic>,
}

impl Ticker {
    /// A ticker with period `period`; the first tick is due one period from now.
    ///
    /// # Panics
    ///
    /// If `period` is zero ("gort::time::Ticker::new: non-positive period"; use
    /// [`try_new`](Ticker::try_new) for a `Result`), or outside a gort runtime.
    #[doc(alias = "NewTicker")]
    #[track_caller]
    pub fn new(period: Duration) -> Ticker {
        match Ticker::try_new(period) {
            Ok(t) => t,
            Err(_) => panic!("gort::time::Ticker::new: non-positive period"),
        }
    }

    /// Like [`new`](Ticker::new), but a zero period is an [`TickerError::ZeroPeriod`].
    ///
    /// # Panics
    ///
    /// Outside a gort runtime.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// assert_eq!(
    ///     gort::time::Ticker::try_new(Duration::ZERO).unwrap_err(),
    ///     gort::time::TickerError::ZeroPeriod
    /// );
    /// ```
    #[track_caller]
    pub fn try_new(period: Duration) -> Result<Ticker, TickerError> {
        if period.is_zero() {
            return Err(TickerError::ZeroPeriod);
        }
        Ok(Ticker {
            core: Handle::start(period, nanos(period), Kind::Ticker),
        })
    }

    /// The channel the ticks arrive on (Go's `t.C`). Waiting on it puts the ticker in a heap
    /// of the runtime, so a receive that has to wait panics on a thread of no gort runtime.
    pub fn c(&self) -> &Receiver<Instant> {
        self.core.rx()
    }

    /// Stops the ticker: no tick is received after this returns (a buffered one is
    /// discarded). The channel is not closed. [`reset`](Ticker::reset) starts it again.
    #[doc(alias = "Stop")]
    pub fn stop(&self) {
        self.core.stop();
    }

    /// Stops the ticker and restarts it with period `period`; the next tick is due one new
    /// period from now. Works after [`stop`](Ticker::stop). No tick of the earlier
    /// configuration is received after it returns.
    ///
    /// # Panics
    ///
    /// If `period` is zero ("gort::time::Ticker::reset: non-positive period"), or outside a gort
    /// runtime.
    #[doc(alias = "Reset")]
    #[track_caller]
    pub fn reset(&self, period: Duration) {
        assert!(
            !period.is_zero(),
            "gort::time::Ticker::reset: non-positive period"
        );
        self.core.reset(period, nanos(period), Kind::Ticker);
    }
}

impl fmt::Debug for Ticker {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Ticker").field("core", &self.core).finish()
    }
}

/// A ticker's channel alone (Go's `time.Tick`): a tick every `period`, the first one period
/// from now. Dropping the receiver (every clone) stops the ticker, so unlike Go before 1.23
/// it does not leak.
///
/// # Panics
///
/// If `period` is zero (Go returns nil instead; a channel that never delivers would hang the
/// caller silently), or outside a gort runtime.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// let rt = gort::Runtime::new().unwrap();
/// rt.block_on(async {
///     let c = gort::time::tick(Duration::from_millis(1));
///     for _ in 0..3 {
///         c.recv().await.unwrap();
///     }
/// });
/// ```
#[doc(alias = "Tick")]
#[track_caller]
pub fn tick(period: Duration) -> Receiver<Instant> {
    assert!(!period.is_zero(), "gort::time::tick: non-positive period");
    Handle::<Periodic>::start(period, nanos(period), Kind::Tick).into_rx()
}

/// A `Ticker` is a [`Stream`](futures_core::Stream) of its ticks, as received from
/// [`c`](Ticker::c) (which is itself a stream once cloned: `ticker.c().clone()`, like the
/// receiver [`tick`] returns). It never ends: a stopped ticker's stream just waits.
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
///     let mut ticker = gort::time::Ticker::new(Duration::from_millis(1));
///     let a = std::future::poll_fn(|cx| Pin::new(&mut ticker).poll_next(cx)).await;
///     let b = std::future::poll_fn(|cx| Pin::new(&mut ticker).poll_next(cx)).await;
///     let (a, b) = (a.unwrap(), b.unwrap());
///     assert!(b > a);
/// });
/// ```
impl futures_core::Stream for Ticker {
    type Item = Instant;

    fn poll_next(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Instant>> {
        futures_core::Stream::poll_next(std::pin::Pin::new(self.get_mut().core.stream()), cx)
    }
}
