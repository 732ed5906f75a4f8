//! Helpers shared by the integration tests.
#![allow(dead_code)]

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};

/// Polls `fut` once with a waker that does nothing.
pub fn poll_once<F: Future + Unpin>(fut: &mut F) -> Poll<F::Output> {
    Pin::new(fut).poll(&mut Context::from_waker(futures::task::noop_waker_ref()))
}

/// A waker that counts its wake-ups.
#[derive(Default)]
pub struct CountingWaker(AtomicUsize);

impl CountingWaker {
    pub fn new() -> (Arc<Self>, Waker) {
        let c = Arc::new(CountingWaker::default());
        let w = Waker::from(c.clone());
        (c, w)
    }

    pub fn count(&self) -> usize {
        self.0.load(Ordering::SeqCst)
    }
}

impl Wake for CountingWaker {
    fn wake(self: Arc<Self>) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

/// Polls `fut` once with `waker`.
pub fn poll_with<F: Future + Unpin>(fut: &mut F, waker: &Waker) -> Poll<F::Output> {
    Pin::new(fut).poll(&mut Context::from_waker(waker))
}

/// A tiny deterministic xorshift generator for test decisions.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }

    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    /// True with probability `num / den`.
    pub fn chance(&mut self, num: u64, den: u64) -> bool {
        self.next() % den < num
    }
}

/// Generous: a healthy run of a test under it takes well under a second.
#[cfg(not(loom))]
pub const WATCHDOG: std::time::Duration = std::time::Duration::from_secs(60);

/// `fast` in release builds, `slow` in debug builds (where a channel operation costs several
/// times more).
#[cfg(not(loom))]
pub fn scaled(fast: usize, slow: usize) -> usize {
    if cfg!(debug_assertions) {
        slow
    } else {
        fast
    }
}

/// Runs `fut` on a runtime of `procs` Ps, on its own thread under the watchdog: a hang fails
/// the test (the thread is left behind; the test process exits anyway).
#[cfg(not(loom))]
pub fn run_under_watchdog<F>(procs: usize, fut: F) -> F::Output
where
    F: std::future::Future + Send + 'static,
    F::Output: Send + 'static,
{
    let (tx, rx) = std::sync::mpsc::channel();
    let t = std::thread::spawn(move || {
        let rt = gort::Builder::new().procs(procs).build().unwrap();
        let out = rt.block_on(fut);
        let _ = tx.send(());
        out
    });
    if let Err(std::sync::mpsc::RecvTimeoutError::Timeout) = rx.recv_timeout(WATCHDOG) {
        panic!("still running after {WATCHDOG:?}: hung (a lost value or wake-up?)");
    }
    match t.join() {
        Ok(out) => out,
        Err(p) => std::panic::resume_unwind(p),
    }
}
