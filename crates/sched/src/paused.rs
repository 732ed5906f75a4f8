//! The scheduler's half of the paused clock (`gort::time::pause`): when a paused runtime is
//! quiescent, its clock jumps to the earliest deadline, as Go's `testing/synctest` bubbles do.
//!
//! The clock itself ([`RuntimeClock`](gort_timer::RuntimeClock)) is a field of [`Shared`]
//! that every thread of the runtime reads through `nanotime`. Under a paused clock no
//! deadline is reached by sleeping: the M in the poller role ([`crate::park`]) asks
//! [`Shared::advance_paused_clock`] instead of arming the poller's timer.
//!
//! # Quiescent
//!
//! The runtime is quiescent when, at one instant under the scheduler lock (which every P
//! acquisition takes, so no M can start running in the middle of the check):
//! - no P is held by an M (so no task is running and no M is spinning),
//! - no run queue holds a task (the global queue, each P's ring and `runnext`),
//! - no clock hold is out: no `block_on`'s future is running or was woken since it last
//!   returned `Pending`, no thread runs user code without a P (a task inside
//!   `block_in_place`, a blocking-pool closure), and no thread without a P (an idle M,
//!   sysmon) is running timers or waking the tasks a poll readied,
//! - no blocking-pool closure of the runtime is queued,
//! - and no timer is already due (those run first, and may wake tasks).
//!
//! The rule behind the holds: a thread that runs user code holds the clock, a thread that
//! waits on the runtime does not. So a `block_on` parked in `block_in_place` or in a
//! blocking closure lends its thread's hold out (`block_on.rs`): it holds the clock only
//! while its future runs or is woken, as a top-level `block_on` does, and its sleeps end by
//! the clock's jump. A closure blocked in user code (`std::thread::sleep`, a blocking read)
//! keeps holding it: the program's own time runs there, in real time, as Tokio's
//! `spawn_blocking` inhibits auto-advance since 1.24.
//!
//! A task blocked on a socket holds the clock too (unless an `advance` asks for the time):
//! its peer may be outside the runtime, in real time, and jumping would make every network
//! timeout fire at once (Tokio's paused clock does; a known trap). Ready sockets are
//! collected before the check, so their tasks count as runnable. A task waiting for a
//! signal does not hold it (`net_api::background_waiters`): nothing in the program's time
//! would ever end that wait.
//!
//! Wakes from threads outside the runtime (a plain thread sending on a channel) are not seen:
//! such a thread is not part of the runtime's time.
//!
//! # Who re-checks
//!
//! Every change that can make the runtime quiescent breaks the blocked poller: an M that goes
//! idle (`park::poll`), the last clock hold released ([`Shared::release_clock_hold`]: a
//! `block_on` parking, a blocking closure returning), the last queued blocking closure
//! dropped unrun at shutdown. The poller M then re-checks.

use crate::p::PStatus;
use crate::park::Quiet;
use crate::shared::Shared;
use gort_timer::{min_nonzero, Nanos};
use parking_lot::Mutex;
use std::sync::Arc;
use std::task::Waker;

/// `advance`'s side: tasks waiting for quiescence, and how far they allow the clock to jump
/// while tasks wait on sockets.
#[derive(Default)]
pub(crate) struct Advances {
    state: Mutex<AdvanceState>,
}

#[derive(Default)]
struct AdvanceState {
    /// Tasks in `advance` whose target time came, waiting for the runtime to go quiet.
    waiters: Vec<Waker>,
    /// How many times waiters were woken: a waiter is done once it changed.
    quiet_epoch: u64,
    /// `advance` calls in progress, and the furthest instant they asked for.
    pending: usize,
    target: Nanos,
    /// `advance` calls still moving the clock, by id: `resume` ends them (on a running clock
    /// the rest of their span would pass in real time).
    moving: Vec<(u64, Waker)>,
    next_id: u64,
}

impl Advances {
    /// An `advance` to `target` begins: the clock may jump up to `target` even while tasks
    /// wait on sockets. Returns its id.
    pub(crate) fn begin(&self, target: Nanos) -> u64 {
        let mut s = self.state.lock();
        s.pending += 1;
        s.target = s.target.max(target);
        s.next_id += 1;
        s.next_id
    }

    /// The `advance` `id` ended (or was dropped).
    pub(crate) fn end(&self, id: u64) {
        let mut s = self.state.lock();
        s.pending -= 1;
        if s.pending == 0 {
            s.target = 0;
        }
        s.moving.retain(|(i, _)| *i != id);
    }

    /// Wakes the `advance` `id` with `waker` when the clock is resumed.
    pub(crate) fn wake_on_resume(&self, id: u64, waker: &Waker) {
        let mut s = self.state.lock();
        match s.moving.iter_mut().find(|(i, _)| *i == id) {
            Some((_, w)) => w.clone_from(waker),
            None => s.moving.push((id, waker.clone())),
        }
    }

    /// The clock was resumed: every `advance` in progress ends (returns its wakers).
    fn take_on_resume(&self) -> Vec<Waker> {
        let mut s = self.state.lock();
        let mut wakers: Vec<Waker> = std::mem::take(&mut s.waiters);
        wakers.extend(s.moving.drain(..).map(|(_, w)| w));
        wakers
    }

    /// The current quiet epoch (see [`Advances::wait_quiet`]).
    pub(crate) fn quiet_epoch(&self) -> u64 {
        self.state.lock().quiet_epoch
    }

    /// Wakes `waker` when the runtime is next quiescent, unless it was quiescent since
    /// `epoch` (then returns true: done).
    pub(crate) fn wait_quiet(&self, epoch: u64, waker: &Waker) -> bool {
        let mut s = self.state.lock();
        if s.quiet_epoch != epoch {
            return true;
        }
        if !s.waiters.iter().any(|w| w.will_wake(waker)) {
            s.waiters.push(waker.clone());
        }
        false
    }

    /// Whether a task waits for quiescence (then an idle M must take the poller role even
    /// with no timer pending, to notice it).
    pub(crate) fn has_waiters(&self) -> bool {
        !self.state.lock().waiters.is_empty()
    }

    fn target(&self) -> Nanos {
        self.state.lock().target
    }

    fn take_waiters(&self) -> Vec<Waker> {
        let mut s = self.state.lock();
        s.quiet_epoch += 1;
        std::mem::take(&mut s.waiters)
    }
}

impl Shared {
    /// The poller M's step under a paused clock: if the runtime is quiescent (module docs),
    /// wake the tasks waiting in `advance`, or else jump the clock to the earliest deadline.
    pub(crate) fn advance_paused_clock(self: &Arc<Self>) -> Quiet {
        if !self.clock.is_paused() {
            return Quiet::Work;
        }
        if self.clock_held() {
            return Quiet::Busy;
        }
        if self.net_waiting() && self.poll_net_now() != 0 {
            return Quiet::Work;
        }
        let net = self.net_holds_clock();
        let verdict = self.idle.locked(|_| self.quiescent_step(net));
        if verdict == Quiet::Advanced {
            // Outside the scheduler lock: a wake schedules a task. A waker is user code (a
            // foreign executor's): one that panics must not cost the others their wake-up.
            for w in self.advances.take_waiters() {
                self.catch_user(|| w.wake());
            }
        }
        verdict
    }

    /// The check and the jump, under the scheduler lock.
    ///
    /// No P changes hands under the lock, so only holders change the heaps and the queues
    /// meanwhile, and the reads go holds, heaps, holds, queues. A holder that adds a timer (a
    /// `block_on` future) did so before the first read of the holds saw them released; a
    /// holder that runs timers P-less ([`Shared::hold_paused_clock`]) took its hold before it
    /// took a timer off a heap, so if the heaps' read missed that timer, the second read of
    /// the holds sees the hold, or its release, which came after the woken task was queued.
    fn quiescent_step(&self, net_holds_clock: bool) -> Quiet {
        if self.all_ps().any(|p| p.status() == PStatus::Running) {
            return Quiet::Busy;
        }
        // Holds taken while we looked (a block_on woken by a blocking job's last act).
        if self.clock_held() {
            return Quiet::Busy;
        }
        let now = self.clock.now();
        let earliest = self
            .all_ps()
            .fold(0, |acc, p| min_nonzero(acc, p.timers.wake_time()));
        if earliest != 0 && earliest <= now {
            return Quiet::Work;
        }
        if self.clock_held() {
            return Quiet::Busy;
        }
        if !self.global.is_empty() || self.all_ps().any(|p| p.has_queued() || p.has_runnext()) {
            return Quiet::Work;
        }
        if self.advances.has_waiters() {
            return Quiet::Advanced;
        }
        if earliest == 0 {
            return Quiet::Busy;
        }
        if net_holds_clock && earliest > self.advances.target() {
            return Quiet::Busy;
        }
        self.clock.jump_to(earliest);
        Quiet::Advanced
    }

    /// Whether a clock hold is out or a blocking closure is queued. The queue is read first:
    /// a closure that starts takes its thread's hold before it leaves the queue's count
    /// (`blocking.rs`), so one of the two reads sees it.
    fn clock_held(&self) -> bool {
        self.blocking.queued() != 0 || self.clock.holds() != 0
    }

    /// Ends a clock hold (`block_on`'s poll, `block_in_place`, a blocking closure); the last one may leave a
    /// paused runtime quiescent.
    pub(crate) fn release_clock_hold(self: &Arc<Self>) {
        if self.clock.release() {
            self.may_be_quiescent();
        }
    }

    /// A clock hold for the time a thread without a P runs timers or wakes the tasks a poll
    /// readied (an idle M, sysmon), when the clock is paused; none otherwise. The task it
    /// wakes is in no heap and no queue until the wake has queued it: without the hold, the
    /// poller M could find the runtime quiescent in between and jump the clock past the
    /// instant the task was woken for (`tests/paused.rs`, `a_paused_run_gives_what_a_real_clock_run_gives`).
    pub(crate) fn hold_paused_clock(self: &Arc<Self>) -> PausedHold<'_> {
        if !self.clock.is_paused() {
            return PausedHold(None);
        }
        self.clock.hold();
        PausedHold(Some(self))
    }

    /// Something that held a paused clock ended: make an M look (the poller, or a new
    /// spinning M when nobody polls: every M may have parked while the clock was held).
    pub(crate) fn may_be_quiescent(self: &Arc<Self>) {
        if self.clock.is_paused() {
            self.wake_netpoller(gort_timer::NEVER);
        }
    }
}

/// A hold from [`Shared::hold_paused_clock`], released when dropped.
pub(crate) struct PausedHold<'a>(Option<&'a Arc<Shared>>);

impl Drop for PausedHold<'_> {
    fn drop(&mut self) {
        if let Some(shared) = self.0 {
            shared.release_clock_hold();
        }
    }
}

/// What `gort::time`'s `pause`, `resume`, `advance` and `is_paused` need from the scheduler.
/// Not a user API.
#[doc(hidden)]
pub mod clock_api {
    use crate::shared::Shared;
    use gort_timer::Nanos;
    use std::sync::Arc;
    use std::task::Waker;

    fn current(what: &str) -> Arc<Shared> {
        crate::context::current().unwrap_or_else(|| panic!("gort::time::{what} {}", crate::OUTSIDE))
    }

    /// Freezes the current runtime's clock. Returns false if it was paused already.
    ///
    /// # Panics
    ///
    /// Outside a gort runtime.
    #[track_caller]
    pub fn pause() -> bool {
        current("pause").clock.pause()
    }

    /// Lets the current runtime's clock run again. Returns false if it was not paused.
    ///
    /// # Panics
    ///
    /// Outside a gort runtime.
    #[track_caller]
    pub fn resume() -> bool {
        let shared = current("resume");
        let resumed = shared.clock.resume();
        // The poller M may be blocked with no deadline: let it arm the real one.
        shared.wake_netpoller(gort_timer::NEVER);
        // Every `advance` in progress ends: a running clock would take the rest of its span
        // in real time (an hour's advance, an hour), and quiescence is not waited for.
        for w in shared.advances.take_on_resume() {
            shared.catch_user(|| w.wake());
        }
        resumed
    }

    /// Whether the current thread's runtime has a paused clock (false outside a runtime).
    pub fn is_paused() -> bool {
        crate::context::with_current(|s| s.is_some_and(|s| s.clock.is_paused()))
    }

    /// An `advance` to `target` starts; returns the runtime it runs on.
    ///
    /// # Panics
    ///
    /// Outside a gort runtime.
    #[track_caller]
    pub fn advance_begin(target: Nanos) -> Advance {
        let shared = current("advance");
        let id = shared.advances.begin(target);
        Advance { shared, id }
    }

    /// An `advance` in progress; ends when dropped.
    pub struct Advance {
        shared: Arc<Shared>,
        id: u64,
    }

    impl Advance {
        /// Whether the runtime's clock is paused.
        pub fn is_paused(&self) -> bool {
            self.shared.clock.is_paused()
        }

        /// True once the clock runs again (`resume`d); otherwise `waker` is woken when it
        /// does. The advance then ends where the clock is.
        pub fn resumed(&self, waker: &Waker) -> bool {
            self.shared.advances.wake_on_resume(self.id, waker);
            // After registering: a resume before it is seen here, one after it wakes us.
            !self.shared.clock.is_paused()
        }

        /// The epoch to pass to [`Advance::wait_quiet`].
        pub fn quiet_epoch(&self) -> u64 {
            self.shared.advances.quiet_epoch()
        }

        /// True once the runtime was quiescent after `epoch`; otherwise `waker` is woken when
        /// it is.
        pub fn wait_quiet(&self, epoch: u64, waker: &Waker) -> bool {
            let done = self.shared.advances.wait_quiet(epoch, waker);
            if !done && !self.shared.clock.is_paused() {
                // Resumed meanwhile: a running clock never waits for quiescence.
                return true;
            }
            done
        }
    }

    impl Drop for Advance {
        fn drop(&mut self) {
            self.shared.advances.end(self.id);
        }
    }
}
