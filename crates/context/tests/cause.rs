//! Go 1.20's `WithCancelCause`/`Cause` and 1.21's `WithDeadlineCause`, after Go's
//! `TestCause` table: the cause of the first cancellation that reaches a context is what
//! every waiter of it and of its descendants reads, whichever thread canceled.

use std::sync::{Arc, Barrier};
use std::time::Duration;

use gort::context::{self, Context, Error};
use gort::time::Instant;

/// Long enough that nothing on a loaded machine reaches it during a test.
const VERY_LONG: Duration = Duration::from_secs(3600);

fn rt() -> gort::Runtime {
    gort::Builder::new().procs(4).build().unwrap()
}

fn cause_text(ctx: &Context) -> Option<String> {
    ctx.cause().map(|c| c.to_string())
}

#[test]
fn no_cause_while_live_and_the_error_without_one() {
    let (ctx, cancel) = context::with_cancel_cause(&Context::background());
    assert!(ctx.cause().is_none());
    assert!(Context::background().cause().is_none());
    let (plain, plain_cancel) = context::with_cancel(&ctx);
    plain_cancel.cancel();
    let cause = plain.cause().unwrap();
    assert_eq!(cause.downcast_ref::<Error>(), Some(&Error::Canceled));
    assert!(
        ctx.cause().is_none(),
        "a child's cancel does not reach its parent"
    );
    cancel.cancel("parent's reason");
    // Already canceled by its own cancel: keeps its cause.
    assert_eq!(
        plain.cause().unwrap().downcast_ref(),
        Some(&Error::Canceled)
    );
}

#[test]
fn descendants_inherit_the_cause_including_ones_made_after() {
    let (root, cancel) = context::with_cancel_cause(&Context::background());
    let (child, _c1) = context::with_cancel(&root);
    let (grandchild, _c2) = context::with_timeout(&child, VERY_LONG);
    let (cause_child, cause_child_cancel) = context::with_cancel_cause(&child);
    cancel.cancel("root's reason");
    for ctx in [&root, &child, &grandchild, &cause_child] {
        assert_eq!(ctx.err(), Some(Error::Canceled));
        assert_eq!(cause_text(ctx).as_deref(), Some("root's reason"));
    }
    // Canceling an already-canceled descendant changes nothing.
    cause_child_cancel.cancel("too late");
    assert_eq!(cause_text(&cause_child).as_deref(), Some("root's reason"));
    // A child made after the cancel is canceled at birth, with the cause.
    let (late, _c3) = context::with_cancel(&grandchild);
    assert_eq!(cause_text(&late).as_deref(), Some("root's reason"));
}

#[test]
fn a_deadline_cause_reaches_the_children() {
    let rt = rt();
    rt.block_on(async {
        let (ctx, _cancel) = context::with_timeout_cause(
            &Context::background(),
            Duration::from_millis(10),
            "backend too slow",
        );
        let (child, _c) = context::with_cancel(&ctx);
        child.done().recv().await;
        assert_eq!(child.err(), Some(Error::DeadlineExceeded));
        assert_eq!(cause_text(&child).as_deref(), Some("backend too slow"));
        assert_eq!(cause_text(&ctx).as_deref(), Some("backend too slow"));
    });
}

#[test]
fn a_deadline_cause_is_not_used_by_a_cancel_first() {
    let (ctx, cancel) =
        context::with_deadline_cause(&Context::background(), Instant::now() + VERY_LONG, "late");
    cancel.cancel();
    assert_eq!(ctx.cause().unwrap().downcast_ref(), Some(&Error::Canceled));
}

#[test]
fn an_earlier_parent_deadline_keeps_its_own_cause() {
    let rt = rt();
    rt.block_on(async {
        let (parent, _c1) = context::with_timeout_cause(
            &Context::background(),
            Duration::from_millis(10),
            "parent's deadline",
        );
        let (child, _c2) = context::with_timeout_cause(&parent, VERY_LONG, "child's deadline");
        child.done().recv().await;
        assert_eq!(cause_text(&child).as_deref(), Some("parent's deadline"));
    });
}

/// Waiting tasks on 4 Ps and plain threads, and four cancellers racing with different
/// causes: one cause wins, and every waiter of the context and of its child reads it.
#[test]
fn every_waiter_sees_the_one_winning_cause() {
    let rt = rt();
    for _ in 0..50 {
        let (ctx, cancel) = context::with_cancel_cause(&Context::background());
        let (child, _c) = context::with_cancel(&ctx);
        let waiters: Vec<_> = (0..8)
            .map(|i| {
                let ctx = if i % 2 == 0 {
                    ctx.clone()
                } else {
                    child.clone()
                };
                rt.spawn(async move {
                    ctx.done().recv().await;
                    cause_text(&ctx).unwrap()
                })
            })
            .collect();
        let start = Arc::new(Barrier::new(4));
        let cancellers: Vec<_> = (0..4)
            .map(|i| {
                let (cancel, start) = (cancel.clone(), start.clone());
                std::thread::spawn(move || {
                    start.wait();
                    cancel.cancel(format!("canceller {i}"));
                })
            })
            .collect();
        for c in cancellers {
            c.join().unwrap();
        }
        let winner = cause_text(&ctx).unwrap();
        assert!(winner.starts_with("canceller "), "{winner}");
        rt.block_on(async {
            for w in waiters {
                assert_eq!(w.await.unwrap(), winner);
            }
        });
        assert_eq!(cause_text(&child).unwrap(), winner);
    }
}

/// Go's `defer cancel(nil)`: a handler's guard cancels its request context (and wakes the
/// task waiting on it) when the handler returns, early by `?` or not, with `Canceled` as the
/// cause; a cause given before the return wins.
#[test]
fn a_drop_guard_cancels_without_a_cause_unless_one_came_first() {
    fn handler(server: &Context, fail: bool) -> Result<Context, &'static str> {
        let (ctx, cancel) = context::with_cancel_cause(server);
        let on_error = cancel.clone();
        let _guard = cancel.drop_guard();
        if fail {
            on_error.cancel("bad request");
            return Err("bad request");
        }
        Ok(ctx)
    }
    rt().block_on(async {
        let (server, _stop) = context::with_cancel(&Context::background());
        let ctx = handler(&server, false).unwrap();
        let waiter = {
            let ctx = ctx.clone();
            gort::spawn(async move { ctx.done().recv().await })
        };
        gort::time::timeout(VERY_LONG, waiter)
            .await
            .expect("the guard's cancel wakes the waiter")
            .unwrap();
        assert_eq!(ctx.err(), Some(Error::Canceled));
        assert_eq!(ctx.cause().unwrap().downcast_ref(), Some(&Error::Canceled));
        assert_eq!(server.err(), None, "only the request's context");
        assert!(handler(&server, true).is_err());
        let (ctx, cancel) = context::with_cancel_cause(&server);
        let cancel = cancel.drop_guard().disarm();
        assert_eq!(ctx.err(), None, "a disarmed guard does not cancel");
        cancel.cancel("later");
        assert_eq!(cause_text(&ctx).as_deref(), Some("later"));
    });
}
