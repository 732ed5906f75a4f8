//! [`Instant`]: a point on gort's monotonic clock, in nanoseconds.

use std::fmt;
use std::ops::{Add, AddAssign, Sub, SubAssign};
use std::time::Duration;

use gort_timer::{deadline_after, epoch, nanotime, Nanos, NEVER};

/// A point on gort's monotonic clock: nanoseconds since the process-wide clock epoch
/// (`gort_timer::epoch()`), the same clock every timer deadline is measured on.
///
/// It is a plain `i64`, so it is `Copy`, cheap to compare and hash. Adding a [`Duration`]
/// saturates at [`Instant::NEVER`] ("never", about 292 years away) instead of panicking, so
/// `Instant::now() + Duration::MAX` is a deadline that simply never comes (tokio#5183).
///
/// Converts to and from [`std::time::Instant`].
///
/// # Examples
///
/// ```
/// use gort::time::Instant;
/// use std::time::Duration;
///
/// let a = Instant::now();
/// let b = a + Duration::from_millis(5);
/// assert_eq!(b - a, Duration::from_millis(5));
/// assert_eq!(a - b, Duration::ZERO); // saturates
/// assert_eq!(a + Duration::MAX, Instant::NEVER);
///
/// let std_b: std::time::Instant = b.into();
/// assert_eq!(Instant::from(std_b), b);
/// ```
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Instant(Nanos);

impl Instant {
    /// The instant that never comes: every saturating addition ends here, and a sleep or timer
    /// with this deadline never fires and registers nothing.
    pub const NEVER: Instant = Instant(NEVER);

    /// Now.
    ///
    /// # Examples
    ///
    /// ```
    /// let a = gort::time::Instant::now();
    /// assert!(gort::time::Instant::now() >= a);
    /// ```
    pub fn now() -> Instant {
        Instant(nanotime())
    }

    /// The instant `nanos` nanoseconds after the clock epoch (negative: before it).
    pub const fn from_nanos(nanos: i64) -> Instant {
        Instant(nanos)
    }

    /// Nanoseconds since the clock epoch: the raw deadline gort's timers use.
    pub const fn as_nanos(self) -> i64 {
        self.0
    }

    /// The time elapsed from `earlier` to `self`, or zero if `earlier` is later.
    pub fn duration_since(self, earlier: Instant) -> Duration {
        self.checked_duration_since(earlier)
            .unwrap_or(Duration::ZERO)
    }

    /// Same as [`duration_since`](Instant::duration_since) (which already saturates); named
    /// like `std`'s method.
    pub fn saturating_duration_since(self, earlier: Instant) -> Duration {
        self.duration_since(earlier)
    }

    /// The time elapsed from `earlier` to `self`, or `None` if `earlier` is later.
    pub fn checked_duration_since(self, earlier: Instant) -> Option<Duration> {
        // i128: the difference of two i64 can exceed i64.
        let d = i128::from(self.0) - i128::from(earlier.0);
        u64::try_from(d).ok().map(Duration::from_nanos)
    }

    /// The time elapsed since `self` (zero if `self` is in the future).
    pub fn elapsed(self) -> Duration {
        Instant::now().duration_since(self)
    }

    /// `self + d`, or `None` if that is past [`Instant::NEVER`].
    pub fn checked_add(self, d: Duration) -> Option<Instant> {
        let d = i64::try_from(d.as_nanos()).ok()?;
        self.0.checked_add(d).map(Instant)
    }

    /// `self - d`, or `None` if that underflows `i64` nanoseconds.
    pub fn checked_sub(self, d: Duration) -> Option<Instant> {
        let d = i64::try_from(d.as_nanos()).ok()?;
        self.0.checked_sub(d).map(Instant)
    }

    /// Whether this is [`Instant::NEVER`].
    pub fn is_never(self) -> bool {
        self.0 == NEVER
    }
}

impl fmt::Debug for Instant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.is_never() {
            f.write_str("Instant(never)")
        } else {
            write!(f, "Instant({}ns)", self.0)
        }
    }
}

/// Saturates at [`Instant::NEVER`].
impl Add<Duration> for Instant {
    type Output = Instant;
    fn add(self, d: Duration) -> Instant {
        Instant(deadline_after(self.0, d))
    }
}

impl AddAssign<Duration> for Instant {
    fn add_assign(&mut self, d: Duration) {
        *self = *self + d;
    }
}

/// Saturates at the earliest representable instant.
impl Sub<Duration> for Instant {
    type Output = Instant;
    fn sub(self, d: Duration) -> Instant {
        let d = i64::try_from(d.as_nanos()).unwrap_or(i64::MAX);
        Instant(self.0.saturating_sub(d))
    }
}

impl SubAssign<Duration> for Instant {
    fn sub_assign(&mut self, d: Duration) {
        *self = *self - d;
    }
}

/// Saturates at zero, like [`Instant::duration_since`].
impl Sub<Instant> for Instant {
    type Output = Duration;
    fn sub(self, earlier: Instant) -> Duration {
        self.duration_since(earlier)
    }
}

impl From<std::time::Instant> for Instant {
    fn from(i: std::time::Instant) -> Instant {
        let e = epoch();
        let nanos = |d: Duration| i64::try_from(d.as_nanos()).unwrap_or(i64::MAX);
        match i.checked_duration_since(e) {
            Some(after) => Instant(nanos(after)),
            None => Instant(-nanos(e.duration_since(i))),
        }
    }
}

impl From<Instant> for std::time::Instant {
    /// [`Instant::NEVER`] maps to the epoch plus ~292 years where the platform can represent
    /// it (Linux can).
    fn from(i: Instant) -> std::time::Instant {
        let e = epoch();
        let d = Duration::from_nanos(i.0.unsigned_abs());
        let out = if i.0 >= 0 {
            e.checked_add(d)
        } else {
            e.checked_sub(d)
        };
        // Only unrepresentable on platforms with a narrow Instant; the epoch is the safe end.
        out.unwrap_or(e)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arithmetic_saturates() {
        let a = Instant::from_nanos(100);
        assert_eq!(a + Duration::from_nanos(5), Instant::from_nanos(105));
        assert_eq!(a + Duration::MAX, Instant::NEVER);
        assert_eq!(Instant::NEVER + Duration::from_secs(1), Instant::NEVER);
        assert_eq!(a - Duration::from_nanos(150), Instant::from_nanos(-50));
        assert_eq!(
            Instant::from_nanos(i64::MIN + 1) - Duration::MAX,
            Instant::from_nanos(i64::MIN)
        );
        assert_eq!(a - Instant::from_nanos(150), Duration::ZERO);
        assert_eq!(a.checked_duration_since(Instant::from_nanos(101)), None);
        assert_eq!(
            Instant::NEVER.checked_duration_since(Instant::from_nanos(i64::MIN)),
            Some(Duration::from_nanos(u64::MAX))
        );
        assert_eq!(a.checked_add(Duration::MAX), None);
        assert_eq!(
            a.checked_sub(Duration::from_nanos(1)),
            Some(Instant::from_nanos(99))
        );
        let mut b = a;
        b += Duration::from_nanos(1);
        b -= Duration::from_nanos(2);
        assert_eq!(b, Instant::from_nanos(99));
    }

    #[test]
    fn std_round_trip() {
        let _ = epoch(); // fixed by its first use, which must come before `now`
        let now = std::time::Instant::now();
        let g = Instant::from(now);
        assert!(g >= Instant::from_nanos(0));
        assert_eq!(std::time::Instant::from(g), now);
        // Before the epoch: negative, and still round-trips.
        let early = epoch() - Duration::from_millis(3);
        let g = Instant::from(early);
        assert_eq!(g.as_nanos(), -3_000_000);
        assert_eq!(std::time::Instant::from(g), early);
    }

    #[test]
    fn now_is_monotonic_and_elapsed_grows() {
        let a = Instant::now();
        std::thread::sleep(Duration::from_millis(2));
        assert!(a.elapsed() >= Duration::from_millis(2));
        assert!(Instant::now() > a);
        assert_eq!(format!("{:?}", Instant::NEVER), "Instant(never)");
        assert!(format!("{:?}", a).ends_with("ns)"));
    }
}
