//! The live progress bar (indicatif, on stderr; hidden when stderr is not a terminal).

use crate::scenarios::Ctx;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

/// The scenario being shown: its context, where its budget starts on the bar, and its length.
type Current = Option<(Arc<Ctx>, u64, u64)>;

/// A bar over the whole run's budget, refreshed by a thread from the running scenario's
/// counters.
#[derive(Debug)]
pub struct Progress {
    bar: ProgressBar,
    current: Arc<Mutex<Current>>,
    done_ms: u64,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Progress {
    /// A bar of `total` (the run's budget).
    pub fn new(total: Duration) -> Self {
        let bar = ProgressBar::with_draw_target(
            Some(total.as_millis() as u64),
            ProgressDrawTarget::stderr(),
        );
        let style = ProgressStyle::with_template(
            "{spinner} [{elapsed_precise}] {bar:30} {percent:>3}% {msg}",
        )
        .unwrap_or_else(|_| ProgressStyle::default_bar());
        bar.set_style(style);
        let current: Arc<Mutex<Current>> = Arc::default();
        let stop = Arc::new(AtomicBool::new(false));
        let thread = {
            let (bar, current, stop) = (bar.clone(), current.clone(), stop.clone());
            std::thread::Builder::new()
                .name("progress".into())
                .spawn(move || {
                    while !stop.load(Relaxed) {
                        if let Some((ctx, base, len)) =
                            current.lock().unwrap_or_else(|e| e.into_inner()).as_ref()
                        {
                            let elapsed = ctx.epoch.elapsed().as_millis() as u64;
                            bar.set_position(base + elapsed.min(*len));
                            bar.set_message(format!(
                                "{}: ops {} fired {} violations {}",
                                ctx.name,
                                ctx.counts.ops.load(Relaxed),
                                ctx.counts.fired.load(Relaxed),
                                ctx.violations.count()
                            ));
                        }
                        bar.tick();
                        std::thread::sleep(Duration::from_millis(100));
                    }
                })
                .ok()
        };
        Progress {
            bar,
            current,
            done_ms: 0,
            stop,
            thread,
        }
    }

    /// Shows `ctx`'s scenario, which has `budget`.
    pub fn start(&self, ctx: &Arc<Ctx>, budget: Duration) {
        *self.current.lock().unwrap_or_else(|e| e.into_inner()) =
            Some((ctx.clone(), self.done_ms, budget.as_millis() as u64));
    }

    /// Marks the shown scenario finished, printing a line above the bar.
    pub fn finish_one(&mut self, line: &str, budget: Duration) {
        *self.current.lock().unwrap_or_else(|e| e.into_inner()) = None;
        self.done_ms += budget.as_millis() as u64;
        self.bar.set_position(self.done_ms);
        if self.bar.is_hidden() {
            eprintln!("{line}");
        } else {
            self.bar.println(line);
        }
    }

    /// Removes the bar.
    pub fn finish(mut self) {
        self.stop.store(true, Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        self.bar.finish_and_clear();
    }
}
