//! A fresh runtime per test, on its own thread under a watchdog: a hang (a lost timer or
//! wake-up) fails the test after a minute instead of hanging CI.

use std::time::Duration;

use gort_sched::Runtime;

/// Runs `f` on a fresh runtime on its own thread; panics if it has not finished within a
/// minute, and passes on a panic of `f`.
pub fn run<F>(f: F) -> F::Output
where
    F: std::future::Future + Send + 'static,
    F::Output: Send + 'static,
{
    let (tx, rx) = std::sync::mpsc::channel();
    let t = std::thread::spawn(move || {
        let out = Runtime::new().unwrap().block_on(f);
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
