//! Ports of golang.org/x/sync's `errgroup/errgroup_test.go`, one test per Go test or example,
//! named in its doc comment. `g.Go` is `ErrGroup::spawn` (`spawn_limited` under a limit, where
//! Go's `Go` blocks), `g.TryGo` `try_spawn`, `g.SetLimit(n)` `set_limit(Some(n))`. Each test
//! runs on a fresh runtime of 1 P and of 4 under a watchdog.
//!
//! Where gort differs on purpose, the test says so where it applies:
//! - `wait` moves the first error out (`E` need not be `Clone`): a second `wait` returns only
//!   errors of tasks spawned after the first (Go's `Wait` returns the first error each time).
//! - `set_limit(Some(0))` panics (no task could ever run) where Go's `SetLimit(0)` makes every
//!   `TryGo` fail and every `Go` deadlock.
//!
//! Not ported: ExampleGroup_justErrors (HTTP fetches; `parallel` below covers the shape) and
//! BenchmarkGo (speed is measured by `benches/`).

use std::sync::atomic::{AtomicI32, Ordering::SeqCst};
use std::sync::Arc;
use std::time::Duration;

use gort::chan::bounded;
use gort::context::{Context, Error};
use gort::sync::ErrGroup;

#[path = "../../time/tests/support/watchdog.rs"]
mod watchdog;

use watchdog::on_1_and_4_procs;

type Search = fn(&Context, &str) -> Result<String, String>;

/// The errors the tasks of a case return (`None`: success), and what `wait` must return.
type Case = (&'static [Option<&'static str>], Result<(), &'static str>);

/// Go's `errDoom`.
const ERR_DOOM: &str = "group_test: doomed";

/// The cases of Go's TestWithContext, which TestCancelCause repeats.
const DOOM_CASES: [Case; 4] = [
    (&[], Ok(())),
    (&[None], Ok(())),
    (&[Some(ERR_DOOM)], Err(ERR_DOOM)),
    (&[Some(ERR_DOOM), None], Err(ERR_DOOM)),
];

fn fake_search(kind: &str, query: &str) -> Result<String, String> {
    Ok(format!("{kind} result for {query:?}"))
}

/// Go: ExampleGroup_parallel. "Google Search 2.0": three searches in a group with a context,
/// each result in its slot, in order.
#[test]
fn example_group_parallel() {
    on_1_and_4_procs(|| async {
        async fn google(ctx: &Context, query: &str) -> Result<Vec<String>, String> {
            let (g, ctx) = ErrGroup::<String>::with_context(ctx);
            let searches: [Search; 3] = [
                |_, q| fake_search("web", q),
                |_, q| fake_search("image", q),
                |_, q| fake_search("video", q),
            ];
            let results = Arc::new(std::sync::Mutex::new(vec![String::new(); searches.len()]));
            for (i, search) in searches.into_iter().enumerate() {
                let (ctx, results, query) = (ctx.clone(), results.clone(), query.to_string());
                g.spawn(async move {
                    let result = search(&ctx, &query)?;
                    results.lock().unwrap()[i] = result;
                    Ok(())
                });
            }
            g.wait().await?;
            let results = results.lock().unwrap().clone();
            Ok(results)
        }
        let results = google(&Context::background(), "golang").await.unwrap();
        assert_eq!(
            results,
            [
                "web result for \"golang\"",
                "image result for \"golang\"",
                "video result for \"golang\"",
            ]
        );
    });
}

/// Go: TestZeroGroup. A group without a context: `wait` after each spawn returns the first
/// error. gort's `wait` moves that error out, so a later `wait` returns `Ok` unless a task
/// spawned since failed (Go returns the first error again); the first error in time is what
/// each `wait` reports among the tasks it joined.
#[test]
fn zero_group() {
    on_1_and_4_procs(|| async {
        let err1 = "errgroup_test: 1";
        let err2 = "errgroup_test: 2";
        let cases: [&[Option<&str>]; 5] = [
            &[],
            &[None],
            &[Some(err1)],
            &[Some(err1), None],
            &[Some(err1), None, Some(err2)],
        ];
        for errs in cases {
            let g = ErrGroup::new();
            for (i, &err) in errs.iter().enumerate() {
                g.spawn(async move { err.map_or(Ok(()), Err) });
                let want = err.map_or(Ok(()), Err);
                assert_eq!(
                    g.wait().await,
                    want,
                    "after spawn for err in {:?}",
                    &errs[..=i]
                );
            }
            assert_eq!(g.wait().await, Ok(()), "the error was moved out");
        }
    });
}

/// Go: TestWithContext. `wait` returns the first error, and its context is done afterwards
/// whether or not a task failed.
#[test]
fn with_context() {
    on_1_and_4_procs(|| async {
        for (errs, want) in DOOM_CASES {
            let (g, ctx) = ErrGroup::with_context(&Context::background());
            for &err in errs {
                g.spawn(async move { err.map_or(Ok(()), Err) });
            }
            assert_eq!(g.wait().await, want, "for errs in {errs:?}");
            assert!(
                ctx.done().try_recv().is_err() && ctx.done().is_closed(),
                "for errs in {errs:?}: ctx.done() was not closed"
            );
            assert_eq!(ctx.err(), Some(Error::Canceled));
        }
    });
}

/// Go: TestTryGo. Under a limit of 42, 42 `try_spawn`s succeed and the 43rd fails; after
/// `wait` a slot is free again; a limit switched to 1 admits one. Go's last step,
/// `SetLimit(0)` to block every `TryGo`, is a panic in gort (see the file's doc).
#[test]
fn try_go() {
    on_1_and_4_procs(|| async {
        let mut g = ErrGroup::<()>::new();
        let n = 42;
        g.set_limit(Some(42));
        let (ch_tx, ch) = bounded::<()>(0);
        let f = || {
            let ch_tx = ch_tx.clone();
            async move {
                ch_tx.send(()).await.unwrap();
                Ok(())
            }
        };
        for i in 0..n {
            assert!(
                g.try_spawn(f()),
                "TryGo should succeed but got fail at {i}-th call."
            );
        }
        assert!(
            !g.try_spawn(f()),
            "TryGo is expected to fail but succeeded."
        );
        let drain = |k: usize| {
            let ch = ch.clone();
            gort::spawn(async move {
                for _ in 0..k {
                    ch.recv().await.unwrap();
                }
            })
        };
        drain(n);
        g.wait().await.unwrap();

        assert!(
            g.try_spawn(f()),
            "TryGo should success but got fail after all goroutines."
        );
        drain(1);
        g.wait().await.unwrap();

        // Switch limit.
        g.set_limit(Some(1));
        assert!(g.try_spawn(f()), "TryGo should success but got failed.");
        assert!(!g.try_spawn(f()), "TryGo should fail but succeeded.");
        drain(1);
        g.wait().await.unwrap();
    });
}

/// Go: TestTryGo's last step. `SetLimit(0)` blocks every call in Go; gort refuses the limit.
#[test]
#[should_panic(expected = "an ErrGroup limit of 0 would never run a task")]
fn try_go_limit_zero() {
    let mut g = ErrGroup::<()>::new();
    g.set_limit(Some(0));
}

/// Go: TestGoLimit. 1025 tasks through a limit of 10 (Go's blocking `Go`: `spawn_limited`):
/// never more than 10 active.
#[test]
fn go_limit() {
    on_1_and_4_procs(|| async {
        const LIMIT: i32 = 10;
        let mut g = ErrGroup::new();
        g.set_limit(Some(LIMIT as usize));
        let active = Arc::new(AtomicI32::new(0));
        for _ in 0..=1 << 10 {
            let active = active.clone();
            g.spawn_limited(async move {
                let n = active.fetch_add(1, SeqCst) + 1;
                if n > LIMIT {
                    return Err(format!("saw {n} active tasks; want ≤ {LIMIT}"));
                }
                // Give other tasks a chance to increment active.
                gort::time::sleep(Duration::from_micros(1)).await;
                active.fetch_sub(1, SeqCst);
                Ok(())
            })
            .await;
        }
        g.wait().await.unwrap();
    });
}

/// Go: TestCancelCause. x/sync's `WithContext` cancels its context with the first error as
/// the cause (`context.Cause(ctx)`), and with `context.Canceled` when `Wait` returns
/// without one: gort's `with_context_cause` (the cause is a copy of the error, so it needs
/// `E: Clone`; `with_context` takes any `E` and its cause is `Canceled`).
#[test]
fn cancel_cause() {
    on_1_and_4_procs(|| async {
        for (errs, want) in DOOM_CASES {
            let (g, ctx) = ErrGroup::<DoomError>::with_context_cause(&Context::background());
            for &err in errs {
                g.try_spawn(async move { err.map_or(Ok(()), |e| Err(DoomError(e))) });
            }
            assert_eq!(g.wait().await.map_err(|e| e.0), want);
            let cause = ctx.cause().expect("done after wait");
            match want {
                Ok(()) => assert_eq!(cause.downcast_ref::<Error>(), Some(&Error::Canceled)),
                Err(doom) => assert_eq!(cause.to_string(), doom, "for errs in {errs:?}"),
            }
        }
    });
}

/// A task error that is a `std::error::Error`, for a cause.
#[derive(Clone, Debug, PartialEq)]
struct DoomError(&'static str);

impl std::fmt::Display for DoomError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.0)
    }
}

impl std::error::Error for DoomError {}
