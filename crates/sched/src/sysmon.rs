//! The monitor thread: Go's `sysmon`, reduced to its duties in gort, and parked while
//! every P is idle.
//!
//! Its duties, all for while some P runs:
//! - Timers. Timers run inside the scheduler: each P runs its own in every scheduling round,
//!   and idle Ms run everyone's. When every M is busy in a long poll (or blocked), nobody
//!   gets there and timers go late (go#38860, go#45632: Go since 1.16 has no backstop for
//!   this). sysmon looks at the P summaries (atomics only) and, for a P whose timers are
//!   overdue by more than `GRACE` and that began no scheduling round since they came due,
//!   runs them itself (timer callbacks only queue tasks and send
//!   on channels, so this is cheap and never blocks); the woken tasks go to the global queue.
//!   It gives way to the P's own M between two timers (`Timers::check_giving_way`): a task
//!   that arms timers in a loop and sysmon otherwise traded the heap's lock timer by timer.
//! - Sockets. Go's non-blocking look when tasks wait on them and nobody has polled for 10 ms
//!   (`netpoll.rs`), so ready sockets are not left behind busy Ps.
//! - `runnext`. A task that spawns or wakes another and then computes without yielding
//!   leaves it in its P's `runnext`, which wakes no M (`Shared::push_task`); while some P
//!   idles, sysmon takes a task that sat there between two of its looks (the holder is stuck
//!   in one task: Go's `retake` tells so by `schedtick`) to the global queue and wakes an M
//!   (`take_stuck_runnext`). Spinning thieves take it sooner if one looks (`worker.rs`).
//!   And it marks the time slice of a P that began none for 10 ms as spent, so that a chain
//!   of tasks readying each other through `runnext` gives way to the P's queue at its next
//!   pick (`look_at_slices`, slice.rs; Go's `retake` preempts the running goroutine).
//! - Rings. No P may idle while a task waits in a busy P's ring: every push that leaves a
//!   task stealable wakes an M, and the last spinner to stop looks at every ring (worker.rs,
//!   `reset_spinning`). That rests on an argument; a wake-up lost there (2a0fcd4 fixed one,
//!   seen as Go's TestGoroutineParallelism2 hanging twice in ~600 runs) left the task behind
//!   a holder that computes, for as long as it computes. Go needs no backstop: sysmon
//!   preempts a goroutine after 10 ms and the P's next round runs its ring. gort cannot
//!   preempt, so sysmon brings a thief instead: while some P idles and no M spins, a running
//!   P whose ring holds tasks and whose holder began no slice since the previous look (stuck
//!   in one task, or a `runnext` chain) gets a `wakep` (`wake_for_rings`); the spinner
//!   steals half the ring, and as the last spinner wakes another if tasks are left. A thief,
//!   not a move to the global queue: the ring is there to be stolen from (one CAS, no lock,
//!   no task moved twice), and a move would need a consumer's side of the ring here. It
//!   costs the task paths nothing (atomics read by sysmon's look, which reads the slice
//!   counts anyway); it never fires with every P running (nobody to wake), while an M spins
//!   or one is on its way (`nmspinning`), nor for a ring since emptied, so a woken M that
//!   finds nothing is not woken again. At 1 proc nobody could run the ring but its holder, and nothing is done:
//!   there gort, as Tokio, relies on tasks yielding (the cooperative budget).
//!
//! Go's other sysmon duties are not sysmon's here: `block_in_place` hands its P off before it
//! blocks (Go's sysmon retakes Ps from syscalls), and a task woken off every P is served
//! within one slice by the yield rule (`p.rs`), not by a preemption flag.
//!
//! # Parking
//!
//! While every P is idle neither duty has anything to do: an idle M blocks in the poller
//! until the earliest timer of every P and watches the sockets (`park.rs`). So sysmon parks,
//! as Go's does (`sched.sysmonwait`), instead of looking every 10 ms; it does not park while
//! tasks wait on sockets and nobody is blocked in the poller (block_on and foreign threads
//! then rely on its look).
//!
//! Whoever ends the idle spell must get sysmon looking again, within its period: the M that
//! takes a P (`Idle::pidleget`, `Idle::startm_pick`) or adds a socket waiter off every P
//! calls `Idle::alert_sysmon`, a fence and one load while sysmon runs. Go wakes sysmon there
//! (a futex wake); gort sets sysmon's alarm `IDLE_TICK` ahead instead (`alarm.rs`: one
//! `timerfd` setting, no context switch), and later takers leave it alone unless it would
//! ring within `REARM_BEFORE`. A spell that lasts gets sysmon's look within `IDLE_TICK` of its start, as
//! before; the short spells of an idle ticker (one per millisecond) keep pushing the alarm
//! ahead and never wake sysmon, where a wake per take would have woken it 1,000 times a
//! second.
//!
//! No alert is lost: sysmon publishes `parked`, fences, then takes its last look at `npidle`
//! and the socket waiters; a taker updates `npidle` (or the waiters), fences, then loads
//! `parked`. By the two `SeqCst` fences either sysmon's look sees the P taken and it does not
//! park, or the taker sees it parked and sets the alarm (loom model
//! `sysmon_parking_vs_a_p_take`; stress test `tests/sysmon.rs`). The alarm is set under
//! sysmon's state lock and only while `parked` holds there, so a late taker cannot override
//! the tick sysmon sets after it resumed; at worst it rings once more than needed.

mod alarm;
#[cfg(all(test, not(loom)))]
mod ring_tests;

use crate::p::PStatus;
use crate::runnext::Fill;
use crate::runq::Lane;
use crate::shared::Shared;
use crate::slice::Seen;
use alarm::Alarm;
use gort_timer::nanotime;
use parking_lot::Mutex;
use std::sync::atomic::Ordering::*;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How overdue a timer must be before sysmon steps in (the Ps themselves are usually quicker).
const GRACE: i64 = 500_000;
/// sysmon's period while timers are pending, and its longest sleep otherwise.
const BUSY_TICK: Duration = Duration::from_micros(500);
const IDLE_TICK: Duration = Duration::from_millis(10);
/// Wake-ups in a row that found nothing overdue before sysmon starts backing off.
const BACKOFF_AFTER: u32 = 4;
/// A taker leaves a parked sysmon's alarm alone unless it rings within this: set at most
/// about every `IDLE_TICK - REARM_BEFORE` while Ps keep being taken.
const REARM_BEFORE: Duration = Duration::from_millis(3);

/// The handle that stops sysmon, and its alarm.
pub(crate) struct Sysmon {
    alarm: Alarm,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    stop: bool,
    /// sysmon sleeps until alerted (see the module docs).
    parked: bool,
    /// While parked: when the alarm a taker set rings (`None`: no taker set it yet).
    rings_at: Option<Instant>,
}

impl Sysmon {
    pub(crate) fn start(shared: Arc<Shared>) -> (Arc<Sysmon>, std::thread::JoinHandle<()>) {
        let alarm = Alarm::new().unwrap_or_else(|e| panic!("gort: cannot start sysmon: {e}"));
        let me = Arc::new(Sysmon {
            alarm,
            state: Mutex::new(State::default()),
        });
        let alerted = me.clone();
        shared
            .idle
            .set_sysmon_alert(Box::new(move || alerted.alert()));
        let me2 = me.clone();
        let h = std::thread::Builder::new()
            .name("gort-sysmon".into())
            .spawn(move || me2.run(shared))
            .unwrap_or_else(|e| panic!("gort: cannot start sysmon: {e}"));
        (me, h)
    }

    pub(crate) fn stop(&self) {
        self.state.lock().stop = true;
        self.alarm.set(Duration::ZERO);
    }

    fn run(&self, shared: Arc<Shared>) {
        let _ctx = crate::context::enter(shared.clone());
        // Wake-ups in a row that found no timer overdue (Go's sysmon `idle` count).
        let mut quiet = 0u32;
        // Each P's `runnext` fill at the previous look.
        let mut runnexts = Vec::new();
        // Whether this look is the quick second look at a `runnext` (`take_stuck_runnext`).
        let mut second_look = false;
        // Each P's slice count at the look that first saw it (slice.rs).
        let mut slices = Vec::new();
        while !self.state.lock().stop {
            shared.sysmon_looks.fetch_add(1, Relaxed);
            let mut tick = look(&shared, &mut quiet);
            let rings = look_at_slices(&shared, &mut slices);
            let look_again = shared.idle.npidle() > 0
                && (take_stuck_runnext(&shared, &mut runnexts) | wake_for_rings(&shared, rings));
            // At most every other look is a quick one: a holder that keeps refilling its
            // `runnext` (a chain of spawns) doubles sysmon's looks at most.
            second_look = look_again && !second_look;
            if second_look {
                tick = tick.min(BUSY_TICK);
            }
            if every_p_idle_and_covered(&shared) {
                self.park(&shared);
            } else {
                self.sleep(tick);
            }
        }
    }

    /// Sleeps `tick`, or until stopped.
    fn sleep(&self, tick: Duration) {
        {
            // Under the lock: a `stop` after this check rings the alarm after this setting.
            let s = self.state.lock();
            if s.stop {
                return;
            }
            self.alarm.set(tick);
        }
        self.alarm.wait();
    }

    /// Parks until a taker's alarm (or `stop`) rings; returns at once if the last look, after
    /// `parked` is published, finds a P running (module docs, "Parking").
    fn park(&self, shared: &Shared) {
        {
            let mut s = self.state.lock();
            if s.stop {
                return;
            }
            s.parked = true;
            s.rings_at = None;
        }
        shared.idle.set_sysmon_parked(true);
        if every_p_idle_and_covered(shared) {
            self.alarm.wait();
        }
        shared.idle.set_sysmon_parked(false);
        self.state.lock().parked = false;
    }

    /// `Idle::alert_sysmon` while sysmon is parked: a P was taken (or a socket waiter added);
    /// make sure sysmon looks within `IDLE_TICK`.
    fn alert(&self) {
        let mut s = self.state.lock();
        if !s.parked || s.stop {
            return;
        }
        let now = Instant::now();
        if s.rings_at.is_some_and(|t| t > now + REARM_BEFORE) {
            return;
        }
        s.rings_at = Some(now + IDLE_TICK);
        self.alarm.set(IDLE_TICK);
    }
}

/// One look: runs the timers overdue by more than `GRACE` of the Ps that began no scheduling
/// round since they came due (giving way to anyone who takes the heap's lock between two of
/// them: what is left stays overdue for the next look, 500 µs on), polls the sockets if
/// nobody has for 10 ms; returns how long to sleep before the next look.
///
/// A P whose holder makes rounds runs its own timers, at most its ring's room per round
/// (`P::timer_room`), so an overdue timer alone does not prove it stuck: taking its
/// backlog here would put the woken tasks in the global queue, behind newer work (design/
/// TIMERS.md, "Bounded rounds"). Go's sysmon tells a stuck P by its `schedtick` (`retake`).
fn look(shared: &Arc<Shared>, quiet: &mut u32) -> Duration {
    let now = nanotime();
    let mut earliest = i64::MAX;
    let mut acted = false;
    for p in shared.all_ps() {
        let mut w = p.timers.wake_time();
        if w != 0 && w.saturating_add(GRACE) <= now && p.no_round_since(w) {
            let _hold = shared.hold_paused_clock();
            w = shared.run_timers_giving_way(&p.timers, now).next;
            acted = true;
        }
        if w != 0 {
            earliest = earliest.min(w);
        }
    }
    shared.sysmon_poll_net(now);
    *quiet = if acted { 0 } else { quiet.saturating_add(1) };
    // Sleep until the earliest timer would be overdue, within [BUSY_TICK, IDLE_TICK];
    // while some P is idle an idle M (the poller) runs timers on time, so sysmon only needs
    // its long tick.
    let until_overdue = earliest.saturating_add(GRACE).saturating_sub(now).max(0) as u64;
    if shared.idle.npidle() > 0 {
        IDLE_TICK
    } else {
        Duration::from_nanos(until_overdue).clamp(backoff(*quiet), IDLE_TICK)
    }
}

/// Moves to the global queue, and wakes an M for, each task that sat in a running P's
/// `runnext` since the previous look (`seen`: the fills seen then, by P id). The holder began
/// no scheduling round meanwhile (each round takes `runnext` or leaves it to thieves), so it
/// is stuck in one task while some P idles (module docs).
///
/// Returns whether a running P's `runnext` holds a task seen for the first time: the next
/// look may come after `BUSY_TICK` rather than `IDLE_TICK`, so that a stuck task waits about
/// one idle tick, not two (a holder that runs it meanwhile has refilled or emptied the slot,
/// and nothing is taken).
#[cold]
#[inline(never)]
fn take_stuck_runnext(shared: &Arc<Shared>, seen: &mut Vec<Option<Fill>>) -> bool {
    let mut look_again = false;
    seen.resize(shared.nallp(), None);
    for p in shared.all_ps() {
        let Some(last) = seen.get_mut(p.id) else {
            continue;
        };
        let now = p.runnext_seen();
        let running = p.status() == PStatus::Running;
        let stuck = now.is_some() && now == *last && running;
        look_again |= now.is_some() && !stuck && running;
        *last = now;
        if let Some(task) = now.filter(|_| stuck).and_then(|f| p.steal_runnext(f)) {
            // Off every P: to the global queue's started-work lane, then `wakep`.
            shared.sysmon_runnext_handoffs.fetch_add(1, Relaxed);
            shared.push_task(task, false, Lane::Ready);
            *last = None;
        }
    }
    look_again
}

/// Marks the slice of each running P that has not begun a new one for a slice length, so that
/// its holder passes over a `runnext` chain at its next pick (slice.rs; Go's `retake`
/// preempts the running goroutine instead). `seen`: what the previous looks saw, by P id.
/// Returns what it saw of the running Ps' rings, for [`wake_for_rings`].
fn look_at_slices(shared: &Shared, seen: &mut Vec<Seen>) -> Rings {
    // The real clock, not the runtime's: a paused clock does not stop a chain's slice.
    let now = Instant::now();
    seen.resize(shared.nallp(), Seen::default());
    let mut rings = Rings::default();
    for p in shared.all_ps() {
        let Some(s) = seen.get_mut(p.id) else {
            continue;
        };
        match p.look_at_slice(s, now) {
            Some(same) if p.has_queued() => {
                rings.stuck |= same;
                rings.first_seen |= !same;
            }
            _ => {}
        }
    }
    rings
}

/// What a look saw of the running Ps' rings (the module docs, "Rings").
#[derive(Clone, Copy, Default)]
struct Rings {
    /// A ring held tasks and its holder began no slice since the previous look.
    stuck: bool,
    /// A ring held tasks and its holder began a slice since the previous look.
    first_seen: bool,
}

/// While some P idles (the caller's check) and no M spins: wakes one (`wakep`, a spinner
/// that steals half the ring) if a running P's ring holds tasks and its holder began no slice
/// since the previous look; nothing is on its way to them (module docs, "Rings").
///
/// Returns whether such a ring was seen for the first time: the next look may then come
/// after `BUSY_TICK`, as for `runnext`, so that a lost wake-up costs about one idle tick.
#[cold]
#[inline(never)]
fn wake_for_rings(shared: &Arc<Shared>, rings: Rings) -> bool {
    // An M spinning (or counted for a `wakep` on its way) looks at every ring before it
    // stops (`reset_spinning`): nothing to do.
    if shared.idle.nmspinning() > 0 {
        return false;
    }
    if rings.stuck {
        shared.sysmon_ring_wakes.fetch_add(1, Relaxed);
        shared.wakep();
    }
    rings.first_seen
}

/// Whether sysmon has nothing to do until a P is taken: every P idle (by the count the takers
/// update, and by each P's status), and the sockets watched by a poller if tasks wait on them.
fn every_p_idle_and_covered(shared: &Shared) -> bool {
    shared.idle.npidle() >= shared.nprocs()
        && shared.all_ps().all(|p| p.status() != PStatus::Running)
        && (!shared.net_waiting() || shared.idle.lastpoll.load(SeqCst) == 0)
}

/// sysmon's shortest sleep after `quiet` wake-ups in a row that found nothing overdue: the
/// busy tick at first, then doubling up to the idle tick (Go's sysmon backs off the same
/// way). Busy Ps that reach scheduling points run their own timers on time, so a sysmon
/// waking every millisecond only preempts them (a wake-up takes a CPU from a busy M for
/// ~20 µs under virtualisation: it was most of T5_busy's tick lateness). The first timer a
/// CPU-bound hog starves waits at most one idle tick more; then sysmon is back to the busy
/// tick.
fn backoff(quiet: u32) -> Duration {
    let doublings = quiet.saturating_sub(BACKOFF_AFTER).min(8);
    (BUSY_TICK * (1 << doublings)).min(IDLE_TICK)
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_after_quiet_rounds_up_to_the_idle_tick() {
        assert_eq!(backoff(0), BUSY_TICK);
        assert_eq!(backoff(BACKOFF_AFTER), BUSY_TICK);
        assert_eq!(backoff(BACKOFF_AFTER + 1), BUSY_TICK * 2);
        assert_eq!(backoff(BACKOFF_AFTER + 3), BUSY_TICK * 8);
        assert_eq!(backoff(u32::MAX), IDLE_TICK);
    }
}
