//! Adversarial probes of `gort::task`: `JoinSet` (tasks that panic or are aborted while
//! `join_next` runs, `abort_all` then spawn again, sets spanning runtimes, dropped runtimes,
//! huge sets, `join_next` cut off by timeouts, `detach_all`); `JoinHandle`/`AbortHandle`
//! races are in abuse_join_handle.rs.

mod support;

use support::{rt, Tracked};

use gort::task::JoinSet;
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::Arc;
use std::time::Duration;
use support::{panic_text, within};

/// A third of the tasks panic, a third are aborted from a plain thread while `join_next`
/// runs, a third return: each comes back exactly once, as what it became.
#[test]
fn join_next_while_tasks_panic_and_are_aborted_from_threads() {
    within(|| {
        let rt = rt(2);
        const N: u64 = 3000;
        let (ok, panicked, cancelled) = rt.block_on(async {
            let mut set = JoinSet::new();
            let mut aborts = Vec::new();
            for i in 0..N {
                let abort = set.spawn(async move {
                    gort::time::sleep(Duration::from_micros(i % 200)).await;
                    match i % 3 {
                        0 => panic!("task {i} panics"),
                        _ => i,
                    }
                });
                if i % 3 == 1 {
                    aborts.push(abort);
                }
            }
            let aborter = std::thread::spawn(move || {
                for a in aborts {
                    a.abort();
                }
            });
            let (mut ok, mut panicked, mut cancelled) = (0u64, 0u64, 0u64);
            while let Some(res) = set.join_next().await {
                match res {
                    Ok(i) => {
                        assert_ne!(i % 3, 0);
                        ok += 1;
                    }
                    Err(e) if e.is_panic() => {
                        assert!(panic_text(&*e.into_panic()).ends_with("panics"));
                        panicked += 1;
                    }
                    Err(e) => {
                        assert!(e.is_cancelled());
                        cancelled += 1;
                    }
                }
            }
            aborter.join().unwrap();
            (ok, panicked, cancelled)
        });
        assert_eq!(panicked, N / 3);
        assert_eq!(ok + cancelled, 2 * N / 3);
        assert!(ok >= N / 3, "only the aborted third may be cancelled");
    });
}

/// `abort_all` marks only the tasks in the set then: a task spawned after it runs to its end,
/// and the aborted ones still come back (cancelled).
#[test]
fn abort_all_then_spawn_again_runs_the_new_tasks() {
    within(|| {
        let rt = rt(2);
        rt.block_on(async {
            let mut set = JoinSet::new();
            for _ in 0..100 {
                set.spawn(async {
                    std::future::pending::<()>().await;
                    0u32
                });
            }
            for round in 1..=5u32 {
                set.abort_all();
                for _ in 0..10 {
                    set.spawn(async move {
                        gort::time::sleep(Duration::from_millis(1)).await;
                        round
                    });
                }
                // Join the new ones only: abort_all again joins everything at the next round.
                let mut got = 0;
                while got < 10 {
                    match set.join_next().await.unwrap() {
                        Ok(0) => unreachable!("a pending task completed"),
                        Ok(r) => {
                            assert_eq!(r, round, "a task of round {r} ran after abort_all");
                            got += 1
                        }
                        Err(e) => assert!(e.is_cancelled()),
                    }
                }
            }
            set.abort_all();
            while let Some(res) = set.join_next().await {
                assert!(res.unwrap_err().is_cancelled());
            }
        });
    });
}

/// A set holding tasks of two other runtimes, dropped on a plain thread: every task's
/// future is dropped (nothing leaks, nothing hangs), and the runtimes still shut down.
#[test]
fn a_set_dropped_with_tasks_pending_on_other_runtimes_aborts_them_all() {
    within(|| {
        let (a, b) = (rt(1), rt(2));
        let dropped = Arc::new(AtomicUsize::new(0));
        let mut set = JoinSet::new();
        for i in 0..200 {
            let guard = Tracked {
                dropped: dropped.clone(),
                n: i,
            };
            let fut = async move {
                let _guard = guard;
                std::future::pending::<()>().await
            };
            if i % 2 == 0 {
                set.spawn_on(fut, a.handle());
            } else {
                set.spawn_on(fut, b.handle());
            }
        }
        drop(set);
        let deadline = std::time::Instant::now() + Duration::from_secs(20);
        while dropped.load(SeqCst) < 200 {
            assert!(
                std::time::Instant::now() < deadline,
                "aborted futures not dropped"
            );
            std::thread::sleep(Duration::from_millis(1));
        }
        drop((a, b));
    });
}

/// Many rounds of `join_next` cut off by a 0 to 50 µs timeout while tasks finish: each output
/// comes back once, none is lost in a dropped `join_next`.
#[test]
fn join_next_cut_off_by_timeouts_loses_no_output() {
    within(|| {
        let rt = rt(2);
        rt.block_on(async {
            const N: u64 = 2000;
            let mut set = JoinSet::new();
            for i in 0..N {
                set.spawn(async move {
                    if i % 4 != 0 {
                        gort::time::sleep(Duration::from_micros(i % 300)).await;
                    }
                    i
                });
            }
            let mut seen = vec![false; N as usize];
            let (mut got, mut cut) = (0, 0u64);
            let mut k = 0u64;
            while got < N {
                k += 1;
                match gort::time::timeout(Duration::from_micros(k % 50), set.join_next()).await {
                    Ok(Some(res)) => {
                        let i = res.unwrap();
                        assert!(!seen[i as usize], "output {i} came back twice");
                        seen[i as usize] = true;
                        got += 1;
                    }
                    Ok(None) => panic!("the set emptied with {got} of {N} outputs"),
                    Err(_) => cut += 1,
                }
            }
            assert!(set.is_empty());
            assert!(set.join_next().await.is_none());
            let _ = cut;
        });
    });
}

/// A set filled on one runtime and joined on another, then on a plain thread, then moved
/// again: tasks of both runtimes in one set all come back.
#[test]
fn a_set_moved_between_runtimes_and_threads_returns_everything() {
    within(|| {
        let (a, b) = (rt(1), rt(2));
        let mut set = a.block_on(async {
            let mut set = JoinSet::new();
            for i in 0..50u32 {
                set.spawn(async move {
                    gort::time::sleep(Duration::from_millis(1)).await;
                    i
                });
            }
            set
        });
        let (mut set, first) = b.block_on(async move {
            for i in 50..100u32 {
                set.spawn(async move { i });
            }
            let first = set.join_next().await.unwrap().unwrap();
            (set, first)
        });
        let mut got = vec![first];
        let b_handle = b.handle().clone();
        let (set, more) = std::thread::spawn(move || {
            let mut more = Vec::new();
            for _ in 0..10 {
                more.push(
                    futures::executor::block_on(set.join_next())
                        .unwrap()
                        .unwrap(),
                );
            }
            set.spawn_on(async { 100u32 }, &b_handle);
            (set, more)
        })
        .join()
        .unwrap();
        got.extend(more);
        got.extend(a.block_on(set.join_all()));
        got.sort();
        assert_eq!(got, (0..=100).collect::<Vec<_>>());
    });
}

/// Spawning through the handle of a runtime already dropped: the future is dropped at once,
/// the task comes back cancelled, and nothing waits for a runtime that is gone.
#[test]
fn spawn_on_a_dropped_runtimes_handle_comes_back_cancelled() {
    within(|| {
        let old = rt(1);
        let handle = old.handle().clone();
        drop(old);
        let dropped = Arc::new(AtomicUsize::new(0));
        let guard = Tracked {
            dropped: dropped.clone(),
            n: 0,
        };
        let mut set = JoinSet::new();
        set.spawn_on(
            async move {
                let _guard = guard;
                1u8
            },
            &handle,
        );
        let blocking_dropped = dropped.clone();
        let guard2 = Tracked {
            dropped: blocking_dropped,
            n: 1,
        };
        let h = handle.spawn_blocking(move || {
            let _guard = guard2;
            2u8
        });
        set.insert(h);
        let live = rt(1);
        live.block_on(async {
            let mut cancelled = 0;
            while let Some(res) = set.join_next().await {
                match res {
                    Err(e) => {
                        assert!(e.is_cancelled());
                        cancelled += 1
                    }
                    Ok(v) => panic!("a task ran on a dropped runtime: {v}"),
                }
            }
            assert_eq!(cancelled, 2);
        });
        assert_eq!(dropped.load(SeqCst), 2, "the futures were not dropped");
    });
}

/// 100,000 tasks in one set: joined all, then another 100,000 dropped pending (each future
/// dropped, in bounded time).
#[test]
fn a_set_of_a_hundred_thousand_tasks_joins_and_drops() {
    within(|| {
        let rt = rt(2);
        rt.block_on(async {
            const N: u64 = 100_000;
            let mut set = JoinSet::new();
            for i in 0..N {
                set.spawn(async move { i });
            }
            assert_eq!(set.len(), N as usize);
            let mut sum = 0;
            while let Some(res) = set.join_next().await {
                sum += res.unwrap();
            }
            assert_eq!(sum, N * (N - 1) / 2);

            let dropped = Arc::new(AtomicUsize::new(0));
            for i in 0..N {
                let guard = Tracked {
                    dropped: dropped.clone(),
                    n: i,
                };
                set.spawn(async move {
                    let _guard = guard;
                    std::future::pending::<u64>().await
                });
            }
            gort::yield_now().await;
            drop(set);
            while dropped.load(SeqCst) < N as usize {
                gort::time::sleep(Duration::from_millis(1)).await;
            }
        });
    });
}

/// `join_next` awaited on a plain thread (a foreign executor) while the runtime of the set's
/// tasks is dropped: every task comes back cancelled, none hangs the waiter.
#[test]
fn join_next_on_a_thread_while_the_tasks_runtime_is_dropped() {
    within(|| {
        let rt = rt(2);
        let mut set = JoinSet::new();
        for i in 0..100u32 {
            set.spawn_on(
                async move {
                    if i % 2 == 0 {
                        gort::time::sleep(Duration::from_secs(3600)).await;
                    } else {
                        std::future::pending::<()>().await;
                    }
                },
                rt.handle(),
            );
        }
        let waiter = std::thread::spawn(move || {
            let mut cancelled = 0;
            while let Some(res) = futures::executor::block_on(set.join_next()) {
                assert!(res.unwrap_err().is_cancelled());
                cancelled += 1;
            }
            cancelled
        });
        std::thread::sleep(Duration::from_millis(20));
        drop(rt);
        assert_eq!(waiter.join().unwrap(), 100);
    });
}

/// `JoinSet::spawn` outside a runtime panics with a message that says what to do, and the
/// set stays usable (nothing half-inserted).
#[test]
fn join_set_spawn_outside_a_runtime_panics_clearly_and_leaves_the_set_usable() {
    within(|| {
        let mut set = JoinSet::new();
        let p = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            set.spawn(async { 1u8 });
        }))
        .unwrap_err();
        let msg = panic_text(&*p);
        assert!(msg.contains("runtime"), "{msg:?}");
        assert!(set.is_empty());
        let rt = rt(1);
        set.spawn_on(async { 2u8 }, rt.handle());
        assert_eq!(rt.block_on(set.join_next()).unwrap().unwrap(), 2);
    });
}

/// `detach_all` lets every task run on (their outputs dropped when they finish), leaves the
/// set empty and usable, and a set that detaches in a loop returns only its own tasks.
#[test]
fn detach_all_lets_tasks_run_and_the_set_start_afresh() {
    within(|| {
        let rt = rt(2);
        rt.block_on(async {
            let dropped = Arc::new(AtomicUsize::new(0));
            let ran = Arc::new(AtomicUsize::new(0));
            let mut set = JoinSet::new();
            for round in 0..50u64 {
                for i in 0..20u64 {
                    let (dropped, ran) = (dropped.clone(), ran.clone());
                    set.spawn(async move {
                        gort::time::sleep(Duration::from_micros(i * 10)).await;
                        ran.fetch_add(1, SeqCst);
                        Tracked { dropped, n: round }
                    });
                }
                set.detach_all();
                assert!(set.is_empty());
                assert!(set.try_join_next().is_none());
            }
            let mine = set.spawn(async {
                gort::time::sleep(Duration::from_millis(5)).await;
                Tracked {
                    dropped: Arc::new(AtomicUsize::new(0)),
                    n: 7,
                }
            });
            assert_eq!(set.join_next().await.unwrap().unwrap().n, 7);
            assert!(mine.is_finished());
            assert!(set.join_next().await.is_none());
            while dropped.load(SeqCst) < 1000 {
                gort::time::sleep(Duration::from_millis(1)).await;
            }
            assert_eq!(ran.load(SeqCst), 1000, "a detached task was aborted");
        });
    });
}
