//! Which task a P runs next: its holder-only state (`Local`: the ring's owner half, the
//! scheduling tick, the `runnext` streak and lane, the global queue's turn) and the pick
//! rules of design/ARCHITECTURE.md, "The M loop" (Go's `runqget` with `schedtick%61`,
//! Tokio's LIFO-slot limit, the time slice's inheritance).

use crate::runnext::{Pushed, RunNext};
use crate::runq::{self, Global, Lane, Take};
use crate::slice::Slices;
use crate::task::{Releases, Task};

/// After this many `runnext` tasks in a row that the scheduling round itself readied (timers,
/// the poller) the P takes from its queue instead (Tokio's `MAX_LIFO_POLLS_PER_TICK = 3`):
/// timers firing round after round would otherwise keep the tasks they pushed into the ring
/// waiting (T3_1M's lateness grew). Tasks readied by a running task are bounded by
/// its time slice instead (slice.rs, [`Local::inherits`]).
const MAX_RUNNEXT_STREAK: u32 = 3;

/// Every 61st scheduling round the P looks at the global queue first so that it cannot starve
/// (Go's `schedtick%61`; 61 is prime so the check does not fall into step with patterns).
pub(crate) const GLOBAL_QUEUE_INTERVAL: u32 = 61;

pub(crate) struct Local {
    pub(crate) queue: runq::Local<Task>,
    /// The lane of the task in `runnext`: the one it keeps when a newer task kicks it out.
    pub(super) runnext_lane: Lane,
    pub(crate) tick: u32,
    pub(super) runnext_streak: u32,
    /// Whether the task in `runnext` was readied by a running task (a chain's next link, which
    /// inherits its slice), not by the scheduling round (timers, the poller): see
    /// [`Local::inherits`].
    pub(super) runnext_chained: bool,
    /// Set when a task yielded after a task was readied into the global queue: the next pick
    /// serves the global queue first (see [`P::note_yield`]).
    pub(super) serve_global: bool,
    /// `Global::woken` when this P last served the global queue for a yield.
    pub(super) seen_woken: usize,
    /// Tasks finished on this P that are still in the registry (registry.rs, "Who touches a
    /// shard").
    pub(super) releases: Releases,
}

impl Local {
    /// [`P::next_local`]'s pick.
    pub(super) fn next(
        &mut self,
        runnext: &RunNext<Task>,
        slices: &Slices,
        global: &Global<Task>,
        thieves: &dyn Thieves,
    ) -> Option<Task> {
        self.tick = self.tick.wrapping_add(1);
        if let Some(t) = self.ahead_of_runnext(runnext, global, thieves) {
            slices.begin();
            return Some(t);
        }
        // SAFETY: the holder's take (`Local` is the holder's).
        if let Some(next) = unsafe { runnext.pop() } {
            let chained = self.runnext_chained;
            if self.inherits(chained, slices) {
                self.runnext_streak += 1;
                return Some(next);
            }
            // Past the bound: the ring's oldest task goes first, in a slice of its own.
            self.runnext_streak = 0;
            slices.begin();
            return match self
                .queue
                .pop()
                .or_else(|| self.after_a_spent_slice(chained, global))
            {
                Some(t) => {
                    self.put_back(next, runnext, global);
                    Some(self.passing_over_runnext(t, runnext, global, thieves))
                }
                None => Some(next),
            };
        }
        self.runnext_streak = 0;
        slices.begin();
        self.queue.pop()
    }

    /// Whether the `runnext` task just taken runs now. One readied by a running task
    /// (`chained`: the one that ran last, or an earlier one) inherits its time slice, as in Go, and runs unless sysmon
    /// found the slice spent (slice.rs): two tasks readying each other hold the P for a slice,
    /// however many turns that is (Go's TestPingPongHog). One the round readied (timers, the
    /// poller) is bounded by count: at most [`MAX_RUNNEXT_STREAK`] in a row.
    #[inline]
    fn inherits(&self, chained: bool, slices: &Slices) -> bool {
        if chained {
            !slices.is_spent()
        } else {
            self.runnext_streak < MAX_RUNNEXT_STREAK
        }
    }

    /// The global queue's oldest task (`Ready` lane first) when a chain's slice is spent
    /// (`chained`) and the ring is empty, as Go's preempted goroutine goes behind it. Else a
    /// task spawned off every P waited for the 61-tick check, 61 turns of the chain
    /// (TestPingPongHog's light pair, spawned by `block_on`: 100 ms behind the hog's turns).
    #[cold]
    #[inline(never)]
    fn after_a_spent_slice(&mut self, chained: bool, global: &Global<Task>) -> Option<Task> {
        if !chained {
            return None;
        }
        self.queue.refill(global, 1, Take::First(Lane::Ready))
    }

    /// The picks that go ahead of `runnext`: the global queue every 61st tick, and after a
    /// yield that saw started work waiting there.
    #[inline]
    fn ahead_of_runnext(
        &mut self,
        runnext: &RunNext<Task>,
        global: &Global<Task>,
        thieves: &dyn Thieves,
    ) -> Option<Task> {
        if self.tick % GLOBAL_QUEUE_INTERVAL == 0 {
            // Every other check serves the global queue's `Fresh` lane first, so that
            // new tasks get in however many woken ones keep arriving (runq.rs).
            let first = if (self.tick / GLOBAL_QUEUE_INTERVAL) % 2 == 0 {
                Lane::Ready
            } else {
                Lane::Fresh
            };
            if let Some(t) = self.queue.refill(global, 1, Take::First(first)) {
                return Some(self.passing_over_runnext(t, runnext, global, thieves));
            }
        }
        // After the fairness check, which alone serves the `Fresh` lane first.
        if std::mem::take(&mut self.serve_global) {
            if let Some(t) = self.take_woken_share(global, thieves) {
                return Some(self.passing_over_runnext(t, runnext, global, thieves));
            }
        }
        None
    }

    /// A yield's look at the tasks woken off every P (`P::note_yield`): takes Go's
    /// `globrunqget` share of the global queue's `Ready` lane, the lane's length over the
    /// procs, plus one, into the ring; returns the first. They may be many at once (sysmon
    /// runs a stuck P's due timers in one go): taking one per yield left the rest for the
    /// next wake-up or the 61-round check, 0.6-1.6 s behind spinners yielding every 10 ms
    /// (test `many_timer_woken_tasks_run_within_slices_of_coarse_spinners`). Out of line, as
    /// every rare path of the pick.
    #[cold]
    #[inline(never)]
    fn take_woken_share(&mut self, global: &Global<Task>, thieves: &dyn Thieves) -> Option<Task> {
        let share = global.ready_len() / thieves.procs().max(1) + 1;
        self.queue.refill(global, share, Take::First(Lane::Ready))
    }

    /// `t` is picked ahead of `runnext`: a task there goes to the ring's tail when a thief
    /// may need it (see [`P::next_local`]). Returns `t`.
    #[inline]
    fn passing_over_runnext(
        &mut self,
        t: Task,
        runnext: &RunNext<Task>,
        global: &Global<Task>,
        thieves: &dyn Thieves,
    ) -> Task {
        if runnext.is_full() {
            self.hand_runnext_to_thieves(runnext, global, thieves);
        }
        t
    }

    /// Puts `next`, just taken from `runnext`, back there (nobody fills the slot but its
    /// holder, so it is still empty).
    fn put_back(&mut self, next: Task, runnext: &RunNext<Task>, global: &Global<Task>) {
        // SAFETY: the holder's push.
        if let Pushed::Kicked(t) | Pushed::Busy(t) = unsafe { runnext.push(next) } {
            debug_assert!(false, "runnext filled by someone other than its holder");
            self.queue.push(t, global, self.runnext_lane);
        }
    }

    /// Moves `runnext`'s task to the ring's tail and wakes a thief, when the ring is left
    /// empty (the task is then next anyway, and nothing else is there to steal) or a P idles.
    /// Otherwise it stays: every P is busy, and behind a long ring it would lose its turn
    /// (R3 slowed when it always moved). Out of line, so that the pick's hot path keeps
    /// none of this code (inlined, it slowed R2's yields; design/PERFORMANCE-LOG.md,
    /// "runnext passed over").
    #[cold]
    #[inline(never)]
    fn hand_runnext_to_thieves(
        &mut self,
        runnext: &RunNext<Task>,
        global: &Global<Task>,
        thieves: &dyn Thieves,
    ) {
        if !self.queue.is_empty() && !thieves.any_idle() {
            return;
        }
        // SAFETY: the holder's take.
        if let Some(next) = unsafe { runnext.pop() } {
            self.queue.push(next, global, self.runnext_lane);
            thieves.wake_one();
        }
    }
}

/// What [`P::next_local`] needs from the scheduler to hand a passed-over `runnext` task to
/// another M.
pub(crate) trait Thieves {
    /// Whether some P idles (a racy hint).
    fn any_idle(&self) -> bool;
    /// Go's `wakep`; touches no P's local state (it runs inside `with_local`).
    fn wake_one(&self);
    /// The runtime's procs (Go's `gomaxprocs`).
    fn procs(&self) -> usize;
}
