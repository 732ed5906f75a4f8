//! A context whose deadline timer was armed on a runtime that is dropped before the deadline
//! (a context made during setup, in a test's runtime, or before a runtime is rebuilt with
//! other `procs`; or waited on by a blocking closure the dropping runtime waits for). The
//! shutdown lets the timer go unrun; the context must still end at its deadline, and not
//! leave its waiters parked for ever.

use std::sync::mpsc;
use std::time::Duration;

use gort::context::{self, Context, Error};
use gort::time::Instant;

fn runtime() -> gort::Runtime {
    gort::Builder::new().procs(2).build().unwrap()
}

/// Makes a context with a deadline `d` from now on a runtime of its own, then drops that
/// runtime (its timers with it).
fn orphaned(d: Duration) -> (Context, context::CancelFn) {
    let rt = runtime();
    let made = rt.block_on(async move { context::with_timeout(&Context::background(), d) });
    drop(rt);
    made
}

/// Waits on `ctx.done()` in a new runtime, for at most 5 s; returns how long it took.
fn wait_done(ctx: &Context) -> Option<Duration> {
    let ctx = ctx.clone();
    let rt = runtime();
    rt.block_on(async move {
        let start = Instant::now();
        gort::time::timeout(Duration::from_secs(5), ctx.done().recv())
            .await
            .ok()
            .map(|_| start.elapsed())
    })
}

#[test]
fn a_deadline_from_a_dropped_runtime_still_ends_the_context() {
    let (ctx, _cancel) = orphaned(Duration::from_millis(100));
    assert_eq!(ctx.err(), None);
    let took = wait_done(&ctx).expect("done() never closed: the deadline was lost");
    assert_eq!(ctx.err(), Some(Error::DeadlineExceeded));
    assert!(took < Duration::from_secs(2), "{took:?}");
}

#[test]
fn a_passed_deadline_from_a_dropped_runtime_reports_itself() {
    let (ctx, _cancel) = orphaned(Duration::from_millis(10));
    std::thread::sleep(Duration::from_millis(30));
    // Outside any runtime: the deadline has passed, so the context is done.
    assert_eq!(ctx.err(), Some(Error::DeadlineExceeded));
    assert!(ctx.done().is_closed());
}

#[test]
fn a_child_of_an_orphaned_deadline_ends_with_it() {
    let (parent, _cancel) = orphaned(Duration::from_millis(100));
    let rt = runtime();
    let child = rt.block_on(async {
        // A later deadline: the parent's comes first, so the child arms no timer of its own.
        let (child, _c) = context::with_timeout(&parent, Duration::from_secs(3600));
        let (grandchild, _g) = context::with_cancel(&child);
        grandchild
    });
    drop(rt);
    wait_done(&child).expect("the child waited for ever on its parent's lost deadline");
    assert_eq!(child.err(), Some(Error::DeadlineExceeded));
    assert_eq!(parent.err(), Some(Error::DeadlineExceeded));
}

#[test]
fn a_cancel_still_works_on_an_orphaned_deadline() {
    let (ctx, cancel) = orphaned(Duration::from_secs(3600));
    cancel.cancel();
    assert_eq!(ctx.err(), Some(Error::Canceled));
    assert!(wait_done(&ctx).is_some());
}

#[test]
fn a_blocking_closure_waiting_on_a_deadline_does_not_hang_the_drop() {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let rt = runtime();
        rt.block_on(async {
            let (ctx, _cancel) =
                context::with_timeout(&Context::background(), Duration::from_millis(100));
            gort::spawn_blocking(move || {
                futures::executor::block_on(ctx.done().recv());
                ctx.err()
            });
            gort::time::sleep(Duration::from_millis(10)).await;
        });
        drop(rt); // waits for the closure, which waits for the deadline
        let _ = tx.send(());
    });
    rx.recv_timeout(Duration::from_secs(10))
        .expect("the drop waited for ever on a closure parked on a lost deadline");
}

#[test]
fn a_task_of_another_runtime_parked_on_the_deadline_wakes() {
    let rt1 = runtime();
    let (ctx, _cancel) = rt1.block_on(async {
        context::with_timeout(&Context::background(), Duration::from_millis(150))
    });
    let rt2 = runtime();
    let waiter = rt2.spawn({
        let ctx = ctx.clone();
        async move {
            gort::time::timeout(Duration::from_secs(5), ctx.done().recv())
                .await
                .is_ok()
        }
    });
    std::thread::sleep(Duration::from_millis(20)); // parked on `done` by now
    drop(rt1);
    assert!(
        rt2.block_on(waiter).unwrap(),
        "the waiter of rt2 stayed parked on rt1's lost deadline"
    );
    assert_eq!(ctx.err(), Some(Error::DeadlineExceeded));
}

#[test]
fn a_deadline_set_through_a_handle_that_outlived_its_runtime_still_ends() {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let rt = runtime();
        let handle = rt.handle().clone();
        drop(rt);
        let err = handle.block_on(async {
            let (ctx, _cancel) =
                context::with_timeout(&Context::background(), Duration::from_millis(20));
            ctx.done().recv().await;
            ctx.err()
        });
        let _ = tx.send(err);
    });
    let err = rx
        .recv_timeout(Duration::from_secs(10))
        .expect("the deadline went to a heap no thread runs: done() never closed");
    assert_eq!(err, Some(Error::DeadlineExceeded));
}
