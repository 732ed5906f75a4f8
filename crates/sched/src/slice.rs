//! Time slices of `runnext` chains: Go's `schedtick` and the part of sysmon's `retake` that
//! preempts a P whose tick has not moved for 10 ms.
//!
//! A task readied by the task that just ran goes to its P's `runnext` and runs next (Go's
//! ping-pong optimisation); in Go it inherits its waker's time slice (`execute(gp,
//! inheritTime)` leaves `schedtick` alone), so a chain of tasks readying each other shares one
//! slice, and sysmon preempts the P once that slice is 10 ms old. gort's tasks cannot be
//! preempted, so the verdict is acted on at the next pick instead: a P counts the slices it
//! began (every pick that does not inherit: [`Slices::begin`]), sysmon marks the count it saw
//! unchanged for [`SLICE`] ([`Seen::look`]), and the holder, about to run a chained `runnext`
//! task, takes from its queue instead when its current slice is marked ([`Slices::is_spent`]:
//! two relaxed loads of its own cache line, no clock read; design/ARCHITECTURE.md, "The run
//! queues").
//!
//! The marks are hints: a mark that comes late lengthens one slice, and a mark for a count the
//! holder has since left behind matches nothing. No task's safety depends on them.

use gort_loom::atomic::{AtomicU32, Ordering::Relaxed};
use std::time::{Duration, Instant};

/// How long a chain of `runnext` tasks may hold its P while other tasks wait in its queue
/// (Go's `forcePreemptNS`). sysmon looks at most every 10 ms while a P runs, so a chain runs
/// 10-20 ms, as Go's did before its sysmon backed off to 20 µs looks.
pub(crate) const SLICE: Duration = Duration::from_millis(10);

/// A P's slice count (written by its holder) and sysmon's verdict on it.
pub(crate) struct Slices {
    /// Slices begun: bumped by the holder at each pick that does not inherit (Go's
    /// `schedtick`). One writer; a relaxed load and store.
    begun: AtomicU32,
    /// The value of `begun` whose slice sysmon found older than [`SLICE`].
    spent: AtomicU32,
}

impl Slices {
    pub(crate) fn new() -> Slices {
        Slices {
            begun: AtomicU32::new(0),
            spent: AtomicU32::new(u32::MAX),
        }
    }

    /// The holder begins a slice: its pick does not inherit the previous one.
    #[inline]
    pub(crate) fn begin(&self) {
        let begun = self.begun.load(Relaxed).wrapping_add(1);
        self.begun.store(begun, Relaxed);
    }

    /// Whether sysmon found the holder's current slice spent.
    #[inline]
    pub(crate) fn is_spent(&self) -> bool {
        self.spent.load(Relaxed) == self.begun.load(Relaxed)
    }
}

/// sysmon's memory of one P's slices (Go's `sysmontick`).
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Seen {
    begun: u32,
    /// When sysmon first saw `begun` (`None`: not watching: the P was not running).
    since: Option<Instant>,
}

impl Seen {
    /// sysmon's look at a running P's `slices` at `now`: marks the current slice spent if it
    /// is the one seen at least [`SLICE`] ago (Go's `retake`: `schedtick` unchanged and
    /// `schedwhen + forcePreemptNS <= now`). Returns whether the slice is the one the previous
    /// look saw: the holder began none since (it is in one task, or a `runnext` chain).
    pub(crate) fn look(&mut self, slices: &Slices, now: Instant) -> bool {
        let begun = slices.begun.load(Relaxed);
        match self.since {
            Some(since) if begun == self.begun => {
                let spent = now.saturating_duration_since(since) >= SLICE;
                if spent && slices.spent.load(Relaxed) != begun {
                    slices.spent.store(begun, Relaxed);
                }
                true
            }
            _ => {
                *self = Seen {
                    begun,
                    since: Some(now),
                };
                false
            }
        }
    }

    /// The P is not running: its next slice is watched from the look that finds it running.
    pub(crate) fn forget(&mut self) {
        self.since = None;
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn a_slice_is_spent_once_seen_unchanged_for_a_slice_length() {
        let s = Slices::new();
        let mut seen = Seen::default();
        let t0 = Instant::now();
        s.begin();
        assert!(!seen.look(&s, t0), "a first look saw a slice before");
        assert!(
            seen.look(&s, t0 + SLICE / 2),
            "the same slice not seen again"
        );
        assert!(!s.is_spent());
        seen.look(&s, t0 + SLICE);
        assert!(s.is_spent());
        // The next slice starts afresh; the old mark matches nothing.
        s.begin();
        assert!(!s.is_spent());
        assert!(
            !seen.look(&s, t0 + SLICE * 3 / 2),
            "a new slice seen as the old one"
        );
        seen.look(&s, t0 + SLICE * 2);
        assert!(!s.is_spent());
        seen.look(&s, t0 + SLICE * 5 / 2);
        assert!(s.is_spent());
    }

    #[test]
    fn a_p_that_stopped_running_is_watched_anew() {
        let s = Slices::new();
        let mut seen = Seen::default();
        let t0 = Instant::now();
        seen.look(&s, t0);
        seen.forget();
        seen.look(&s, t0 + SLICE);
        assert!(!s.is_spent());
        seen.look(&s, t0 + SLICE * 2);
        assert!(s.is_spent());
    }
}
