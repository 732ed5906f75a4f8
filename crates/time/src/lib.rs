//! Go's `time` package for gort (re-exported as `gort::time`), with Go 1.23's guarantees, on
//! gort's per-P timer heaps (`gort-timer`).
//!
//! | Go                          | gort                                   |
//! |-----------------------------|----------------------------------------|
//! | `time.Sleep(d)`             | [`sleep(d)`](sleep)`.await`, [`sleep_until`] |
//! | `time.NewTimer(d)`, `t.C`   | [`Timer::new`], [`Timer::c`]           |
//! | `time.After(d)`             | [`after`]                              |
//! | `time.AfterFunc(d, f)`      | [`after_func`]                         |
//! | `time.NewTicker(d)`, `Tick` | [`Ticker::new`], [`tick`]              |
//! | `context.WithTimeout`-ish   | [`timeout`], [`timeout_at`]            |
//! | tokio's `interval`          | [`interval`], [`Interval`]             |
//! | `testing/synctest`'s clock  | [`pause`], [`advance`], [`resume`]     |
//! | `x/time/rate`'s `Limiter`   | [`rate::Limiter`]                      |
//!
//! Guarantees (Go 1.23, go#37196, go#69312, go#61542):
//!
//! - `stop()`/`reset()` of a [`Timer`] return true exactly when no value of the current arming
//!   has been received or can still be received; after either returns, no earlier value is
//!   ever received. The same holds for [`Ticker`] ticks.
//! - The value on a timer channel is the instant the timer was due.
//! - A channel timer is in a timer heap only while a receiver waits on its channel, so an
//!   unread [`Timer`] or [`Ticker`] costs nothing; a receiver that arrives late gets the value
//!   Go 1.23 gives (the due instant; for a ticker, the oldest missed tick, then its phase).
//! - Dropping a [`Timer`], a [`Ticker`], or the last receiver of [`after`]/[`tick`] stops it
//!   and frees it; an [`AfterFunc`] keeps running when its handle is dropped.
//! - Deadlines saturate: [`Duration::MAX`](std::time::Duration::MAX) means "never", which
//!   costs no heap entry and never panics.
//! - A deadline that has passed completes a [`Sleep`] on its first poll, without rounding and
//!   without touching a heap (tokio#6866).
//!
//! Precision: a timer never fires before its deadline. On an idle runtime it fires within
//! microseconds of it. Under a dense stream of timers the runtime serves them in batches to
//! save wake-ups: a wake-up may be deferred by up to 100 µs, and beyond that by up to 1/16 of
//! the duration of the earliest pending timer, never more than 1 ms in all. So a stream of
//! one-second sleeps runs up to 1 ms late, while short timers that tasks wait on one after
//! another keep 100 µs precision.
//!
//! Everything that has to wait must run inside a gort runtime (`Runtime::block_on` or a
//! task); it panics otherwise, and also when it arms a timer off the runtime's Ps once the
//! runtime is shut down (a blocking closure still running, a `Handle` that outlived its
//! runtime), whose timers no longer fire (Tokio's rule). A shutdown wakes a sleep still
//! waiting there, and closes the channel of a `Timer` or `Ticker` received on there, so
//! that no such wait hangs.
//!
//! # Examples
//!
//! ```
//! use std::time::Duration;
//! let rt = gort::Runtime::new().unwrap();
//! rt.block_on(async {
//!     let t = gort::time::Timer::new(Duration::from_secs(3600));
//!     let r = gort::time::timeout(Duration::from_millis(5), t.c().recv()).await;
//!     assert!(r.is_err()); // timed out
//!     assert!(t.stop()); // nothing was received, so stop reports it stopped the timer
//! });
//! ```

#![warn(missing_docs)]

mod after_func;
#[doc(hidden)]
pub mod arming;
mod chan_timer;
mod instant;
mod interval;
mod paused;
pub mod rate;
mod runtime_timer;
mod sleep;
mod ticker;
mod timeout;
mod timer;

pub use after_func::{after_func, AfterFunc};
pub use instant::Instant;
pub use interval::{interval, interval_at, Interval, MissedTickBehavior};
pub use paused::{advance, is_paused, pause, resume};
pub use sleep::{sleep, sleep_until, Sleep};
pub use ticker::{tick, Ticker, TickerError};
pub use timeout::{timeout, timeout_at, Elapsed, Timeout};
pub use timer::{after, Timer};

/// Compile-time check: every handle users hold is `Send + Sync + Debug`.
const _: () = {
    const fn handle<T: Send + Sync + std::fmt::Debug>() {}
    handle::<Instant>();
    handle::<Sleep>();
    handle::<Timer>();
    handle::<Ticker>();
    handle::<AfterFunc>();
    handle::<Interval>();
    handle::<Timeout<Sleep>>();
    handle::<Elapsed>();
    handle::<TickerError>();
    handle::<MissedTickBehavior>();
    handle::<rate::Limiter>();
    handle::<rate::Reservation<'static>>();
    handle::<rate::WaitError>();
    handle::<gort_chan::Receiver<Instant>>();
};
