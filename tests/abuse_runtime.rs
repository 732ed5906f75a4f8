//! User code that misuses the runtime, by mistake or on purpose: dropping a runtime from inside
//! its own callbacks, blocking on it from where it cannot block, awaiting a task from itself or
//! from a foreign executor, wakers kept past the runtime. The rule each test checks: nothing
//! hangs, nothing aborts the process, and misuse panics with a message that names it.
//! Every test runs under a watchdog that fails it instead of hanging CI.

mod support;

use support::{one_p, panic_text, slot, wait_until_taken, within, DroppingWaker, WATCHDOG};

use std::future::{poll_fn, Future};
use std::pin::pin;
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::{mpsc, Arc, Mutex};
use std::task::{Context, Poll, Waker};
use std::time::Duration;

#[test]
fn the_last_runtime_dropped_inside_an_after_func_callback_shuts_down() {
    within(|| {
        let rt = slot(one_p());
        let inner = rt.clone();
        let (done_tx, done_rx) = mpsc::channel();
        let h = rt.lock().unwrap().as_ref().unwrap().handle().clone();
        let guard = h.enter();
        let f = gort::time::after_func(Duration::from_millis(5), move || {
            // Taken out of the lock first: the drop must not run under the user's mutex.
            let taken = inner.lock().unwrap().take();
            drop(taken);
            let _ = done_tx.send(());
        });
        drop(guard);
        drop(h);
        done_rx
            .recv_timeout(WATCHDOG)
            .expect("the drop inside the callback hung");
        wait_until_taken(&rt);
        drop(f);
    });
}

#[test]
fn the_last_runtime_dropped_inside_a_blocking_closure_shuts_down() {
    within(|| {
        let rt = slot(one_p());
        let inner = rt.clone();
        let (done_tx, done_rx) = mpsc::channel();
        let h = rt.lock().unwrap().as_ref().unwrap().handle().clone();
        drop(h.spawn_blocking(move || {
            let taken = inner.lock().unwrap().take();
            drop(taken);
            let _ = done_tx.send(());
        }));
        done_rx
            .recv_timeout(WATCHDOG)
            .expect("the drop inside spawn_blocking hung");
    });
}

#[test]
fn the_last_runtime_dropped_inside_a_wakers_wake_shuts_down() {
    within(|| {
        let rt = slot(one_p());
        let (done_tx, done_rx) = mpsc::channel();
        let waker = Waker::from(Arc::new(DroppingWaker(rt.clone(), done_tx)));
        let (armed_tx, armed_rx) = mpsc::channel();
        let h = rt.lock().unwrap().as_ref().unwrap().handle().clone();
        drop(h.spawn(async move {
            let mut sleep = pin!(gort::time::sleep(Duration::from_millis(5)));
            assert!(sleep
                .as_mut()
                .poll(&mut Context::from_waker(&waker))
                .is_pending());
            drop(waker);
            let _ = armed_tx.send(());
            // Stays pending (the foreign waker is the one armed) until the drop cancels it.
            std::future::pending::<()>().await;
        }));
        drop(h);
        armed_rx.recv_timeout(WATCHDOG).unwrap();
        done_rx
            .recv_timeout(WATCHDOG)
            .expect("the drop inside wake hung");
    });
}

#[test]
fn block_on_inside_an_after_func_callback_panics_clearly_and_kills_no_m() {
    within(|| {
        let rt = one_p();
        let (tx, rx) = mpsc::channel();
        let h = rt.handle().clone();
        let _f = {
            let _g = rt.handle().enter();
            gort::time::after_func(Duration::from_millis(1), move || {
                let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    h.block_on(async { 1 })
                }));
                let _ = tx.send(r.map_err(|p| panic_text(&*p)));
            })
        };
        // Either it works (the callback runs where blocking is allowed) or it panics saying
        // why; never a hang.
        match rx
            .recv_timeout(WATCHDOG)
            .expect("block_on in a callback hung")
        {
            Ok(v) => assert_eq!(v, 1),
            Err(msg) => assert!(msg.contains("block_on"), "unclear message: {msg:?}"),
        }
        assert_eq!(rt.block_on(async { 2 }), 2);
    });
}

#[test]
fn a_task_awaiting_its_own_join_handle_hangs_only_itself() {
    within(|| {
        let rt = one_p();
        let (htx, hrx) = gort::chan::bounded::<gort::JoinHandle<()>>(1);
        let (ran_tx, ran_rx) = mpsc::channel();
        let h = rt.spawn(async move {
            let own = hrx.recv().await.unwrap();
            let _ = ran_tx.send(());
            // A deadlock of this task alone (Go's "all goroutines are asleep" is not
            // detected); the runtime keeps running others and its drop cancels it.
            let _ = own.await;
        });
        let abort = h.abort_handle();
        rt.block_on(async move { htx.send(h).await.unwrap() });
        ran_rx.recv_timeout(WATCHDOG).unwrap();
        assert_eq!(
            rt.block_on(async { gort::spawn(async { 3 }).await.unwrap() }),
            3
        );
        assert!(!abort.is_finished());
        drop(rt);
    });
}

#[test]
fn a_task_aborting_itself_stops_at_its_next_await() {
    within(|| {
        let rt = one_p();
        let after = Arc::new(AtomicUsize::new(0));
        let seen = after.clone();
        let (htx, hrx) = gort::chan::bounded::<gort::task::AbortHandle>(1);
        let h = rt.spawn(async move {
            let own = hrx.recv().await.unwrap();
            own.abort();
            seen.fetch_add(1, SeqCst); // still runs: abort takes effect at the next await
            gort::task::yield_now().await;
            seen.fetch_add(1, SeqCst);
        });
        let abort = h.abort_handle();
        let err = rt.block_on(async move {
            htx.send(abort).await.unwrap();
            h.await.unwrap_err()
        });
        assert!(err.is_cancelled(), "{err:?}");
        assert_eq!(after.load(SeqCst), 1);
    });
}

#[test]
fn a_join_handle_awaited_by_a_foreign_executor_and_another_runtime() {
    within(|| {
        let rt = gort::Builder::new().procs(2).build().unwrap();
        let other = one_p();
        let h = rt.spawn(async {
            gort::time::sleep(Duration::from_millis(10)).await;
            7
        });
        assert_eq!(futures::executor::block_on(h).unwrap(), 7);
        let h = rt.spawn(async {
            gort::time::sleep(Duration::from_millis(10)).await;
            8
        });
        assert_eq!(other.block_on(h).unwrap(), 8);
        // A handle whose runtime is dropped while a foreign executor waits on it.
        let h = rt.spawn(std::future::pending::<u8>());
        let waiter = std::thread::spawn(move || futures::executor::block_on(h));
        std::thread::sleep(Duration::from_millis(20));
        drop(rt);
        assert!(waiter.join().unwrap().unwrap_err().is_cancelled());
    });
}

/// A waker kept in a static, woken long after its runtime is gone.
static KEPT: Mutex<Vec<Waker>> = Mutex::new(Vec::new());

#[test]
fn wakers_kept_past_their_runtime_are_woken_and_dropped_harmlessly() {
    within(|| {
        let rt = one_p();
        rt.block_on(async {
            let h = gort::spawn(poll_fn(|cx| {
                let mut kept = KEPT.lock().unwrap();
                for _ in 0..10_000 {
                    kept.push(cx.waker().clone());
                }
                Poll::<()>::Pending
            }));
            gort::time::sleep(Duration::from_millis(5)).await;
            drop(h);
        });
        drop(rt);
        let wakers = std::mem::take(&mut *KEPT.lock().unwrap());
        for (i, w) in wakers.into_iter().enumerate() {
            if i % 2 == 0 {
                w.wake_by_ref();
                drop(w);
            } else {
                w.wake();
            }
        }
    });
}

/// An output whose `Drop` panics: dropped by the runtime when nobody takes it.
struct PanicOnDrop;

impl Drop for PanicOnDrop {
    fn drop(&mut self) {
        panic!("test: this output panics when dropped");
    }
}

#[test]
fn an_output_whose_drop_panics_kills_no_m() {
    within(|| {
        let rt = one_p();
        // Detached: the runtime drops the output on the M.
        drop(rt.spawn(async { PanicOnDrop }));
        // Awaited then dropped by the user: the panic is the user's, on the user's thread.
        let out = rt.block_on(rt.spawn(async { PanicOnDrop })).unwrap();
        let r = std::panic::catch_unwind(move || drop(out));
        assert!(r.is_err());
        // A handle dropped after the task finished: its output is dropped by that drop.
        let h = rt.spawn(async { PanicOnDrop });
        while !h.is_finished() {
            std::thread::sleep(Duration::from_millis(1));
        }
        let r = std::panic::catch_unwind(move || drop(h));
        let _ = r;
        for _ in 0..3 {
            assert_eq!(rt.block_on(rt.spawn(async { 5 })).unwrap(), 5);
        }
        drop(rt);
    });
}

/// A future whose `Drop` arms timers and spawns tasks, dropped by the runtime's shutdown.
struct ArmsOnDrop(Arc<AtomicUsize>);

impl Drop for ArmsOnDrop {
    fn drop(&mut self) {
        let n = self.0.clone();
        let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let f = gort::time::after_func(Duration::from_millis(1), || {});
            std::mem::forget(f);
            let t = gort::time::Timer::new(Duration::from_secs(3600));
            std::mem::forget(t);
            drop(gort::spawn(async move {
                n.fetch_add(1, SeqCst);
            }));
        }));
    }
}

#[test]
fn futures_whose_drop_arms_timers_and_spawns_at_shutdown_let_it_finish() {
    within(|| {
        let rt = gort::Builder::new().procs(2).build().unwrap();
        let n = Arc::new(AtomicUsize::new(0));
        for _ in 0..100 {
            let guard = ArmsOnDrop(n.clone());
            drop(rt.spawn(async move {
                let _g = guard;
                std::future::pending::<()>().await;
            }));
        }
        rt.block_on(gort::time::sleep(Duration::from_millis(10)));
        drop(rt);
    });
}

#[test]
fn a_cpu_loop_on_the_only_p_delays_timers_but_the_drop_returns_after_it() {
    within(|| {
        let rt = one_p();
        let (tx, rx) = mpsc::channel();
        drop(rt.spawn(async move {
            gort::time::sleep(Duration::from_millis(1)).await;
            let _ = tx.send(());
        }));
        drop(rt.spawn(async {
            let start = std::time::Instant::now();
            while start.elapsed() < Duration::from_millis(300) {
                std::hint::spin_loop();
            }
        }));
        // Sysmon runs the stuck P's timers: the sleeping task is made runnable, and runs
        // once the loop returns (no preemption of Rust code).
        rx.recv_timeout(WATCHDOG).expect("the timer never fired");
        drop(rt);
    });
}

#[test]
fn thousands_of_blocking_closures_at_once_all_run() {
    within(|| {
        let rt = gort::Builder::new().procs(2).build().unwrap();
        let n = rt.block_on(async {
            let mut set = gort::JoinSet::new();
            for i in 0..3_000u64 {
                set.spawn(async move {
                    gort::spawn_blocking(move || {
                        std::thread::sleep(Duration::from_millis(1));
                        i
                    })
                    .await
                    .unwrap()
                });
            }
            let mut sum = 0;
            while let Some(r) = set.join_next().await {
                sum += r.unwrap();
            }
            sum
        });
        assert_eq!(n, 3_000 * 2_999 / 2);
        drop(rt);
    });
}

/// A panic payload whose own `Drop` panics: whoever drops the payload (the runtime for a
/// task nobody joins, the user for a `JoinError` it holds) runs user code that panics.
struct PanicsWhenDropped;

impl Drop for PanicsWhenDropped {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            panic!("test: this panic payload panics when dropped");
        }
    }
}

#[test]
fn a_panic_payload_whose_drop_panics_kills_no_m_and_no_blocking_thread() {
    within(|| {
        let rt = gort::Builder::new().procs(1).build().unwrap();
        for _ in 0..4 {
            drop(rt.spawn(async { std::panic::panic_any(PanicsWhenDropped) }));
            drop(rt.spawn_blocking(|| std::panic::panic_any(PanicsWhenDropped)));
        }
        let err = rt
            .block_on(rt.spawn(async { std::panic::panic_any(PanicsWhenDropped) }))
            .unwrap_err();
        assert!(err.is_panic());
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(move || drop(err)));
        assert!(
            r.is_err(),
            "the user's drop of the payload panics on the user's thread"
        );
        let err = rt
            .block_on(rt.spawn_blocking(|| std::panic::panic_any(PanicsWhenDropped)))
            .unwrap_err();
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(move || drop(err)));
        assert!(r.is_err());
        // A task still runs, a blocking closure still runs, and the drop returns.
        std::thread::sleep(Duration::from_millis(20));
        for _ in 0..3 {
            assert_eq!(rt.block_on(rt.spawn(async { 5 })).unwrap(), 5);
            assert_eq!(rt.block_on(rt.spawn_blocking(|| 6)).unwrap(), 6);
        }
        support::drop_within(rt, WATCHDOG, "the drop hung");
    });
}

#[test]
fn a_join_set_dropped_inside_one_of_its_own_tasks() {
    within(|| {
        let rt = gort::Builder::new().procs(2).build().unwrap();
        let (tx, rx) = mpsc::channel();
        rt.block_on(async move {
            let set = Arc::new(Mutex::new(Some(gort::JoinSet::new())));
            let (go_tx, go_rx) = gort::chan::bounded::<()>(1);
            let inner = set.clone();
            set.lock().unwrap().as_mut().unwrap().spawn(async move {
                go_rx.recv().await;
                // Aborts every task of the set, this one included; the drop itself runs on.
                let taken = inner.lock().unwrap().take();
                drop(taken);
                let _ = tx.send(());
                gort::task::yield_now().await;
                unreachable!("aborted at its next await");
            });
            for _ in 0..10 {
                set.lock()
                    .unwrap()
                    .as_mut()
                    .unwrap()
                    .spawn(std::future::pending::<()>());
            }
            go_tx.send(()).await.unwrap();
            gort::time::sleep(Duration::from_millis(20)).await;
        });
        rx.recv_timeout(WATCHDOG)
            .expect("the drop inside the set's task hung");
        assert_eq!(rt.metrics().task_panics, 0, "{:?}", rt.metrics());
        drop(rt);
    });
}
