//! A watchdog for the abuse probes: a hang fails the test instead of stalling the run.

use std::sync::{mpsc, Mutex};
use std::time::Duration;

/// Generous: the machine may be loaded; a healthy probe takes milliseconds to a second.
pub const WATCHDOG: Duration = Duration::from_secs(30);

/// Runs `f` on its own thread; fails if it does not return within [`WATCHDOG`], after
/// printing every live runtime's `debug_state` (the thread is left behind; the test process
/// exits anyway), and resumes its panic if it panicked.
pub fn within<R: Send + 'static>(f: impl FnOnce() -> R + Send + 'static) -> R {
    let (tx, rx) = mpsc::channel();
    let t = std::thread::spawn(move || {
        let r = f();
        let _ = tx.send(());
        r
    });
    if let Err(mpsc::RecvTimeoutError::Timeout) = rx.recv_timeout(WATCHDOG) {
        // Where the stranded task sits, in every runtime of the process (other tests' too).
        eprintln!("{}", gort::Handle::debug_states());
        panic!("still running after {WATCHDOG:?}: hung (a lost wake-up?)");
    }
    match t.join() {
        Ok(r) => r,
        Err(p) => std::panic::resume_unwind(p),
    }
}

/// The number of open file descriptors of this process.
pub fn open_fds() -> usize {
    std::fs::read_dir("/proc/self/fd").unwrap().count()
}

/// Taken by [`serial`]: the tests of a binary that counts fds run one at a time, since
/// another test's sockets would count in the process's total.
static SERIAL: Mutex<()> = Mutex::new(());

/// [`within`], one test of this binary at a time (a failed one does not block the next).
pub fn serial<R: Send + 'static>(f: impl FnOnce() -> R + Send + 'static) -> R {
    let _turn = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    within(f)
}
