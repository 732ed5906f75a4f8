//! The monotonic clock every deadline in this crate is measured on.

use std::sync::OnceLock;
use std::time::{Duration, Instant};

mod runtime_clock;
#[cfg(all(target_os = "linux", target_arch = "x86_64"))]
mod tsc;

pub use runtime_clock::RuntimeClock;

/// Monotonic nanoseconds since [`epoch`]; Go's `int64` nanotime.
pub type Nanos = i64;

/// A deadline that never comes: Go's `maxWhen` (2^63 - 1, about 292 years).
///
/// Durations that overflow saturate to it, so an enormous sleep simply never fires.
pub const NEVER: Nanos = i64::MAX;

/// The clock's origin: a `std` [`Instant`], and (on Linux) a reading of the raw
/// `CLOCK_MONOTONIC` at or just after it.
struct Epoch {
    instant: Instant,
    #[cfg(target_os = "linux")]
    raw: Nanos,
    /// The counter that extrapolates readings between real ones (see `tsc.rs`).
    #[cfg(all(target_os = "linux", target_arch = "x86_64"))]
    tsc: tsc::Calibration,
}

static EPOCH: OnceLock<Epoch> = OnceLock::new();

fn the_epoch() -> &'static Epoch {
    EPOCH.get_or_init(|| {
        #[cfg(target_os = "linux")]
        {
            // `std` reads the same CLOCK_MONOTONIC (its documented Linux source) but does not
            // say what it read, so bracket the `Instant` between two raw reads and keep the
            // later: then gort's clock trails std's by at most the bracket (the tightest of a
            // few tries; under a microsecond unless the thread is preempted every time), and
            // a deadline converted from a std `Instant` can only fire that little late,
            // never early.
            let mut best: Option<(Nanos, (Instant, Nanos))> = None;
            for _ in 0..16 {
                let before = raw_monotonic();
                let instant = Instant::now();
                let raw = raw_monotonic();
                let width = raw - before;
                if best.as_ref().map_or(true, |(w, _)| width < *w) {
                    best = Some((width, (instant, raw)));
                }
                if width <= 1_000 {
                    break;
                }
            }
            let (instant, raw) = best.expect("at least one try").1;
            Epoch {
                instant,
                raw,
                #[cfg(target_arch = "x86_64")]
                tsc: tsc::Calibration::start(|| raw_monotonic() - raw),
            }
        }
        #[cfg(not(target_os = "linux"))]
        Epoch {
            instant: Instant::now(),
        }
    })
}

/// The `std` [`Instant`] that [`nanotime`] counts from, fixed by the first call to either.
///
/// `epoch() + Duration::from_nanos(n as u64)` is the `Instant` of the deadline `n`. On Linux
/// [`nanotime`] reads the clock directly and may trail `Instant::now() - epoch()` by a little
/// (normally under a microsecond); it never runs ahead of it.
pub fn epoch() -> Instant {
    the_epoch().instant
}

/// CLOCK_MONOTONIC in nanoseconds, read straight from the vDSO through libc: what `std`'s
/// `Instant::now` reads, without its `Timespec` checks and the u128 `Duration` arithmetic a
/// conversion to nanoseconds costs (together ~10 ns of a ~30 ns read; a timer reset pays one).
#[cfg(target_os = "linux")]
#[inline]
fn raw_monotonic() -> Nanos {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec and CLOCK_MONOTONIC is always supported on
    // Linux, so the call only writes `ts`.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    debug_assert_eq!(rc, 0, "clock_gettime(CLOCK_MONOTONIC) failed");
    // Seconds since boot: i64 nanoseconds last 292 years.
    (ts.tv_sec as Nanos)
        .saturating_mul(1_000_000_000)
        .saturating_add(ts.tv_nsec as Nanos)
}

/// Now, in nanoseconds since [`epoch`]. Never decreases and is always `>= 1`, because 0 is
/// the "no timer" sentinel of [`Timers::wake_time`](crate::Timers::wake_time).
///
/// On x86_64 Linux with an invariant time-stamp counter that the kernel keeps time by, a
/// reading within 50 µs of the thread's last real one is extrapolated by the counter (a
/// third of the cost of a vDSO read; see `clock/tsc.rs`). It trails the real clock by at most the anchor
/// reading's bracket (under a microsecond) plus ~100 ns, and never leads it ([`CLOCK_TRAIL`]).
///
/// # Examples
///
/// ```
/// let a = gort_timer::nanotime();
/// let b = gort_timer::nanotime();
/// assert!(a >= 1 && b >= a);
/// ```
///
/// On a thread of a runtime whose clock a test paused ([`RuntimeClock`]), it reads that
/// runtime's virtual clock instead; while no clock in the process is virtual, checking costs
/// one relaxed load.
#[inline]
pub fn nanotime() -> Nanos {
    if let Some(now) = runtime_clock::current_virtual_now() {
        return now;
    }
    real_nanotime()
}

/// The real clock read exactly (never extrapolated: see `clock/tsc.rs`), whatever runtime
/// this thread belongs to. Two such readings on different threads are ordered as they were
/// taken, which a paused clock's transitions need (`runtime_clock.rs`).
pub(crate) fn real_nanotime_exact() -> Nanos {
    #[cfg(target_os = "linux")]
    {
        read_and_anchor()
    }
    #[cfg(not(target_os = "linux"))]
    {
        real_nanotime()
    }
}

/// The real clock, whatever runtime this thread belongs to.
#[inline]
pub(crate) fn real_nanotime() -> Nanos {
    #[cfg(all(target_os = "linux", target_arch = "x86_64"))]
    if let Some(now) = tsc::extrapolate() {
        return now;
    }
    #[cfg(target_os = "linux")]
    {
        read_and_anchor()
    }
    #[cfg(not(target_os = "linux"))]
    {
        let since = Instant::now().saturating_duration_since(epoch());
        // An i64 of nanoseconds lasts 292 years; saturate rather than wrap after that.
        i64::try_from(since.as_nanos()).unwrap_or(NEVER).max(1)
    }
}

/// How far a [`nanotime`] reading may trail one taken earlier on another thread: a bound on
/// the counter's extrapolation (`clock/tsc.rs`: it trails the real clock by the anchor's
/// bracket, at most 2,000 ticks, 2 µs at a 1 GHz counter, plus ~100 ns of lowered rate). A
/// reading closer than this to an event another thread saw at its own reading is ordered
/// after it only by [`nanotime_exact`].
pub const CLOCK_TRAIL: Nanos = 4_000;

/// [`nanotime`] read from the kernel (or the virtual clock), never extrapolated: at least every
/// reading any thread took before it, and this thread's later [`nanotime`] readings are at
/// least this one (it becomes the thread's anchor). A vDSO read: ~30 ns instead of ~12.
///
/// # Examples
///
/// ```
/// let exact = gort_timer::nanotime_exact();
/// assert!(gort_timer::nanotime() >= exact);
/// ```
pub fn nanotime_exact() -> Nanos {
    if let Some(now) = runtime_clock::current_virtual_now() {
        return now;
    }
    #[cfg(target_os = "linux")]
    {
        read_and_anchor()
    }
    #[cfg(not(target_os = "linux"))]
    {
        real_nanotime()
    }
}

/// A real reading, which becomes the thread's anchor for extrapolated ones.
#[cfg(target_os = "linux")]
#[inline(never)]
fn read_and_anchor() -> Nanos {
    let e = the_epoch();
    let read = || (raw_monotonic() - e.raw).max(1);
    #[cfg(target_arch = "x86_64")]
    return tsc::read_and_anchor(&e.tsc, read);
    #[cfg(not(target_arch = "x86_64"))]
    read()
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
