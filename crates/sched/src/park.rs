//! The park/unpark/poller hand-off: how an M with nothing to do gives its P up and either
//! blocks in the poller or parks (the last three phases of the M loop: Go's `findrunnable`
//! tail and `stopm`), and how whoever submits work or a timer gets an M to it (Go's `wakep`,
//! `startm`, `wakeNetPoller`).
//!
//! The protocol is written against two small traits, [`Sched`] (the queues, timers and
//! threads it looks at) and [`Poll`] (the poller), over `idle.rs`'s lists and counters, all on
//! the `gort_loom` facade: the loom models (`tests/loom_park.rs`) compile this file and
//! `idle.rs` as they are, with model queues, timers and a model poller behind the traits.
//!
//! # The no-lost-wake-up argument
//!
//! New work is (a) a task pushed to a P's queue or the global queue, or (b) a timer added or
//! moved earlier. Whoever submits it does: publish the work; `fence(SeqCst)`; then [`wakep`]
//! (reads `npidle` and `nmspinning`) or [`wake_netpoller`]. An M that goes idle does
//! ([`release_and_recheck`]): `release_p` (under the lock, after checking the global queue;
//! `npidle += 1`); if it was spinning, `nmspinning -= 1`; `fence(SeqCst)`; then re-checks every
//! queue, and ([`poll`]) every P's timer summary. Every idle M re-checks, spinning or not: Go
//! gets away with only spinners doing so because its global queue is pushed to under
//! `sched.lock`, while gort's global queue has a lock of its own, not the scheduler's (the
//! loom model `idle_m_vs_submit_with_a_parked_m` finds the lost wake-up that Go's rule leaves
//! here). By the two fences, either the submitter sees the idle P / zero spinners and starts
//! an M, or the idle M sees the work.
//!
//! A `wakep` that finds an M blocked in the poller passes it the spinner it counted
//! ([`pass_to_poller`]): it sets `poller_spinner`, breaks the poll, then re-reads `lastpoll`;
//! the poller M, when its poll ends, stores `lastpoll`, then swaps the flag ([`be_the_poller`]).
//! All `SeqCst`: if the re-read sees 0, the poller's store and swap come later and find the
//! flag; else the `wakep` swaps it back, and the swap decides which of the two holds the count.
//! The poller M takes an idle P as the spinner, or drops the count if none is left (whoever
//! took the P runs it, or re-checks every queue when it goes idle); the `wakep` starts an M.
//!
//! For timers the poller's side is: `lastpoll.swap(0)` (claim the role), then publish in
//! `poll_until` the instant it sleeps to, all `SeqCst`; the adder's: publish the timer, fence,
//! read `lastpoll` and `poll_until`. Either the poller's look at every heap after its claim
//! ([`sleep_in_poller`]) sees the timer, or the adder sees the poller and the instant it
//! sleeps to and breaks the poll, or sees no poller and starts an M.
//!
//! That instant is the one the poll really sleeps to (Go's `sched.pollUntil`, "the time to
//! which the current poll is expected to run"): after coalescing ([`Poll::published`]), up to
//! `MAX_GAP` past the earliest deadline. Publishing the earliest deadline instead let a timer
//! armed between the two, later than the deadline but before the coalesced wake-up, wait
//! for that wake-up whatever its slack (test `poller_deadline.rs`). One exception: when the
//! poller's minimum gap alone set the instant, no new deadline could move the poll sooner,
//! and the poller publishes an instant already past, so that no adder breaks it in vain.

use crate::idle::{Idle, IdleP, MHandle, Woken, PARK_BACKSTOP};
use gort_loom::atomic::{fence, Ordering::SeqCst};
use gort_timer::{min_nonzero, Nanos};
use std::sync::Arc;
use std::task::Waker;

/// The poller the idle M blocks in (Go's netpoll): `poller.rs`'s `Poller` in the runtime.
pub(crate) trait Poll {
    /// Blocks until `until` (ns of the runtime clock; coalescing may defer the wake-up to as
    /// late as `latest`) or a [`Poll::wake`], whichever is first. The wakers of the tasks the
    /// poll readied are left in `readied`, for the caller to wake once it holds a P.
    fn poll(&self, until: Nanos, latest: Nanos, readied: &mut Vec<Waker>);
    /// What the M that holds the poller role publishes in `poll_until` before a
    /// [`Poll::poll`] for `until` (> 0) and `latest`: the instant the poll sleeps to
    /// (coalescing may defer it past `until`, not past `latest`), or an instant already past
    /// when no new deadline could make the poll end sooner (the poller's minimum gap), so
    /// that no timer breaks it in vain.
    fn published(&self, until: Nanos, _latest: Nanos) -> Nanos {
        until
    }
    /// Ends the poll in progress, or the next one if none is (Go's `netpollBreak`).
    fn wake(&self);
}

/// What the hand-off needs of the scheduler: its idle lists, its poller, and a look at its
/// queues, timers and clock.
pub(crate) trait Sched {
    /// The scheduler's P.
    type P: IdleP;
    /// The scheduler's poller.
    type Poller: Poll;
    /// The idle Ps and Ms, spinning count and poller state.
    fn idle(&self) -> &Idle<Self::P>;
    /// The poller.
    fn poller(&self) -> &Self::Poller;
    /// Whether the runtime is shutting down.
    fn is_shutdown(&self) -> bool;
    /// The runtime clock (ns).
    fn now(&self) -> Nanos;
    /// Whether the global queue holds a task.
    fn global_has_work(&self) -> bool;
    /// Whether any queue (the global queue or any P's) holds a task.
    fn work_queued(&self) -> bool;
    /// Runs, P-less, the timers of every P that are due at `now`; returns the earliest
    /// deadline left over every P and `poll_until` (0 = none), and the latest instant that
    /// deadline's timer tolerates (its slack; 0 = none).
    fn run_idle_timers(&self, poll_until: Nanos, now: Nanos) -> (Nanos, Nanos);
    /// Whether some P has a timer due at `now`.
    fn timers_due(&self, now: Nanos) -> bool;
    /// Whether tasks wait on sockets (Go's `netpollWaiters`): then an idle M polls even
    /// without a timer, blocking until readiness or a break.
    fn net_waiting(&self) -> bool;
    /// Starts a new M holding `p` (spinning or not).
    fn start_m(&self, p: Arc<Self::P>, spinning: bool);
    /// Whether a test paused the runtime's clock (`paused.rs`).
    fn clock_paused(&self) -> bool {
        false
    }
    /// Under a paused clock: if the runtime is quiescent, jump the clock to the earliest
    /// deadline or wake the tasks in `advance` (`paused.rs`).
    fn advance_paused_clock(&self) -> Quiet {
        Quiet::Work
    }
    /// Wakes the tasks in `readied` now, from a thread that holds no P.
    fn wake_now(&self, readied: &mut Vec<Waker>) {
        readied.drain(..).for_each(Waker::wake);
    }
    /// Whether a task in `advance` waits for quiescence: an idle M must then take the
    /// poller role even with no timer pending.
    fn awaits_quiescence(&self) -> bool {
        false
    }
    /// Called by [`wake_netpoller`] for a timer that wakes only the running task, when no M
    /// polls, in place of its `wakep`: true if the caller is an M that holds a P and has
    /// recorded that it owes that `wakep`, to be paid before it runs another task; if it
    /// goes idle first, its own look at every heap ([`poll`]) covers the timer.
    fn owe_timer_wakep(&self) -> bool {
        false
    }
}

/// What the poller M found when it asked the paused clock to advance.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Quiet {
    /// Something runs or holds the clock: block until a break.
    Busy,
    /// Work is queued, timers are due, or the clock runs again: go back and run it.
    Work,
    /// The clock jumped to the next deadline, or `advance`'s waiters were woken.
    Advanced,
}

/// A P taken back by an idle M, and whether the M spins.
pub(crate) type Back<P> = (Arc<P>, bool);

/// The outcome of the polling phase.
pub(crate) enum Polled<P> {
    /// The M took an idle P back (and spins or not): start the round again.
    Holds(Back<P>),
    /// The runtime shuts down.
    Shutdown,
    /// Nothing to do: park.
    Park,
}

/// Phase 5 of the M loop, Go's "delicate dance": gives `p` up (refused if the global queue
/// refilled, checked under the scheduler lock), stops spinning, fences, then re-checks every
/// queue. Returns whether the M was spinning, or the P it holds again.
///
/// Every idle M re-checks, not only spinners (module docs). Work that appeared is work to
/// steal, so the M comes back as a spinner whatever it was: a non-spinner would find the
/// spinning limit closed by the very spinner whose queue holds the work, and loop here until
/// the OS ran that M again.
pub(crate) fn release_and_recheck<S: Sched>(
    s: &S,
    p: Arc<S::P>,
    spinning: bool,
) -> Result<bool, Back<S::P>> {
    let idle = s.idle();
    if let Err(p) = idle.release_p(p, || s.global_has_work()) {
        return Err((p, spinning));
    }
    if spinning {
        idle.dec_spinning();
    } else {
        idle.idle_fence();
    }
    if s.work_queued() {
        if let Some(back) = reacquire(s, true) {
            return Err(back);
        }
    }
    Ok(spinning)
}

/// Phase 6, Go's `netpoll(delay)` at the end of `findrunnable`: with the earliest timer of
/// every P as deadline (due ones run here, P-less: they belong to a P the M could not steal
/// from), claim the poller role (`lastpoll.swap(0)`) and block until that deadline or a break,
/// then take an idle P back; if another M polls, break its poll when it would oversleep our
/// deadline. Without a deadline the M parks, unless tasks wait on sockets: then it polls
/// without a timeout (Go blocks in `netpoll` while `netpollWaiters > 0`).
///
/// The tasks the poll readied are left in `readied`: the caller wakes them after it took the
/// P back, so that they go to its P and it runs one itself (Go's `findrunnable` after
/// `netpoll`), or P-less if it parks.
pub(crate) fn poll<S: Sched>(
    s: &S,
    poll_until: Nanos,
    was_spinning: bool,
    readied: &mut Vec<Waker>,
) -> Polled<S::P> {
    let now = s.now();
    let (poll_until, latest) = s.run_idle_timers(poll_until, now);
    if poll_until == 0 && !s.net_waiting() && !s.awaits_quiescence() {
        return Polled::Park;
    }
    let idle = s.idle();
    if idle.lastpoll.swap(0, SeqCst) != 0 {
        let deadline = (poll_until, latest);
        return be_the_poller(s, deadline, now, was_spinning, readied);
    }
    // Under a paused clock the poller waits for quiescence, which this M's idling may bring.
    if s.clock_paused() || oversleeps(idle.poll_until.load(SeqCst), poll_until, latest) {
        s.poller().wake();
    }
    Polled::Park
}

/// Whether a poller that sleeps to `theirs` (0 = no deadline) would serve our earliest timer,
/// due at `until` (0 = none) and tolerating `latest` (its slack), too late. Compared with
/// `latest`, not `until`: the poller coalesces past the earliest deadline it saw, which is
/// usually ours too, by no more than that deadline's slack; comparing with `until` would break
/// every coalesced sleep.
fn oversleeps(theirs: Nanos, until: Nanos, latest: Nanos) -> bool {
    until != 0 && (theirs == 0 || theirs > latest.max(until))
}

/// The M holds the poller role: sleep until `poll_until` or a break, then give the role back
/// and take an idle P. Shutdown breaks the poller once; an M that passed the loop's shutdown
/// check before it was set, and took the role after the previous poller used up that break,
/// would sleep to its earliest timer (an hour, say): so the claim re-checks shutdown.
fn be_the_poller<S: Sched>(
    s: &S,
    (poll_until, latest): (Nanos, Nanos),
    now: Nanos,
    was_spinning: bool,
    readied: &mut Vec<Waker>,
) -> Polled<S::P> {
    let idle = s.idle();
    if s.is_shutdown() {
        idle.lastpoll.store(s.now(), SeqCst);
        return Polled::Shutdown;
    }
    if s.clock_paused() {
        wait_on_paused_clock(s, readied);
    } else {
        sleep_in_poller(s, (poll_until, latest), now, readied);
    }
    idle.poll_until.store(0, SeqCst);
    idle.lastpoll.store(s.now(), SeqCst);
    if idle.poller_spinner.swap(false, SeqCst) {
        // A `wakep` counted a spinner for us: we are it, with the idle P it saw if still idle.
        return match idle.pidleget() {
            Some(p) => Polled::Holds((p, true)),
            None => {
                idle.dec_spinning();
                Polled::Park
            }
        };
    }
    match reacquire(s, was_spinning) {
        Some(back) => Polled::Holds(back),
        None => Polled::Park,
    }
}

/// Publishes the instant the poll sleeps to (module docs), looks at every heap again, then
/// sleeps unless the deadline is due already. `poll_until == 0`: no timer, sockets only;
/// block until readiness or a break.
///
/// The second look is the claim's half of the hand-off with a timer's adder: the scan that
/// decided to poll ran before the claim, and an adder that published its timer in between
/// saw no poller, so it broke no poll (its `wakep` may find the spinning limit closed). After
/// `lastpoll.swap(0)` and the publication, either this look sees the timer, or the adder sees
/// the claim and the instant published and breaks the poll if it is later.
fn sleep_in_poller<S: Sched>(
    s: &S,
    (poll_until, latest): (Nanos, Nanos),
    now: Nanos,
    readied: &mut Vec<Waker>,
) {
    let idle = s.idle();
    let first = published(s, poll_until, latest, now);
    idle.poll_until.store(first, SeqCst);
    let (until, latest_again) = s.run_idle_timers(poll_until, now);
    let latest = min_nonzero(latest, latest_again);
    let target = published(s, until, latest, now);
    if target != first {
        idle.poll_until.store(target, SeqCst);
    }
    if until > now || until == 0 {
        s.poller().poll(until, latest.max(until), readied);
    }
}

/// What the poller M publishes in `poll_until` for a poll to `until` (0: none) whose earliest
/// timer tolerates `latest` ([`Poll::published`]), or `until` itself when that is due
/// already (no sleep).
fn published<S: Sched>(s: &S, until: Nanos, latest: Nanos, now: Nanos) -> Nanos {
    match until {
        0 => 0,
        _ if until > now => s.poller().published(until, latest.max(until)),
        _ => until,
    }
}

/// The poller role under a paused clock: no deadline is reached by sleeping. If the runtime
/// is quiescent the clock jumps (or `advance` is woken) and the M goes back to run what came
/// due; if work is queued it goes back at once; else it blocks, with no deadline, until an
/// idle M, a released clock hold or a socket breaks the poll (`paused.rs`).
///
/// The tasks the poll readied are woken (P-less) before the M gives the role up: once it
/// has, another M may take the role and look for quiescence, and a task whose waker is
/// still in this M's hands is in no queue, its socket no longer counted as waited on.
fn wait_on_paused_clock<S: Sched>(s: &S, readied: &mut Vec<Waker>) {
    s.idle().poll_until.store(0, SeqCst);
    if s.advance_paused_clock() == Quiet::Busy {
        s.poller().poll(0, 0, readied);
        s.wake_now(readied);
    }
}

/// Takes an idle P back after new work or a poller wake-up. `spin`: the M spins (again), as
/// a signal for `reset_spinning` to wake another M (Go) and to pass the spinning limit.
fn reacquire<S: Sched>(s: &S, spin: bool) -> Option<Back<S::P>> {
    let p = s.idle().pidleget()?;
    if spin {
        s.idle().inc_spinning();
    }
    Some((p, spin))
}

/// Phase 7, Go's `stopm`: parks the M on its hand-off slot until handed a P. Every
/// `PARK_BACKSTOP` it looks around once on its own (every submission wakes an M explicitly;
/// this is a backstop only). Returns `None` on shutdown.
pub(crate) fn stopm<S: Sched>(s: &S, m: &Arc<MHandle<S::P>>) -> Option<Back<S::P>> {
    loop {
        if s.is_shutdown() {
            return None;
        }
        s.idle().mput(m);
        // Shutdown may have drained the idle list just before our mput.
        if s.is_shutdown() {
            s.idle().mremove(m);
            return None;
        }
        match wait_for_handoff(s, m) {
            Woken::P(p, spinning) => return Some((p, spinning)),
            Woken::Shutdown => return None,
            Woken::Timeout => {}
        }
        if s.work_queued() || s.timers_due(s.now()) {
            if let Some(p) = s.idle().pidleget() {
                return Some((p, false));
            }
        }
    }
}

/// Waits on `m`'s slot for a hand-off, or for the backstop once: after a timeout the M takes
/// itself off the idle list, unless a `startm` popped it already (then its hand-off is on the
/// way and must be waited for).
fn wait_for_handoff<S: Sched>(s: &S, m: &Arc<MHandle<S::P>>) -> Woken<S::P> {
    let mut timeout = Some(PARK_BACKSTOP);
    loop {
        match m.wait(timeout) {
            Woken::Timeout if !s.idle().mremove(m) => timeout = None,
            woken => return woken,
        }
    }
}

/// Go's `wakep`: start a spinning M if there is an idle P and nobody is spinning.
#[inline]
pub(crate) fn wakep<S: Sched>(s: &S) {
    if s.idle().wakep_gate() && !pass_to_poller(s) {
        startm(s, None, true);
    }
}

/// The spinner a `wakep` counted, passed to the M blocked in the poller when there is one:
/// its poll is broken and it takes the idle P as that spinner ([`be_the_poller`]), where
/// handing the P to a parked M would wake a third thread while the poller M comes back to no
/// idle P (Tokio wakes a worker parked in its driver through the driver). Returns false if
/// nobody polls, or the poller left before it could take the spinner (then the caller
/// starts one as usual).
fn pass_to_poller<S: Sched>(s: &S) -> bool {
    let idle = s.idle();
    if idle.lastpoll.load(SeqCst) != 0 {
        return false;
    }
    idle.poller_spinner.store(true, SeqCst);
    s.poller().wake();
    // The poller M stores `lastpoll`, then takes the flag: if it has not stored yet, it
    // will find the flag; if it has, take the flag back unless it already did.
    idle.lastpoll.load(SeqCst) == 0 || !idle.poller_spinner.swap(false, SeqCst)
}

/// Go's `startm`: run `p` (or an idle P) on an idle M, or on a new one.
pub(crate) fn startm<S: Sched>(s: &S, p: Option<Arc<S::P>>, spinning: bool) {
    let idle = s.idle();
    if s.is_shutdown() {
        if let Some(p) = p {
            idle.pidleput(p);
        }
        if spinning {
            idle.dec_spinning();
        }
        return;
    }
    match idle.startm_pick(p, spinning) {
        Ok((p, Some(m))) => m.hand(p, spinning),
        Ok((p, None)) => s.start_m(p, spinning),
        Err(()) => {}
    }
}

/// Go's `wakeNetPoller(when)`: called after a timer was added or moved earlier to `when`,
/// makes sure some M wakes up by then: break the poller if it sleeps past `when` (the instant
/// it sleeps to, coalescing included), or start an M if nobody polls, unless the timer wakes
/// only the task running on the caller (`own`: a `Sleep` armed in its poll) and the caller
/// is an M that will get there itself ([`Sched::owe_timer_wakep`]).
///
/// Go wakes an M whenever nobody polls. A task that sleeps in a loop on an idle runtime
/// arms each sleep on the M that came back from the poller to run it: nobody polls then, so
/// Go's rule woke a parked M that took the idle P, found nothing and took the poller role
/// with the new deadline, while the first M parked: a futex wake, a wait and two switches
/// per tick. The first M is about to go idle and poll itself, and the timer's firing could
/// run nobody before the poll in progress ends (it wakes that very task): the M owes the
/// `wakep` only if it runs another task first. Tokio wakes no worker for a timer at all.
pub(crate) fn wake_netpoller<S: Sched>(s: &S, when: Nanos, own: bool) {
    fence(SeqCst);
    let idle = s.idle();
    if idle.lastpoll.load(SeqCst) == 0 {
        let until = idle.poll_until.load(SeqCst);
        if until == 0 || until > when {
            s.poller().wake();
        }
    } else if !(own && s.owe_timer_wakep()) {
        wakep(s);
    }
}
