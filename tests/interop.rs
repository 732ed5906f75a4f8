//! Runtime-agnostic crates from the ecosystem on gort: `tokio::sync`, `async-lock`,
//! `futures` and `async-channel` only use `std::task::Waker`s, so they work across gort tasks
//! on several Ps (no Tokio runtime anywhere in these tests). Each test makes tasks on different
//! Ps contend, park and wake each other through the crate's primitive.

use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::Arc;
use std::time::Duration;

use futures::stream::{FuturesUnordered, StreamExt};

const TASKS: usize = 16;
/// Generous: these tests check that progress happens, never how fast.
const BOUND: Duration = Duration::from_secs(30);

fn rt() -> gort::Runtime {
    gort::Builder::new().procs(4).build().unwrap()
}

/// Runs `f` on a 4-P runtime, failing (instead of hanging) if it does not finish in [`BOUND`].
fn run<F: std::future::Future<Output = ()> + Send + 'static>(f: F) {
    rt().block_on(async move {
        gort::time::timeout(BOUND, gort::spawn(f))
            .await
            .expect("interop test hung")
            .unwrap();
    });
}

/// Spawns `TASKS` tasks running `task(i)` and waits for them all.
async fn spawn_all<F, Fut>(task: F)
where
    F: Fn(usize) -> Fut,
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    let handles: Vec<_> = (0..TASKS).map(|i| gort::spawn(task(i))).collect();
    for h in handles {
        h.await.unwrap();
    }
}

#[test]
fn tokio_sync_mutex_and_rwlock() {
    run(async {
        let m = Arc::new(tokio::sync::Mutex::new(0usize));
        let rw = Arc::new(tokio::sync::RwLock::new(0usize));
        spawn_all(|_| {
            let (m, rw) = (m.clone(), rw.clone());
            async move {
                for _ in 0..100 {
                    let mut g = m.lock().await;
                    *g += 1;
                    gort::yield_now().await; // hold it across a yield: others park
                    drop(g);
                    *rw.write().await += 1;
                    let _r = rw.read().await;
                }
            }
        })
        .await;
        assert_eq!(*m.lock().await, TASKS * 100);
        assert_eq!(*rw.read().await, TASKS * 100);
    });
}

#[test]
fn tokio_sync_semaphore_bounds_concurrency() {
    run(async {
        let sem = Arc::new(tokio::sync::Semaphore::new(3));
        let (now, max) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
        spawn_all(|_| {
            let (sem, now, max) = (sem.clone(), now.clone(), max.clone());
            async move {
                for _ in 0..10 {
                    let _permit = sem.acquire().await.unwrap();
                    let n = now.fetch_add(1, SeqCst) + 1;
                    max.fetch_max(n, SeqCst);
                    gort::time::sleep(Duration::from_micros(100)).await;
                    now.fetch_sub(1, SeqCst);
                }
            }
        })
        .await;
        assert!(
            max.load(SeqCst) <= 3,
            "semaphore let {} in",
            max.load(SeqCst)
        );
        assert!(max.load(SeqCst) >= 2, "tasks never overlapped");
    });
}

#[test]
fn tokio_sync_notify_oneshot_watch_broadcast() {
    run(async {
        // Notify: a waiter on another P is woken.
        let notify = Arc::new(tokio::sync::Notify::new());
        let n2 = notify.clone();
        let waiter = gort::spawn(async move { n2.notified().await });
        gort::time::sleep(Duration::from_millis(5)).await;
        notify.notify_one();
        waiter.await.unwrap();

        // oneshot across tasks.
        let (tx, rx) = tokio::sync::oneshot::channel();
        gort::spawn(async move { tx.send(42).unwrap() });
        assert_eq!(rx.await.unwrap(), 42);

        // watch: every watcher sees the last value.
        let (wtx, wrx) = tokio::sync::watch::channel(0);
        let watchers: Vec<_> = (0..TASKS)
            .map(|_| {
                let mut wrx = wrx.clone();
                gort::spawn(async move {
                    wrx.wait_for(|v| *v == 10).await.unwrap();
                })
            })
            .collect();
        for v in 1..=10 {
            wtx.send(v).unwrap();
            gort::yield_now().await;
        }
        for w in watchers {
            w.await.unwrap();
        }

        // broadcast: every subscriber receives every value.
        let (btx, _) = tokio::sync::broadcast::channel(64);
        let subs: Vec<_> = (0..TASKS)
            .map(|_| {
                let mut rx = btx.subscribe();
                gort::spawn(async move {
                    let mut sum = 0;
                    for _ in 0..32 {
                        sum += rx.recv().await.unwrap();
                    }
                    sum
                })
            })
            .collect();
        for v in 0..32u32 {
            btx.send(v).unwrap();
        }
        for s in subs {
            assert_eq!(s.await.unwrap(), (0..32).sum::<u32>());
        }
    });
}

#[test]
fn async_lock_mutex_rwlock_semaphore_barrier() {
    run(async {
        let m = Arc::new(async_lock::Mutex::new(0usize));
        let rw = Arc::new(async_lock::RwLock::new(0usize));
        let sem = Arc::new(async_lock::Semaphore::new(2));
        let barrier = Arc::new(async_lock::Barrier::new(TASKS));
        let leaders = Arc::new(AtomicUsize::new(0));
        spawn_all(|_| {
            let (m, rw, sem) = (m.clone(), rw.clone(), sem.clone());
            let (barrier, leaders) = (barrier.clone(), leaders.clone());
            async move {
                for _ in 0..50 {
                    let mut g = m.lock().await;
                    *g += 1;
                    gort::yield_now().await;
                    drop(g);
                    *rw.write().await += 1;
                    let _guard = sem.acquire().await;
                }
                if barrier.wait().await.is_leader() {
                    leaders.fetch_add(1, SeqCst);
                }
            }
        })
        .await;
        assert_eq!(*m.lock().await, TASKS * 50);
        assert_eq!(*rw.read().await, TASKS * 50);
        assert_eq!(leaders.load(SeqCst), 1);
    });
}

#[test]
fn futures_join_select_streams_futures_unordered() {
    run(async {
        // join! of gort timers and channels.
        let (tx, rx) = gort::chan::bounded(0);
        let (a, b) = futures::join!(
            async {
                gort::time::sleep(Duration::from_millis(2)).await;
                tx.send(1).await.unwrap();
                "sent"
            },
            rx.recv()
        );
        assert_eq!((a, b), ("sent", Some(1)));

        // futures::select! over a gort receive and a gort timer.
        let (_keep, quiet) = gort::chan::bounded::<u8>(0);
        let mut recv = Box::pin(quiet.recv());
        let mut timer = Box::pin(gort::time::sleep(Duration::from_millis(2)));
        let which = futures::select! {
            _ = futures::FutureExt::fuse(&mut recv) => "recv",
            _ = futures::FutureExt::fuse(&mut timer) => "timer",
        };
        assert_eq!(which, "timer");

        // FuturesUnordered of gort tasks on several Ps, completing out of order.
        let mut set: FuturesUnordered<_> = (0..TASKS as u64)
            .map(|i| {
                gort::spawn(async move {
                    gort::time::sleep(Duration::from_micros((TASKS as u64 - i) * 200)).await;
                    i
                })
            })
            .collect();
        let mut got = Vec::new();
        while let Some(r) = set.next().await {
            got.push(r.unwrap());
        }
        got.sort_unstable();
        assert_eq!(got, (0..TASKS as u64).collect::<Vec<_>>());

        // Stream combinators over a gort channel fed from other tasks.
        let (tx, rx) = gort::chan::bounded(4);
        for i in 0..TASKS {
            let tx = tx.clone();
            gort::spawn(async move { tx.send(i).await.unwrap() });
        }
        drop(tx);
        let total: usize = rx.map(|i| i * 2).fold(0, |a, b| async move { a + b }).await;
        assert_eq!(total, (0..TASKS).sum::<usize>() * 2);
    });
}

#[test]
fn async_channel_across_tasks() {
    run(async {
        let (tx, rx) = async_channel::bounded(2);
        let consumers: Vec<_> = (0..4)
            .map(|_| {
                let rx = rx.clone();
                gort::spawn(async move {
                    let mut n = 0;
                    while rx.recv().await.is_ok() {
                        n += 1;
                    }
                    n
                })
            })
            .collect();
        spawn_all(|i| {
            let tx = tx.clone();
            async move {
                for j in 0..50 {
                    tx.send(i * 1000 + j).await.unwrap();
                }
            }
        })
        .await;
        tx.close();
        let mut total = 0;
        for c in consumers {
            total += c.await.unwrap();
        }
        assert_eq!(total, TASKS * 50);
    });
}
