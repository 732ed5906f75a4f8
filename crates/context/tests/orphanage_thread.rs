//! The orphanage's thread (`gort-context-orphanage`) keeps the deadlines of contexts whose
//! runtime was dropped first, for as long as something can still observe them, and no longer:
//! a user's test campaign found it alive a day after a runtime drop, for a day's timeout on a
//! context whose every handle was gone (Tokio leaves no thread behind).
//!
//! The thread is the process's, so the tests here take turns.

use std::sync::{mpsc, Mutex, MutexGuard};
use std::time::Duration;

use gort::context::{self, Context, Error};

/// The tests' turns.
static TURN: Mutex<()> = Mutex::new(());

fn turn() -> MutexGuard<'static, ()> {
    TURN.lock().unwrap_or_else(|e| e.into_inner())
}

const DAY: Duration = Duration::from_secs(24 * 3600);

/// How many threads of the orphanage run (a thread's name is cut to 15 bytes in `comm`).
fn orphanage_threads() -> usize {
    std::fs::read_dir("/proc/self/task")
        .unwrap()
        .filter_map(|t| std::fs::read_to_string(t.ok()?.path().join("comm")).ok())
        .filter(|name| "gort-context-orphanage".starts_with(name.trim()))
        .count()
}

/// Whether the orphanage's thread count is `n` within 5 s (a new thread names itself once
/// it runs; one leaving is listed until it has).
fn threads_become(n: usize) -> bool {
    let start = std::time::Instant::now();
    while orphanage_threads() != n {
        if start.elapsed() > Duration::from_secs(5) {
            return false;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    true
}

/// Whether the orphanage's thread is gone within 5 s.
fn gone() -> bool {
    threads_become(0)
}

/// Whether no orphanage thread shows for 500 ms (one just started names itself once it runs).
fn none_shows() -> bool {
    let start = std::time::Instant::now();
    while start.elapsed() < Duration::from_millis(500) {
        if orphanage_threads() > 0 {
            return false;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    true
}

/// Whether the orphanage's thread runs within 5 s, and is still running 50 ms later.
fn running() -> bool {
    let up = threads_become(1);
    std::thread::sleep(Duration::from_millis(50));
    up && orphanage_threads() == 1
}

/// Runs `f` in a runtime of its own, dropped before this returns (its deadline timers left
/// unrun).
fn in_a_dropped_runtime<T>(f: impl std::future::Future<Output = T>) -> T {
    let rt = gort::Builder::new().procs(2).build().unwrap();
    let made = rt.block_on(f);
    drop(rt);
    made
}

/// The user's `orphan_thread`: a day's timeout made in a runtime, its context and `CancelFn`
/// dropped uncanceled, then the runtime: nothing can observe the context, so no thread stays.
#[test]
fn a_deadline_nobody_can_observe_leaves_no_thread_behind_its_runtime() {
    let _turn = turn();
    assert!(gone(), "the orphanage ran before the test");
    in_a_dropped_runtime(async {
        let (ctx, cancel) = context::with_timeout(&Context::background(), DAY);
        drop((ctx, cancel)); // dropping a CancelFn does not cancel
    });
    assert!(none_shows(), "a thread stayed for a context nobody holds");
}

/// A context still held when its runtime is dropped keeps the thread (its deadline is still
/// kept); once the context is dropped, the thread leaves.
#[test]
fn the_orphanage_thread_leaves_once_its_contexts_are_dropped() {
    let _turn = turn();
    let (ctx, cancel) =
        in_a_dropped_runtime(async { context::with_timeout(&Context::background(), DAY) });
    assert!(running(), "the deadline of a held context is kept");
    drop(cancel);
    assert!(running(), "held through its context");
    drop(ctx);
    assert!(gone(), "the thread stayed for a dropped context");
}

/// The same for a context canceled before its deadline, its handles held.
#[test]
fn the_orphanage_thread_leaves_once_its_contexts_are_canceled() {
    let _turn = turn();
    let (ctx, cancel) =
        in_a_dropped_runtime(async { context::with_timeout(&Context::background(), DAY) });
    // Made off any runtime: adopted at once.
    let (plain, cancel_plain) = context::with_timeout(&Context::background(), DAY);
    assert!(running());
    cancel.cancel();
    assert!(running(), "a live deadline is left");
    cancel_plain.cancel();
    assert!(gone(), "the thread stayed for canceled contexts");
    assert_eq!(ctx.err(), Some(Error::Canceled));
    assert_eq!(plain.err(), Some(Error::Canceled));
}

/// A context nobody holds but with an `after_func` waiting is still observable: its
/// deadline is kept, the function runs then, and the thread leaves after.
#[test]
fn a_dropped_context_with_an_after_func_still_ends_at_its_deadline() {
    let _turn = turn();
    let ran = in_a_dropped_runtime(async {
        let (ctx, cancel) =
            context::with_timeout(&Context::background(), Duration::from_millis(100));
        drop_with_an_after_func(ctx, cancel)
    });
    ran_then_gone(&ran);
}

/// The same with the `after_func` registered once the orphanage has the deadline.
#[test]
fn a_dropped_orphan_with_a_later_after_func_still_ends_at_its_deadline() {
    let _turn = turn();
    let (ctx, cancel) = in_a_dropped_runtime(async {
        context::with_timeout(&Context::background(), Duration::from_millis(100))
    });
    ran_then_gone(&drop_with_an_after_func(ctx, cancel));
}

/// Registers an `after_func` on `ctx` that reports its run, then drops the function's handle
/// and both of the context's: only the `after_func` observes the context any more.
fn drop_with_an_after_func(ctx: Context, cancel: context::CancelFn) -> mpsc::Receiver<()> {
    let (tx, rx) = mpsc::channel();
    drop(context::after_func(&ctx, move || {
        let _ = tx.send(());
    }));
    drop((ctx, cancel));
    rx
}

/// The `after_func` behind `ran` ran at its context's deadline, and the thread left after.
fn ran_then_gone(ran: &mpsc::Receiver<()>) {
    ran.recv_timeout(Duration::from_secs(10))
        .expect("the after_func of an orphaned deadline never ran");
    assert!(gone(), "the thread stayed after its last deadline");
}

/// A context held only through its child: the parent's deadline still ends the child.
#[test]
fn a_context_held_through_its_child_still_ends_at_its_deadline() {
    let _turn = turn();
    let child = in_a_dropped_runtime(async {
        let (parent, _cancel) =
            context::with_timeout(&Context::background(), Duration::from_millis(100));
        context::with_cancel(&parent).0
    });
    futures::executor::block_on(child.done().recv());
    assert_eq!(child.err(), Some(Error::DeadlineExceeded));
    assert!(gone(), "the thread stayed after its last deadline");
}
