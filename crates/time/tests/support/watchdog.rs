//! A fresh runtime per test, on its own thread under a watchdog: a hang (a lost timer or
//! wake-up) fails the test after a minute instead of hanging CI. Shared by the Go ports of
//! `gort-time`, `gort-context` and `gort-sync` (`#[path]` to this file).

use std::time::Duration;

use gort_sched::{Builder, Runtime};

/// Runs `f` on a fresh default runtime on its own thread; panics if it has not finished
/// within a minute, and passes on a panic of `f`.
#[allow(dead_code)] // not every test binary that includes this file calls each helper
pub fn run<F>(f: F) -> F::Output
where
    F: std::future::Future + Send + 'static,
    F::Output: Send + 'static,
{
    watch(move || Runtime::new().unwrap().block_on(f))
}

/// [`run`] on a runtime of `procs` Ps, its clock paused from the start if `paused`.
#[allow(dead_code)]
pub fn run_with<F>(procs: usize, paused: bool, f: F) -> F::Output
where
    F: std::future::Future + Send + 'static,
    F::Output: Send + 'static,
{
    watch(move || {
        let rt = Builder::new()
            .procs(procs)
            .start_paused(paused)
            .build()
            .unwrap();
        rt.block_on(f)
    })
}

/// Runs `test` on a fresh runtime of 1 P, then of 4, each under the watchdog ([`run_with`]).
#[allow(dead_code)]
pub fn on_1_and_4_procs<Fut>(test: impl Fn() -> Fut)
where
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    for procs in [1, 4] {
        run_with(procs, false, test());
    }
}

/// Runs `f` on its own thread; panics if it has not returned within a minute, and passes on
/// a panic of `f`.
#[allow(dead_code)]
pub fn watch<R: Send + 'static>(f: impl FnOnce() -> R + Send + 'static) -> R {
    let (tx, rx) = std::sync::mpsc::channel();
    let t = std::thread::spawn(move || {
        let out = f();
        let _ = tx.send(());
        out
    });
    if let Err(std::sync::mpsc::RecvTimeoutError::Timeout) =
        rx.recv_timeout(Duration::from_secs(60))
    {
        panic!("still running after 60 s: hung (a lost timer or wake-up?)");
    }
    match t.join() {
        Ok(out) => out,
        Err(p) => std::panic::resume_unwind(p),
    }
}
