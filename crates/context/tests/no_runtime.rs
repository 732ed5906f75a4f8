//! Go code makes contexts anywhere: `ctx, cancel := context.WithTimeout(bg, 30*time.Second)`
//! at the top of `main`, before anything runs. A deadline set on a thread of no gort runtime
//! (before `Runtime::block_on`, in a plain thread) panicked; it is kept by the context
//! crate's own thread instead, and ends the context on time wherever it is waited on.

use std::sync::mpsc;
use std::time::Duration;

use gort::context::{self, Context, Error};
use gort::time::Instant;

/// Runs `f` on a thread of its own; `None` if it has not returned in 10 s.
fn within_10s<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> Option<T> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    rx.recv_timeout(Duration::from_secs(10)).ok()
}

#[test]
fn a_deadline_set_on_a_plain_thread_ends_the_context() {
    let (err, took) = within_10s(|| {
        let start = Instant::now();
        let (ctx, _cancel) =
            context::with_timeout(&Context::background(), Duration::from_millis(50));
        assert_eq!(ctx.err(), None);
        futures::executor::block_on(ctx.done().recv());
        (ctx.err(), start.elapsed())
    })
    .expect("done() never closed");
    assert_eq!(err, Some(Error::DeadlineExceeded));
    assert!(took >= Duration::from_millis(50), "ended early: {took:?}");
}

#[test]
fn a_context_made_before_the_runtime_starts_ends_inside_it() {
    let (ctx, _cancel) = context::with_timeout(&Context::background(), Duration::from_millis(50));
    let err = within_10s(move || {
        let rt = gort::Runtime::new().unwrap();
        rt.block_on(async move {
            let (child, _c) = context::with_cancel(&ctx);
            gort::spawn(async move {
                child.done().recv().await;
                child.err()
            })
            .await
            .unwrap()
        })
    })
    .expect("the task waited for ever on a deadline set before the runtime");
    assert_eq!(err, Some(Error::DeadlineExceeded));
}
