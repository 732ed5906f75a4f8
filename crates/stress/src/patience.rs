//! How long the suite waits before it calls a wait a hang or a lost wake-up, counted in the
//! time this process could run.
//!
//! A scenario's stall detectors (a drain that returned nothing for 2 s, a callback that did
//! not run within 2 s, heaps not drained after 3 s) and the hang watchdog were wall-clock
//! limits. On a machine whose other processes take nearly all of the CPU (a build beside the
//! suite, or the suite in a low-priority group), the process gets a few per cent of a core,
//! and 2 s of wall time is tens of milliseconds of its own: those limits then reported hangs
//! and lost results that were starvation (loaded runs at 14 to 22 times the machine's cores
//! failed that way in `task-sets`, `faults` and `timer-storm`, with their CPU column near 0).
//! The lateness bounds already stop counting on such a machine (`checks::CONTENDED`); a
//! [`Patience`] does the same for a wait: an interval in which other processes took more
//! than `CONTENDED` of the machine counts only for the share they left, so a starved wait
//! waits longer, up to [`STRETCH`] times its allowance, and a quiet machine sees the
//! allowance unchanged.

use std::future::Future;
use std::time::{Duration, Instant};

use crate::scenarios::{external_load, CONTENDED};
use crate::stats::{CpuTime, MachineCpu};

/// The most wall time a wait may take, as a multiple of its allowance: a real hang on a
/// machine starved for good is still reported.
pub const STRETCH: u32 = 30;

/// The least share of an interval that counts, however starved the process was.
const MIN_CREDIT: f64 = 1.0 / STRETCH as f64;

/// How often the machine's load is read (a read of `/proc/stat` and a `getrusage`).
const SAMPLE_EVERY: Duration = Duration::from_millis(100);

/// A wait's allowance, counted while the process could run (module docs).
#[derive(Debug)]
pub struct Patience {
    allowance: Duration,
    started: Instant,
    /// Time counted up to `sampled`.
    counted: Duration,
    sampled: Instant,
    machine: MachineCpu,
    ours: CpuTime,
}

impl Patience {
    /// A wait of `allowance` starting now.
    pub fn new(allowance: Duration) -> Patience {
        let now = Instant::now();
        Patience {
            allowance,
            started: now,
            counted: Duration::ZERO,
            sampled: now,
            machine: MachineCpu::now(),
            ours: CpuTime::now(),
        }
    }

    /// Whether the allowance is used up: counted time reached it, or the wait took
    /// [`STRETCH`] times it in wall time. Cheap between samples (one clock read).
    pub fn exhausted(&mut self) -> bool {
        let now = Instant::now();
        if now.duration_since(self.started) >= self.allowance * STRETCH {
            return true;
        }
        // Counting the time since the last sample in full can only overstate it.
        let since = now.duration_since(self.sampled);
        if self.counted + since < self.allowance {
            return false;
        }
        if since >= SAMPLE_EVERY || self.counted == Duration::ZERO {
            self.sample(now);
        }
        self.counted >= self.allowance
    }

    /// Counts the interval since the last sample at the share of the machine the other
    /// processes left this one.
    fn sample(&mut self, now: Instant) {
        let (machine, ours) = (MachineCpu::now(), CpuTime::now());
        let wall = now.duration_since(self.sampled);
        let others = external_load(machine.since(self.machine), ours.since(self.ours), wall);
        self.counted += wall.mul_f64(credit(others));
        (self.sampled, self.machine, self.ours) = (now, machine, ours);
    }

    /// Wall time since the wait began.
    pub fn elapsed(&self) -> Duration {
        self.started.elapsed()
    }
}

/// The share of an interval that counts when other processes took `others` of the machine.
fn credit(others: f64) -> f64 {
    if others <= CONTENDED {
        1.0
    } else {
        (1.0 - others).clamp(MIN_CREDIT, 1.0)
    }
}

/// `gort::time::timeout` with a [`Patience`]: `fut` keeps running (it is never dropped and
/// polled again) until it completes or the allowance is used up.
pub async fn timeout<F: Future>(allowance: Duration, fut: F) -> Option<F::Output> {
    let mut patience = Patience::new(allowance);
    let mut fut = std::pin::pin!(fut);
    loop {
        let step = allowance.min(SAMPLE_EVERY * 5);
        if let Ok(out) = gort::time::timeout(step, fut.as_mut()).await {
            return Some(out);
        }
        if patience.exhausted() {
            return None;
        }
    }
}

/// Waits (sleeping `step` between looks) until `done` says so or a [`Patience`] of
/// `allowance` is used up; returns `done`'s last answer. For the waits that give a
/// straggler a moment before a check counts it lost.
pub async fn wait_until(
    allowance: Duration,
    step: Duration,
    mut done: impl FnMut() -> bool,
) -> bool {
    let mut patience = Patience::new(allowance);
    loop {
        if done() {
            return true;
        }
        if patience.exhausted() {
            return done();
        }
        gort::time::sleep(step).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_quiet_machine_counts_every_interval_in_full() {
        assert_eq!(credit(0.0), 1.0);
        assert_eq!(credit(CONTENDED), 1.0);
    }

    #[test]
    fn a_starved_interval_counts_for_what_the_others_left_and_never_for_nothing() {
        assert!((credit(0.6) - 0.4).abs() < 1e-9);
        assert_eq!(credit(0.999), MIN_CREDIT);
        assert_eq!(credit(1.7), MIN_CREDIT);
    }

    #[test]
    fn an_allowance_runs_out_on_an_idle_machine_and_not_before() {
        let mut p = Patience::new(Duration::from_millis(30));
        assert!(!p.exhausted());
        std::thread::sleep(Duration::from_millis(40));
        // This process sleeps and the test machine may be busy: at most STRETCH times longer.
        let end = Instant::now() + Duration::from_millis(30) * STRETCH + Duration::from_secs(1);
        while !p.exhausted() {
            assert!(Instant::now() < end, "a patience outlived its stretch");
            std::thread::sleep(Duration::from_millis(5));
        }
        assert!(p.elapsed() >= Duration::from_millis(30));
    }
}
