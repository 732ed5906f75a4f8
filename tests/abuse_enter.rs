//! `Handle::enter` guards misused inside a task: leaked with `mem::forget`, or dropped out of
//! order. Each left the worker thread in the wrong runtime with its P hidden, and the M
//! loop dropped that P: both tests hung (the watchdog failed them) before the worker learned
//! to put itself back. The rule: the worker's runtime and P survive a task, and the misuse
//! panics saying what went wrong (on the worker, counted in `Metrics::user_panics`).

mod support;

use support::{one_p, within};

use std::time::Duration;

/// The runtime still runs its tasks, and a task spawned from its task lands on it.
fn still_healthy(rt: &gort::Runtime) {
    for _ in 0..3 {
        let v = rt.block_on(rt.spawn(async {
            gort::time::sleep(Duration::from_millis(1)).await;
            let inner = gort::spawn(async { gort::Handle::current() });
            inner.await.unwrap()
        }));
        let handle = v.unwrap();
        assert_eq!(
            format!("{:?}", handle.procs()),
            format!("{:?}", rt.handle().procs())
        );
    }
    let other = rt.block_on(rt.spawn(async {
        // Spawned from this runtime's task: must run on this runtime.
        gort::spawn(async { 7 }).await.unwrap()
    }));
    assert_eq!(other.unwrap(), 7);
}

#[test]
fn a_forgotten_enter_guard_of_another_runtime_inside_a_task() {
    within(|| {
        let rt = one_p();
        let other = gort::Builder::new().procs(2).build().unwrap();
        let h = other.handle().clone();
        let r = rt.block_on(rt.spawn(async move {
            std::mem::forget(h.enter());
        }));
        let _ = r;
        still_healthy(&rt);
        assert!(rt.metrics().user_panics >= 1, "the misuse went unreported");
        drop(rt);
        drop(other);
    });
}

#[test]
fn enter_guards_dropped_out_of_order_inside_a_task() {
    within(|| {
        let rt = one_p();
        let a = gort::Builder::new().procs(1).build().unwrap();
        let b = gort::Builder::new().procs(1).build().unwrap();
        let (ha, hb) = (a.handle().clone(), b.handle().clone());
        let r = rt.block_on(rt.spawn(async move {
            let ga = ha.enter();
            let gb = hb.enter();
            drop(ga);
            drop(gb);
        }));
        assert!(r.is_ok(), "{r:?}");
        still_healthy(&rt);
        assert!(rt.metrics().user_panics >= 1, "the misuse went unreported");
    });
}

#[test]
fn a_forgotten_enter_guard_in_a_blocking_closure_does_not_move_later_closures() {
    within(|| {
        let rt = gort::Builder::new()
            .procs(1)
            .max_blocking_threads(1)
            .build()
            .unwrap();
        let other = gort::Builder::new().procs(2).build().unwrap();
        let h = other.handle().clone();
        rt.block_on(async move {
            gort::spawn_blocking(move || std::mem::forget(h.enter()))
                .await
                .unwrap();
            // The pool's one thread runs the next closure: it must be in this runtime.
            let procs = gort::spawn_blocking(|| gort::Handle::current().procs())
                .await
                .unwrap();
            assert_eq!(procs, 1, "a later closure ran in the other runtime");
        });
        assert!(rt.metrics().user_panics >= 1, "the misuse went unreported");
        drop(rt);
        drop(other);
    });
}
