//! Tokio's `rt_panic.rs`, `task_panic.rs`, `rt_spawn_blocking.rs` and `task_yield_now.rs`,
//! ported to gort: each test keeps its Tokio name and a comment naming its file, under a
//! watchdog. The panic-location tests check that a misuse panics at the caller's line
//! (`#[track_caller]`), with the panic hook swapped for the test (one at a time).
//!
//! Skipped: the `LocalSet` and `task_local!` cases of `task_panic.rs` (gort has neither);
//! `builder_global_queue_interval_*`, `builder_event_interval_*` and `builder_name_*` (no such
//! knobs); `block_in_place_panic_caller` (gort's `block_in_place` outside a worker runs its
//! closure: `gort::block_in_place`'s docs).

#[path = "support/mock_task.rs"]
mod mock_task;
mod support;

use gort::runtime::Handle;
use std::panic;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use support::within;

/// Tokio's `support::panic::test_panic`: the file of the panic `func` raised, if any.
fn test_panic<Func: FnOnce() + panic::UnwindSafe>(func: Func) -> Option<String> {
    static PANIC_MUTEX: Mutex<()> = Mutex::new(());
    let _guard = PANIC_MUTEX.lock().unwrap_or_else(|e| e.into_inner());
    let panic_file: Arc<Mutex<Option<String>>> = Arc::default();
    let prev_hook = panic::take_hook();
    {
        let panic_file = panic_file.clone();
        panic::set_hook(Box::new(move |info| {
            let file = info.location().unwrap().file().to_string();
            // The first panic is the one the test makes (a worker's later one is not).
            panic_file.lock().unwrap().get_or_insert(file);
        }));
    }
    let result = panic::catch_unwind(func);
    panic::set_hook(prev_hook);
    if result.is_err() {
        panic_file.lock().unwrap().clone()
    } else {
        None
    }
}

// rt_panic.rs
#[test]
fn current_handle_panic_caller() {
    let file = test_panic(|| {
        let _ = Handle::current();
    });
    assert_eq!(file.as_deref(), Some(file!()));
}

// rt_panic.rs
#[test]
fn into_panic_panic_caller() {
    let file = test_panic(move || {
        let rt = gort::Builder::new().procs(1).build().unwrap();
        rt.block_on(async {
            let handle = gort::spawn(std::future::pending::<()>());
            handle.abort();
            let err = handle.await.unwrap_err();
            assert!(!err.is_panic());
            let _ = err.into_panic();
        });
    });
    assert_eq!(file.as_deref(), Some(file!()));
}

// rt_panic.rs (`worker_threads(0)` is `procs(0)` here)
#[test]
fn builder_worker_threads_panic_caller() {
    let file = test_panic(|| {
        let _ = gort::Builder::new().procs(0).build();
    });
    assert_eq!(file.as_deref(), Some(file!()));
}

// rt_panic.rs
#[test]
fn builder_max_blocking_threads_panic_caller() {
    let file = test_panic(|| {
        let _ = gort::Builder::new().max_blocking_threads(0).build();
    });
    assert_eq!(file.as_deref(), Some(file!()));
}

// task_panic.rs
#[test]
fn spawn_panic_caller() {
    let file = test_panic(|| {
        gort::spawn(async {});
    });
    assert_eq!(file.as_deref(), Some(file!()));
}

// rt_spawn_blocking.rs (tokio#8056, a spawn lost by the blocking pool; 100 rounds instead of
// 512): blocking closures parked in `blocking_recv` while others come and go; every one must
// be picked up, or the round times out.
#[test]
fn issue_8056_regression_test() {
    type Senders = Vec<tokio::sync::mpsc::Sender<()>>;
    type Handles = gort::task::JoinSet<()>;

    fn make_writer() -> (Senders, Handles) {
        let mut senders = vec![];
        let mut handles = gort::task::JoinSet::new();
        for _ in 0..2 {
            let (tx, mut rx) = tokio::sync::mpsc::channel::<()>(1);
            senders.push(tx);
            handles.spawn_blocking(move || while rx.blocking_recv().is_some() {});
        }
        (senders, handles)
    }

    async fn drive_writer(senders: Senders, mut handles: Handles) {
        for tx in &senders {
            tx.send(()).await.unwrap();
        }
        drop(senders);
        while let Some(res) = handles.join_next().await {
            res.unwrap();
        }
    }

    async fn quick() {
        gort::spawn_blocking(|| {}).await.unwrap();
    }

    within(|| {
        for _ in 0..100 {
            let rt = gort::Builder::new().procs(1).build().unwrap();
            let completed = rt.block_on(async {
                gort::time::timeout(Duration::from_secs(10), async {
                    quick().await;
                    quick().await;
                    let (persistent_senders, persistent_handles) = make_writer();
                    for _ in 0..2 {
                        quick().await;
                        quick().await;
                        let (senders, mut handles) = make_writer();
                        drop(senders);
                        while let Some(res) = handles.join_next().await {
                            res.unwrap();
                        }
                    }
                    quick().await;
                    quick().await;
                    let (second_senders, second_handles) = make_writer();
                    drive_writer(persistent_senders, persistent_handles).await;
                    drive_writer(second_senders, second_handles).await;
                })
                .await
                .is_ok()
            });
            assert!(completed);
        }
    });
}

// task_yield_now.rs
#[test]
fn yield_now_outside_of_runtime() {
    let mut task = mock_task::mock(gort::yield_now());
    assert!(task.poll().is_pending());
    assert!(task.is_woken());
    assert!(task.poll().is_ready());
}

// task_yield_now.rs
#[test]
fn yield_now_external_executor_and_block_in_place() {
    mock_task::rt_test(2, false, || async {
        gort::spawn(async {
            gort::block_in_place(|| futures::executor::block_on(gort::yield_now()));
        })
        .await
        .unwrap();
    });
}
