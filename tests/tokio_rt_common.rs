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

#[path = "support/rt_common.rs"]
mod rt_common;
mod support;

use gort::net::{TcpListener, TcpStream};
use rt_common::{each, rt_of, yield_once};
use std::future::poll_fn;
use std::sync::Arc;
use std::task::Poll;
use std::thread;
use std::time::{Duration, Instant};
use tokio::sync::oneshot;

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
