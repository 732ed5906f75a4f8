//! A hang is a failure too: if a scenario runs far past its budget (a lost wake-up, a
//! deadlock in the runtime), the watchdog prints the seed that replays it and exits with 1,
//! so CI reports it instead of timing out without a clue, with the scheduler's state
//! (`Handle::debug_state`: where a stranded task sits, what the Ms believed) of the runtime
//! the scenario runs on.

use std::sync::mpsc::{self, RecvTimeoutError, Sender};
use std::sync::Mutex;
use std::thread::JoinHandle;
use std::time::Duration;

/// Slack on top of three budgets: the drain checks alone may take a few seconds.
const SLACK: Duration = Duration::from_secs(30);

/// The runtime the current scenario runs on, for the hang report. Cleared before the runtime
/// is dropped (`unwatch`), so that the handle keeps none of its descriptors open past it.
static WATCHED: Mutex<Option<gort::runtime::Handle>> = Mutex::new(None);

/// Names `rt` as the runtime a hang report describes.
pub fn watch(rt: &gort::Runtime) {
    *WATCHED.lock().unwrap_or_else(|e| e.into_inner()) = Some(rt.handle().clone());
}

/// Forgets the watched runtime (before it is shut down).
pub fn unwatch() {
    WATCHED.lock().unwrap_or_else(|e| e.into_inner()).take();
}

/// Guards one scenario; disarmed by [`Watchdog::disarm`].
#[derive(Debug)]
pub struct Watchdog {
    done: Sender<()>,
    thread: Option<JoinHandle<()>>,
}

impl Watchdog {
    /// Exits the process with 1 unless disarmed within `3 * budget + 30 s`.
    pub fn arm(scenario: &'static str, budget: Duration, seed: u64) -> Self {
        let (done, rx) = mpsc::channel::<()>();
        let limit = budget * 3 + SLACK;
        let thread = std::thread::Builder::new()
            .name("watchdog".into())
            .spawn(move || {
                if let Err(RecvTimeoutError::Timeout) = rx.recv_timeout(limit) {
                    eprintln!(
                        "gort-stress: violation: scenario {scenario} still running after {limit:?} \
                         (budget {budget:?}): hung; replay with --scenario {scenario} --seed {seed}"
                    );
                    if let Some(h) = WATCHED.lock().unwrap_or_else(|e| e.into_inner()).as_ref() {
                        eprintln!("{}", h.debug_state());
                    }
                    std::process::exit(1);
                }
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
