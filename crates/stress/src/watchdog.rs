//! A hang is a failure too: if a scenario runs far past its budget (a lost wake-up, a
//! deadlock in the runtime), the watchdog prints the seed that replays it and exits with 1,
//! so CI reports it instead of timing out without a clue, with the scheduler's state
//! (`Handle::debug_state`: where a stranded task sits, what the Ms believed) of the runtime
//! the scenario runs on. The limit is counted in the time this process could run
//! (`patience.rs`): a process starved by others is slow, not hung.

use std::sync::mpsc::{self, RecvTimeoutError, Sender};
use std::sync::Mutex;
use std::thread::JoinHandle;
use std::time::Duration;

use crate::patience::Patience;
use crate::stats::CpuTime;

/// Slack on top of three budgets: the drain checks alone may take a few seconds.
const SLACK: Duration = Duration::from_secs(30);

/// How often the watchdog looks at its patience.
const LOOK_EVERY: Duration = Duration::from_secs(1);

/// The runtime the current scenario runs on, for the hang report. Cleared before the runtime
/// is dropped (`unwatch`), so that the handle keeps none of its descriptors open past it.
static WATCHED: Mutex<Option<gort::runtime::Handle>> = Mutex::new(None);

/// A scenario's own account of its progress for the hang report: where the runtime's state
/// says which tasks are stranded, this says which of the scenario's waits never ended.
type Progress = Box<dyn Fn() -> String + Send>;

/// The current scenario's phase (`phase`) and progress report (`on_hang`).
static PHASE: Mutex<&'static str> = Mutex::new("");
static PROGRESS: Mutex<Option<Progress>> = Mutex::new(None);

/// Names `rt` as the runtime a hang report describes.
pub fn watch(rt: &gort::Runtime) {
    *WATCHED.lock().unwrap_or_else(|e| e.into_inner()) = Some(rt.handle().clone());
}

/// Forgets the watched runtime (before it is shut down) and the scenario's progress report.
pub fn unwatch() {
    WATCHED.lock().unwrap_or_else(|e| e.into_inner()).take();
    PROGRESS.lock().unwrap_or_else(|e| e.into_inner()).take();
    phase("");
}

/// Names the phase the scenario is in, for the hang report.
pub fn phase(name: &'static str) {
    *PHASE.lock().unwrap_or_else(|e| e.into_inner()) = name;
}

/// Adds `report` (what the scenario still waits for) to a hang report, until `unwatch`.
pub fn on_hang(report: impl Fn() -> String + Send + 'static) {
    *PROGRESS.lock().unwrap_or_else(|e| e.into_inner()) = Some(Box::new(report));
}

/// Prints the hang report: the scenario's phase and progress, then the runtime's state.
fn report_hang() {
    let phase = *PHASE.lock().unwrap_or_else(|e| e.into_inner());
    if !phase.is_empty() {
        eprintln!("gort-stress: hung in phase: {phase}");
    }
    if let Some(progress) = PROGRESS.lock().unwrap_or_else(|e| e.into_inner()).as_ref() {
        eprintln!("{}", progress());
    }
    if let Some(h) = WATCHED.lock().unwrap_or_else(|e| e.into_inner()).as_ref() {
        eprintln!("{}", h.debug_state());
    }
}

/// Guards one scenario; disarmed by [`Watchdog::disarm`].
#[derive(Debug)]
pub struct Watchdog {
    done: Sender<()>,
    thread: Option<JoinHandle<()>>,
}

impl Watchdog {
    /// Exits the process with 1 unless disarmed within `3 * budget + 30 s` of the time the
    /// process could run ([`Patience`]).
    pub fn arm(scenario: &'static str, budget: Duration, seed: u64) -> Self {
        let (done, rx) = mpsc::channel::<()>();
        let limit = budget * 3 + SLACK;
        let thread = std::thread::Builder::new()
            .name("watchdog".into())
            .spawn(move || {
                let (mut patience, cpu0) = (Patience::new(limit), CpuTime::now());
                loop {
                    match rx.recv_timeout(LOOK_EVERY) {
                        Err(RecvTimeoutError::Timeout) if patience.exhausted() => break,
                        Err(RecvTimeoutError::Timeout) => {}
                        _ => return,
                    }
                }
                let cpu = CpuTime::now().since(cpu0);
                eprintln!(
                    "gort-stress: violation: scenario {scenario} still running after {limit:?} \
                     of the time it could run ({:?} of wall time, {:?} of CPU used): hung; \
                     replay with --scenario {scenario} --seed {seed}",
                    patience.elapsed(),
                    cpu.user + cpu.system,
                );
                report_hang();
                std::process::exit(1);
            })
            .ok();
        Watchdog { done, thread }
    }

    /// The scenario finished in time.
    pub fn disarm(mut self) {
        let _ = self.done.send(());
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn disarm_returns_promptly() {
        let start = std::time::Instant::now();
        Watchdog::arm("test", Duration::from_secs(100), 1).disarm();
        assert!(start.elapsed() < Duration::from_secs(5));
    }
}
