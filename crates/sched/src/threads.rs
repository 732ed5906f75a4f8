//! How a runtime starts its threads (Ms and blocking-pool threads): names, stack size, the
//! user's start and stop hooks, and the blocking pool's limits, as set on the `Builder`.

use crate::context;
use crate::shared::Shared;
use std::fmt;
use std::io;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{Arc, Weak};
use std::thread::JoinHandle;
use std::time::Duration;

/// A thread-name maker (`Builder::thread_name_fn`).
pub(crate) type NameFn = Arc<dyn Fn() -> String + Send + Sync>;
/// A thread start or stop hook.
pub(crate) type Hook = Arc<dyn Fn() + Send + Sync>;

/// At most this many blocking threads at once by default (Tokio's default is 512 too).
pub(crate) const MAX_BLOCKING_THREADS: usize = 512;
/// By default an idle blocking thread exits after this long (Tokio's default is 10 s too).
pub(crate) const KEEP_ALIVE: Duration = Duration::from_secs(10);

/// The thread options of one runtime.
#[derive(Clone)]
pub(crate) struct ThreadConfig {
    pub(crate) name: Option<NameFn>,
    pub(crate) stack_size: Option<usize>,
    pub(crate) on_start: Option<Hook>,
    pub(crate) on_stop: Option<Hook>,
    pub(crate) max_blocking: usize,
    pub(crate) keep_alive: Duration,
}

impl Default for ThreadConfig {
    fn default() -> ThreadConfig {
        ThreadConfig {
            name: None,
            stack_size: None,
            on_start: None,
            on_stop: None,
            max_blocking: MAX_BLOCKING_THREADS,
            keep_alive: KEEP_ALIVE,
        }
    }
}

impl fmt::Debug for ThreadConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ThreadConfig")
            .field("name", &self.name.as_ref().map(|_| ".."))
            .field("stack_size", &self.stack_size)
            .field("on_start", &self.on_start.as_ref().map(|_| ".."))
            .field("on_stop", &self.on_stop.as_ref().map(|_| ".."))
            .field("max_blocking", &self.max_blocking)
            .field("keep_alive", &self.keep_alive)
            .finish()
    }
}

impl ThreadConfig {
    /// Starts a thread of `runtime` running `body`, named by the user's name (or
    /// `default_name`), with the start hook before `body` and the stop hook after it, both
    /// in the runtime's context (as Tokio's: `Handle::current` works in them).
    pub(crate) fn spawn(
        &self,
        default_name: impl FnOnce() -> String,
        runtime: Weak<Shared>,
        body: impl FnOnce() + Send + 'static,
    ) -> io::Result<JoinHandle<()>> {
        // The user's name function is user code: its panic (the panic hook has reported it)
        // gives the thread the default name instead of unwinding through the scheduler
        // code that starts threads, which would lose the P or the thread count it had taken.
        // A name with a NUL byte would make std's thread builder panic here, unwinding the
        // same way: that thread gets the default name too.
        let name = match &self.name {
            Some(make) => catch_unwind(AssertUnwindSafe(|| make()))
                .ok()
                .filter(|name| !name.contains('\0'))
                .unwrap_or_else(default_name),
            None => default_name(),
        };
        let mut builder = std::thread::Builder::new().name(name);
        if let Some(size) = self.stack_size {
            builder = builder.stack_size(size);
        }
        let (on_start, on_stop) = (self.on_start.clone(), self.on_stop.clone());
        builder.spawn(move || {
            run_hook(on_start.as_deref(), &runtime);
            body();
            run_hook(on_stop.as_deref(), &runtime);
        })
    }
}

/// Runs a user hook. Its panic is caught (the panic hook has printed it): the thread goes
/// on, so a faulty hook cannot take an M, or the runtime's shutdown, down with it.
fn run_hook(hook: Option<&(dyn Fn() + Send + Sync)>, runtime: &Weak<Shared>) {
    if let Some(hook) = hook {
        let _ctx = runtime.upgrade().map(context::enter);
        let _ = catch_unwind(AssertUnwindSafe(hook));
    }
}

/// Joins `thread` (sysmon, which may be inside a timer's waker, or an M or blocking thread
/// running its stop hook: user code) unless it is still running at `deadline`; then it is
/// abandoned.
pub(crate) fn join_until(thread: JoinHandle<()>, deadline: Option<std::time::Instant>) {
    if let Some(d) = deadline {
        while !thread.is_finished() {
            if std::time::Instant::now() >= d {
                return;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
    }
    let _ = thread.join();
}
