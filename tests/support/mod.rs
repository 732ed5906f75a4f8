//! Helpers shared by the top crate's integration tests (each test file is its own crate and
//! declares `mod support;`, and uses some of them).
#![allow(dead_code)]

use std::sync::mpsc;
use std::time::Duration;

/// Generous: the machine may be loaded; a healthy run takes milliseconds.
pub const WATCHDOG: Duration = Duration::from_secs(30);

/// Runs `f` on its own thread; fails if it does not return within [`WATCHDOG`] (the thread is
/// left behind, the test process exits anyway: a hang, a lost value or wake-up) and resumes
/// its panic if it panicked.
pub fn within<R: Send + 'static>(f: impl FnOnce() -> R + Send + 'static) -> R {
    let (tx, rx) = mpsc::channel();
    let t = std::thread::spawn(move || {
        let r = f();
        let _ = tx.send(());
        r
    });
    if let Err(mpsc::RecvTimeoutError::Timeout) = rx.recv_timeout(WATCHDOG) {
        panic!("still running after {WATCHDOG:?}: hung (a lost value or wake-up?)");
    }
    match t.join() {
        Ok(r) => r,
        Err(p) => std::panic::resume_unwind(p),
    }
}

/// A runtime of one P.
pub fn one_p() -> gort::Runtime {
    gort::Builder::new().procs(1).build().unwrap()
}

/// The message of a caught panic, by reference (`String` or `&str` payloads), or "".
pub fn panic_text(p: &(dyn std::any::Any + Send)) -> String {
    p.downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| p.downcast_ref::<String>().cloned())
        .unwrap_or_default()
}

/// The message of a caught panic (`String` or `&str` payloads), or "" for any other payload.
pub fn panic_message(payload: Box<dyn std::any::Any + Send>) -> String {
    payload
        .downcast_ref::<String>()
        .cloned()
        .or_else(|| payload.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_default()
}
