//! The one place this crate reaches into the scheduler: arming a runtime timer on the
//! caller's P.

use gort_loom::Arc;
use gort_sched::timer_api::{addtimer_cell, modtimer, modtimer_cell, modtimer_own};
use gort_timer::{CellTimer, Nanos, Timer};

/// Arms (or re-arms) `t` at `when` with `period` on the current P's heap: Go's
/// `modtimer`. Returns whether it was pending.
///
/// # Panics
///
/// Outside a gort runtime, or on a thread without a P of one that is shut down, naming
/// `what` (e.g. "gort::time::Sleep").
#[track_caller]
pub(crate) fn arm(t: &Arc<Timer>, when: Nanos, period: Nanos, slack: Nanos, what: &str) -> bool {
    t.set_slack(slack);
    match modtimer(t, when, period, None) {
        Some(pending) => pending,
        None => outside(what),
    }
}

/// [`arm`] for a timer whose firing wakes only the task polling the caller: a `Sleep` armed
/// in its own poll, after it set that task's waker (`gort_sched::timer_api::modtimer_own`).
///
/// # Panics
///
/// As [`arm`].
#[track_caller]
pub(crate) fn arm_own(t: &Arc<Timer>, when: Nanos, slack: Nanos, what: &str) -> bool {
    t.set_slack(slack);
    match modtimer_own(t, when) {
        Some(pending) => pending,
        None => outside(what),
    }
}

/// [`arm`] for a one-shot timer that lives with its callback in one allocation: installs the
/// callback if an earlier stop or run released it, inside the status the arming owns
/// ([`gort_timer::modify_cell`]).
///
/// # Panics
///
/// Outside a gort runtime, naming `what`.
#[track_caller]
#[inline]
pub(crate) fn arm_cell(t: &CellTimer, when: Nanos, slack: Nanos, what: &str) -> bool {
    t.set_slack(slack);
    match modtimer_cell(t, when, 0) {
        Some(pending) => pending,
        None => outside(what),
    }
}

/// [`arm_cell`] for a cell that `t` alone references (one just made): Go's `addtimer`,
/// without the status CAS and the payload lock ([`gort_timer::add_cell`]).
///
/// # Panics
///
/// As [`arm_cell`].
#[track_caller]
#[inline]
pub(crate) fn arm_new_cell(t: &mut CellTimer, when: Nanos, slack: Nanos, what: &str) -> bool {
    t.set_slack(slack);
    match addtimer_cell(t, when, 0) {
        Some(pending) => pending,
        None => outside(what),
    }
}

/// The panic for timer use outside a runtime, or outside its tasks once it is shut down
/// (its timers would never fire: `gort_sched::timer_api::modtimer`).
#[cold]
#[track_caller]
pub(crate) fn outside(what: &str) -> ! {
    panic!(
        "{what} must be used inside a gort runtime \
         (in Runtime::block_on, a task, or a blocking closure) that is not shut down"
    )
}

/// The coalescing slack of an arming `d` ahead ([`Timer::set_slack`]): 1/16 of it, so a
/// timer shares a poller wake-up with others only by a delay its own length makes small
/// (a 50 µs timer stays precise; a one-second sleep may run up to the poller's 1 ms cap late).
pub(crate) fn slack(d: Nanos) -> Nanos {
    d / 16
}

/// Nanoseconds of a duration, saturating at `i64::MAX` (which never comes).
pub(crate) fn nanos(d: std::time::Duration) -> Nanos {
    i64::try_from(d.as_nanos()).unwrap_or(Nanos::MAX)
}
