//! Tokio's `tests/rt_threaded.rs` and `tests/join_handle_panic.rs`, ported to gort: each test
//! keeps its Tokio name and runs under a watchdog; Tokio's `rt()` (4 workers) is a gort
//! runtime of 4 Ps. Rounds are scaled down where said, to stay fast on 2 cores.
//!
//! Skipped: `global_queue_interval_set_to_one` and `test_tuning` (gort has Go's fixed
//! global-queue interval of 61, no knob); `wake_deferred_tasks_before_block_in_place` (gort
//! has no deferred wakes: `yield_now` wakes its task at once); `default_runtime_name_should_be_none`
//! and `different_runtime_names` (no runtime names, only `Builder::thread_name`);
//! `test_block_in_place1` and `test_block_in_place3` (Tokio panics on a current-thread
//! runtime; gort has no such flavour, and `block_in_place` outside a worker simply runs its
//! closure: `gort::block_in_place`'s docs), ported as the non-panicking cases.

#[path = "support/mock_task.rs"]
mod mock_task;
mod support;

use gort::net::{TcpListener, TcpStream};
use gort::Runtime;
use mock_task::rt_test;
use std::future::{poll_fn, Future};
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
use std::sync::{mpsc, Arc, Mutex};
use std::task::{Context, Poll, Waker};
use std::time::Duration;
use support::{within, PanicsOnDrop};
use tokio::sync::oneshot;

/// Tokio's `rt()`: a runtime of 4 workers.
fn rt() -> Runtime {
    gort::Builder::new().procs(4).build().unwrap()
}

fn one_worker() -> Runtime {
    gort::Builder::new().procs(1).build().unwrap()
}

// rt_threaded.rs
#[test]
fn single_thread() {
    within(|| drop(one_worker()));
}

// rt_threaded.rs (2 rounds instead of 5)
#[test]
fn many_oneshot_futures() {
    const NUM: usize = 1_000;
    within(|| {
        for _ in 0..2 {
            let (tx, rx) = mpsc::channel();
            let rt = rt();
            let cnt = Arc::new(AtomicUsize::new(0));
            for _ in 0..NUM {
                let cnt = cnt.clone();
                let tx = tx.clone();
                rt.spawn(async move {
                    if cnt.fetch_add(1, Relaxed) + 1 == NUM {
                        tx.send(()).unwrap();
                    }
                });
            }
            rx.recv().unwrap();
            drop(rt);
        }
    });
}

// rt_threaded.rs
#[test]
fn spawn_two() {
    within(|| {
        let rt = rt();
        let out = rt.block_on(async {
            let (tx, rx) = oneshot::channel();
            gort::spawn(async move {
                gort::spawn(async move {
                    tx.send("ZOMG").unwrap();
                });
            });
            rx.await.unwrap()
        });
        assert_eq!(out, "ZOMG");
    });
}

// rt_threaded.rs (3 rounds of 20 tracks of 50 instead of 50 rounds of 50 tracks of 200)
#[test]
fn many_multishot_futures() {
    const CHAIN: usize = 50;
    const CYCLES: usize = 5;
    const TRACKS: usize = 20;
    within(|| {
        for _ in 0..3 {
            let rt = rt();
            let mut start_txs = Vec::with_capacity(TRACKS);
            let mut final_rxs = Vec::with_capacity(TRACKS);
            for _ in 0..TRACKS {
                let (start_tx, mut chain_rx) = tokio::sync::mpsc::channel(10);
                for _ in 0..CHAIN {
                    let (next_tx, next_rx) = tokio::sync::mpsc::channel(10);
                    rt.spawn(async move {
                        while let Some(v) = chain_rx.recv().await {
                            next_tx.send(v).await.unwrap();
                        }
                    });
                    chain_rx = next_rx;
                }
                let (final_tx, final_rx) = tokio::sync::mpsc::channel(10);
                let cycle_tx = start_tx.clone();
                rt.spawn(async move {
                    for rem in (0..CYCLES).rev() {
                        let msg = chain_rx.recv().await.unwrap();
                        if rem == 0 {
                            final_tx.send(msg).await.unwrap();
                        } else {
                            cycle_tx.send(msg).await.unwrap();
                        }
                    }
                });
                start_txs.push(start_tx);
                final_rxs.push(final_rx);
            }
            rt.block_on(async move {
                for start_tx in start_txs {
                    start_tx.send("ping").await.unwrap();
                }
                for mut final_rx in final_rxs {
                    final_rx.recv().await.unwrap();
                }
            });
        }
    });
}

// rt_threaded.rs: a task that spawns itself for ever through the `runnext` slot must not
// starve the rest, nor the shutdown.
#[test]
fn lifo_slot_budget() {
    async fn my_fn() {
        spawn_another();
    }
    fn spawn_another() {
        gort::spawn(my_fn());
    }
    within(|| {
        let rt = one_worker();
        let (send, recv) = oneshot::channel();
        rt.spawn(async move {
            gort::spawn(my_fn());
            let _ = send.send(());
        });
        let _ = rt.block_on(recv);
    });
}

async fn client_server(tx: mpsc::Sender<()>) {
    let server = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = server.local_addr().unwrap();
    gort::spawn(async move {
        let (socket, _) = server.accept().await.unwrap();
        socket.write_all(b"hello").await.unwrap();
    });
    let client = TcpStream::connect(addr).await.unwrap();
    let mut buf = vec![];
    let mut chunk = [0u8; 16];
    loop {
        match client.read(&mut chunk).await.unwrap() {
            0 => break,
            n => buf.extend_from_slice(&chunk[..n]),
        }
    }
    assert_eq!(buf, b"hello");
    tx.send(()).unwrap();
}

// rt_threaded.rs
#[test]
fn spawn_shutdown() {
    within(|| {
        let rt = rt();
        let (tx, rx) = mpsc::channel();
        rt.block_on(async {
            gort::spawn(client_server(tx.clone()));
        });
        rt.spawn(client_server(tx));
        rx.recv().unwrap();
        rx.recv().unwrap();
        drop(rt);
        rx.try_recv().unwrap_err();
    });
}

// rt_threaded.rs (50 rounds instead of 1,000)
#[test]
fn drop_threadpool_drops_futures() {
    struct Never(Arc<AtomicUsize>);
    impl Future for Never {
        type Output = ();
        fn poll(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<()> {
            Poll::Pending
        }
    }
    impl Drop for Never {
        fn drop(&mut self) {
            self.0.fetch_add(1, Relaxed);
        }
    }
    within(|| {
        for _ in 0..50 {
            let num_inc = Arc::new(AtomicUsize::new(0));
            let num_dec = Arc::new(AtomicUsize::new(0));
            let num_drop = Arc::new(AtomicUsize::new(0));
            let (a, b) = (num_inc.clone(), num_dec.clone());
            let rt = gort::Builder::new()
                .on_thread_start(move || {
                    a.fetch_add(1, Relaxed);
                })
                .on_thread_stop(move || {
                    b.fetch_add(1, Relaxed);
                })
                .build()
                .unwrap();
            rt.spawn(Never(num_drop.clone()));
            drop(rt);
            let a = num_inc.load(Relaxed);
            assert!(a >= 1);
            assert_eq!(a, num_dec.load(Relaxed), "every started thread stopped");
            assert_eq!(num_drop.load(Relaxed), 1);
        }
    });
}

// rt_threaded.rs
#[test]
fn start_stop_callbacks_called() {
    within(|| {
        let after_start = Arc::new(AtomicUsize::new(0));
        let before_stop = Arc::new(AtomicUsize::new(0));
        let (after_inner, before_inner) = (after_start.clone(), before_stop.clone());
        let rt = gort::Builder::new()
            .on_thread_start(move || {
                after_inner.fetch_add(1, Relaxed);
            })
            .on_thread_stop(move || {
                before_inner.fetch_add(1, Relaxed);
            })
            .build()
            .unwrap();
        let (tx, rx) = oneshot::channel();
        rt.spawn(async move {
            tx.send(()).unwrap();
        });
        rt.block_on(rx).unwrap();
        drop(rt);
        assert!(after_start.load(Relaxed) > 0);
        assert!(before_stop.load(Relaxed) > 0);
    });
}

// rt_threaded.rs (3 rounds instead of 10): every P's task in `block_in_place` at once, and
// 1,000 tasks still run (the Ps were handed off).
#[test]
fn blocking() {
    const NUM: usize = 1_000;
    within(|| {
        for _ in 0..3 {
            let (tx, rx) = mpsc::channel();
            let rt = rt();
            let cnt = Arc::new(AtomicUsize::new(0));
            let block = Arc::new(std::sync::Barrier::new(5));
            for _ in 0..4 {
                let block = block.clone();
                rt.spawn(async move {
                    gort::block_in_place(move || {
                        block.wait();
                        block.wait();
                    })
                });
            }
            block.wait();
            for _ in 0..NUM {
                let cnt = cnt.clone();
                let tx = tx.clone();
                rt.spawn(async move {
                    if cnt.fetch_add(1, Relaxed) + 1 == NUM {
                        tx.send(()).unwrap();
                    }
                });
            }
            rx.recv().unwrap();
            block.wait();
        }
    });
}

// rt_threaded.rs
#[test]
fn multi_threadpool() {
    within(|| {
        let (rt1, rt2) = (rt(), rt());
        let (tx, rx) = oneshot::channel();
        let (done_tx, done_rx) = mpsc::channel();
        rt2.spawn(async move {
            rx.await.unwrap();
            done_tx.send(()).unwrap();
        });
        rt1.spawn(async move {
            tx.send(()).unwrap();
        });
        done_rx.recv().unwrap();
    });
}

// rt_threaded.rs (over `gort::chan`, which spends gort's budget): after `block_in_place`
// the task still yields when its budget runs out.
#[test]
fn coop_and_block_in_place() {
    within(|| {
        let rt = gort::Builder::new()
            .max_blocking_threads(1)
            .build()
            .unwrap();
        rt.block_on(async move {
            let (tx, rx) = gort::chan::bounded(1024);
            for _ in 0..1024 {
                tx.send(()).await.unwrap();
            }
            drop(tx);
            gort::spawn(async move {
                gort::block_in_place(|| {});
                poll_fn(|cx| loop {
                    let mut fut = std::pin::pin!(rx.recv());
                    match fut.as_mut().poll(cx) {
                        Poll::Ready(Some(())) => {}
                        Poll::Ready(None) => panic!("did not yield"),
                        Poll::Pending => return Poll::Ready(()),
                    }
                })
                .await
            })
            .await
            .unwrap();
        });
    });
}

// rt_threaded.rs
#[test]
fn yield_after_block_in_place() {
    within(|| {
        let rt = one_worker();
        rt.block_on(async {
            gort::spawn(async move {
                gort::block_in_place(|| {
                    let rt = one_worker();
                    rt.block_on(async {});
                });
                gort::yield_now().await;
            })
            .await
            .unwrap()
        });
    });
}

// rt_threaded.rs
#[test]
fn max_blocking_threads() {
    let _rt = gort::Builder::new()
        .max_blocking_threads(1)
        .build()
        .unwrap();
}

// rt_threaded.rs
#[test]
#[should_panic]
fn max_blocking_threads_set_to_zero() {
    let _rt = gort::Builder::new()
        .max_blocking_threads(0)
        .build()
        .unwrap();
}

// rt_threaded.rs (sleeps of 100 and 200 ms instead of 1 and 2 s): the runtime is dropped
// while a task sits in `block_in_place` on a channel whose sender a sleeping task holds.
#[test]
fn hang_on_shutdown() {
    within(|| {
        let rt = gort::Builder::new().procs(2).build().unwrap();
        rt.block_on(async {
            let (sync_tx, sync_rx) = mpsc::channel::<()>();
            gort::spawn(async move {
                gort::block_in_place(|| sync_rx.recv().ok());
            });
            gort::spawn(async {
                gort::time::sleep(Duration::from_millis(200)).await;
                drop(sync_tx);
            });
            gort::time::sleep(Duration::from_millis(100)).await;
        });
    });
}

// rt_threaded.rs: a future's `Drop` wakes another task while the runtime drops them.
#[test]
fn wake_during_shutdown() {
    struct Shared {
        waker: Option<Waker>,
    }
    struct MyFuture {
        shared: Arc<Mutex<Shared>>,
        put_waker: bool,
    }
    impl Future for MyFuture {
        type Output = ();
        fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
            let me = Pin::into_inner(self);
            let mut lock = me.shared.lock().unwrap();
            if me.put_waker {
                lock.waker = Some(cx.waker().clone());
            }
            Poll::Pending
        }
    }
    impl Drop for MyFuture {
        fn drop(&mut self) {
            let mut lock = self.shared.lock().unwrap();
            if !self.put_waker {
                lock.waker.take().unwrap().wake();
            }
            drop(lock);
        }
    }
    within(|| {
        let rt = one_worker();
        let shared = Arc::new(Mutex::new(Shared { waker: None }));
        let f1 = MyFuture {
            shared: shared.clone(),
            put_waker: true,
        };
        let f2 = MyFuture {
            shared,
            put_waker: false,
        };
        rt.spawn(f1);
        rt.spawn(f2);
        rt.block_on(gort::time::sleep(Duration::from_millis(20)));
    });
}

// rt_threaded.rs
#[gort::test(procs = 4)]
async fn test_block_in_place2() {
    gort::block_in_place(|| {});
}

// rt_threaded.rs (`#[gort::main]` on a test; this and test_block_in_place2 test the attribute
// forms, so they run without the watchdog, on a closure that cannot block)
#[gort::main]
#[test]
async fn test_block_in_place4() {
    gort::block_in_place(|| {});
}

// rt_threaded.rs (20 rounds instead of 100)
#[test]
fn test_nested_block_in_place_with_block_on_between() {
    within(|| {
        let rt = gort::Builder::new()
            .procs(1)
            .max_blocking_threads(1)
            .build()
            .unwrap();
        for _ in 0..20 {
            let h = rt.handle().clone();
            rt.block_on(async move {
                gort::spawn(async move {
                    gort::block_in_place(|| {
                        h.block_on(async {
                            gort::block_in_place(|| {});
                        });
                    })
                })
                .await
                .unwrap()
            });
        }
    });
}

// rt_threaded.rs
#[test]
fn yield_now_in_block_in_place() {
    within(|| {
        let rt = one_worker();
        rt.block_on(async {
            gort::spawn(async {
                gort::block_in_place(|| {
                    gort::Handle::current().block_on(gort::yield_now());
                })
            })
            .await
            .unwrap()
        })
    });
}

// rt_threaded.rs
#[test]
fn mutex_in_block_in_place() {
    const BUDGET: usize = 128;
    within(|| {
        let rt = one_worker();
        rt.block_on(async {
            let lock = tokio::sync::Mutex::new(0);
            gort::spawn(async move {
                gort::block_in_place(|| {
                    gort::Handle::current().block_on(async move {
                        for i in 0..(BUDGET + 1) {
                            *lock.lock().await = i;
                        }
                    });
                })
            })
            .await
            .unwrap();
        })
    });
}

// join_handle_panic.rs
#[test]
fn test_panics_do_not_propagate_when_dropping_join_handle() {
    rt_test(2, false, || async {
        let join_handle = gort::spawn(async move { PanicsOnDrop });
        // Drop the JoinHandle once the task has completed (hard to synchronise exactly).
        gort::time::sleep(Duration::from_millis(3)).await;
        drop(join_handle);
    });
}
