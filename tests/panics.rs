//! Issue 17, item 3: a panic in user code the runtime calls (a waker a timer fires, a join
//! waker, the `Drop` of a future, payload or callback) never kills an M or hangs shutdown.
//! Each test checks that the runtime still runs other tasks and that its drop returns.
//! Item 4 (dropping and exiting) is in `tests/exiting.rs`.

use std::future::Future;
use std::pin::pin;
use std::sync::atomic::{AtomicBool, Ordering::SeqCst};
use std::sync::{mpsc, Arc};
use std::task::{Context, Poll, Wake, Waker};
use std::time::Duration;

mod support;
use support::one_p;

/// Generous: the machine may be loaded; a healthy run takes milliseconds.
const PATIENCE: Duration = Duration::from_secs(60);

/// A waker whose `wake` panics (any executor's waker is user code to the runtime).
struct PanickingWaker;

impl Wake for PanickingWaker {
    fn wake(self: Arc<Self>) {
        panic!("test: this waker panics when woken");
    }
}

fn panicking_waker() -> Waker {
    Waker::from(Arc::new(PanickingWaker))
}

/// A value whose `Drop` panics.
struct PanicOnDrop;

impl Drop for PanicOnDrop {
    fn drop(&mut self) {
        panic!("test: this value panics when dropped");
    }
}

/// Drops `rt` on another thread and fails (instead of hanging) if that takes too long.
fn drop_within(rt: gort::Runtime) {
    support::drop_within(
        rt,
        PATIENCE,
        "dropping the runtime hung (an M died, or shutdown waited for one)",
    );
}

/// The runtime still runs a new task: its only P was not lost with a dead M.
fn still_runs_tasks(rt: &gort::Runtime) {
    let (tx, rx) = mpsc::channel();
    drop(rt.spawn(async move {
        gort::time::sleep(Duration::from_millis(1)).await;
        let _ = tx.send(());
    }));
    rx.recv_timeout(PATIENCE)
        .expect("the runtime stopped running tasks after a panic in user code");
}

fn wait_for_user_panics(rt: &gort::Runtime, n: u64) {
    let start = std::time::Instant::now();
    while rt.metrics().user_panics < n {
        assert!(start.elapsed() < PATIENCE, "{:?}", rt.metrics());
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// Item 3: the timer batch ran the waker on an M without `catch_unwind`; the panic killed
/// the M, its P was never returned, and the drop waited for ever for `live_ms`.
#[test]
fn a_waker_that_panics_when_its_timer_fires_kills_no_m() {
    let rt = one_p();
    let h = rt.spawn(async {
        // Armed with the panicking waker; kept alive (so not stopped) past its deadline.
        let mut armed = pin!(gort::time::sleep(Duration::from_millis(5)));
        let waker = panicking_waker();
        let poll = armed.as_mut().poll(&mut Context::from_waker(&waker));
        assert!(poll.is_pending());
        gort::time::sleep(Duration::from_millis(50)).await;
    });
    rt.block_on(h).expect("the task itself does not panic");
    wait_for_user_panics(&rt, 1);
    still_runs_tasks(&rt);
    drop_within(rt);
}

/// Item 3: a `JoinHandle` polled with a panicking waker; the task's completion woke it on
/// the M that ran the task, outside the poll's `catch_unwind`.
#[test]
fn a_join_waker_that_panics_kills_no_m() {
    let rt = one_p();
    let (go, wait) = gort::chan::bounded::<()>(1);
    let task = rt.spawn(async move {
        let _ = wait.recv().await;
    });
    let mut task = pin!(task);
    let waker = panicking_waker();
    assert!(task
        .as_mut()
        .poll(&mut Context::from_waker(&waker))
        .is_pending());
    rt.block_on(async move { go.send(()).await.unwrap() });
    wait_for_user_panics(&rt, 1);
    still_runs_tasks(&rt);
    assert!(matches!(
        task.as_mut()
            .poll(&mut Context::from_waker(&Waker::from(Arc::new(Nop)))),
        Poll::Ready(Ok(()))
    ));
    drop_within(rt);
}

struct Nop;

impl Wake for Nop {
    fn wake(self: Arc<Self>) {}
}

/// Item 3: a future whose `Drop` panics, dropped by `abort` (on an M) and by shutdown.
#[test]
fn a_future_whose_drop_panics_on_abort_or_shutdown_kills_nothing() {
    let rt = one_p();
    let guard = PanicOnDrop; // captured: dropped with the future, polled or not
    let aborted = rt.spawn(async move {
        let _guard = guard;
        std::future::pending::<()>().await;
    });
    aborted.abort();
    let res = rt.block_on(aborted);
    assert!(res.unwrap_err().is_cancelled());
    wait_for_user_panics(&rt, 1);
    still_runs_tasks(&rt);
    // And one that shutdown drops.
    let guard = PanicOnDrop;
    drop(rt.spawn(async move {
        let _guard = guard;
        std::future::pending::<()>().await;
    }));
    drop_within(rt);
}

/// Item 3: an `after_func` whose closure's captures panic when dropped. Fired, the last
/// reference is the run queue's, dropped on the M after the call (outside its
/// `catch_unwind`); pending at shutdown, the drain drops it inside `Runtime::drop`.
#[test]
fn a_callback_payload_whose_drop_panics_kills_nothing() {
    let rt = one_p();
    let called = Arc::new(AtomicBool::new(false));
    let handle_dropped = Arc::new(AtomicBool::new(false));
    rt.block_on(async {
        let guard = PanicOnDrop;
        let (c, h) = (called.clone(), handle_dropped.clone());
        let f = gort::time::after_func(Duration::from_millis(1), move || {
            let _ = &guard;
            // Return only once the handle is gone, so the run queue's reference is the last.
            let start = std::time::Instant::now();
            while !h.load(SeqCst) && start.elapsed() < PATIENCE {
                std::thread::sleep(Duration::from_millis(1));
            }
            c.store(true, SeqCst);
        });
        drop(f);
        handle_dropped.store(true, SeqCst);
        let guard = PanicOnDrop;
        drop(gort::time::after_func(
            Duration::from_secs(3600),
            move || {
                let _ = &guard;
            },
        ));
    });
    wait_for_user_panics(&rt, 1);
    assert!(called.load(SeqCst));
    still_runs_tasks(&rt);
    drop_within(rt);
}

/// Item 3: the runtime goes on after many such panics, on every path at once.
#[test]
fn many_panicking_wakers_leave_every_p_working() {
    let rt = gort::Builder::new().procs(2).build().unwrap();
    let mut hs = Vec::new();
    for i in 0..50u64 {
        hs.push(rt.spawn(async move {
            let mut armed = pin!(gort::time::sleep(Duration::from_millis(1 + i % 5)));
            let waker = panicking_waker();
            let _ = armed.as_mut().poll(&mut Context::from_waker(&waker));
            gort::time::sleep(Duration::from_millis(20)).await;
        }));
    }
    for h in hs {
        rt.block_on(h).unwrap();
    }
    wait_for_user_panics(&rt, 50);
    for _ in 0..10 {
        still_runs_tasks(&rt);
    }
    drop_within(rt);
}

/// Item 3: a `block_in_place` closure that panics: its M gave its P away before calling it,
/// and the task's poll catches the panic on an M without a P.
#[test]
fn a_panic_in_block_in_place_leaves_the_runtime_working() {
    let rt = one_p();
    let h = rt.spawn(async {
        gort::block_in_place(|| panic!("test: this block_in_place closure panics"));
    });
    assert!(rt.block_on(h).unwrap_err().is_panic());
    assert_eq!(rt.metrics().task_panics, 1);
    for _ in 0..10 {
        still_runs_tasks(&rt);
    }
    drop_within(rt);
}

/// Shutdown drains every timer at once: the drain collected the payloads in one `Vec`, whose
/// drop, unwinding from the first payload that panicked, met the second one and aborted the
/// process ("panic in a destructor during cleanup"). Each payload is now dropped on its own.
#[test]
fn several_pending_payloads_that_panic_at_shutdown_abort_nothing() {
    let rt = one_p();
    rt.block_on(async {
        for _ in 0..5 {
            let guard = PanicOnDrop;
            drop(gort::time::after_func(
                Duration::from_secs(3600),
                move || {
                    let _ = &guard;
                },
            ));
        }
    });
    still_runs_tasks(&rt);
    drop_within(rt);
}
