//! The monotonic clock every deadline in this crate is measured on.

use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// Monotonic nanoseconds since [`epoch`]; Go's `int64` nanotime.
pub type Nanos = i64;

/// A deadline that never comes: Go's `maxWhen` (2^63 - 1, about 292 years).
///
/// Durations that overflow saturate to it, so an enormous sleep simply never fires.
pub const NEVER: Nanos = i64::MAX;

static EPOCH: OnceLock<Instant> = OnceLock::new();

/// The `std` [`Instant`] that [`nanotime`] counts from, fixed by the first call to either.
///
/// `epoch() + Duration::from_nanos(n as u64)` is the `Instant` of the deadline `n`.
pub fn epoch() -> Instant {
    *EPOCH.get_or_init(Instant::now)
}

/// Now, in nanoseconds since [`epoch`]. Never decreases and is always `>= 1`, because 0 is
/// the "no timer" sentinel of [`Timers::wake_time`](crate::Timers::wake_time).
///
/// # Examples
///
/// ```
/// let a = gort_timer::nanotime();
/// let b = gort_timer::nanotime();
/// assert!(a >= 1 && b >= a);
/// ```
pub fn nanotime() -> Nanos {
    let since = Instant::now().saturating_duration_since(epoch());
    // An i64 of nanoseconds lasts 292 years; saturate rather than wrap after that.
    i64::try_from(since.as_nanos()).unwrap_or(NEVER).max(1)
}

/// `now + d`, saturating at [`NEVER`] (Go's `when(d)` overflow rule). A zero duration gives
/// `now`, which is already due: such a timer fires at the next check (go#44868).
///
/// # Examples
///
/// ```
/// use gort_timer::{deadline_after, NEVER};
/// use std::time::Duration;
/// assert_eq!(deadline_after(10, Duration::from_nanos(5)), 15);
/// assert_eq!(deadline_after(10, Duration::ZERO), 10);
/// assert_eq!(deadline_after(10, Duration::MAX), NEVER);
/// ```
pub fn deadline_after(now: Nanos, d: Duration) -> Nanos {
    let d = i64::try_from(d.as_nanos()).unwrap_or(NEVER);
    now.saturating_add(d)
}
