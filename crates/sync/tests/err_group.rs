//! `ErrGroup`: Go's errgroup semantics (first error in time, early cancel, wait cancels,
//! panics resumed after the others finish).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use gort::context::{Context, Error};
use gort::sync::ErrGroup;

fn runtime() -> gort::Runtime {
    gort::Builder::new().procs(2).build().unwrap()
}

#[test]
fn the_first_error_in_time_wins_whatever_the_spawn_order() {
    runtime().block_on(async {
        let group = ErrGroup::new();
        group.spawn(async {
            gort::time::sleep(Duration::from_millis(40)).await;
            Err("late")
        });
        group.spawn(async { Err("early") });
        group.spawn(async { Ok(()) });
        assert_eq!(group.wait().await, Err("early"));
    });
}

#[test]
fn an_error_cancels_the_context_before_wait_is_called() {
    runtime().block_on(async {
        let (group, ctx) = ErrGroup::with_context(&Context::background());
        let stopped = Arc::new(AtomicUsize::new(0));
        for _ in 0..8 {
            let (ctx, stopped) = (ctx.clone(), stopped.clone());
            group.spawn(async move {
                ctx.done().recv().await;
                stopped.fetch_add(1, Ordering::SeqCst);
                Err::<(), _>(ctx.err())
            });
        }
        group.spawn(async { Err(None) });
        // Not waited yet: the failure alone must cancel the siblings.
        let canceled = gort::time::timeout(Duration::from_secs(10), ctx.done().recv()).await;
        assert!(
            canceled.is_ok(),
            "the first error did not cancel the context"
        );
        assert_eq!(ctx.err(), Some(Error::Canceled));
        assert_eq!(group.wait().await, Err(None));
        assert_eq!(stopped.load(Ordering::SeqCst), 8);
    });
}

#[test]
fn wait_returns_ok_and_cancels_the_context_when_all_succeed() {
    runtime().block_on(async {
        let (group, ctx) = ErrGroup::<String>::with_context(&Context::background());
        let done = Arc::new(AtomicUsize::new(0));
        for i in 0..100u64 {
            let done = done.clone();
            group.spawn(async move {
                gort::time::sleep(Duration::from_micros(i * 10)).await;
                done.fetch_add(1, Ordering::SeqCst);
                Ok(())
            });
        }
        assert_eq!(ctx.err(), None);
        assert_eq!(group.wait().await, Ok(()));
        assert_eq!(done.load(Ordering::SeqCst), 100);
        assert_eq!(ctx.err(), Some(Error::Canceled));
    });
}

#[test]
fn a_panic_is_resumed_by_wait_after_the_other_tasks_finish() {
    let rt = runtime();
    let finished = Arc::new(AtomicUsize::new(0));
    let f = finished.clone();
    let res = rt.block_on(rt.spawn(async move {
        let (group, ctx) = ErrGroup::<()>::with_context(&Context::background());
        group.spawn(async { panic!("test: this errgroup task panics") });
        group.spawn(async move {
            ctx.done().recv().await; // canceled by the panic
            f.fetch_add(1, Ordering::SeqCst);
            Ok(())
        });
        group.wait().await
    }));
    let payload = res.unwrap_err().into_panic();
    assert_eq!(
        payload.downcast_ref::<&str>(),
        Some(&"test: this errgroup task panics")
    );
    assert_eq!(finished.load(Ordering::SeqCst), 1);
}

/// `spawn` reaps finished tasks once the set has grown (a long-lived group keeps none): a
/// panic reaped that way is still the one `wait` resumes, and later panics are dropped.
#[test]
fn a_panic_reaped_by_spawn_is_resumed_by_wait() {
    let rt = runtime();
    let res = rt.block_on(rt.spawn(async move {
        let group = ErrGroup::<()>::new();
        for i in 0..2 {
            group.spawn(async move { panic!("test: reaped errgroup panic {i}") });
            gort::time::sleep(Duration::from_millis(5)).await;
        }
        for _ in 0..1_000 {
            group.spawn(async { Ok(()) });
            gort::task::yield_now().await;
        }
        group.wait().await
    }));
    let payload = res.unwrap_err().into_panic();
    assert_eq!(
        payload.downcast_ref::<String>().map(String::as_str),
        Some("test: reaped errgroup panic 0")
    );
}

#[test]
fn dropping_the_group_unwaited_aborts_its_tasks() {
    runtime().block_on(async {
        let alive = Arc::new(());
        let group = ErrGroup::<()>::new();
        let held = alive.clone();
        group.spawn(async move {
            let _held = held;
            std::future::pending::<()>().await;
            Ok(())
        });
        gort::yield_now().await;
        drop(group);
        let start = std::time::Instant::now();
        while Arc::strong_count(&alive) > 1 {
            assert!(
                start.elapsed() < Duration::from_secs(10),
                "task not aborted"
            );
            gort::time::sleep(Duration::from_millis(1)).await;
        }
    });
}

#[test]
fn a_group_is_send_and_sync_so_its_tasks_can_share_it() {
    fn check<T: Send + Sync + std::fmt::Debug>() {}
    check::<ErrGroup<String>>();
}

/// Go's `g.Go` from inside a group's goroutine: a task spawns a sibling (after its spawner's
/// batch may already be joined), whose sibling fails; `wait` waits for all three and
/// returns that error, and the error canceled the group's context.
#[test]
fn a_task_spawns_a_sibling_whose_error_wait_returns() {
    runtime().block_on(async {
        let (group, ctx) = ErrGroup::with_context(&Context::background());
        let group = Arc::new(group);
        let finished = Arc::new(AtomicUsize::new(0));
        let (g, done) = (group.clone(), finished.clone());
        group.spawn(async move {
            gort::time::sleep(Duration::from_millis(5)).await;
            let (g2, done2) = (g.clone(), done.clone());
            g.spawn(async move {
                gort::time::sleep(Duration::from_millis(20)).await;
                g2.spawn(async move {
                    gort::time::sleep(Duration::from_millis(20)).await;
                    done2.fetch_add(1, Ordering::SeqCst);
                    Err("grandchild failed")
                });
                Ok(())
            });
            done.fetch_add(1, Ordering::SeqCst);
            Ok(())
        });
        assert_eq!(group.wait().await, Err("grandchild failed"));
        assert_eq!(finished.load(Ordering::SeqCst), 2);
        assert_eq!(ctx.err(), Some(Error::Canceled));
        // The group is reusable and holds no error any more.
        group.spawn(async { Ok(()) });
        assert_eq!(group.wait().await, Ok(()));
    });
}

/// Two tasks wait at once: each takes part of the tasks, and neither returns before every
/// task (the other's included) has finished.
#[test]
fn concurrent_waits_both_wait_for_every_task() {
    runtime().block_on(async {
        let group = Arc::new(ErrGroup::<()>::new());
        let finished = Arc::new(AtomicUsize::new(0));
        let spawn_slow = |ms: u64| {
            let done = finished.clone();
            group.spawn(async move {
                gort::time::sleep(Duration::from_millis(ms)).await;
                done.fetch_add(1, Ordering::SeqCst);
                Ok(())
            });
        };
        spawn_slow(60);
        let first = {
            let (g, done) = (group.clone(), finished.clone());
            gort::spawn(async move {
                g.wait().await.unwrap();
                done.load(Ordering::SeqCst)
            })
        };
        // Let the first wait take the slow task before the second is spawned.
        gort::time::sleep(Duration::from_millis(10)).await;
        spawn_slow(1);
        group.wait().await.unwrap();
        assert_eq!(finished.load(Ordering::SeqCst), 2);
        assert_eq!(first.await.unwrap(), 2);
    });
}

/// A spawn that panics (outside a runtime) leaves no task counted: a later `wait` returns.
#[test]
fn a_failed_spawn_is_not_counted_as_running() {
    let group = ErrGroup::<()>::new();
    let res = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        group.spawn(async { Ok(()) })
    }));
    assert!(res.is_err());
    assert!(format!("{group:?}").contains("running: 0"), "{group:?}");
    runtime().block_on(async { assert_eq!(group.wait().await, Ok(())) });
}

/// Two waits at once: both return after the failing task, and exactly one of them gets its
/// error (the other `Ok(())`): the error moves to one caller, unlike Go's `Wait`, which
/// gives every caller the same error (the docs of `wait` say so).
#[test]
fn of_two_concurrent_waits_exactly_one_gets_the_error() {
    runtime().block_on(async {
        let group = Arc::new(ErrGroup::new());
        group.spawn(async {
            gort::time::sleep(Duration::from_millis(20)).await;
            Err("boom")
        });
        let waits: Vec<_> = (0..2)
            .map(|_| {
                let g = group.clone();
                gort::spawn(async move { g.wait().await })
            })
            .collect();
        let mut results = Vec::new();
        for w in waits {
            results.push(w.await.unwrap());
        }
        results.sort();
        assert_eq!(results, [Ok(()), Err("boom")]);
    });
}
