//! `singleflight::Group`: Go's `Do`/`Forget` semantics on the real runtime, on 1 and 4 Ps,
//! plus what Rust adds: dropped callers never cancel the run, a panic reaches every caller
//! as an error. Runs are held open by gates (channels closed by the test), never by sleeps.

use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::Arc;
use std::time::Duration;

use gort::chan::{bounded, Receiver};
use gort::sync::singleflight::{CallError, Group};

#[path = "../../time/tests/support/watchdog.rs"]
mod watchdog;

use watchdog::on_1_and_4_procs;

/// A gate: the work waits on the receiver until the test drops the sender.
fn gate() -> (gort::chan::Sender<()>, Receiver<()>) {
    bounded(0)
}

/// Work that counts its runs, waits for `gate` to open, then returns `value`.
fn gated_work(
    runs: &Arc<AtomicUsize>,
    gate: Receiver<()>,
    value: u64,
) -> impl FnOnce() -> std::pin::Pin<Box<dyn Future<Output = u64> + Send>> + Send + 'static {
    let runs = runs.clone();
    move || {
        Box::pin(async move {
            runs.fetch_add(1, SeqCst);
            gate.recv().await;
            value
        })
    }
}

/// Fails the test instead of hanging it if `fut` never ends (10 s: not a timing assertion).
async fn within_10s<T>(fut: impl Future<Output = T>) -> T {
    gort::time::timeout(Duration::from_secs(10), fut)
        .await
        .expect("hung: the run or its callers never finished")
}

#[test]
fn concurrent_callers_of_one_key_share_one_run() {
    on_1_and_4_procs(|| async {
        const CALLERS: usize = 50;
        let group = Group::<&str, u64>::new();
        let runs = Arc::new(AtomicUsize::new(0));
        let (open, wait) = gate();
        let (joined_tx, joined) = bounded(CALLERS);
        let mut callers = Vec::new();
        for _ in 0..CALLERS {
            let (group, joined_tx) = (group.clone(), joined_tx.clone());
            let work = gated_work(&runs, wait.clone(), 7);
            callers.push(gort::spawn(async move {
                let call = group.call("key", work);
                joined_tx.send(()).await.unwrap();
                call.await
            }));
        }
        for _ in 0..CALLERS {
            joined.recv().await.unwrap();
        }
        assert_eq!(group.in_flight(), 1);
        drop(open);
        for caller in callers {
            // Go's `shared`: the value went to more than one caller, the first included.
            assert_eq!(within_10s(caller).await.unwrap(), Ok((7, true)));
        }
        assert_eq!(runs.load(SeqCst), 1);
        assert_eq!(group.in_flight(), 0);
        // The key is free again: a lone caller starts a new run and shares nothing.
        assert_eq!(group.call("key", || async { 8 }).await, Ok((8, false)));
    });
}

#[test]
fn distinct_keys_run_concurrently() {
    on_1_and_4_procs(|| async {
        const KEYS: u64 = 8;
        let group = Group::<u64, u64>::new();
        let (open, wait) = gate();
        let (started_tx, started) = bounded(KEYS as usize);
        let calls: Vec<_> = (0..KEYS)
            .map(|key| {
                let (wait, started_tx) = (wait.clone(), started_tx.clone());
                group.call(key, move || async move {
                    started_tx.send(()).await.unwrap();
                    wait.recv().await;
                    key * 10
                })
            })
            .collect();
        // Every run starts while all of them are held open: none waits for another key's.
        for _ in 0..KEYS {
            within_10s(started.recv()).await.unwrap();
        }
        assert_eq!(group.in_flight(), KEYS as usize);
        drop(open);
        for (key, call) in (0..KEYS).zip(calls) {
            assert_eq!(within_10s(call).await, Ok((key * 10, false)));
        }
    });
}

#[test]
fn a_dropped_first_caller_does_not_cancel_the_run_for_the_others() {
    on_1_and_4_procs(|| async {
        let group = Group::<&str, u64>::new();
        let runs = Arc::new(AtomicUsize::new(0));
        let (open, wait) = gate();
        // The first caller's future is dropped unpolled; the second's is aborted mid-wait.
        let first = group.call("key", gated_work(&runs, wait.clone(), 1));
        let (joined_tx, joined) = bounded(1);
        let g = group.clone();
        let second = gort::spawn(async move {
            let call = g.call("key", || async { unreachable!("joins the run in flight") });
            joined_tx.send(()).await.unwrap();
            call.await
        });
        let third = group.call("key", || async { unreachable!("joins the run in flight") });
        joined.recv().await.unwrap();
        drop(first);
        second.abort();
        assert!(second.await.unwrap_err().is_cancelled());
        drop(open);
        assert_eq!(within_10s(third).await, Ok((1, true)));
        assert_eq!(runs.load(SeqCst), 1);
    });
}

#[test]
fn a_run_whose_callers_all_left_completes_then_frees_its_key() {
    on_1_and_4_procs(|| async {
        let group = Group::<&str, u64>::new();
        let runs = Arc::new(AtomicUsize::new(0));
        let (open, wait) = gate();
        let (ended_tx, ended) = bounded(1);
        let counted = runs.clone();
        drop(group.call("key", move || async move {
            counted.fetch_add(1, SeqCst);
            wait.recv().await;
            ended_tx.send(()).await.unwrap(); // the run went on without any caller
            1
        }));
        // While the orphaned run is in flight, a new call joins it and gets its value.
        let late = group.call("key", || async { unreachable!("joins the orphaned run") });
        drop(open);
        within_10s(ended.recv()).await.unwrap();
        assert_eq!(within_10s(late).await, Ok((1, true)));
        // Once it ended, the key is free: the next call starts a new run.
        assert_eq!(group.in_flight(), 0);
        let (open, wait) = gate();
        drop(open);
        assert_eq!(
            group.call("key", gated_work(&runs, wait, 2)).await,
            Ok((2, false))
        );
        assert_eq!(runs.load(SeqCst), 2);

        // And with no caller ever joining: the run still ends, and its result is dropped.
        let (open, wait) = gate();
        let (ended_tx, ended) = bounded(1);
        drop(group.call("other", move || async move {
            wait.recv().await;
            ended_tx.send(()).await.unwrap();
            3
        }));
        drop(open);
        within_10s(ended.recv()).await.unwrap();
        // The run returns just after its signal; wait (by state, not time) for its end.
        within_10s(async {
            while group.in_flight() != 0 {
                gort::task::yield_now().await;
            }
        })
        .await;
        assert_eq!(group.call("other", || async { 4 }).await, Ok((4, false)));
    });
}

#[test]
fn a_panic_reaches_every_caller_as_an_error_and_the_group_keeps_working() {
    on_1_and_4_procs(|| async {
        let group = Group::<&str, u64>::new();
        let (open, wait) = gate();
        let calls: Vec<_> = (0..10)
            .map(|_| {
                let wait = wait.clone();
                group.call("key", move || async move {
                    wait.recv().await;
                    panic!("backend exploded")
                })
            })
            .collect();
        drop(open);
        for call in calls {
            assert_eq!(
                within_10s(call).await,
                Err(CallError::Panicked("backend exploded".into()))
            );
        }
        assert_eq!(group.in_flight(), 0);
        // A panic in the closure itself, before any future exists, is caught the same way.
        let n = 3;
        let sync_panic = group.call("key", move || -> std::future::Ready<u64> {
            panic!("bad config {n}")
        });
        assert_eq!(
            sync_panic.await,
            Err(CallError::Panicked("bad config 3".into()))
        );
        assert_eq!(group.call("key", || async { 5 }).await, Ok((5, false)));
    });
}

#[test]
fn forget_during_a_run_starts_a_new_one_and_the_old_one_ends_for_its_callers() {
    on_1_and_4_procs(|| async {
        let group = Group::<&str, u64>::new();
        let runs = Arc::new(AtomicUsize::new(0));
        let (open_old, wait_old) = gate();
        let old_first = group.call("key", gated_work(&runs, wait_old, 1));
        let old_second = group.call("key", || async { unreachable!("joins the old run") });
        group.forget("key");
        assert_eq!(group.in_flight(), 0);
        let (open_new, wait_new) = gate();
        let new_first = group.call("key", gated_work(&runs, wait_new, 2));
        // The old run ends first; it must not free the key that the new run now holds.
        drop(open_old);
        assert_eq!(within_10s(old_first).await, Ok((1, true)));
        assert_eq!(within_10s(old_second).await, Ok((1, true)));
        assert_eq!(group.in_flight(), 1);
        let new_second = group.call("key", || async { unreachable!("joins the new run") });
        drop(open_new);
        assert_eq!(within_10s(new_first).await, Ok((2, true)));
        assert_eq!(within_10s(new_second).await, Ok((2, true)));
        assert_eq!(runs.load(SeqCst), 2);
        group.forget("absent"); // no run: nothing to do
    });
}

#[test]
fn a_runtime_shutdown_mid_run_gives_shutdown_to_callers_elsewhere() {
    let rt = gort::Builder::new().procs(2).build().unwrap();
    let group = Group::<&str, u64>::new();
    let (open, wait) = gate();
    let call = {
        let _in_rt = rt.handle().enter(); // `call` spawns the run on `rt`
        group.call(
            "key",
            move || async move { wait.recv().await.map_or(0, |()| 1) },
        )
    };
    drop(rt); // drops the run's task unfinished
    assert_eq!(futures::executor::block_on(call), Err(CallError::Shutdown));
    assert_eq!(group.in_flight(), 0);
    drop(open);
}

#[test]
fn a_call_made_outside_a_runtime_registers_when_block_on_polls_it() {
    let group = Group::<&str, u64>::new();
    let rt = gort::Builder::new().procs(1).build().unwrap();
    // The future is built before `block_on` enters the runtime.
    assert_eq!(
        rt.block_on(group.call("key", || async { 2 })),
        Ok((2, false))
    );
    assert_eq!(group.in_flight(), 0);
    // Polled outside any runtime, a call that must start a run panics and leaves the key free.
    let outside =
        std::panic::catch_unwind(|| futures::executor::block_on(group.call("key", || async { 1 })));
    assert!(outside.is_err(), "a run needs a runtime to spawn on");
    assert_eq!(group.in_flight(), 0);
    assert_eq!(
        rt.block_on(async { group.call("key", || async { 3 }).await }),
        Ok((3, false))
    );
}

#[test]
fn churn_of_callers_joining_and_leaving_runs_of_many_keys() {
    on_1_and_4_procs(|| async {
        const TASKS: u64 = 400;
        const KEYS: u64 = 8;
        let group = Group::<u64, (u64, u64)>::new();
        let next_run = Arc::new(AtomicUsize::new(0));
        let tasks: Vec<_> = (0..TASKS)
            .map(|i| {
                let (group, next_run) = (group.clone(), next_run.clone());
                gort::spawn(async move {
                    let key = i % KEYS;
                    let call = group.call(key, move || async move {
                        let run = next_run.fetch_add(1, SeqCst) as u64;
                        for _ in 0..(run % 4) {
                            gort::task::yield_now().await;
                        }
                        (key, run)
                    });
                    gort::task::yield_now().await;
                    if i % 3 == 0 {
                        drop(call); // leaves mid-run, or after it ended
                        return None;
                    }
                    Some(call.await.unwrap())
                })
            })
            .collect();
        let mut shared_of_run = std::collections::HashMap::new();
        for (i, task) in (0..TASKS).zip(tasks) {
            let Some(((key, run), shared)) = within_10s(task).await.unwrap() else {
                continue;
            };
            assert_eq!(key, i % KEYS, "a caller got another key's value");
            assert!((run as usize) < next_run.load(SeqCst));
            // Every caller of a run sees the same `shared`: it is fixed when the run ends.
            assert_eq!(*shared_of_run.entry(run).or_insert(shared), shared);
        }
        // A run every caller of which left (`i % 3 == 0` callers start runs too) goes on, as
        // no dropped caller cancels it, and may still be between its yields when the last
        // caller is joined: checked at once, one such run was left in 1 of 4 runs of this
        // binary on a loaded machine. Every run still ends, and frees its key, within 10 s.
        within_10s(async {
            while group.in_flight() > 0 {
                gort::time::sleep(Duration::from_millis(1)).await;
            }
        })
        .await;
        assert_eq!(group.in_flight(), 0);
    });
}
