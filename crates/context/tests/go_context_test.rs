//! Ports of Go 1.19's `src/context/context_test.go` (run by `x_test.go`) and of its
//! `example_test.go` (but ExampleWithValue), through gort's public API, one test per Go test,
//! named in its doc comment. Goroutines are `gort::spawn`ed tasks,
//! `<-c.Done()` is `ctx.done().recv()`, and each test that waits runs on a fresh runtime
//! under a watchdog. Go's `quiescent` bound (5 s) is 20 s here.
//!
//! gort differs on purpose, and these are not ported:
//! - TestValues, TestWithValueChecksKey, and the `WithValue` layers of the others: a gort
//!   context carries no values (Rust passes request data as arguments; see `gort::context`).
//! - The `otherContext`/`myCtx`/`myDoneCtx` cases and TestCustomContextGoroutines: `Context`
//!   is a type, not an interface a user implements, so there is no foreign parent to watch
//!   with a goroutine.
//! - The `String()` checks (`"context.Background.WithCancel"`): a context has `Debug` (its
//!   deadline and error), not Go's chain of constructor names.
//! - The checks of the parent's `children` map (TestCancelRemoves, and the linkage in
//!   TestParentFinishesChild and TestChildFinishesFirst) read internals: they are in the
//!   crate's unit tests (`src/tests.rs`); here the observable half is ported.
//! - TestInvalidDerivedFail: a nil parent cannot be written in Rust.
//! - TestAllocs: Go's limits count its escape analysis' allocations; gort's costs are measured
//!   by the benchmarks (design/PERFORMANCE.md).

use std::time::Duration;

use gort::context::{self, CancelFn, Context, Error};
use gort::sync::WaitGroup;
use gort::time::Instant;

#[path = "../../time/tests/support/watchdog.rs"]
mod watchdog;
use watchdog::run;

/// Go's `shortDuration`: a reasonable duration to block in a test.
const SHORT: Duration = Duration::from_millis(1);
/// Go's `veryLongDuration`: an upper bound on the test's running time.
const VERY_LONG: Duration = Duration::from_secs(1000 * 3600);
/// Go's `quiescent`: by when everything should have happened, generous for a loaded machine.
const QUIESCENT: Duration = Duration::from_secs(20);

/// Whether `<-ctx.Done()` would not block.
fn is_done(ctx: &Context) -> bool {
    ctx.done().is_closed()
}

/// Go: TestBackground. Background's done channel blocks.
#[test]
fn background() {
    let c = Context::background();
    assert!(c.done().try_recv().is_err(), "<-c.Done() should block");
    assert!(!is_done(&c));
    assert_eq!((c.err(), c.deadline()), (None, None));
}

/// Go: TestTODO. Go's `TODO` is another empty root; gort has one root, `background` (whose
/// doc alias is `TODO`): the same checks.
#[test]
fn todo() {
    background();
}

/// Go: TestWithCancel. A child and a grandchild live until the child's cancel, which reaches
/// both synchronously with `Canceled`.
#[test]
fn with_cancel() {
    let (c1, cancel) = context::with_cancel(&Context::background());
    let (c2, _cancel2) = context::with_cancel(&c1);
    let contexts = [&c1, &c2];
    for (i, c) in contexts.iter().enumerate() {
        assert_eq!(c.err(), None, "c[{i}].err()");
        assert!(c.done().try_recv().is_err(), "<-c[{i}].done() should block");
    }
    cancel.cancel(); // Should propagate synchronously.
    for (i, c) in contexts.iter().enumerate() {
        assert!(is_done(c), "<-c[{i}].done() blocked, but shouldn't have");
        assert_eq!(c.err(), Some(Error::Canceled), "c[{i}].err()");
    }
}

/// Go: TestParentFinishesChild. A parent's cancel finishes its cancel child and its timer
/// child (the value child is not ported), and a child made from the canceled parent is done
/// at once.
#[test]
fn parent_finishes_child() {
    run(async {
        let (parent, cancel) = context::with_cancel(&Context::background());
        let (cancel_child, stop1) = context::with_cancel(&parent);
        let (timer_child, stop2) = context::with_timeout(&parent, VERY_LONG);
        let _stops = (stop1.drop_guard(), stop2.drop_guard()); // Go's defer stop()
        for (c, name) in [
            (&parent, "parent"),
            (&cancel_child, "cancelChild"),
            (&timer_child, "timerChild"),
        ] {
            assert!(!is_done(c), "<-{name}.done() should block");
        }

        cancel.cancel();

        for (c, name) in [
            (&parent, "parent"),
            (&cancel_child, "cancelChild"),
            (&timer_child, "timerChild"),
        ] {
            assert!(is_done(c), "<-{name}.done() blocked, but shouldn't have");
            assert_eq!(c.err(), Some(Error::Canceled), "{name}.err()");
        }

        // A child of a canceled parent is canceled at construction.
        let (precanceled_child, _stop) = context::with_cancel(&parent);
        assert!(
            is_done(&precanceled_child),
            "<-precanceledChild.done() blocked"
        );
        assert_eq!(precanceled_child.err(), Some(Error::Canceled));
    });
}

/// Go: TestChildFinishesFirst. A child canceled first is done; its parent (the background, or
/// a cancelable one) is not.
#[test]
fn child_finishes_first() {
    let (cancelable, stop) = context::with_cancel(&Context::background());
    let _stop = stop.drop_guard();
    for parent in [Context::background(), cancelable] {
        let (child, cancel) = context::with_cancel(&parent);
        assert!(!is_done(&parent) && !is_done(&child));
        cancel.cancel();
        assert!(
            is_done(&child),
            "<-child.done() blocked, but shouldn't have"
        );
        assert_eq!(child.err(), Some(Error::Canceled));
        assert!(!is_done(&parent), "<-parent.done() should block");
        assert_eq!(parent.err(), None);
    }
}

/// Go's `testDeadline`: `c` is done within [`QUIESCENT`], with `DeadlineExceeded`.
async fn test_deadline(c: &Context, name: &str) {
    let timer = gort::time::Timer::new(QUIESCENT);
    gort::select! {
        _ = timer.c().recv() => panic!("{name}: context not timed out after {QUIESCENT:?}"),
        _ = c.done().recv() => {}
    }
    assert_eq!(c.err(), Some(Error::DeadlineExceeded), "{name}: c.err()");
}

/// Go: TestDeadline. A deadline 1 ms ahead, one under a parent's, one in the past, one now:
/// each is reached with `DeadlineExceeded`.
#[test]
fn deadline() {
    run(async {
        let bg = Context::background();
        let (c, _cancel) = context::with_deadline(&bg, Instant::now() + SHORT);
        test_deadline(&c, "WithDeadline").await;

        let (o, _cancel) = context::with_deadline(&bg, Instant::now() + SHORT);
        let (c, _cancel) = context::with_deadline(&o, Instant::now() + VERY_LONG);
        assert_eq!(c.deadline(), o.deadline(), "the parent's earlier deadline");
        test_deadline(&c, "WithDeadline+WithDeadline").await;

        let (c, _cancel) = context::with_deadline(&bg, Instant::now() - SHORT);
        test_deadline(&c, "WithDeadline+inthepast").await;

        let (c, _cancel) = context::with_deadline(&bg, Instant::now());
        test_deadline(&c, "WithDeadline+now").await;
    });
}

/// Go: TestTimeout. As TestDeadline, with `with_timeout`.
#[test]
fn timeout() {
    run(async {
        let bg = Context::background();
        let (c, _cancel) = context::with_timeout(&bg, SHORT);
        test_deadline(&c, "WithTimeout").await;

        let (o, _cancel) = context::with_timeout(&bg, SHORT);
        let (c, _cancel) = context::with_timeout(&o, VERY_LONG);
        test_deadline(&c, "WithTimeout+WithTimeout").await;
    });
}

/// Go: TestCanceledTimeout. A timer child's own cancel, before any deadline, gives
/// `Canceled` synchronously.
#[test]
fn canceled_timeout() {
    run(async {
        let (c, _cancel) = context::with_timeout(&Context::background(), Duration::from_secs(1));
        let (c, cancel) = context::with_timeout(&c, VERY_LONG);
        cancel.cancel(); // Should propagate synchronously.
        assert!(is_done(&c), "<-c.done() blocked, but shouldn't have");
        assert_eq!(c.err(), Some(Error::Canceled));
    });
}

/// Go: TestSimultaneousCancels. A tree of about 100 contexts, every cancel called at once
/// from its own task: every context is done and every cancel returns.
#[test]
fn simultaneous_cancels() {
    run(async {
        let (root, cancel) = context::with_cancel(&Context::background());
        let mut all: Vec<(Context, CancelFn)> = vec![(root.clone(), cancel)];
        let mut q = std::collections::VecDeque::from([root]);
        // Create a tree of contexts.
        while let Some(parent) = q.pop_front() {
            if all.len() >= 100 {
                break;
            }
            for _ in 0..4 {
                let (ctx, cancel) = context::with_cancel(&parent);
                all.push((ctx.clone(), cancel));
                q.push_back(ctx);
            }
        }
        // Start all the cancels (Go's map order is random: here every other one reversed).
        let wg = WaitGroup::new();
        wg.add(all.len() as isize);
        let order = (0..all.len())
            .rev()
            .step_by(2)
            .chain((0..all.len()).step_by(2));
        for i in order.take(all.len()) {
            let (cancel, wg) = (all[i].1.clone(), wg.clone());
            gort::spawn(async move {
                cancel.cancel();
                wg.done();
            });
        }
        let stuck = gort::time::after(QUIESCENT);
        // Wait on all the contexts.
        for (ctx, _) in &all {
            gort::select! {
                _ = ctx.done().recv() => {}
                _ = stuck.recv() => panic!("timed out after {QUIESCENT:?} waiting for ctx.done()"),
            }
        }
        // Wait for all the cancel functions to return.
        gort::select! {
            _ = wg.wait() => {}
            _ = stuck.recv() => panic!("timed out after {QUIESCENT:?} waiting for cancel functions"),
        }
    });
}

/// Go: TestInterlockedCancels. A task that cancels the child once the parent is done, while
/// the parent's cancel is itself canceling the child: the child is done, no deadlock.
#[test]
fn interlocked_cancels() {
    run(async {
        let (parent, cancel_parent) = context::with_cancel(&Context::background());
        let (child, cancel_child) = context::with_cancel(&parent);
        gort::spawn(async move {
            parent.done().recv().await;
            cancel_child.cancel();
        });
        cancel_parent.cancel();
        let timer = gort::time::Timer::new(QUIESCENT);
        gort::select! {
            _ = child.done().recv() => {}
            _ = timer.c().recv() => panic!("timed out after {QUIESCENT:?} waiting for child.done()"),
        }
    });
}

/// Go's `testLayers` without its value layers: at least 30 random layers of `with_cancel` and
/// `with_timeout` (at least one of each); the innermost context is canceled by a random
/// cancel (synchronously) or, with `test_timeout`, by the short timeouts.
async fn test_layers(seed: u64, test_timeout: bool) {
    let mut r = seed;
    let mut next = move |n: u64| {
        // xorshift64*: Go's math/rand is only a source of shapes here.
        r ^= r << 13;
        r ^= r >> 7;
        r ^= r << 17;
        r % n
    };
    const MIN_LAYERS: usize = 30;
    let mut cancels: Vec<CancelFn> = Vec::new();
    let mut num_timers = 0;
    let mut ctx = Context::background();
    let mut i = 0;
    while i < MIN_LAYERS || num_timers == 0 || cancels.len() == num_timers {
        i += 1;
        let cancel;
        if next(2) == 0 {
            (ctx, cancel) = context::with_cancel(&ctx);
        } else {
            let d = if test_timeout { SHORT } else { VERY_LONG };
            (ctx, cancel) = context::with_timeout(&ctx, d);
            num_timers += 1;
        }
        cancels.push(cancel);
    }
    if !test_timeout {
        assert!(
            !is_done(&ctx),
            "seed={seed}: ctx should not be canceled yet"
        );
    }
    if test_timeout {
        let timer = gort::time::Timer::new(QUIESCENT);
        gort::select! {
            _ = ctx.done().recv() => {}
            _ = timer.c().recv() => panic!("seed={seed}: ctx should have timed out after {QUIESCENT:?}"),
        }
        assert_eq!(ctx.err(), Some(Error::DeadlineExceeded), "seed={seed}");
    } else {
        let cancel = &cancels[next(cancels.len() as u64) as usize];
        cancel.cancel();
        assert!(is_done(&ctx), "seed={seed}: ctx should be canceled");
        assert_eq!(ctx.err(), Some(Error::Canceled), "seed={seed}");
    }
}

fn seed() -> u64 {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64;
    nanos | 1 // xorshift needs a non-zero state
}

/// Go: TestLayersCancel.
#[test]
fn layers_cancel() {
    run(test_layers(seed(), false));
}

/// Go: TestLayersTimeout.
#[test]
fn layers_timeout() {
    run(test_layers(seed(), true));
}

/// Go: TestCancelRemoves, its observable half: a child canceled first (a cancel child, then a
/// timer child) leaves its parent live, and the parent's later cancel still works.
#[test]
fn cancel_removes() {
    run(async {
        let (ctx, cancel_parent) = context::with_cancel(&Context::background());
        let (child, cancel) = context::with_cancel(&ctx);
        cancel.cancel();
        assert_eq!((child.err(), ctx.err()), (Some(Error::Canceled), None));

        let (child, cancel) = context::with_timeout(&ctx, Duration::from_secs(60 * 60));
        cancel.cancel();
        assert_eq!((child.err(), ctx.err()), (Some(Error::Canceled), None));
        cancel_parent.cancel();
        assert_eq!(ctx.err(), Some(Error::Canceled));
    });
}

/// Go: TestWithCancelCanceledParent. A child of a canceled parent is done upon construction.
#[test]
fn with_cancel_canceled_parent() {
    let (parent, pcancel) = context::with_cancel(&Context::background());
    pcancel.cancel();
    let (c, _cancel) = context::with_cancel(&parent);
    assert!(is_done(&c), "child not done immediately upon construction");
    assert_eq!(c.err(), Some(Error::Canceled), "child not canceled");
}

/// Go: TestDeadlineExceededSupportsTimeout. `DeadlineExceeded` says it is a timeout (Go's
/// `Timeout() bool`, which `net.Error` callers check); `Canceled` does not.
#[test]
fn deadline_exceeded_supports_timeout() {
    assert!(
        Error::DeadlineExceeded.is_timeout(),
        "wrong value for timeout"
    );
    assert!(!Error::Canceled.is_timeout());
    // As an `io::Error` (a `?` in an I/O function), the kind gort::net's deadlines give.
    let io: std::io::Error = Error::DeadlineExceeded.into();
    assert_eq!(io.kind(), std::io::ErrorKind::TimedOut);
    assert_eq!(io.to_string(), "context deadline exceeded");
}

/// Go: ExampleWithCancel. A generator task stops when its context is canceled: the consumer
/// takes 1 to 5, cancels, and the generator returns (Go's leak check: its handle resolves).
#[test]
fn example_with_cancel() {
    run(async {
        // gen generates integers in a separate task and sends them to the returned channel.
        fn gen(ctx: Context) -> (gort::chan::Receiver<i32>, gort::task::JoinHandle<()>) {
            let (dst_tx, dst) = gort::chan::bounded(0);
            let task = gort::spawn(async move {
                let mut n = 1;
                loop {
                    gort::select! {
                        _ = ctx.done().recv() => return, // returning not to leak the task
                        _ = dst_tx.send(n) => n += 1,
                    }
                }
            });
            (dst, task)
        }
        let (ctx, cancel) = context::with_cancel(&Context::background());
        let (ints, task) = gen(ctx);
        let mut got = Vec::new();
        while let Some(n) = ints.recv().await {
            got.push(n);
            if n == 5 {
                break;
            }
        }
        cancel.cancel(); // cancel when we are finished consuming integers
        assert_eq!(got, [1, 2, 3, 4, 5]);
        task.await.unwrap(); // the generator returned
    });
}

/// Go's ExampleWithDeadline and ExampleWithTimeout: a wait of (here) 10 s loses to the
/// context's 1 ms deadline, whose error prints as Go's.
async fn abandon_at(ctx: &Context) {
    let overslept = gort::time::after(Duration::from_secs(10));
    gort::select! {
        _ = overslept.recv() => panic!("overslept"),
        _ = ctx.done().recv() => {
            assert_eq!(ctx.err().unwrap().to_string(), "context deadline exceeded");
        }
    }
}

/// Go: ExampleWithDeadline.
#[test]
fn example_with_deadline() {
    run(async {
        let d = Instant::now() + SHORT;
        let (ctx, cancel) = context::with_deadline(&Context::background(), d);
        let _cancel = cancel.drop_guard(); // Go's defer cancel()
        abandon_at(&ctx).await;
    });
}

/// Go: ExampleWithTimeout.
#[test]
fn example_with_timeout() {
    run(async {
        let (ctx, cancel) = context::with_timeout(&Context::background(), SHORT);
        let _cancel = cancel.drop_guard(); // Go's defer cancel()
        abandon_at(&ctx).await;
    });
}
