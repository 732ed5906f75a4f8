//! [`Timer`] and [`after`]: one value on a channel at a deadline (Go's `time.NewTimer`,
//! `time.After`), with Go 1.23's `Stop`/`Reset` guarantees.

use std::fmt;
use std::time::Duration;

use gort_chan::Receiver;

use crate::arming::OneShot;
use crate::chan_timer::{Handle, Kind};
use crate::Instant;

/// A single event: the instant it was due is sent on [`c`](Timer::c) once `d` has passed
/// (Go's `time.Timer`, with Go 1.23 semantics).
///
/// - [`stop`](Timer::stop) and [`reset`](Timer::reset) return true exactly when no value of
///   the current arming has been received or can still be received: a value that fired but
///   was not received yet is drained and counts as stopped. After either returns, no value of
///   an earlier arming is ever received, so the old `if !t.Stop() { <-t.C }` dance is never
///   needed (go#37196, go#69312).
/// - The value is the instant the timer was due, not when it was sent, so a late delivery
///   still reports the deadline.
/// - As in Go 1.23, the timer is in a timer heap only while a receiver waits on its channel;
///   a receiver (or [`len`](gort_chan::Receiver::len)) that arrives after the deadline finds
///   the value at once.
/// - Dropping the `Timer` stops it and frees everything, unless you kept a clone of its
///   receiver: a clone keeps the timer running until the last receiver is dropped.
/// - A duration too long to represent ([`Duration::MAX`]) never fires and costs no heap entry.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// let rt = gort::Runtime::new().unwrap();
/// rt.block_on(async {
///     let t = gort::time::Timer::new(Duration::from_millis(5));
///     let due = t.c().recv().await.unwrap();
///     assert!(due.elapsed() < Duration::from_secs(5));
///
///     // Stop before it fires: true, and nothing is ever received.
///     let t = gort::time::Timer::new(Duration::from_secs(3600));
///     assert!(t.stop());
///     assert!(t.c().try_recv().is_err());
/// });
/// ```
#[doc(alias = "NewTimer")]
pub struct Timer {
    core: Handle<OneShot>,
}

impl Timer {
    /// A timer that sends the instant it was due on [`c`](Timer::c) after `d`. With a zero `d`
    /// the value is there for the first receive (or `len`), which sends it itself (Go 1.23).
    ///
    /// # Panics
    ///
    /// Outside a gort runtime (unless `d` is so long that nothing needs registering).
    #[doc(alias = "NewTimer")]
    #[track_caller]
    pub fn new(d: Duration) -> Timer {
        Timer {
            core: Handle::start(d, 0, Kind::Timer),
        }
    }

    /// The channel the value arrives on (Go's `t.C`). Its length is 0 after `stop`/`reset`.
    /// Waiting on it puts the timer in a heap of the runtime, so a receive that has to wait
    /// panics on a thread of no gort runtime.
    pub fn c(&self) -> &Receiver<Instant> {
        self.core.rx()
    }

    /// Stops the timer. Returns true if no value of the current arming has been received or
    /// can still be received (it had not fired, or it fired and the value was still unread:
    /// that value is discarded). Returns false if the value was already received, or the timer
    /// was already stopped.
    #[doc(alias = "Stop")]
    pub fn stop(&self) -> bool {
        self.core.stop()
    }

    /// Stops the timer (as [`stop`](Timer::stop), whose result it returns) and arms it again to
    /// fire `d` from now. Valid in any state; no value of an earlier arming is received after it
    /// returns.
    ///
    /// # Panics
    ///
    /// Outside a gort runtime (unless `d` is so long that nothing needs registering).
    #[doc(alias = "Reset")]
    #[track_caller]
    pub fn reset(&self, d: Duration) -> bool {
        self.core.reset(d, 0, Kind::Timer)
    }
}

impl fmt::Debug for Timer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Timer").field("core", &self.core).finish()
    }
}

/// Waits for `d`, then sends the instant it was due on the returned channel (Go's
/// `time.After`).
///
/// Dropping the receiver (and every clone of it) stops the timer and frees it, so `after` in a
/// `select!` loop does not pile up timers (go#61542).
///
/// # Panics
///
/// Outside a gort runtime (unless `d` is so long that nothing needs registering).
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// let rt = gort::Runtime::new().unwrap();
/// rt.block_on(async {
///     let start = gort::time::Instant::now();
///     let due = gort::time::after(Duration::from_millis(5)).recv().await.unwrap();
///     assert!(due >= start + Duration::from_millis(5));
/// });
/// ```
#[doc(alias = "After")]
#[track_caller]
pub fn after(d: Duration) -> Receiver<Instant> {
    Handle::<OneShot>::start(d, 0, Kind::After).into_rx()
}
