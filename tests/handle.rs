//! `gort::runtime::Handle`: reaching a runtime from plain threads, blocking closures and
//! tasks; `enter`; `block_on`'s refusal on threads that run tasks and its use in
//! `block_in_place`; unwind safety.

mod support;

use gort::runtime::{EnterGuard, Handle, TryCurrentError};
use gort::{Builder, Runtime};
use std::fmt::Debug;
use std::panic::{catch_unwind, AssertUnwindSafe, RefUnwindSafe, UnwindSafe};
use std::time::Duration;
use support::panic_message;

fn runtime() -> Runtime {
    Builder::new().procs(2).build().unwrap()
}

#[test]
fn handle_and_runtime_have_tokios_auto_traits() {
    fn clone_send_sync_debug<T: Clone + Send + Sync + Debug>() {}
    fn unwind_safe<T: UnwindSafe + RefUnwindSafe>() {}
    fn error<T: std::error::Error + Send + Sync + 'static>() {}
    fn debug<T: Debug>() {}
    clone_send_sync_debug::<Handle>();
    unwind_safe::<Handle>();
    unwind_safe::<Runtime>();
    error::<TryCurrentError>();
    debug::<EnterGuard<'static>>();
}

#[test]
fn a_std_thread_holding_a_handle_spawns_and_blocks_on() {
    let rt = runtime();
    let handle = rt.handle().clone();
    let out = std::thread::spawn(move || {
        let hs: Vec<_> = (0..100u64)
            .map(|i| handle.spawn(async move { i }))
            .collect();
        handle.block_on(async {
            let mut sum = 0;
            for h in hs {
                sum += h.await.unwrap();
            }
            // Timers work in a Handle's block_on too.
            gort::time::sleep(Duration::from_millis(1)).await;
            sum
        })
    })
    .join()
    .unwrap();
    assert_eq!(out, 4950);
}

#[test]
fn current_inside_a_task_a_blocking_closure_and_block_on_is_that_runtime() {
    let rt = runtime();
    rt.set_procs(3);
    let in_task = rt.block_on(rt.spawn(async { Handle::current().procs() }));
    let in_blocking = rt.block_on(rt.spawn_blocking(|| Handle::current().procs()));
    let in_block_on = rt.block_on(async { Handle::current().procs() });
    assert_eq!(
        (in_task.unwrap(), in_blocking.unwrap(), in_block_on),
        (3, 3, 3)
    );
}

#[test]
fn current_outside_a_runtime_panics_with_a_clear_message_and_try_current_errs() {
    let err = Handle::try_current().unwrap_err();
    assert!(err.is_missing_context() && !err.is_thread_local_destroyed());
    let payload = catch_unwind(Handle::current).unwrap_err();
    let msg = panic_message(payload);
    assert!(msg.contains("outside a gort runtime"), "message: {msg}");
}

#[test]
fn enter_makes_spawn_and_current_work_on_a_plain_thread_until_dropped() {
    let rt = runtime();
    let guard = rt.handle().enter();
    let h = gort::spawn(async { gort::task::id() });
    let mut set = gort::JoinSet::new();
    set.spawn(async { 5 });
    assert!(Handle::try_current().is_ok());
    drop(guard);
    assert!(Handle::try_current().is_err());
    assert!(catch_unwind(|| gort::spawn(async {})).is_err());
    let id = h.id();
    assert_eq!(rt.block_on(h).unwrap(), id);
    assert_eq!(rt.block_on(set.join_next()).unwrap().unwrap(), 5);
}

#[test]
fn entering_another_runtime_from_a_task_spawns_there_and_comes_back() {
    let a = Builder::new().procs(1).thread_name("rt-a").build().unwrap();
    let b = Builder::new().procs(1).thread_name("rt-b").build().unwrap();
    let hb = b.handle().clone();
    let names = a.block_on(a.spawn(async move {
        let there = {
            let _guard = hb.enter();
            gort::spawn(async { std::thread::current().name().map(String::from) })
        };
        let here = gort::spawn(async { std::thread::current().name().map(String::from) });
        (there.await.unwrap(), here.await.unwrap())
    }));
    let (there, here) = names.unwrap();
    assert_eq!(there.as_deref(), Some("rt-b"));
    assert_eq!(here.as_deref(), Some("rt-a"));
}

#[test]
fn entering_the_own_runtime_inside_a_task_keeps_the_worker_running() {
    let rt = runtime();
    let out = rt.block_on(rt.spawn(async {
        let mut sum = 0;
        for i in 0..50u32 {
            // The guard is not `Send`: it cannot be held across an await.
            let h = {
                let _guard = Handle::current().enter();
                gort::spawn(async move { i })
            };
            sum += h.await.unwrap();
            gort::yield_now().await;
        }
        sum
    }));
    assert_eq!(out.unwrap(), 1225);
}

#[test]
fn block_on_works_inside_a_blocking_closure_of_the_same_and_another_runtime() {
    let rt = runtime();
    let other = runtime();
    let (own, foreign) = (rt.handle().clone(), other.handle().clone());
    let h = rt.spawn_blocking(move || {
        let a = own.block_on(async {
            gort::time::sleep(Duration::from_millis(2)).await;
            gort::spawn(async { 1 }).await.unwrap()
        });
        let b = foreign.block_on(foreign.spawn(async { 2 })).unwrap();
        // Back in its own pool's context afterwards: spawning still goes to `rt`.
        let c = own.block_on(gort::spawn(async { 3 })).unwrap();
        a + b + c
    });
    assert_eq!(rt.block_on(h).unwrap(), 6);
}

/// Guards the refusal: a worker parked in `block_on` would stall every task queued on its P
/// (and with one P, the task it waits for, forever).
#[test]
fn block_on_from_a_task_panics_with_a_clear_message() {
    let rt = Builder::new().procs(1).build().unwrap();
    let handle = rt.handle().clone();
    let err = rt
        .block_on(rt.spawn(async move { handle.block_on(async { 1 }) }))
        .unwrap_err();
    let msg = panic_message(err.into_panic());
    assert!(
        msg.contains("block_on called on a thread that runs tasks"),
        "message: {msg}"
    );
    // The worker survived: the runtime still runs tasks.
    assert_eq!(rt.block_on(rt.spawn(async { 7 })).unwrap(), 7);
}

#[test]
fn block_on_inside_block_on_panics() {
    let rt = runtime();
    let handle = rt.handle().clone();
    let res = catch_unwind(AssertUnwindSafe(|| {
        rt.block_on(async { handle.block_on(async { 1 }) })
    }));
    assert!(res.is_err());
}

/// Tokio's bridge (`block_in_place(|| Handle::current().block_on(..))`): the task's thread
/// gave its P away, so parking it stalls nothing. With one P, the task spawned inside runs
/// on the P the caller handed off.
#[test]
fn block_on_in_block_in_place_runs_the_future_and_the_runtimes_tasks() {
    let rt = Builder::new().procs(1).build().unwrap();
    let out = rt.block_on(rt.spawn(async {
        let sum = gort::block_in_place(|| {
            Handle::current().block_on(async {
                gort::time::sleep(Duration::from_millis(2)).await;
                gort::spawn(async { 40 }).await.unwrap() + 1
            })
        });
        gort::yield_now().await;
        sum + 1
    }));
    assert_eq!(out.unwrap(), 42);
}

/// Only `block_in_place` allows it: back in the task's poll, `block_on` is refused again.
#[test]
fn block_on_after_block_in_place_returns_panics_again() {
    let rt = Builder::new().procs(1).build().unwrap();
    let handle = rt.handle().clone();
    let err = rt
        .block_on(rt.spawn(async move {
            gort::block_in_place(|| handle.block_on(async { 1 }));
            handle.block_on(async { 2 })
        }))
        .unwrap_err();
    let msg = panic_message(err.into_panic());
    assert!(
        msg.contains("block_on called on a thread"),
        "message: {msg}"
    );
    assert_eq!(rt.block_on(rt.spawn(async { 7 })).unwrap(), 7);
}

/// A `block_on` inside a `block_in_place` in `block_on`'s own future works, as in Tokio
/// (its `yield_in_block_in_place`, tests/tokio_rt_handle_block_on.rs): `block_in_place` is the
/// caller's word that the thread may block. Without it, a nested `block_on` stays refused.
#[test]
fn block_on_in_block_in_place_inside_block_on_works() {
    let rt = runtime();
    let handle = rt.handle().clone();
    let one = rt.block_on(async { gort::block_in_place(|| handle.block_on(async { 1 })) });
    assert_eq!(one, 1);
    let res = catch_unwind(AssertUnwindSafe(|| {
        rt.block_on(async { handle.block_on(async { 2 }) })
    }));
    let msg = panic_message(res.unwrap_err());
    assert!(msg.contains("inside another block_on"), "message: {msg}");
}

/// `block_in_place` holds a paused clock; the `block_on` in it lends that hold out while it
/// parks, so its hour-long sleep ends by the clock's jump, at once and exactly.
#[test]
fn block_on_in_block_in_place_sleeps_on_a_paused_clock() {
    let rt = Builder::new().procs(1).start_paused(true).build().unwrap();
    let wall = std::time::Instant::now();
    let hour = Duration::from_secs(3600);
    let slept = rt.block_on(rt.spawn(async move {
        let ticker = gort::spawn(async move {
            gort::time::sleep(hour / 2).await;
            gort::time::Instant::now()
        });
        let start = gort::time::Instant::now();
        gort::block_in_place(|| {
            let out = Handle::current().block_on(async {
                gort::time::sleep(hour).await;
                (start.elapsed(), ticker.await.unwrap() - start)
            });
            // The hold is back once `block_on` returns: a pending timer does not make the
            // clock jump while this thread runs on.
            let sleeper = gort::spawn(gort::time::sleep(hour));
            let now = gort::time::Instant::now();
            std::thread::sleep(Duration::from_millis(50));
            assert_eq!(gort::time::Instant::now(), now);
            drop(sleeper);
            out
        })
    }));
    assert_eq!(slept.unwrap(), (hour, hour / 2));
    assert!(wall.elapsed() < Duration::from_secs(10));
}

#[test]
fn a_handle_outliving_its_runtime_gets_cancelled_tasks() {
    let rt = runtime();
    let handle = rt.handle().clone();
    drop(rt);
    let h = handle.spawn(async { 1 });
    assert!(handle.block_on(h).unwrap_err().is_cancelled());
    assert!(format!("{handle:?}").contains("Handle"));
}

/// A timer armed through a handle whose runtime is gone would never fire: `block_on` of a
/// sleep hung for ever. It panics now, as Tokio's does ("being shutdown").
#[test]
fn a_timer_after_the_runtime_dropped_panics_instead_of_hanging() {
    let rt = runtime();
    let handle = rt.handle().clone();
    drop(rt);
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let slept = catch_unwind(AssertUnwindSafe(|| {
            handle.block_on(gort::time::sleep(Duration::from_millis(1)))
        }));
        let _ = tx.send(slept.map_err(panic_message));
    });
    let slept = rx
        .recv_timeout(Duration::from_secs(60))
        .expect("block_on of a sleep hung on a dropped runtime");
    let message = slept.expect_err("the sleep cannot end without a runtime");
    assert!(message.contains("not shut down"), "{message}");
}

#[test]
fn a_runtime_survives_catch_unwind_around_its_users() {
    let rt = runtime();
    let res = catch_unwind(|| {
        rt.block_on(async { panic!("user code") });
    });
    assert!(res.is_err());
    assert_eq!(rt.block_on(rt.spawn(async { 9 })).unwrap(), 9);
}

/// Guards the difference between entering a runtime and running its tasks: a plain thread
/// under `Handle::enter` may still block on (as in Tokio).
#[test]
fn block_on_under_an_enter_guard_on_a_plain_thread_works() {
    let rt = runtime();
    let _guard = rt.handle().enter();
    let h = gort::spawn(async { 3 });
    assert_eq!(rt.block_on(h).unwrap(), 3);
    assert_eq!(rt.handle().block_on(async { 4 }), 4);
}

/// Guards `enter` on a worker: entering the own runtime must leave the P alone when the
/// guard drops. A task that gave its P away inside the guard (`block_in_place`) would else
/// get the old P back while another M runs it: two Ms on one P's queues.
#[test]
fn enter_then_block_in_place_inside_a_task_does_not_hand_back_a_given_away_p() {
    let rt = runtime();
    let total = rt.block_on(async {
        let tasks: Vec<_> = (0..8u64)
            .map(|i| {
                gort::spawn(async move {
                    let mut sum = 0;
                    for j in 0..20u64 {
                        {
                            let _guard = Handle::current().enter();
                            gort::block_in_place(|| std::thread::sleep(Duration::from_micros(200)));
                        }
                        sum += gort::spawn(async move { i * j }).await.unwrap();
                        gort::yield_now().await;
                    }
                    sum
                })
            })
            .collect();
        let mut total = 0;
        for t in tasks {
            total += t.await.unwrap();
        }
        total
    });
    assert_eq!(total, 28 * 190);
}

/// A panic in `block_in_place`'s closure gives back the paused clock's hold: the clock still
/// jumps for the runtime's next sleep, and the worker takes a P again.
#[test]
fn a_panic_in_block_in_place_leaves_the_paused_clock_free() {
    let rt = Builder::new().procs(1).start_paused(true).build().unwrap();
    let err = rt
        .block_on(rt.spawn(async { gort::block_in_place(|| panic!("in place")) }))
        .unwrap_err();
    assert_eq!(panic_message(err.into_panic()), "in place");
    let wall = std::time::Instant::now();
    let hour = Duration::from_secs(3600);
    let slept = rt.block_on(rt.spawn(async move {
        let start = gort::time::Instant::now();
        gort::time::sleep(hour).await;
        start.elapsed()
    }));
    assert_eq!(slept.unwrap(), hour);
    assert!(wall.elapsed() < Duration::from_secs(10));
}
