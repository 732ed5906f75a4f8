//! `gort::task`: JoinSet, AbortHandle and task ids, from tasks, plain threads and blocking
//! closures.

use gort::task::{AbortHandle, Id, JoinSet};
use gort::{Builder, Runtime};
use std::collections::HashSet;
use std::fmt::{Debug, Display};
use std::hash::Hash;
use std::panic::{RefUnwindSafe, UnwindSafe};
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::Arc;
use std::time::Duration;

/// Counts its drops: a task's future holds one, so the count says whether it was dropped.
struct CountDrop(Arc<AtomicUsize>);

impl Drop for CountDrop {
    fn drop(&mut self) {
        self.0.fetch_add(1, SeqCst);
    }
}

fn runtime() -> Runtime {
    Builder::new().procs(2).build().unwrap()
}

#[test]
fn ids_abort_handles_and_join_sets_have_the_promised_traits() {
    fn id_traits<T: Copy + Eq + Hash + Debug + Display + Send + Sync>() {}
    fn clone_send_sync<T: Clone + Send + Sync + Debug + UnwindSafe + RefUnwindSafe>() {}
    fn send<T: Send + Debug>() {}
    id_traits::<Id>();
    clone_send_sync::<AbortHandle>();
    send::<JoinSet<u32>>();
    fn unwind_safe<T: UnwindSafe + RefUnwindSafe>() {}
    unwind_safe::<gort::JoinHandle<u32>>();
}

#[test]
fn join_next_returns_outputs_in_finishing_order_then_none() {
    let rt = runtime();
    let order = rt.block_on(async {
        let mut set = JoinSet::new();
        for (i, ms) in [(0u32, 60u64), (1, 5), (2, 30)] {
            set.spawn(async move {
                gort::time::sleep(Duration::from_millis(ms)).await;
                i
            });
        }
        assert_eq!(set.len(), 3);
        let mut order = Vec::new();
        while let Some(res) = set.join_next().await {
            order.push(res.unwrap());
        }
        assert!(set.is_empty());
        assert!(set.join_next().await.is_none());
        order
    });
    // Generous gaps: 25 ms between finishes. On a loaded machine the order could still
    // invert, so only the first and last are pinned where the gap is 55 ms.
    assert_eq!(order.len(), 3);
    assert_eq!(order.iter().copied().collect::<HashSet<_>>().len(), 3);
    assert_eq!((order[0], order[2]), (1, 0));
}

#[test]
fn many_tasks_all_come_back_once() {
    let rt = runtime();
    let n = 10_000u64;
    let sum = rt.block_on(async {
        let mut set = JoinSet::new();
        for i in 0..n {
            set.spawn(async move {
                if i % 3 == 0 {
                    gort::yield_now().await;
                }
                i
            });
        }
        let mut sum = 0;
        while let Some(res) = set.join_next().await {
            sum += res.unwrap();
        }
        sum
    });
    assert_eq!(sum, n * (n - 1) / 2);
}

#[test]
fn a_panicking_task_comes_back_as_a_panic_error() {
    let rt = runtime();
    rt.block_on(async {
        let mut set = JoinSet::new();
        set.spawn(async { panic!("boom") });
        let err = set.join_next().await.unwrap().unwrap_err();
        assert!(err.is_panic());
    });
}

/// On a paused clock the sleeps end in deadline order, each task finishing before time moves
/// on: task i (sleeping 50 - 10 i ms) finishes in the order 4, 3, 2, 1, 0.
#[test]
fn join_all_returns_every_output_in_finishing_order() {
    let rt = Builder::new().procs(2).start_paused(true).build().unwrap();
    let outputs = rt.block_on(async {
        let mut set = JoinSet::new();
        for i in 0..5u64 {
            set.spawn(async move {
                gort::time::sleep(Duration::from_millis(50 - 10 * i)).await;
                i
            });
        }
        set.join_all().await
    });
    assert_eq!(outputs, [4, 3, 2, 1, 0]);
    assert!(rt.block_on(JoinSet::<u8>::new().join_all()).is_empty());
}

#[test]
fn join_all_resumes_a_tasks_panic_and_aborts_the_rest() {
    let rt = runtime();
    let dropped = Arc::new(AtomicUsize::new(0));
    let panic = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        rt.block_on(async {
            let mut set = JoinSet::new();
            for _ in 0..3 {
                let guard = CountDrop(dropped.clone());
                set.spawn(async move {
                    let _guard = guard;
                    std::future::pending::<u32>().await
                });
            }
            set.spawn(async { std::panic::panic_any(42u32) });
            set.join_all().await
        })
    }))
    .unwrap_err();
    assert_eq!(
        panic.downcast_ref::<u32>(),
        Some(&42),
        "the task's own payload"
    );
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while dropped.load(SeqCst) < 3 && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(2));
    }
    assert_eq!(
        dropped.load(SeqCst),
        3,
        "the set's other tasks were aborted"
    );
}

#[test]
fn join_all_panics_on_a_cancelled_task() {
    let rt = runtime();
    let panic = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        rt.block_on(async {
            let mut set = JoinSet::new();
            set.spawn(std::future::pending::<u32>()).abort();
            set.join_all().await
        })
    }))
    .unwrap_err();
    let msg = panic.downcast_ref::<String>().unwrap();
    assert!(msg.contains("was cancelled"), "{msg}");
}

#[test]
fn abort_handle_cancels_one_task_and_abort_all_the_rest() {
    let rt = runtime();
    rt.block_on(async {
        let mut set = JoinSet::new();
        let first = set.spawn(std::future::pending::<u32>());
        for _ in 0..5 {
            set.spawn(std::future::pending::<u32>());
        }
        set.spawn(async { 7 });
        first.abort();
        // The aborted task and the quick one both finish without `abort_all`, in either order.
        let (mut done, mut cancelled) = (0, 0);
        while done + cancelled < 2 {
            match set.join_next().await.unwrap() {
                Ok(v) => {
                    assert_eq!(v, 7);
                    done += 1;
                }
                Err(e) => {
                    assert!(e.is_cancelled());
                    cancelled += 1;
                }
            }
        }
        assert_eq!((done, cancelled), (1, 1));
        assert!(first.is_finished());
        set.abort_all();
        while let Some(res) = set.join_next().await {
            assert!(res.unwrap_err().is_cancelled());
            cancelled += 1;
        }
        assert_eq!(cancelled, 6);
    });
}

/// Dropping the set drops every task's future (the runtime does not keep them alive).
#[test]
fn dropping_the_set_aborts_its_tasks() {
    let rt = runtime();
    let dropped = Arc::new(AtomicUsize::new(0));
    let aborts = rt.block_on(async {
        let mut set = JoinSet::new();
        let mut aborts = Vec::new();
        for _ in 0..10 {
            let guard = CountDrop(dropped.clone());
            aborts.push(set.spawn(async move {
                let _guard = guard;
                std::future::pending::<()>().await
            }));
        }
        gort::yield_now().await;
        drop(set);
        aborts
    });
    // Cancellation is asynchronous (a worker drops each future); wait generously.
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while dropped.load(SeqCst) < 10 && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(2));
    }
    assert_eq!(dropped.load(SeqCst), 10);
    assert!(aborts.iter().all(AbortHandle::is_finished));
}

#[test]
fn a_join_set_used_from_a_plain_thread_and_a_blocking_closure() {
    let rt = runtime();
    let handle = rt.handle().clone();
    let from_thread = std::thread::spawn(move || {
        let mut set = JoinSet::new();
        for i in 0..10u32 {
            set.spawn_on(async move { i }, &handle);
        }
        {
            let _guard = handle.enter();
            set.spawn(async { 100 });
        }
        handle.block_on(async {
            let mut sum = 0;
            while let Some(res) = set.join_next().await {
                sum += res.unwrap();
            }
            sum
        })
    })
    .join()
    .unwrap();
    assert_eq!(from_thread, 145);

    let handle = rt.handle().clone();
    let from_blocking = rt.spawn_blocking(move || {
        let mut set = JoinSet::new();
        for i in 0..10u32 {
            set.spawn(async move { i }); // the pool thread is in the runtime's context
        }
        set.spawn_blocking(|| 100);
        handle.block_on(async {
            let mut sum = 0;
            while let Some(res) = set.join_next().await {
                sum += res.unwrap();
            }
            sum
        })
    });
    assert_eq!(rt.block_on(from_blocking).unwrap(), 145);
}

/// `join_next` is cancel-safe: a `select!` that drops it loses no output.
#[test]
fn join_next_dropped_by_a_timeout_loses_nothing() {
    let rt = runtime();
    rt.block_on(async {
        let mut set = JoinSet::new();
        set.spawn(async {
            gort::time::sleep(Duration::from_millis(20)).await;
            1
        });
        let mut timeouts = 0;
        let v = loop {
            let t = gort::time::after(Duration::from_millis(1));
            let next = set.join_next();
            gort::select! {
                v = next => break v,
                _ = t.recv() => timeouts += 1,
            }
        };
        assert_eq!(v.unwrap().unwrap(), 1);
        assert!(timeouts > 0);
        assert!(set.is_empty());
    });
}

#[test]
fn task_ids_are_unique_and_id_inside_equals_join_handle_id() {
    let rt = runtime();
    let (inside, outside) = rt.block_on(async {
        let handles: Vec<_> = (0..1000)
            .map(|_| gort::spawn(async { gort::task::id() }))
            .collect();
        let outside: Vec<Id> = handles.iter().map(|h| h.id()).collect();
        let mut inside = Vec::new();
        for h in handles {
            inside.push(h.await.unwrap());
        }
        (inside, outside)
    });
    assert_eq!(inside, outside);
    assert_eq!(outside.iter().collect::<HashSet<_>>().len(), outside.len());
    // Ids from several threads at once are unique too.
    let from_threads: Vec<Id> = (0..4)
        .map(|_| {
            let handle = rt.handle().clone();
            std::thread::spawn(move || {
                (0..500)
                    .map(|_| handle.spawn(async {}).id())
                    .collect::<Vec<_>>()
            })
        })
        .flat_map(|t| t.join().unwrap())
        .chain(outside)
        .collect();
    let unique: HashSet<_> = from_threads.iter().collect();
    assert_eq!(unique.len(), from_threads.len());
    let id = from_threads[0];
    assert_eq!(format!("{id}"), id.as_u64().to_string());
    assert!(format!("{id:?}").starts_with("Id("));
}

#[test]
fn the_current_id_follows_the_task_across_awaits_and_is_none_outside_tasks() {
    let rt = runtime();
    assert_eq!(gort::task::try_id(), None);
    assert!(std::panic::catch_unwind(gort::task::id).is_err());
    let h = rt.spawn(async {
        let before = gort::task::id();
        gort::time::sleep(Duration::from_millis(1)).await;
        // A task it spawns and awaits has its own id; ours is back afterwards.
        let child = gort::spawn(async { gort::task::id() }).await.unwrap();
        assert_ne!(child, before);
        gort::yield_now().await;
        (before, gort::task::id())
    });
    let id = h.id();
    let (before, after) = rt.block_on(h).unwrap();
    assert_eq!((before, after), (id, id));
    assert_eq!(rt.block_on(async { gort::task::try_id() }), None);
    // A blocking closure runs as a task of the pool: it has its handle's id (as in Tokio).
    let blocking = rt.spawn_blocking(gort::task::try_id);
    let id = blocking.id();
    assert_eq!(rt.block_on(blocking).unwrap(), Some(id));
}

#[test]
fn try_join_next_returns_only_finished_tasks_without_waiting() {
    runtime().block_on(async {
        let mut set = JoinSet::new();
        assert!(set.try_join_next().is_none()); // empty
        let (tx, rx) = gort::chan::bounded::<()>(0);
        set.spawn(async move {
            rx.recv().await;
            "late"
        });
        for _ in 0..3 {
            set.spawn(async { "early" });
        }
        let mut early = 0;
        while early < 3 {
            match set.try_join_next() {
                Some(res) => {
                    assert_eq!(res.unwrap(), "early");
                    early += 1;
                }
                None => gort::time::sleep(Duration::from_millis(1)).await,
            }
        }
        assert!(set.try_join_next().is_none()); // the last one still waits
        assert_eq!(set.len(), 1);
        drop(tx);
        // Its join waker was registered by try_join_next: join_next still sees it finish.
        assert_eq!(set.join_next().await.unwrap().unwrap(), "late");
        assert!(set.try_join_next().is_none());
    });
}

#[test]
fn shutdown_aborts_every_task_and_waits_for_them_to_stop() {
    runtime().block_on(async {
        struct Count(Arc<AtomicUsize>);
        impl Drop for Count {
            fn drop(&mut self) {
                self.0.fetch_add(1, SeqCst);
            }
        }
        let dropped = Arc::new(AtomicUsize::new(0));
        let mut set = JoinSet::new();
        for _ in 0..8 {
            let guard = Count(dropped.clone());
            set.spawn(async move {
                let _guard = guard;
                std::future::pending::<()>().await;
            });
        }
        set.spawn(async {});
        set.shutdown().await;
        assert!(set.is_empty());
        assert_eq!(dropped.load(SeqCst), 8); // every future was dropped before shutdown returned
        set.spawn(async {});
        assert!(set.join_next().await.unwrap().is_ok()); // the set is usable again
    });
}

/// A handle whose output was already taken, inserted into a set: `join_next` panics (the
/// handle's own "polled after it returned Ready"), and the set no longer holds it, so a
/// caller that caught the panic gets `None` instead of waiting for ever on an entry that
/// left the ready list.
#[test]
fn a_set_whose_join_next_panicked_on_a_spent_handle_is_left_without_it() {
    let rt = Runtime::new().unwrap();
    rt.block_on(async {
        let mut spent = gort::spawn(async { 1 });
        assert_eq!((&mut spent).await.unwrap(), 1);
        let mut set = JoinSet::new();
        set.insert(spent);
        let caught =
            futures::FutureExt::catch_unwind(std::panic::AssertUnwindSafe(set.join_next())).await;
        assert!(caught.is_err(), "a spent handle's output was joined");
        assert_eq!(set.len(), 0);
        let next = gort::time::timeout(Duration::from_secs(10), set.join_next())
            .await
            .expect("join_next waited for an entry it had already given up");
        assert!(next.is_none());
    });
}
