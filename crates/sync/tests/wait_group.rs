//! `WaitGroup` on real runtime threads: waiters woken at zero, Go's misuse panic, cancel-safe
//! waits, and reuse across generations.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use gort::sync::WaitGroup;

fn rt() -> gort::Runtime {
    gort::Builder::new().procs(4).build().unwrap()
}

/// Every counted task has finished when `wait` returns, with tasks on several Ps.
#[test]
fn wait_returns_after_every_done() {
    let rt = rt();
    rt.block_on(async {
        let wg = WaitGroup::new();
        let finished = Arc::new(AtomicUsize::new(0));
        for i in 0..200u64 {
            wg.add(1);
            let (wg, finished) = (wg.clone(), finished.clone());
            gort::spawn(async move {
                gort::time::sleep(Duration::from_micros(i % 7 * 100)).await;
                finished.fetch_add(1, Ordering::SeqCst);
                wg.done();
            });
        }
        wg.wait().await;
        assert_eq!(finished.load(Ordering::SeqCst), 200);
        assert_eq!(wg.count(), 0);
    });
}

/// Many waiters (tasks and plain threads) are all woken by the last `done`.
#[test]
fn every_waiter_is_woken() {
    let rt = rt();
    let wg = WaitGroup::new();
    wg.add(1);
    let threads: Vec<_> = (0..3)
        .map(|_| {
            let wg = wg.clone();
            std::thread::spawn(move || futures::executor::block_on(wg.wait()))
        })
        .collect();
    rt.block_on(async {
        let tasks: Vec<_> = (0..50)
            .map(|_| {
                let wg = wg.clone();
                gort::spawn(async move { wg.wait().await })
            })
            .collect();
        gort::time::sleep(Duration::from_millis(20)).await;
        let wg2 = wg.clone();
        std::thread::spawn(move || wg2.done()).join().unwrap();
        for t in tasks {
            t.await.unwrap();
        }
    });
    for t in threads {
        t.join().unwrap();
    }
}

/// Go's misuse panic: a negative counter panics with Go's message and leaves the counter as
/// it was, so the group stays usable.
#[test]
fn negative_counter_panics_with_gos_message() {
    let wg = WaitGroup::new();
    wg.add(1);
    let err = std::panic::catch_unwind(|| wg.add(-2)).unwrap_err();
    let msg = err
        .downcast_ref::<String>()
        .map(String::as_str)
        .or_else(|| err.downcast_ref::<&str>().copied())
        .unwrap();
    assert_eq!(msg, "sync: negative WaitGroup counter");
    assert_eq!(wg.count(), 1);
    wg.done();
    assert!(std::panic::catch_unwind(|| wg.done()).is_err());
    assert_eq!(wg.count(), 0);
}

/// A wait dropped while parked (a timeout around it) leaves nothing behind: the group keeps
/// working and a later wait is woken.
#[test]
fn dropped_wait_is_cancel_safe() {
    let rt = rt();
    rt.block_on(async {
        let wg = WaitGroup::new();
        wg.add(2);
        for _ in 0..10 {
            let r = gort::time::timeout(Duration::from_millis(1), wg.wait()).await;
            assert!(r.is_err(), "the counter is 2: wait must not return");
        }
        wg.done();
        let wg2 = wg.clone();
        let waiter = gort::spawn(async move { wg2.wait().await });
        gort::time::sleep(Duration::from_millis(5)).await;
        wg.done();
        waiter.await.unwrap();
    });
}

/// A waiter parked when the counter reached zero returns even if the counter is raised again
/// before it runs (the generation it watched ended), and the group can be reused.
#[test]
fn reuse_across_generations() {
    let wg = WaitGroup::new();
    wg.add(1);
    let mut wait = Box::pin(wg.wait());
    let waker = futures::task::noop_waker();
    let mut cx = std::task::Context::from_waker(&waker);
    assert!(wait.as_mut().poll(&mut cx).is_pending());
    wg.done();
    wg.add(1); // a new generation starts before the waiter runs
    assert!(wait.as_mut().poll(&mut cx).is_ready());
    // The new generation has its own waiters.
    let mut second = Box::pin(wg.wait());
    assert!(second.as_mut().poll(&mut cx).is_pending());
    wg.done();
    assert!(second.as_mut().poll(&mut cx).is_ready());
}

use std::future::Future;

/// `WaitGroup` and its wait future cross threads.
#[test]
fn wait_group_is_send_sync_clone() {
    fn check<T: Send + Sync + Clone>() {}
    fn send<T: Send>(_: &T) {}
    check::<WaitGroup>();
    let wg = WaitGroup::new();
    send(&wg.wait());
}

/// A waker that panics when woken: a foreign executor's, polling a wait of the group.
fn panicking_waker() -> std::task::Waker {
    struct Panics;
    impl std::task::Wake for Panics {
        fn wake(self: Arc<Self>) {
            panic!("a foreign waker panics");
        }
    }
    std::task::Waker::from(Arc::new(Panics))
}

/// A waiter whose waker panics does not cost the others their wake-up: the `done` that
/// reaches zero panics (the waker's panic reaches its caller), but every other waiter is
/// still woken. The rest of the wakers were dropped unwoken by the panic before, and the
/// tasks waiting behind it hung.
#[test]
fn a_panicking_waker_does_not_strand_the_other_waiters() {
    use std::future::Future;
    let rt = rt();
    rt.block_on(async {
        let wg = WaitGroup::new();
        wg.add(1);
        // The foreign waiter parks first, so the others are woken after it.
        let mut foreign = Box::pin(wg.wait());
        let waker = panicking_waker();
        let mut cx = std::task::Context::from_waker(&waker);
        assert!(foreign.as_mut().poll(&mut cx).is_pending());
        let waiters: Vec<_> = (0..8)
            .map(|_| {
                let wg = wg.clone();
                gort::spawn(async move { wg.wait().await })
            })
            .collect();
        gort::time::sleep(Duration::from_millis(20)).await; // the tasks park
        let done = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| wg.done()));
        assert!(done.is_err(), "the waker's panic reaches done's caller");
        assert_eq!(wg.count(), 0);
        for w in waiters {
            let woken = gort::time::timeout(Duration::from_secs(10), w).await;
            woken.expect("woken despite the panicking waker").unwrap();
        }
        assert!(foreign.as_mut().poll(&mut cx).is_ready());
    });
}
