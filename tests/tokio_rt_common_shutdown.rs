//! Tokio's `tests/rt_common.rs`, second half (shutdown, panics, the cooperative budget,
//! thread-locals), ported to gort as the first half (`tokio_rt_common.rs`): each test keeps
//! its Tokio name and runs on gort runtimes of 1, 2 and 4 Ps under a watchdog; counts scaled
//! down where said. Skipped: see `tokio_rt_common.rs`.

#[path = "support/rt_common.rs"]
mod rt_common;
mod support;

use gort::net::{TcpListener, TcpStream, UdpSocket};
use gort::Runtime;
use rt_common::{each, read_to_end, rt_of, PROCS};
use std::future::{poll_fn, Future};
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering::SeqCst};
use std::sync::{mpsc, Arc};
use std::task::{Context, Poll};
use std::thread;
use std::time::{Duration, Instant};
use support::within;
use tokio::sync::oneshot;

async fn client_server(tx: mpsc::Sender<()>) {
    let server = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = server.local_addr().unwrap();
    gort::spawn(async move {
        let (socket, _) = server.accept().await.unwrap();
        socket.write_all(b"hello").await.unwrap();
    });
    let client = TcpStream::connect(addr).await.unwrap();
    assert_eq!(read_to_end(&client).await, b"hello");
    tx.send(()).unwrap();
}

// rt_common.rs
#[test]
fn client_server_block_on() {
    each(|rt| {
        let (tx, rx) = mpsc::channel();
        rt.block_on(async move { client_server(tx).await });
        rx.try_recv().unwrap();
        rx.try_recv().unwrap_err();
    });
}

// rt_common.rs (gort drops a panicked task's future after the unwind is caught, not during
// it: `thread::panicking()` is false in its `Drop`; `gort::JoinHandle`'s docs and
// design/ARCHITECTURE.md, "Panics in user code")
#[test]
fn panic_in_task() {
    struct Boom(Option<oneshot::Sender<()>>);
    impl Future for Boom {
        type Output = ();
        fn poll(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<()> {
            panic!();
        }
    }
    impl Drop for Boom {
        fn drop(&mut self) {
            assert!(!thread::panicking());
            self.0.take().unwrap().send(()).unwrap();
        }
    }
    each(|rt| {
        let (tx, rx) = oneshot::channel();
        rt.spawn(Boom(Some(tx)));
        rt.block_on(rx).unwrap();
    });
}

// rt_common.rs
#[test]
#[should_panic]
fn panic_in_block_on() {
    let rt = rt_of(2);
    rt.block_on(async { panic!() });
}

// rt_common.rs (`rt.enter()`: `gort::Runtime::enter`)
#[test]
fn enter_and_spawn() {
    each(|rt| {
        let handle = {
            let _enter = rt.enter();
            gort::spawn(async {})
        };
        rt.block_on(handle).unwrap();
    });
}

// rt_common.rs
#[test]
fn eagerly_drops_futures_on_shutdown() {
    struct Never {
        drop_tx: mpsc::Sender<()>,
    }
    impl Future for Never {
        type Output = ();
        fn poll(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<()> {
            Poll::Pending
        }
    }
    impl Drop for Never {
        fn drop(&mut self) {
            self.drop_tx.send(()).unwrap();
        }
    }
    each(|rt| {
        let (drop_tx, drop_rx) = mpsc::channel();
        let (run_tx, run_rx) = oneshot::channel();
        rt.block_on(async move {
            gort::spawn(async move {
                run_tx.send(()).unwrap();
                Never { drop_tx }.await
            });
            run_rx.await.unwrap();
        });
        drop(rt);
        drop_rx.recv().unwrap();
    });
}

// rt_common.rs
#[test]
fn wake_while_rt_is_dropping() {
    struct OnDrop<F: FnMut()>(F);
    impl<F: FnMut()> Drop for OnDrop<F> {
        fn drop(&mut self) {
            (self.0)()
        }
    }
    each(|rt| {
        let (tx1, rx1) = oneshot::channel::<()>();
        let (tx2, rx2) = oneshot::channel::<()>();
        let barrier = Arc::new(tokio::sync::Barrier::new(3));
        let (barrier1, barrier2) = (barrier.clone(), barrier.clone());
        rt.spawn(async move {
            let mut tx2 = Some(tx2);
            let _d = OnDrop(move || {
                let _ = tx2.take().unwrap().send(());
            });
            let _ = tokio::join!(rx1, barrier1.wait());
        });
        rt.spawn(async move {
            let mut tx1 = Some(tx1);
            let _d = OnDrop(move || {
                let _ = tx1.take().unwrap().send(());
            });
            let _ = tokio::join!(rx2, barrier2.wait());
        });
        rt.block_on(barrier.wait());
        // Whichever task drops first wakes the other from its destructor.
        drop(rt);
    });
}

// rt_common.rs (one round per runtime size instead of 9)
#[test]
fn io_notify_while_shutting_down() {
    within(|| {
        for procs in PROCS {
            let runtime = rt_of(procs);
            runtime.block_on(async {
                let socket = UdpSocket::bind("127.0.0.1:0").await.unwrap();
                let addr = socket.local_addr().unwrap();
                let send_half = Arc::new(socket);
                let recv_half = send_half.clone();
                gort::spawn(async move {
                    let mut buf = [0];
                    loop {
                        recv_half.recv_from(&mut buf).await.unwrap();
                        thread::sleep(Duration::from_millis(2));
                    }
                });
                gort::spawn(async move {
                    let buf = [0];
                    loop {
                        send_half.send_to(&buf, addr).await.unwrap();
                        gort::time::sleep(Duration::from_millis(1)).await;
                    }
                });
                gort::time::sleep(Duration::from_millis(5)).await;
            });
        }
    });
}

// rt_common.rs
#[test]
fn shutdown_timeout() {
    each(|runtime| {
        let (tx, rx) = oneshot::channel();
        runtime.block_on(async move {
            gort::spawn_blocking(move || {
                tx.send(()).unwrap();
                thread::sleep(Duration::from_secs(10_000));
            });
            rx.await.unwrap();
        });
        let start = Instant::now();
        Arc::try_unwrap(runtime)
            .unwrap()
            .shutdown_timeout(Duration::from_millis(100));
        assert!(start.elapsed() < Duration::from_secs(5));
    });
}

// rt_common.rs
#[test]
fn shutdown_timeout_0() {
    each(|runtime| {
        runtime.block_on(async move {
            gort::spawn_blocking(move || thread::sleep(Duration::from_secs(10_000)));
        });
        let now = Instant::now();
        Arc::try_unwrap(runtime)
            .unwrap()
            .shutdown_timeout(Duration::from_nanos(0));
        assert!(now.elapsed().as_secs() < 1);
    });
}

// rt_common.rs
#[test]
fn shutdown_timeout_max() {
    each(|runtime| {
        Arc::try_unwrap(runtime)
            .unwrap()
            .shutdown_timeout(Duration::MAX)
    });
}

// rt_common.rs (a 20 ms sleep instead of 100)
#[test]
fn shutdown_wakeup_time() {
    each(|runtime| {
        runtime.block_on(gort::time::sleep(Duration::from_millis(20)));
        Arc::try_unwrap(runtime)
            .unwrap()
            .shutdown_timeout(Duration::from_secs(10_000));
    });
}

// rt_common.rs
#[test]
fn runtime_in_thread_local() {
    use std::cell::RefCell;
    thread_local!(
        static R: RefCell<Option<Runtime>> = const { RefCell::new(None) };
    );
    within(|| {
        thread::spawn(|| {
            R.with(|cell| {
                let rt = Arc::try_unwrap(rt_of(2)).unwrap();
                *cell.borrow_mut() = Some(rt);
            });
            let _rt = rt_of(2);
        })
        .join()
        .unwrap();
    });
}

// rt_common.rs (over `gort::chan`, whose operations spend gort's budget)
#[test]
fn coop() {
    each(|rt| {
        rt.block_on(async {
            let (send, recv) = gort::chan::unbounded();
            for _ in 0..1_000 {
                send.try_send(()).unwrap();
            }
            poll_fn(|cx| {
                // At least one receive returns pending.
                for _ in 0..1_000 {
                    let mut recv_one = std::pin::pin!(recv.recv());
                    if recv_one.as_mut().poll(cx).is_pending() {
                        return Poll::Ready(());
                    }
                }
                panic!("did not yield");
            })
            .await;
        });
    });
}

// rt_common.rs (over `gort::chan`)
#[test]
fn coop_unconstrained() {
    each(|rt| {
        rt.block_on(async {
            let (send, recv) = gort::chan::unbounded();
            for _ in 0..1_000 {
                send.try_send(()).unwrap();
            }
            gort::task::unconstrained(poll_fn(|cx| {
                for _ in 0..1_000 {
                    let mut recv_one = std::pin::pin!(recv.recv());
                    assert_eq!(recv_one.as_mut().poll(cx), Poll::Ready(Some(())));
                }
                Poll::Ready(())
            }))
            .await;
        });
    });
}

// rt_common.rs (tokio_unstable there; `gort::task::consume_budget` here)
#[test]
fn coop_consume_budget() {
    each(|rt| {
        rt.block_on(async {
            poll_fn(|cx| {
                let counter = Arc::new(std::sync::Mutex::new(0));
                let counter_clone = Arc::clone(&counter);
                let mut worker = Box::pin(async move {
                    for _ in 0..1000 {
                        *counter.lock().unwrap() += 1;
                        gort::task::consume_budget().await
                    }
                });
                assert!(worker.as_mut().poll(cx).is_pending());
                assert!(*counter_clone.lock().unwrap() < 1000);
                Poll::Ready(())
            })
            .await;
        });
    });
}

// rt_common.rs (50 pairs instead of 100; `gort::chan` as the channels)
#[test]
fn ping_pong_saturation() {
    const NUM: usize = 50;
    each(|rt| {
        let running = Arc::new(AtomicBool::new(true));
        rt.block_on(async {
            let (spawned_tx, spawned_rx) = gort::chan::unbounded();
            let mut tasks = vec![];
            for _ in 0..NUM {
                let (tx1, rx1) = gort::chan::unbounded();
                let (tx2, rx2) = gort::chan::unbounded();
                let spawned_tx = spawned_tx.clone();
                let running = running.clone();
                tasks.push(gort::spawn(async move {
                    spawned_tx.send(()).await.unwrap();
                    while running.load(SeqCst) {
                        tx1.send(()).await.unwrap();
                        rx2.recv().await.unwrap();
                    }
                    drop(tx1);
                    assert!(rx2.recv().await.is_none());
                }));
                tasks.push(gort::spawn(async move {
                    while rx1.recv().await.is_some() {
                        tx2.send(()).await.unwrap();
                    }
                }));
            }
            for _ in 0..NUM {
                spawned_rx.recv().await.unwrap();
            }
            // A task that yields must still get to finish among the ping-pongs.
            let handle = gort::spawn(async {
                for _ in 0..5 {
                    gort::yield_now().await;
                }
            });
            handle.await.unwrap();
            running.store(false, SeqCst);
            for t in tasks {
                t.await.unwrap();
            }
        });
    });
}

// rt_common.rs (2 rounds of 2,000 tasks instead of 5 of 10,000)
#[test]
fn shutdown_concurrent_spawn() {
    within(|| {
        for procs in [1, 2] {
            for _ in 0..2 {
                let (tx, rx) = mpsc::channel();
                let rt = rt_of(procs);
                let mut txs = vec![];
                for _ in 0..2_000 {
                    let (tx, rx) = oneshot::channel::<()>();
                    txs.push(tx);
                    rt.spawn(async move {
                        rx.await.unwrap();
                    });
                }
                rt.block_on(gort::yield_now());
                let th = thread::spawn(move || {
                    tx.send(()).unwrap();
                    for tx in txs.drain(..) {
                        let _ = tx.send(());
                    }
                });
                rx.recv().unwrap();
                drop(rt);
                th.join().unwrap();
            }
        }
    });
}

fn wake_from_thread_local(by_ref: bool) {
    use std::cell::RefCell;
    use std::task::Waker;
    struct TlData {
        by_ref: bool,
        waker: Option<Waker>,
        done: mpsc::Sender<bool>,
    }
    impl Drop for TlData {
        fn drop(&mut self) {
            if self.by_ref {
                self.waker.take().unwrap().wake_by_ref();
            } else {
                self.waker.take().unwrap().wake();
            }
            let _ = self.done.send(true);
        }
    }
    thread_local! {
        static TL_DATA: RefCell<Option<TlData>> = const { RefCell::new(None) };
    }
    within(move || {
        for procs in PROCS {
            let (send, recv) = mpsc::channel();
            thread::spawn(move || {
                let rt = rt_of(procs);
                rt.block_on(rt.spawn(poll_fn(move |cx| {
                    let waker = cx.waker().clone();
                    let send = send.clone();
                    TL_DATA.with(|tl| {
                        tl.replace(Some(TlData {
                            by_ref,
                            waker: Some(waker),
                            done: send,
                        }));
                    });
                    Poll::Ready(())
                })))
                .unwrap();
            })
            .join()
            .unwrap();
            assert!(recv.recv().unwrap());
        }
    });
}

// rt_common.rs
#[test]
fn wake_by_ref_from_thread_local() {
    wake_from_thread_local(true);
}

// rt_common.rs
#[test]
fn wake_by_val_from_thread_local() {
    wake_from_thread_local(false);
}
