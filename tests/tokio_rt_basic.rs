//! Tokio's `rt_basic.rs`, `rt_shutdown_err.rs`, `rt_busy_tick.rs`,
//! `rt_blocking_thread_exhaust.rs` and `rt_common_before_park.rs`, ported to gort on a runtime
//! of one P (Tokio's current-thread runtime) and, where it says, two: each test keeps its
//! Tokio name and a comment naming its file, under a watchdog.
//!
//! Skipped, where gort deliberately differs: `spawned_task_does_not_progress_without_block_on`
//! (gort's tasks run on its Ms whether or not a thread is in `block_on`, as on Tokio's
//! multi-thread runtime: `gort::spawn`'s docs); `timeout_panics_when_no_time_handle` (timers
//! are always on); `default_runtime_name_should_be_none`, `different_runtime_names`,
//! `rt_worker_index.rs`, `before_park_*`, the `max_io_events_per_*tick` builder knobs (no
//! such API: gort's Builder has `thread_name`, not a runtime name, no park hooks and no worker
//! index); `is_rt_shutdown_err` (no such function: the error says the runtime is shut down);
//! the `unstable` module (`unhandled_panic`, `rng_seed`).

mod support;

use futures::future::pending;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::SeqCst};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;
use support::{within, ChildRun};
use tokio::sync::oneshot;

fn rt() -> gort::Runtime {
    gort::Builder::new().procs(1).build().unwrap()
}

/// Waits (up to the watchdog) until `cond` holds, then gives spurious work 50 ms to show.
fn settle(cond: impl Fn() -> bool) {
    while !cond() {
        std::thread::sleep(Duration::from_millis(1));
    }
    std::thread::sleep(Duration::from_millis(50));
}

// rt_basic.rs: the task's polls are counted once it has settled, as gort's tasks run without
// `block_on` (see the header).
#[test]
fn no_extra_poll() {
    within(|| {
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<()>();
        let npolls = Arc::new(AtomicUsize::new(0));
        let polls = npolls.clone();
        let rt = rt();
        rt.spawn(async move {
            std::future::poll_fn(|cx| {
                polls.fetch_add(1, SeqCst);
                match rx.poll_recv(cx) {
                    Poll::Ready(Some(())) => Poll::Ready(true),
                    Poll::Ready(None) => Poll::Ready(false),
                    Poll::Pending => Poll::Pending,
                }
            })
            .await;
            // The loop of Tokio's test, one `poll_fn` per item.
            loop {
                let more = std::future::poll_fn(|cx| {
                    polls.fetch_add(1, SeqCst);
                    rx.poll_recv(cx).map(|v| v.is_some())
                })
                .await;
                if !more {
                    break;
                }
            }
        });
        // Polled exactly once: the initial poll.
        settle(|| npolls.load(SeqCst) >= 1);
        assert_eq!(npolls.load(SeqCst), 1);
        tx.send(()).unwrap();
        // Twice more: once to yield the value, once to return `Pending`.
        settle(|| npolls.load(SeqCst) >= 3);
        assert_eq!(npolls.load(SeqCst), 1 + 2);
        drop(tx);
        // Once more: to yield `None`.
        settle(|| npolls.load(SeqCst) >= 4);
        assert_eq!(npolls.load(SeqCst), 1 + 2 + 1);
    });
}

// rt_basic.rs
#[test]
fn acquire_mutex_in_drop() {
    within(|| {
        let (tx1, rx1) = oneshot::channel::<()>();
        let (tx2, rx2) = oneshot::channel::<()>();
        let rt = rt();
        rt.spawn(async move {
            let _ = rx2.await;
            unreachable!();
        });
        rt.spawn(async move {
            let _ = rx1.await;
            tx2.send(()).unwrap();
            unreachable!();
        });
        // A task that will never notify.
        rt.spawn(async move {
            pending::<()>().await;
            tx1.send(()).unwrap();
        });
        // Tick the loop.
        rt.block_on(async {
            gort::yield_now().await;
        });
        // Drop the runtime: the tasks' drops wake one another's.
        drop(rt);
    });
}

// rt_basic.rs
#[test]
fn drop_tasks_in_context() {
    static SUCCESS: AtomicBool = AtomicBool::new(false);

    struct ContextOnDrop;

    impl Future for ContextOnDrop {
        type Output = ();

        fn poll(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<()> {
            Poll::Pending
        }
    }

    impl Drop for ContextOnDrop {
        fn drop(&mut self) {
            if gort::runtime::Handle::try_current().is_ok() {
                SUCCESS.store(true, SeqCst);
            }
        }
    }

    within(|| {
        let rt = rt();
        rt.spawn(ContextOnDrop);
        drop(rt);
    });
    assert!(SUCCESS.load(SeqCst));
}

// rt_basic.rs
#[test]
fn wake_in_drop_after_panic() {
    struct WakeOnDrop(Option<oneshot::Sender<()>>);

    impl Drop for WakeOnDrop {
        fn drop(&mut self) {
            let _ = self.0.take().unwrap().send(());
        }
    }

    let panic = within(|| {
        std::panic::catch_unwind(|| {
            let rt = rt();
            let (tx1, rx1) = oneshot::channel::<()>();
            let (tx2, rx2) = oneshot::channel::<()>();
            // Two identical tasks: whichever is dropped first wakes the other, so a live task
            // is woken while the "boom" panic unwinds.
            rt.spawn(async move {
                let _wake_on_drop = WakeOnDrop(Some(tx2));
                let _ = rx1.await;
                unreachable!()
            });
            rt.spawn(async move {
                let _wake_on_drop = WakeOnDrop(Some(tx1));
                let _ = rx2.await;
                unreachable!()
            });
            rt.block_on(async {
                gort::yield_now().await;
                panic!("boom");
            });
        })
        .unwrap_err()
    });
    assert_eq!(support::panic_message(panic), "boom");
}

// rt_basic.rs
#[test]
fn spawn_remote() {
    within(|| {
        let out = rt().block_on(async {
            let (tx, rx) = oneshot::channel();
            let handle = gort::spawn(async move {
                std::thread::spawn(move || {
                    std::thread::sleep(Duration::from_millis(10));
                    tx.send("ZOMG").unwrap();
                });
                rx.await.unwrap()
            });
            handle.await.unwrap()
        });
        assert_eq!(out, "ZOMG");
    });
}

// rt_common_before_park.rs
#[test]
fn wake_from_other_thread_block_on() {
    within(|| {
        let rt = rt();
        let handle = rt.handle().clone();
        let notify = Arc::new(tokio::sync::Notify::new());
        let notify2 = notify.clone();
        let th = std::thread::spawn(move || {
            // Give the main thread time to park.
            std::thread::sleep(Duration::from_millis(5));
            handle.block_on(async move {
                notify2.notify_one();
            });
        });
        rt.block_on(async {
            notify.notified().await;
        });
        th.join().unwrap();
    });
}

// rt_shutdown_err.rs: a listener of a runtime that was dropped fails its accept in another
// runtime, with an error that says so (gort has no `is_rt_shutdown_err`).
#[test]
fn test_is_rt_shutdown_err() {
    let err = within(|| {
        let rt1 = rt();
        let rt2 = rt();
        let listener =
            rt1.block_on(async { gort::net::TcpListener::bind("127.0.0.1:0").await.unwrap() });
        drop(rt1);
        rt2.block_on(async { listener.accept().await.unwrap_err() })
    });
    // Go's `net.ErrClosed` text: the runtime's drop closed the socket.
    assert!(err.to_string().contains("closed"), "{err}");
}

// rt_shutdown_err.rs: a `JoinError` converts into an `io::Error` (as Tokio's does).
#[test]
fn test_join_error_panic() {
    let io_err: std::io::Error = within(|| {
        let rt = rt();
        let handle = rt.spawn(async {
            panic!("oops");
        });
        rt.block_on(handle).unwrap_err().into()
    });
    assert!(!io_err.to_string().contains("shut down"), "{io_err}");
    let join_err = io_err.into_inner().unwrap().downcast::<gort::JoinError>();
    assert!(join_err.unwrap().is_panic());
}

// rt_shutdown_err.rs
#[test]
fn test_join_error_cancelled() {
    let io_err: std::io::Error = within(|| {
        let rt = rt();
        let handle = rt.spawn(async {
            std::future::pending::<()>().await;
        });
        handle.abort();
        rt.block_on(handle).unwrap_err().into()
    });
    assert!(io_err.to_string().contains("cancelled"), "{io_err}");
}

/// rt_busy_tick.rs: the runtime always has runnable tasks (8 that only yield), so its Ps never
/// park; echo traffic must still complete.
fn busy_runtime_gets_every_event(rt: gort::Runtime) {
    within(move || {
        for _ in 0..8 {
            rt.spawn(async {
                loop {
                    gort::yield_now().await;
                }
            });
        }
        rt.block_on(async {
            let listener = gort::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            let addr = listener.local_addr().unwrap();
            gort::spawn(async move {
                loop {
                    let (s, _) = listener.accept().await.unwrap();
                    gort::spawn(async move {
                        let mut buf = [0u8; 4];
                        while s.read_exact(&mut buf).await.is_ok() {
                            s.write_all(&buf).await.unwrap();
                        }
                    });
                }
            });
            let clients: Vec<_> = (0..16)
                .map(|_| {
                    gort::spawn(async move {
                        let s = gort::net::TcpStream::connect(addr).await.unwrap();
                        for _ in 0..16 {
                            s.write_all(b"ping").await.unwrap();
                            s.read_exact(&mut [0u8; 4]).await.unwrap();
                        }
                    })
                })
                .collect();
            let all = async {
                for c in clients {
                    c.await.unwrap();
                }
            };
            gort::time::timeout(Duration::from_secs(20), all)
                .await
                .expect("echo round trips did not finish");
        });
        // The spinners never end: the runtime's drop cancels them at their next yield.
        drop(rt);
    });
}

// rt_busy_tick.rs (`current_thread_busy_tick`: one P)
#[test]
fn current_thread_busy_tick() {
    busy_runtime_gets_every_event(gort::Builder::new().procs(1).build().unwrap());
}

// rt_busy_tick.rs (`multi_thread_busy_tick`; two Ps here)
#[test]
fn multi_thread_busy_tick() {
    busy_runtime_gets_every_event(gort::Builder::new().procs(2).build().unwrap());
}

const EXHAUST_CHILD: &str = "GORT_TOKIO_RT_BASIC_EXHAUST";

// rt_blocking_thread_exhaust.rs, in a child process (its thread limit is the process's):
// `spawn_blocking` when the OS refuses a thread panics, never hangs. Skipped, as Tokio's is,
// where the limit is not enforced (root, some containers); run as an unprivileged user
// (`setpriv --reuid=65534`), the child panics with "gort: cannot start a blocking thread".
#[test]
fn spawn_blocking_with_only_scheduler_workers() {
    let run: ChildRun = support::run_child(
        "spawn_blocking_with_only_scheduler_workers_child",
        EXHAUST_CHILD,
        Duration::from_secs(30),
        "spawn_blocking hung when no thread could start",
    );
    assert!(run.status.success(), "{}\n{}", run.stdout, run.stderr);
}

#[test]
#[ignore = "run by spawn_blocking_with_only_scheduler_workers"]
fn spawn_blocking_with_only_scheduler_workers_child() {
    if std::env::var(EXHAUST_CHILD).is_err() {
        return;
    }
    // gort starts its Ms as work comes (Go's rule), not all at `build`: run a task on each
    // P first, so that the limit below leaves the runtime its threads.
    let rt = gort::Builder::new().procs(2).build().unwrap();
    rt.block_on(async {
        let spin = || gort::spawn(async { std::thread::sleep(Duration::from_millis(20)) });
        let (a, b) = (spin(), spin());
        a.await.unwrap();
        b.await.unwrap();
    });
    let threads = std::fs::read_dir("/proc/self/task").unwrap().count();
    let lim = libc::rlimit {
        rlim_cur: threads as libc::rlim_t,
        rlim_max: threads as libc::rlim_t,
    };
    // SAFETY: setrlimit reads `lim`, valid for the call.
    assert_eq!(unsafe { libc::setrlimit(libc::RLIMIT_NPROC, &lim) }, 0);
    match std::thread::Builder::new().spawn(|| {}) {
        Ok(h) => {
            let _ = h.join();
            println!("skip: setrlimit did not prevent thread creation");
            return;
        }
        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
        Err(e) => panic!("unexpected thread-spawn error: {e}"),
    }
    let res = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        rt.block_on(async {
            gort::time::timeout(Duration::from_secs(5), gort::spawn_blocking(|| 42u32)).await
        })
    }));
    let msg = match res {
        Err(p) => support::panic_message(p),
        Ok(Err(_)) => panic!("spawn_blocking timed out"),
        Ok(Ok(_)) => panic!("spawn_blocking unexpectedly succeeded"),
    };
    assert!(
        msg.contains("cannot start a blocking thread"),
        "unexpected panic: {msg}"
    );
}
