//! Tokio's `io_driver.rs` and `io_driver_drop.rs`, ported to gort's netpoller: sockets polled
//! by hand (not by a gort task) with wakers of the test's own, across the runtime's drop.
//! Each test keeps its Tokio name, under a watchdog, on a runtime of one P.
//!
//! Where gort deliberately differs: `accept` returns an error only after one yield
//! (`TcpListener::accept`'s docs: an accept loop that retries at once still lets its P's
//! other tasks run), so a failing accept is `Pending`, already woken, at its first poll and
//! ready at its second ([`poll_past_yield`]).
//!
//! Skipped: `panics_when_io_disabled` (gort's I/O is always on). gort has no `poll_accept`:
//! `shutdown_drops_waker_holding_registration` polls an `accept` future instead, which leaves
//! no waker behind when dropped (its cancel safety), so only the drop of everything after the
//! runtime's is checked.

#[path = "support/mock_task.rs"]
mod mock_task;
mod support;

use gort::net::TcpListener;
use mock_task::mock;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering::SeqCst};
use std::sync::{mpsc, Arc, Mutex};
use std::task::{Context, Poll, Wake, Waker};
use support::within;

fn rt() -> gort::Runtime {
    gort::Builder::new().procs(1).build().unwrap()
}

/// A listener from std's, made inside `rt` (as Tokio's tests do under `rt.enter()`).
fn listener_in(rt: &gort::Runtime) -> TcpListener {
    let _enter = rt.handle().enter();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    TcpListener::from_std(listener).unwrap()
}

/// Polls `task` until it is ready: once more after a yield (a `Pending` that woke itself),
/// never after a `Pending` that did not.
fn poll_past_yield<F: Future>(task: &mut mock_task::Mock<F>) -> Poll<F::Output> {
    match task.poll() {
        Poll::Pending if task.is_woken() => task.poll(),
        other => other,
    }
}

type BoxFuture = Pin<Box<dyn Future<Output = ()> + Send>>;

/// io_driver.rs's `Task`: a future whose waker does nothing.
struct Task {
    future: Mutex<BoxFuture>,
}

impl Wake for Task {
    fn wake(self: Arc<Self>) {}
}

// io_driver.rs
#[test]
fn test_drop_on_notify() {
    within(|| {
        // The waker (the task) is held by the listener's registration, and the task holds
        // the future that holds the listener: a cycle the runtime's drop must break.
        let rt = rt();
        let (addr_tx, addr_rx) = mpsc::channel();
        let task = Arc::new(Task {
            future: Mutex::new(Box::pin(async move {
                let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
                let addr = listener.local_addr().unwrap();
                addr_tx.send(addr).unwrap();
                loop {
                    let _ = listener.accept().await;
                }
            })),
        });
        {
            let _enter = rt.handle().enter();
            let waker = Waker::from(task.clone());
            let mut cx = Context::from_waker(&waker);
            assert!(task
                .future
                .lock()
                .unwrap()
                .as_mut()
                .poll(&mut cx)
                .is_pending());
        }
        let addr = addr_rx.recv().unwrap();
        drop(task);
        let _s = std::net::TcpStream::connect(addr).unwrap();
        rt.block_on(async {});
    });
}

// io_driver_drop.rs
#[test]
fn tcp_doesnt_block() {
    within(|| {
        let rt = rt();
        let listener = listener_in(&rt);
        drop(rt);
        let mut task = mock(async move {
            assert!(listener.accept().await.is_err());
        });
        assert!(poll_past_yield(&mut task).is_ready());
    });
}

// io_driver_drop.rs
#[test]
fn drop_wakes() {
    within(|| {
        let rt = rt();
        let listener = listener_in(&rt);
        let mut task = mock(async move {
            assert!(listener.accept().await.is_err());
        });
        assert!(task.poll().is_pending());
        drop(rt);
        assert!(task.is_woken());
        assert!(poll_past_yield(&mut task).is_ready());
    });
}

/// io_driver_drop.rs's `RegistrationWaker`: a waker that holds the listener.
struct RegistrationWaker {
    _listener: Arc<TcpListener>,
    dropped: Arc<AtomicBool>,
}

impl Wake for RegistrationWaker {
    fn wake(self: Arc<Self>) {}
}

impl Drop for RegistrationWaker {
    fn drop(&mut self) {
        self.dropped.store(true, SeqCst);
    }
}

// io_driver_drop.rs (an `accept` future for `poll_accept`; see the header)
#[test]
fn shutdown_drops_waker_holding_registration() {
    within(|| {
        let rt = rt();
        let listener = Arc::new(listener_in(&rt));
        let dropped = Arc::new(AtomicBool::new(false));
        let task = Arc::new(RegistrationWaker {
            _listener: listener.clone(),
            dropped: dropped.clone(),
        });
        {
            let waker = Waker::from(task.clone());
            let mut cx = Context::from_waker(&waker);
            let mut accept = std::pin::pin!(listener.accept());
            assert!(matches!(accept.as_mut().poll(&mut cx), Poll::Pending));
        }
        drop(listener);
        drop(task);
        drop(rt);
        assert!(dropped.load(SeqCst));
    });
}
