//! The monitor thread: Go's `sysmon`, reduced to the timer duty and the sockets' 10 ms look.
//!
//! Timers run inside the scheduler: each P runs its own in every scheduling round, and idle
//! Ms run everyone's. When every M is busy in a long poll (or blocked), nobody gets there and
//! timers go late (go#38860, go#45632: Go since 1.16 has no backstop for this). sysmon looks
//! at the P summaries (atomics only) and, for a P whose timers are overdue by more than
//! `GRACE`, runs them itself (timer callbacks only queue tasks and send on channels, so this is
//! cheap and never blocks); the woken tasks go to the global queue.
//!
//! It also takes Go's non-blocking look at the sockets when tasks wait on them and nobody has
//! polled for 10 ms (`netpoll.rs`), so ready sockets are not left behind busy Ps.

use crate::shared::Shared;
use gort_timer::nanotime;
use parking_lot::{Condvar, Mutex};
use std::sync::Arc;
use std::time::Duration;

/// How overdue a timer must be before sysmon steps in (the Ps themselves are usually quicker).
const GRACE: i64 = 500_000;
/// sysmon's period while timers are pending, and its longest sleep otherwise.
const BUSY_TICK: Duration = Duration::from_micros(500);
const IDLE_TICK: Duration = Duration::from_millis(10);
/// Wake-ups in a row that found nothing overdue before sysmon starts backing off.
const BACKOFF_AFTER: u32 = 4;

/// The handle that stops sysmon.
#[derive(Default)]
pub(crate) struct Sysmon {
    stop: Mutex<bool>,
    cv: Condvar,
}

impl Sysmon {
    pub(crate) fn start(shared: Arc<Shared>) -> (Arc<Sysmon>, std::thread::JoinHandle<()>) {
        let me = Arc::new(Sysmon::default());
        let me2 = me.clone();
        let h = std::thread::Builder::new()
            .name("gort-sysmon".into())
            .spawn(move || me2.run(shared))
            .unwrap_or_else(|e| panic!("gort: cannot start sysmon: {e}"));
        (me, h)
    }

    pub(crate) fn stop(&self) {
        *self.stop.lock() = true;
        self.cv.notify_all();
    }

    fn run(&self, shared: Arc<Shared>) {
        let _ctx = crate::context::enter(shared.clone());
        let mut stop = self.stop.lock();
        // Wake-ups in a row that found no timer overdue (Go's sysmon `idle` count).
        let mut quiet = 0u32;
        while !*stop {
            let now = nanotime();
            let mut earliest = i64::MAX;
            let mut acted = false;
            for p in shared.all_ps() {
                let mut w = p.timers.wake_time();
                if w != 0 && w.saturating_add(GRACE) <= now {
                    w = shared.run_timers(&p.timers, now, false).next;
                    acted = true;
                }
                if w != 0 {
                    earliest = earliest.min(w);
                }
            }
            shared.sysmon_poll_net(now);
            quiet = if acted { 0 } else { quiet.saturating_add(1) };
            // Sleep until the earliest timer would be overdue, within [BUSY_TICK, IDLE_TICK];
            // while some P is idle an idle M (the poller) runs timers on time, so sysmon
            // only needs its long tick.
            let until_overdue = earliest.saturating_add(GRACE).saturating_sub(now).max(0) as u64;
            let tick = if shared.idle.npidle() > 0 {
                IDLE_TICK
            } else {
                Duration::from_nanos(until_overdue).clamp(backoff(quiet), IDLE_TICK)
            };
            self.cv.wait_for(&mut stop, tick);
        }
    }
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
