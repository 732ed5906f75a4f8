//! What the Tokio ports need of `tokio_test`: a future polled by hand with a waker that
//! records its wake-ups (`task::spawn`'s `Spawn`), `assert_elapsed!`, and a runtime for a
//! `#[tokio::test]` body under the watchdog.
#![allow(dead_code)]

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering::SeqCst};
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};
use std::time::Duration;

/// Whether the waker was woken since the last poll.
#[derive(Default)]
pub struct Flag(AtomicBool);

impl Wake for Flag {
    fn wake(self: Arc<Self>) {
        self.0.store(true, SeqCst);
    }
    fn wake_by_ref(self: &Arc<Self>) {
        self.0.store(true, SeqCst);
    }
}

/// `tokio_test::task::Spawn`: a pinned future polled by hand.
pub struct Mock<F> {
    pub fut: Pin<Box<F>>,
    woken: Arc<Flag>,
}

pub fn mock<F>(fut: F) -> Mock<F> {
    Mock {
        fut: Box::pin(fut),
        woken: Arc::default(),
    }
}

impl<F> Mock<F> {
    /// Runs `f` with the mock's context and its pinned value.
    pub fn enter<R>(&mut self, f: impl FnOnce(&mut Context<'_>, Pin<&mut F>) -> R) -> R {
        self.woken.0.store(false, SeqCst);
        let waker = Waker::from(self.woken.clone());
        f(&mut Context::from_waker(&waker), self.fut.as_mut())
    }

    pub fn is_woken(&self) -> bool {
        self.woken.0.load(SeqCst)
    }

    pub fn into_inner(self) -> Pin<Box<F>> {
        self.fut
    }
}

impl<F: Future> Mock<F> {
    pub fn poll(&mut self) -> Poll<F::Output> {
        self.enter(|cx, f| f.poll(cx))
    }
}

pub fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// tokio-test's `assert_elapsed!`: at least `dur` and at most 1 ms more.
#[macro_export]
macro_rules! assert_elapsed {
    ($now:expr, $dur:expr) => {{
        let elapsed = $now.elapsed();
        let lower: std::time::Duration = $dur;
        assert!(
            elapsed >= lower && elapsed <= lower + std::time::Duration::from_millis(1),
            "actual = {:?}, expected = {:?}",
            elapsed,
            lower
        );
    }};
}

/// A `#[tokio::test]` body under the watchdog: `body`'s future runs in `block_on` on a
/// runtime of `procs` Ps (paused from the start if `paused`).
pub fn rt_test<Fut: Future<Output = ()>>(
    procs: usize,
    paused: bool,
    body: impl FnOnce() -> Fut + Send + 'static,
) {
    crate::support::within(move || {
        let rt = gort::Builder::new()
            .procs(procs)
            .start_paused(paused)
            .build()
            .unwrap();
        rt.block_on(body())
    })
}
