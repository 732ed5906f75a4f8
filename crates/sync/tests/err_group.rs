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
        let mut group = ErrGroup::new();
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
        let (mut group, ctx) = ErrGroup::with_context(&Context::background());
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
        let (mut group, ctx) = ErrGroup::<String>::with_context(&Context::background());
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
        let (mut group, ctx) = ErrGroup::<()>::with_context(&Context::background());
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

#[test]
fn dropping_the_group_unwaited_aborts_its_tasks() {
    runtime().block_on(async {
        let alive = Arc::new(());
        let mut group = ErrGroup::<()>::new();
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
