//! Shutdown misused, as user code reaches it: `shutdown_timeout` abandoning a spinning task
//! or called from the runtime's own task, a handle outliving its runtime, the last runtime
//! dropped inside a waker that sysmon runs, a future whose `Drop` blocks on its runtime at
//! shutdown, a task aborting itself. (The rest of the runtime's misuse probes are in
//! `tests/abuse_runtime.rs`.) Every test runs under a watchdog.

mod support;

use support::{one_p, panic_text, slot, wait_until_taken, within, DroppingWaker, WATCHDOG};

use std::future::Future;
use std::pin::pin;
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::{mpsc, Arc, Mutex};
use std::task::{Context, Waker};
use std::time::Duration;

#[test]
fn shutdown_timeout_abandons_a_spinning_task_which_then_ends_harmlessly() {
    within(|| {
        let rt = gort::Builder::new().procs(2).build().unwrap();
        let (started_tx, started_rx) = mpsc::channel();
        let ended = Arc::new(AtomicUsize::new(0));
        let seen = ended.clone();
        drop(rt.spawn(async move {
            let _ = started_tx.send(());
            let start = std::time::Instant::now();
            while start.elapsed() < Duration::from_millis(500) {
                std::hint::spin_loop();
            }
            // Runs after the shutdown gave up on this M: spawn and arm a timer on the
            // runtime that is gone.
            let r = std::panic::catch_unwind(|| {
                drop(gort::spawn(async {}));
                drop(gort::time::after_func(Duration::from_millis(1), || {}));
            });
            let _ = r;
            seen.fetch_add(1, SeqCst);
            gort::task::yield_now().await;
            seen.fetch_add(1, SeqCst);
        }));
        started_rx.recv_timeout(WATCHDOG).unwrap();
        let begun = std::time::Instant::now();
        rt.shutdown_timeout(Duration::from_millis(20));
        assert!(begun.elapsed() < Duration::from_secs(10));
        let start = std::time::Instant::now();
        while ended.load(SeqCst) == 0 {
            assert!(start.elapsed() < WATCHDOG);
            std::thread::sleep(Duration::from_millis(5));
        }
        std::thread::sleep(Duration::from_millis(50));
        assert_eq!(
            ended.load(SeqCst),
            1,
            "the task was polled again after the shutdown"
        );
    });
}

#[test]
fn shutdown_timeout_from_inside_the_runtimes_own_task() {
    within(|| {
        let rt = slot(gort::Builder::new().procs(2).build().unwrap());
        let inner = rt.clone();
        let (done_tx, done_rx) = mpsc::channel();
        let h = rt.lock().unwrap().as_ref().unwrap().handle().clone();
        drop(h.spawn(async move {
            gort::time::sleep(Duration::from_millis(2)).await;
            let taken = inner.lock().unwrap().take().unwrap();
            taken.shutdown_timeout(Duration::from_millis(50));
            let _ = done_tx.send(());
        }));
        drop(h);
        done_rx
            .recv_timeout(WATCHDOG)
            .expect("shutdown_timeout inside a task hung");
    });
}

#[test]
fn a_handle_outliving_its_runtime_refuses_blocking_closures_and_entering_cleanly() {
    within(|| {
        let rt = one_p();
        let handle = rt.handle().clone();
        drop(rt);
        let ran = Arc::new(AtomicUsize::new(0));
        let r = ran.clone();
        let h = handle.spawn_blocking(move || {
            r.fetch_add(1, SeqCst);
        });
        let out = handle.block_on(h);
        assert!(out.is_err() || ran.load(SeqCst) == 1, "{out:?}");
        let _g = handle.enter();
        let h = gort::spawn(async { 1 });
        assert!(handle.block_on(h).unwrap_err().is_cancelled());
        let err = std::panic::catch_unwind(|| {
            drop(gort::time::after_func(Duration::from_millis(1), || {}))
        });
        if let Err(p) = err {
            let msg = panic_text(&*p);
            assert!(msg.contains("shut down"), "unclear message: {msg:?}");
        }
        assert!(handle.block_on(async { 5 }) == 5);
    });
}

#[test]
fn a_task_aborting_itself_then_returning_without_an_await_completes() {
    within(|| {
        let rt = one_p();
        let (htx, hrx) = gort::chan::bounded::<gort::task::AbortHandle>(1);
        let h = rt.spawn(async move {
            let own = hrx.recv().await.unwrap();
            own.abort();
            5
        });
        let abort = h.abort_handle();
        let r = rt.block_on(async move {
            htx.send(abort).await.unwrap();
            h.await
        });
        assert_eq!(
            r.unwrap(),
            5,
            "documented: an abort takes effect at the next Pending"
        );
    });
}

/// The waker runs on sysmon: the only P is stuck in a loop when the timer comes due, so
/// sysmon runs that P's timers, and the waker drops the last runtime there.
#[test]
fn the_last_runtime_dropped_inside_a_waker_that_sysmon_runs_shuts_down() {
    within(|| {
        let rt = slot(one_p());
        let (done_tx, done_rx) = mpsc::channel();
        let waker = Waker::from(Arc::new(DroppingWaker(rt.clone(), done_tx)));
        let h = rt.lock().unwrap().as_ref().unwrap().handle().clone();
        let (armed_tx, armed_rx) = mpsc::channel();
        drop(h.spawn(async move {
            let mut sleep = pin!(gort::time::sleep(Duration::from_millis(5)));
            assert!(sleep
                .as_mut()
                .poll(&mut Context::from_waker(&waker))
                .is_pending());
            drop(waker);
            let _ = armed_tx.send(());
            // The only P is stuck here while the timer comes due.
            let start = std::time::Instant::now();
            while start.elapsed() < Duration::from_millis(300) {
                std::hint::spin_loop();
            }
            std::future::pending::<()>().await;
        }));
        drop(h);
        armed_rx.recv_timeout(WATCHDOG).unwrap();
        done_rx
            .recv_timeout(WATCHDOG)
            .expect("the drop inside a waker run by sysmon hung");
        wait_until_taken(&rt);
    });
}

/// A future whose `Drop` blocks on its runtime: dropped by that runtime's shutdown. The
/// panic said "a thread that runs tasks" (the dropping thread runs none); it names the
/// shutdown now.
struct BlocksOnDrop(gort::Handle, Arc<Mutex<Vec<String>>>);

impl Drop for BlocksOnDrop {
    fn drop(&mut self) {
        let h = self.0.clone();
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            h.block_on(async {
                gort::time::sleep(Duration::from_millis(1)).await;
            })
        }));
        let what = match r {
            Ok(()) => "slept".to_string(),
            Err(p) => panic_text(&*p),
        };
        self.1.lock().unwrap().push(what);
    }
}

#[test]
fn a_future_blocking_on_its_runtime_in_its_drop_at_shutdown_panics_clearly() {
    within(|| {
        let rt = gort::Builder::new().procs(2).build().unwrap();
        let seen = Arc::new(Mutex::new(Vec::new()));
        for _ in 0..4 {
            let guard = BlocksOnDrop(rt.handle().clone(), seen.clone());
            drop(rt.spawn(async move {
                let _g = guard;
                std::future::pending::<()>().await;
            }));
        }
        rt.block_on(gort::time::sleep(Duration::from_millis(5)));
        drop(rt);
        let seen = seen.lock().unwrap();
        assert_eq!(seen.len(), 4);
        for what in seen.iter() {
            assert!(what.contains("shutdown runs"), "unclear: {what:?}");
        }
    });
}
