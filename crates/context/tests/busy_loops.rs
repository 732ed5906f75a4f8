//! Go's busy-worker idiom, `for { select { case <-ctx.Done(): return; default: work() } }`,
//! on a runtime whose only P that worker holds: it never yields, so the deadline has to
//! cancel the context from the timer's run (sysmon runs a stuck P's timers), not from a task
//! queued behind the worker.

use std::sync::mpsc;
use std::time::Duration;

use gort::context::{self, Context, Error};

/// Runs `f` on a one-P runtime in its own thread; `None` if it has not returned in 10 s (the
/// thread is then left spinning: the process ends with the test binary).
fn on_one_p<T: Send + 'static>(
    f: impl std::future::Future<Output = T> + Send + 'static,
) -> Option<T> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let rt = gort::Builder::new().procs(1).build().unwrap();
        let _ = tx.send(rt.block_on(async move { gort::spawn(f).await.unwrap() }));
    });
    rx.recv_timeout(Duration::from_secs(10)).ok()
}

/// A stand-in for a slice of CPU-bound work.
fn work(n: &mut u64) {
    *n = std::hint::black_box(*n + 1);
}

#[test]
fn a_deadline_ends_a_worker_that_never_yields() {
    let done = on_one_p(async {
        let (ctx, _cancel) =
            context::with_timeout(&Context::background(), Duration::from_millis(50));
        let mut n = 0;
        loop {
            gort::select! {
                _ = ctx.done().recv() => break,
                default => work(&mut n),
            }
        }
        ctx.err()
    });
    assert_eq!(
        done,
        Some(Some(Error::DeadlineExceeded)),
        "the worker never saw its deadline"
    );
}

#[test]
fn a_deadline_ends_a_worker_that_polls_err() {
    let done = on_one_p(async {
        let (parent, _cancel) =
            context::with_timeout(&Context::background(), Duration::from_millis(50));
        let (ctx, _c) = context::with_cancel(&parent);
        let mut n = 0;
        while ctx.err().is_none() {
            work(&mut n);
        }
        ctx.err()
    });
    assert_eq!(
        done,
        Some(Some(Error::DeadlineExceeded)),
        "the worker never saw its deadline"
    );
}
