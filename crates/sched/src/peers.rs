//! Watching other Ps' timers: part of the M loop's phase 1 (worker.rs), gort's own. A P's
//! due timers are run by its holder between tasks (Go's `checkTimers`); when that holder is in
//! a long task, or the OS has preempted it, another M that is between tasks runs them here,
//! so a timer waits for the first of two Ps to get to it, not for its own.

use crate::p::{PStatus, P};
use crate::shared::Shared;
use gort_timer::{nanotime, Nanos};

/// How often an M whose P has timers looks at one other P for due timers its holder is not
/// getting to (`watch_peer`), in ns of the clock it reads anyway. Not every round: the look
/// loads the other P's `timer0_when`, a line its holder writes whenever its earliest timer
/// changes, and that cache miss is paid by the watcher's own round.
const WATCH_EVERY: Nanos = 25_000;
/// How overdue a P's timer must be before an M that has timers of its own runs it for that
/// P's holder (ns), if the holder also began no scheduling round since it came due
/// (`P::no_round_since`: it is in one long task or preempted by the OS; a round may leave
/// due timers behind, `P::timer_room`). Shorter would take timers from holders that are
/// merely in a task of a few microseconds, and contend on their heap.
const STALL: Nanos = 100_000;

/// What `watch_peer` remembers between looks.
#[derive(Default)]
pub(crate) struct Watch {
    /// The P to look at next.
    next: usize,
    /// When `watch_peer` last looked.
    last_look: Nanos,
}

impl Watch {
    /// Part of the M loop's phase 1 (gort's, not Go's): looks at one other P for due timers
    /// its holder is not getting to: in every round when this P has no timers (`help_peer`),
    /// every `WATCH_EVERY` when it has (`watch_peer`). Either runs at most the room of this
    /// P's ring for the tasks they wake (`P::timer_room`).
    pub(crate) fn look_at_a_peer(
        &mut self,
        shared: &Shared,
        p: &P,
        own_timers: bool,
        now: &mut Nanos,
    ) {
        if !own_timers {
            self.help_peer(shared, p, now);
        } else if *now - self.last_look >= WATCH_EVERY {
            self.last_look = *now;
            self.watch_peer(shared, p, *now);
        }
    }

    /// The next P other than `p`, in turn, if it is running and has timers: the P and its
    /// `wake_time`. An idle P's timers are the poller's.
    #[inline]
    fn next_peer_with_timers<'a>(&mut self, shared: &'a Shared, p: &P) -> Option<(&'a P, Nanos)> {
        let n = shared.nallp();
        if n <= 1 {
            return None;
        }
        // `next <= n` (`nallp` never shrinks), so wrapping needs no division (this runs in
        // every scheduling round).
        let w = self;
        let wrap = |id: usize| if id >= n { 0 } else { id };
        let mut id = wrap(w.next);
        if id == p.id {
            id = wrap(id + 1);
        }
        w.next = id + 1;
        let q = shared.p(id)?;
        let due = q.timers.wake_time();
        if due == 0 || q.status() != PStatus::Running {
            return None;
        }
        Some((q, due))
    }

    /// A P with no timers of its own looks at one other P (in turn) in every round and runs
    /// that P's due timers, unless someone holds that heap's lock (then they are being run).
    /// A timer then waits for the first of the two Ps to end its current task, not for its
    /// own P's. The tasks they wake come to this P. A P that has timers never does this:
    /// there, every M runs due timers all the time, and Ms reaching into each other's heaps
    /// all the time would contend on their locks. The cost is one load when the other P has
    /// no timers, and a clock read when it has (what a P with a timer of its own pays in
    /// every round, here and in Go).
    #[inline]
    fn help_peer(&mut self, shared: &Shared, p: &P, now: &mut Nanos) {
        let Some((q, due)) = self.next_peer_with_timers(shared, p) else {
            return;
        };
        if *now == 0 {
            *now = nanotime();
        }
        if due <= *now {
            shared.try_run_timers(&q.timers, *now, p.timer_room());
        }
    }

    /// Every `WATCH_EVERY`, a P that has timers looks at one other P (in turn): if it is
    /// running, has a timer overdue by `STALL`, and began no scheduling round since that timer
    /// came due (its holder is stuck in one long task or preempted by the OS; an overdue timer
    /// alone proves nothing since a round runs at most its ring's room), this M
    /// runs that P's due timers, unless someone holds that heap's lock (then they are being
    /// run); the tasks they wake come to this P. The first look that finds the timer that
    /// late runs it: a timer-woken task waits for the first round of any P after that, not
    /// for a second look a whole slice of this P's tasks later. Go leaves a busy
    /// P's timers to its holder (and to preemption after 10 ms); Tokio's one timer wheel is
    /// driven by whichever worker gets there. The look is a load or two (the clock was read
    /// for this P's own timers).
    #[cold]
    fn watch_peer(&mut self, shared: &Shared, p: &P, now: Nanos) {
        let Some((q, due)) = self.next_peer_with_timers(shared, p) else {
            return;
        };
        if due <= now - STALL && q.no_round_since(due) {
            shared.try_run_timers(&q.timers, now, p.timer_room());
        }
    }
}
