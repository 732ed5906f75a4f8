//! The rules of Go's `src/context/context_test.go` (Go 1.19) and Go 1.21's `AfterFunc` tests,
//! ported by name (`XTestWithCancel` → `test_with_cancel`), on real runtime threads. Tests
//! that only concern Go's values or custom `Context` implementations have no counterpart.

use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::Arc;
use std::time::Duration;

use gort_chan::TryRecvError;
use gort_sched::Runtime;
use gort_time::Instant;

use crate::{after_func, with_cancel, with_deadline, with_timeout, Context, Error};

/// Long enough that nothing on a loaded machine reaches it during a test.
const VERY_LONG: Duration = Duration::from_secs(3600);
/// Generous bound for "should have happened by now" on a loaded 2-core machine.
const QUIESCENT: Duration = Duration::from_secs(20);

fn rt() -> Runtime {
    gort_sched::Builder::new().procs(4).build().unwrap()
}

fn is_done(ctx: &Context) -> bool {
    ctx.done().try_recv() == Err(TryRecvError::Closed)
}

/// Waits for `ctx` to be done, failing the test after [`QUIESCENT`].
async fn wait_done(ctx: &Context, what: &str) {
    let r = gort_time::timeout(QUIESCENT, ctx.done().recv()).await;
    assert!(r.is_ok(), "{what}: not done after {QUIESCENT:?}");
}

#[test]
fn test_background() {
    let c = Context::background();
    assert_eq!(c.err(), None);
    assert_eq!(c.deadline(), None);
    assert_eq!(c.done().try_recv(), Err(TryRecvError::Empty), "must block");
}

/// Cancel propagates synchronously to the context and its children.
#[test]
fn test_with_cancel() {
    let (c1, cancel) = with_cancel(&Context::background());
    let (c2, _c2cancel) = with_cancel(&c1);
    for c in [&c1, &c2] {
        assert_eq!(c.err(), None);
        assert!(!is_done(c), "done must block before cancel");
    }
    cancel.cancel();
    for c in [&c1, &c2] {
        assert!(is_done(c), "done must be closed right after cancel");
        assert_eq!(c.err(), Some(Error::Canceled));
    }
}

/// Cancelling a parent cancels its children (of every kind) and clears its children map; a
/// child created after the parent is canceled is canceled at once.
#[test]
fn test_parent_finishes_child() {
    let rt = rt();
    rt.block_on(async {
        let (parent, cancel) = with_cancel(&Context::background());
        let (cancel_child, _c1) = with_cancel(&parent);
        let (timer_child, _c2) = with_timeout(&parent, VERY_LONG);
        let (deep_child, _c3) = with_cancel(&cancel_child);
        assert_eq!(parent.node.children_len(), 2);
        assert_eq!(cancel_child.node.children_len(), 1);
        for c in [&parent, &cancel_child, &timer_child, &deep_child] {
            assert!(!is_done(c));
        }
        cancel.cancel();
        for c in [&parent, &cancel_child, &timer_child, &deep_child] {
            assert!(is_done(c));
            assert_eq!(c.err(), Some(Error::Canceled));
        }
        assert_eq!(
            parent.node.children_len(),
            0,
            "parent.children after cancel"
        );
        assert_eq!(cancel_child.node.children_len(), 0);
        assert!(
            !timer_child.node.has_timer(),
            "the deadline timer is stopped"
        );
        let (late, _c4) = with_cancel(&parent);
        assert_eq!(late.err(), Some(Error::Canceled));
    });
}

/// A child canceled first leaves its parent live, and unregisters from it.
#[test]
fn test_child_finishes_first() {
    let rt = rt();
    rt.block_on(async {
        for parent in [Context::background(), with_cancel(&Context::background()).0] {
            let (child, cancel) = with_cancel(&parent);
            let children_before = if parent.node.is_cancelable() { 1 } else { 0 };
            assert_eq!(parent.node.children_len(), children_before);
            cancel.cancel();
            assert!(is_done(&child));
            assert_eq!(child.err(), Some(Error::Canceled));
            assert_eq!(parent.node.children_len(), 0, "child removed from parent");
            assert_eq!(parent.err(), None, "parent must stay live");
            assert!(!is_done(&parent));
        }
    });
}

/// A deadline cancels with `DeadlineExceeded`, also for a child of a deadline context and
/// for a child with a later deadline of its own (capped by the parent's).
#[test]
fn test_deadline() {
    let rt = rt();
    rt.block_on(async {
        let bg = Context::background();
        let soon = Instant::now() + Duration::from_millis(50);
        let (c, _) = with_deadline(&bg, soon);
        assert_eq!(c.deadline(), Some(soon));
        wait_done(&c, "WithDeadline").await;
        assert_eq!(c.err(), Some(Error::DeadlineExceeded));

        let (o, _) = with_deadline(&bg, Instant::now() + Duration::from_millis(50));
        let (c, _) = with_deadline(&o, Instant::now() + VERY_LONG);
        assert_eq!(c.deadline(), o.deadline(), "the earlier deadline wins");
        wait_done(&c, "WithDeadline+otherContext+WithDeadline").await;
        assert_eq!(c.err(), Some(Error::DeadlineExceeded));

        let (c, _) = with_deadline(&bg, Instant::now() - Duration::from_millis(1));
        assert_eq!(
            c.err(),
            Some(Error::DeadlineExceeded),
            "past deadline: at once"
        );
    });
}

#[test]
fn test_timeout() {
    let rt = rt();
    rt.block_on(async {
        let (c, _) = with_timeout(&Context::background(), Duration::from_millis(50));
        let (c2, _) = with_timeout(&c, VERY_LONG);
        wait_done(&c2, "WithTimeout+WithTimeout").await;
        assert_eq!(c2.err(), Some(Error::DeadlineExceeded));
        assert_eq!(c.err(), Some(Error::DeadlineExceeded));
    });
}

/// A timeout context canceled before its deadline says `Canceled`, and its timer is stopped.
#[test]
fn test_canceled_timeout() {
    let rt = rt();
    rt.block_on(async {
        // Long enough that the cancel below always comes first, even on a loaded machine.
        let (c, cancel) = with_timeout(&Context::background(), Duration::from_secs(1));
        let (o, _) = with_cancel(&c);
        assert!(c.node.has_timer());
        cancel.cancel();
        wait_done(&o, "child of canceled timeout").await;
        assert_eq!(o.err(), Some(Error::Canceled));
        assert_eq!(c.err(), Some(Error::Canceled));
        assert!(!c.node.has_timer(), "cancel stops the deadline timer");
        gort_time::sleep(Duration::from_millis(1100)).await;
        assert_eq!(
            c.err(),
            Some(Error::Canceled),
            "the deadline must not overwrite"
        );
    });
}

/// A tree of 100 contexts, all canceled concurrently from tasks on several Ps: every one is
/// done and no cancel hangs.
#[test]
fn test_simultaneous_cancels() {
    let rt = rt();
    rt.block_on(async {
        let (root, cancel) = with_cancel(&Context::background());
        let mut all = vec![(root.clone(), cancel)];
        let mut queue = std::collections::VecDeque::from([root]);
        while all.len() < 100 {
            let parent = queue.pop_front().unwrap();
            for _ in 0..4 {
                let (ctx, cancel) = with_cancel(&parent);
                all.push((ctx.clone(), cancel));
                queue.push_back(ctx);
            }
        }
        let cancels: Vec<_> = all
            .iter()
            .map(|(_, cancel)| {
                let cancel = cancel.clone();
                gort_sched::spawn(async move { cancel.cancel() })
            })
            .collect();
        for (ctx, _) in &all {
            wait_done(ctx, "simultaneous cancels").await;
        }
        for c in cancels {
            gort_time::timeout(QUIESCENT, c).await.unwrap().unwrap();
        }
    });
}

/// A child canceled by a task that watches its parent, racing the parent's own propagation.
#[test]
fn test_interlocked_cancels() {
    let rt = rt();
    rt.block_on(async {
        let (parent, cancel_parent) = with_cancel(&Context::background());
        let (child, cancel_child) = with_cancel(&parent);
        let p = parent.clone();
        gort_sched::spawn(async move {
            p.done().recv().await;
            cancel_child.cancel();
        });
        cancel_parent.cancel();
        wait_done(&child, "child of interlocked cancel").await;
    });
}

/// Random chains of cancel and timeout layers: cancelling any layer cancels the innermost.
fn test_layers(seed: u64, timeout: bool) {
    let rt = rt();
    rt.block_on(async {
        let mut rng = seed;
        let mut next = move |n: u64| {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            rng % n
        };
        let mut ctx = Context::background();
        let mut cancels = Vec::new();
        let mut timers = 0;
        let short = Duration::from_millis(20);
        while cancels.len() < 30 || timers == 0 {
            let (c, cancel) = if next(2) == 0 {
                with_cancel(&ctx)
            } else {
                timers += 1;
                with_timeout(&ctx, if timeout { short } else { VERY_LONG })
            };
            ctx = c;
            cancels.push(cancel);
        }
        if timeout {
            wait_done(&ctx, "innermost layer").await;
            assert_eq!(ctx.err(), Some(Error::DeadlineExceeded), "seed {seed}");
        } else {
            assert!(!is_done(&ctx), "seed {seed}: canceled too early");
            cancels[next(cancels.len() as u64) as usize].cancel();
            assert!(is_done(&ctx), "seed {seed}: innermost not canceled");
        }
    });
}

#[test]
fn test_layers_cancel() {
    for seed in 1..20 {
        test_layers(seed * 7919, false);
    }
}

#[test]
fn test_layers_timeout() {
    test_layers(12345, true);
}

/// Cancelling a child (plain or with a timeout) removes it from its parent's children.
#[test]
fn test_cancel_removes() {
    let rt = rt();
    rt.block_on(async {
        let (ctx, _) = with_cancel(&Context::background());
        assert_eq!(ctx.node.children_len(), 0, "after creation");
        let (_c, cancel) = with_cancel(&ctx);
        assert_eq!(ctx.node.children_len(), 1, "with WithCancel child");
        cancel.cancel();
        assert_eq!(
            ctx.node.children_len(),
            0,
            "after canceling WithCancel child"
        );

        let (_c, cancel) = with_timeout(&ctx, VERY_LONG);
        assert_eq!(ctx.node.children_len(), 1, "with WithTimeout child");
        cancel.cancel();
        assert_eq!(
            ctx.node.children_len(),
            0,
            "after canceling WithTimeout child"
        );
    });
}

#[test]
fn test_with_cancel_canceled_parent() {
    let (parent, pcancel) = with_cancel(&Context::background());
    pcancel.cancel();
    let (c, _) = with_cancel(&parent);
    assert!(
        is_done(&c),
        "child of a canceled parent must be done at once"
    );
    assert_eq!(c.err(), Some(Error::Canceled));
}

/// Go 1.21 `TestAfterFuncCalledAfterCancel`: `f` runs once the context is canceled, and `stop`
/// then reports that it did not stop it.
#[test]
fn test_after_func_called_after_cancel() {
    let rt = rt();
    rt.block_on(async {
        let (ctx, cancel) = with_cancel(&Context::background());
        let (tx, rx) = gort_chan::bounded(1);
        let stop = after_func(&ctx, move || tx.try_send(()).unwrap());
        assert_eq!(
            rx.try_recv(),
            Err(TryRecvError::Empty),
            "f ran before cancel"
        );
        cancel.cancel();
        assert!(gort_time::timeout(QUIESCENT, rx.recv()).await.is_ok());
        assert!(!stop.stop(), "stop after f started");
    });
}

/// Go 1.21 `TestAfterFuncCalledAfterTimeout`.
#[test]
fn test_after_func_called_after_timeout() {
    let rt = rt();
    rt.block_on(async {
        let (ctx, _) = with_timeout(&Context::background(), Duration::from_millis(10));
        let (tx, rx) = gort_chan::bounded(1);
        after_func(&ctx, move || tx.try_send(()).unwrap());
        assert!(gort_time::timeout(QUIESCENT, rx.recv()).await.is_ok());
    });
}

/// Go 1.21 `TestAfterFuncCalledImmediately`: on an already-done context `f` starts at once.
#[test]
fn test_after_func_called_immediately() {
    let rt = rt();
    rt.block_on(async {
        let (ctx, cancel) = with_cancel(&Context::background());
        cancel.cancel();
        let (tx, rx) = gort_chan::bounded(1);
        after_func(&ctx, move || tx.try_send(()).unwrap());
        assert!(gort_time::timeout(QUIESCENT, rx.recv()).await.is_ok());
    });
}

/// Go 1.21 `TestAfterFuncNotCalledAfterStop`: a stopped `f` never runs, even after cancel,
/// and a second stop reports false.
#[test]
fn test_after_func_not_called_after_stop() {
    let rt = rt();
    rt.block_on(async {
        let (ctx, cancel) = with_cancel(&Context::background());
        let calls = Arc::new(AtomicUsize::new(0));
        let c = calls.clone();
        let stop = after_func(&ctx, move || {
            c.fetch_add(1, SeqCst);
        });
        assert!(stop.stop(), "first stop");
        assert!(!stop.stop(), "second stop");
        cancel.cancel();
        gort_time::sleep(Duration::from_millis(20)).await;
        assert_eq!(calls.load(SeqCst), 0);
        assert!(ctx.node.state().after_funcs.is_empty(), "stop unregisters");
    });
}

/// Go 1.21 `TestAfterFuncCalledAsynchronously`: `f` runs in its own task, never on the
/// canceller's stack (here `f` blocks until the canceller has returned).
#[test]
fn test_after_func_called_asynchronously() {
    let rt = rt();
    rt.block_on(async {
        let (ctx, cancel) = with_cancel(&Context::background());
        let (returned_tx, returned_rx) = gort_chan::bounded::<()>(1);
        let (ran_tx, ran_rx) = gort_chan::bounded(1);
        after_func(&ctx, move || {
            futures::executor::block_on(returned_rx.recv());
            ran_tx.try_send(()).unwrap();
        });
        cancel.cancel(); // would deadlock if f ran here
        returned_tx.try_send(()).unwrap();
        assert!(gort_time::timeout(QUIESCENT, ran_rx.recv()).await.is_ok());
    });
}

/// On a context that is never canceled, `f` never runs and `stop` stops it.
#[test]
fn test_after_func_on_background() {
    let stop = after_func(&Context::background(), || unreachable!());
    assert!(stop.stop());
}

/// Cancelling from a plain thread outside the runtime still runs `f` (on its own thread)
/// and wakes tasks waiting on `done`.
#[test]
fn cancel_from_a_plain_thread() {
    let rt = rt();
    let (ctx, cancel) = with_cancel(&Context::background());
    let (tx, rx) = gort_chan::bounded(1);
    after_func(&ctx, move || tx.try_send(()).unwrap());
    let waiter = rt.spawn({
        let ctx = ctx.clone();
        async move { ctx.done().recv().await }
    });
    std::thread::spawn(move || cancel.cancel()).join().unwrap();
    rt.block_on(async {
        gort_time::timeout(QUIESCENT, waiter)
            .await
            .unwrap()
            .unwrap();
        assert!(gort_time::timeout(QUIESCENT, rx.recv()).await.is_ok());
    });
}

/// `done` first asked for after cancel, or concurrently with it, is closed.
#[test]
fn done_created_after_or_during_cancel_is_closed() {
    for _ in 0..200 {
        let (ctx, cancel) = with_cancel(&Context::background());
        let c = ctx.clone();
        let t = std::thread::spawn(move || is_done(&c));
        cancel.cancel();
        t.join().unwrap();
        assert!(is_done(&ctx));
    }
}

#[test]
fn error_display_and_traits() {
    fn is_error<E: std::error::Error + Send + Sync + 'static>(_: E) {}
    is_error(Error::Canceled);
    assert_eq!(Error::Canceled.to_string(), "context canceled");
    assert_eq!(
        Error::DeadlineExceeded.to_string(),
        "context deadline exceeded"
    );
    fn send_sync_clone<T: Send + Sync + Clone>() {}
    send_sync_clone::<Context>();
    send_sync_clone::<crate::CancelFn>();
}

/// The deadline is ONE timer on the per-P heaps, stopped by cancel (so mass cancellation
/// costs what T7's stopped timers cost, no wake-up): 10,000 timeout contexts canceled before
/// their deadline stop 10,000 timers and fire none; children whose deadline the parent's
/// caps start no timer at all.
#[test]
fn deadline_is_one_timer_stopped_on_cancel() {
    let rt = rt();
    let before = rt.metrics();
    rt.block_on(async {
        let bg = Context::background();
        for _ in 0..10_000 {
            let (_ctx, cancel) = with_timeout(&bg, VERY_LONG);
            cancel.cancel();
        }
        let (parent, cancel_parent) = with_timeout(&bg, Duration::from_secs(60));
        let children: Vec<_> = (0..1_000)
            .map(|_| with_timeout(&parent, VERY_LONG))
            .collect();
        assert!(children.iter().all(|(c, _)| !c.node.has_timer()));
        cancel_parent.cancel();
    });
    let after = rt.metrics();
    assert_eq!(
        after.timers_fired - before.timers_fired,
        0,
        "a deadline fired"
    );
    assert_eq!(
        after.timers_stopped - before.timers_stopped,
        10_001,
        "one timer per deadline context (children capped by the parent's have none)"
    );
}
