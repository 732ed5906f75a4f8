//! Tokio's `tests/rt_common.rs`, ported to gort: each test keeps its Tokio name and runs on
//! gort runtimes of 1, 2 and 4 Ps (Tokio runs it on its current-thread runtime and on 1 and 4
//! workers), under a watchdog. Counts are scaled down where said, to stay fast on 2 cores.
//! `tokio::sync`'s channels need no Tokio runtime (README, "Using crates from the ecosystem").
//!
//! Skipped: `local_set_block_on_socket`, `local_set_client_server_block_on` (gort has no
//! `LocalSet`: every task is `Send`); `coop` and `coop_unconstrained` over `tokio::sync::mpsc`
//! (its budget is Tokio's own, which only Tokio's runtime sets: README), ported over
//! `gort::chan`, which spends gort's; `yield_defers_until_park` and
//! `coop_yield_defers_until_park`: gort's `yield_now` is Go's `Gosched` (the task goes to the
//! back of its P's queue, and the netpoller is polled between tasks only when the P has none,
//! or by sysmon every 10 ms), not Tokio's "defer until the driver is polled"
//! (`gort::yield_now` and design/NETPOLL.md, "How readiness reaches tasks").

mod support;

use gort::net::{TcpListener, TcpStream, UdpSocket};
use gort::Runtime;
use std::future::{poll_fn, Future};
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering::SeqCst};
use std::sync::{mpsc, Arc};
use std::task::{Context, Poll};
use std::thread;
use std::time::{Duration, Instant};
use support::within;
use tokio::sync::oneshot;

/// The runtimes each test runs on: 1, 2 and 4 Ps.
const PROCS: [usize; 3] = [1, 2, 4];

fn rt_of(procs: usize) -> Arc<Runtime> {
    Arc::new(gort::Builder::new().procs(procs).build().unwrap())
}

/// Runs `f` on a fresh runtime of each size in [`PROCS`], under the watchdog.
fn each(f: impl Fn(Arc<Runtime>) + Send + Sync + 'static) {
    within(move || {
        for procs in PROCS {
            f(rt_of(procs));
        }
    })
}

/// Tokio's `yield_once`: pending once, waking itself.
async fn yield_once() {
    let mut yielded = false;
    poll_fn(|cx| {
        if yielded {
            Poll::Ready(())
        } else {
            yielded = true;
            cx.waker().wake_by_ref();
            Poll::Pending
        }
    })
    .await
}

/// Reads until end of stream.
async fn read_to_end(s: &TcpStream) -> Vec<u8> {
    let mut out = Vec::new();
    let mut buf = [0u8; 64];
    loop {
        let n = s.read(&mut buf).await.unwrap();
        if n == 0 {
            return out;
        }
        out.extend_from_slice(&buf[..n]);
    }
}

// rt_common.rs
#[test]
fn block_on_sync() {
    each(|rt| {
        let mut win = false;
        rt.block_on(async {
            win = true;
        });
        assert!(win);
    });
}

// rt_common.rs
#[test]
fn block_on_async() {
    each(|rt| {
        let out = rt.block_on(async {
            let (tx, rx) = oneshot::channel();
            thread::spawn(move || {
                thread::sleep(Duration::from_millis(10));
                tx.send("ZOMG").unwrap();
            });
            rx.await.unwrap()
        });
        assert_eq!(out, "ZOMG");
    });
}

// rt_common.rs
#[test]
fn spawn_one_bg() {
    each(|rt| {
        let out = rt.block_on(async {
            let (tx, rx) = oneshot::channel();
            gort::spawn(async move {
                tx.send("ZOMG").unwrap();
            });
            rx.await.unwrap()
        });
        assert_eq!(out, "ZOMG");
    });
}

// rt_common.rs
#[test]
fn spawn_one_join() {
    each(|rt| {
        let out = rt.block_on(async {
            let (tx, rx) = oneshot::channel();
            let handle = gort::spawn(async move {
                tx.send("ZOMG").unwrap();
                "DONE"
            });
            let msg = rx.await.unwrap();
            assert_eq!(handle.await.unwrap(), "DONE");
            msg
        });
        assert_eq!(out, "ZOMG");
    });
}

// rt_common.rs
#[test]
fn spawn_two() {
    each(|rt| {
        let out = rt.block_on(async {
            let (tx1, rx1) = oneshot::channel();
            let (tx2, rx2) = oneshot::channel();
            gort::spawn(async move {
                tx1.send("ZOMG").unwrap();
            });
            gort::spawn(async move {
                let msg = rx1.await.unwrap();
                tx2.send(msg).unwrap();
            });
            rx2.await.unwrap()
        });
        assert_eq!(out, "ZOMG");
    });
}

/// Spawns `iter` tasks each waiting on a oneshot that a std thread fills, and collects what
/// they pass on (the body of `spawn_many_from_block_on` and `spawn_many_from_task`).
async fn spawn_many(iter: usize) -> Vec<usize> {
    let (done_tx, mut done_rx) = tokio::sync::mpsc::unbounded_channel();
    let txs: Vec<_> = (0..iter)
        .map(|i| {
            let (tx, rx) = oneshot::channel();
            let done_tx = done_tx.clone();
            gort::spawn(async move {
                let msg = rx.await.unwrap();
                assert_eq!(i, msg);
                done_tx.send(msg).unwrap();
            });
            tx
        })
        .collect();
    drop(done_tx);
    thread::spawn(move || {
        for (i, tx) in txs.into_iter().enumerate() {
            tx.send(i).unwrap();
        }
    });
    let mut out = vec![];
    while let Some(i) = done_rx.recv().await {
        out.push(i);
    }
    out.sort_unstable();
    out
}

// rt_common.rs (200 tasks, as Tokio's)
#[test]
fn spawn_many_from_block_on() {
    each(|rt| {
        let out = rt.block_on(spawn_many(200));
        assert_eq!(out, (0..200).collect::<Vec<_>>());
    });
}

// rt_common.rs (500 tasks, as Tokio's)
#[test]
fn spawn_many_from_task() {
    each(|rt| {
        let out = rt.block_on(async { gort::spawn(spawn_many(500)).await.unwrap() });
        assert_eq!(out, (0..500).collect::<Vec<_>>());
    });
}

// rt_common.rs
#[test]
fn spawn_one_from_block_on_called_on_handle() {
    each(|rt| {
        let (tx, rx) = oneshot::channel();
        #[allow(clippy::async_yields_async)]
        let handle = rt.handle().block_on(async {
            gort::spawn(async move {
                tx.send("ZOMG").unwrap();
                "DONE"
            })
        });
        let out = rt.block_on(async {
            let msg = rx.await.unwrap();
            assert_eq!(handle.await.unwrap(), "DONE");
            msg
        });
        assert_eq!(out, "ZOMG");
    });
}

// rt_common.rs
#[test]
fn spawn_await_chain() {
    each(|rt| {
        let out = rt.block_on(async {
            gort::spawn(async { gort::spawn(async { "hello" }).await.unwrap() })
                .await
                .unwrap()
        });
        assert_eq!(out, "hello");
    });
}

// rt_common.rs
#[test]
fn outstanding_tasks_dropped() {
    each(|rt| {
        let cnt = Arc::new(());
        rt.block_on(async {
            let cnt = cnt.clone();
            gort::spawn(poll_fn(move |_| {
                assert_eq!(2, Arc::strong_count(&cnt));
                Poll::<()>::Pending
            }));
        });
        assert_eq!(2, Arc::strong_count(&cnt));
        drop(rt);
        assert_eq!(1, Arc::strong_count(&cnt));
    });
}

// rt_common.rs
#[test]
#[should_panic]
fn nested_rt() {
    let rt1 = rt_of(1);
    let rt2 = rt_of(1);
    rt1.block_on(async { rt2.block_on(async { "hello" }) });
}

// rt_common.rs
#[test]
fn create_rt_in_block_on() {
    each(|rt1| {
        let rt2 = rt1.block_on(async { rt_of(2) });
        assert_eq!(rt2.block_on(async { "ZOMG" }), "ZOMG");
    });
}

// rt_common.rs
#[test]
fn complete_block_on_under_load() {
    each(|rt| {
        rt.block_on(async {
            let (tx, rx) = oneshot::channel();
            // Spin hard (until the runtime drops it).
            gort::spawn(async {
                loop {
                    yield_once().await;
                }
            });
            thread::spawn(move || {
                thread::sleep(Duration::from_millis(10));
                tx.send(()).unwrap();
            });
            rx.await.unwrap();
        });
    });
}

// rt_common.rs
#[test]
fn complete_task_under_load() {
    each(|rt| {
        rt.block_on(async {
            let (tx1, rx1) = oneshot::channel();
            let (tx2, rx2) = oneshot::channel();
            gort::spawn(async {
                loop {
                    yield_once().await;
                }
            });
            thread::spawn(move || {
                thread::sleep(Duration::from_millis(10));
                tx1.send(()).unwrap();
            });
            gort::spawn(async move {
                rx1.await.unwrap();
                tx2.send(()).unwrap();
            });
            rx2.await.unwrap();
        });
    });
}

// rt_common.rs
#[test]
fn spawn_from_other_thread_idle() {
    each(|rt| {
        let handle = rt.clone();
        let (tx, rx) = oneshot::channel();
        thread::spawn(move || {
            thread::sleep(Duration::from_millis(10));
            handle.spawn(async move {
                tx.send(()).unwrap();
            });
        });
        rt.block_on(async move { rx.await.unwrap() });
    });
}

// rt_common.rs
#[test]
fn spawn_from_other_thread_under_load() {
    each(|rt| {
        let handle = rt.clone();
        let (tx, rx) = oneshot::channel();
        thread::spawn(move || {
            handle.spawn(async move {
                tx.send(()).unwrap();
            });
        });
        rt.block_on(async move {
            gort::spawn(async {
                loop {
                    yield_once().await;
                }
            });
            rx.await.unwrap();
        });
    });
}

// rt_common.rs (10 ms instead of 50)
#[test]
fn sleep_at_root() {
    each(|rt| {
        let now = Instant::now();
        let dur = Duration::from_millis(10);
        rt.block_on(gort::time::sleep(dur));
        assert!(now.elapsed() >= dur);
    });
}

// rt_common.rs (10 ms instead of 50)
#[test]
fn sleep_in_spawn() {
    each(|rt| {
        let now = Instant::now();
        let dur = Duration::from_millis(10);
        rt.block_on(async move {
            let (tx, rx) = oneshot::channel();
            gort::spawn(async move {
                gort::time::sleep(dur).await;
                tx.send(()).unwrap();
            });
            rx.await.unwrap();
        });
        assert!(now.elapsed() >= dur);
    });
}

// rt_common.rs
#[test]
fn block_on_socket() {
    each(|rt| {
        rt.block_on(async move {
            let (tx, rx) = oneshot::channel();
            let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
            let addr = listener.local_addr().unwrap();
            gort::spawn(async move {
                let _ = listener.accept().await;
                tx.send(()).unwrap();
            });
            TcpStream::connect(addr).await.unwrap();
            rx.await.unwrap();
        });
    });
}

// rt_common.rs
#[test]
fn spawn_from_blocking() {
    each(|rt| {
        let out = rt.block_on(async move {
            let inner = gort::spawn_blocking(|| gort::spawn(async move { "hello" }))
                .await
                .unwrap();
            inner.await.unwrap()
        });
        assert_eq!(out, "hello");
    });
}

// rt_common.rs
#[test]
fn spawn_blocking_from_blocking() {
    each(|rt| {
        let out = rt.block_on(async move {
            let inner = gort::spawn_blocking(|| gort::spawn_blocking(|| "hello"))
                .await
                .unwrap();
            inner.await.unwrap()
        });
        assert_eq!(out, "hello");
    });
}

// rt_common.rs
#[test]
fn sleep_from_blocking() {
    each(|rt| {
        rt.block_on(async move {
            gort::spawn_blocking(|| {
                let now = Instant::now();
                let dur = Duration::from_millis(1);
                // futures' block_on: no gort block_on context, only the blocking thread's.
                futures::executor::block_on(gort::time::sleep(dur));
                assert!(now.elapsed() >= dur);
            })
            .await
            .unwrap();
        });
    });
}

// rt_common.rs
#[test]
fn socket_from_blocking() {
    each(|rt| {
        rt.block_on(async move {
            let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
            let addr = listener.local_addr().unwrap();
            let peer = gort::spawn_blocking(move || {
                futures::executor::block_on(async {
                    TcpStream::connect(addr).await.unwrap();
                });
            });
            let _ = listener.accept().await.unwrap();
            peer.await.unwrap();
        });
    });
}

// rt_common.rs
#[test]
fn always_active_parker() {
    each(|rt| {
        let rt2 = rt.clone();
        let (tx1, rx1) = oneshot::channel();
        let (tx2, rx2) = oneshot::channel();
        let jh1 = thread::spawn(move || {
            rt.block_on(async move {
                rx2.await.unwrap();
                gort::time::sleep(Duration::from_millis(5)).await;
                tx1.send(()).unwrap();
            });
        });
        let jh2 = thread::spawn(move || {
            rt2.block_on(async move {
                tx2.send(()).unwrap();
                gort::time::sleep(Duration::from_millis(5)).await;
                rx1.await.unwrap();
                gort::time::sleep(Duration::from_millis(5)).await;
            });
        });
        jh1.join().unwrap();
        jh2.join().unwrap();
    });
}

// rt_common.rs (20 spinning tasks instead of 100)
#[test]
fn io_driver_called_when_under_load() {
    each(|rt| {
        for _ in 0..20 {
            rt.spawn(async {
                loop {
                    poll_fn::<(), _>(|cx| {
                        cx.waker().wake_by_ref();
                        Poll::Pending
                    })
                    .await;
                }
            });
        }
        rt.block_on(async {
            let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
            let addr = listener.local_addr().unwrap();
            let srv = gort::spawn(async move {
                let (stream, _) = listener.accept().await.unwrap();
                stream.write_all(b"hello world").await.unwrap();
            });
            let cli = gort::spawn(async move {
                let stream = TcpStream::connect(addr).await.unwrap();
                let mut dst = vec![0; 11];
                stream.read_exact(&mut dst).await.unwrap();
                assert_eq!(dst, b"hello world");
            });
            srv.await.unwrap();
            cli.await.unwrap();
        });
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
