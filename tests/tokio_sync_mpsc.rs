//! Tokio's `tests/sync_mpsc.rs` (and the channel cases of `tests/sync_oneshot.rs`), ported to
//! `gort::chan`: each test keeps its Tokio name and a comment naming its file, and runs under
//! a watchdog. Tokio's `mpsc::channel(n)` is `gort::chan::bounded(n)`, `unbounded_channel` is
//! `unbounded`, `oneshot::channel` is `bounded(1)` used once.
//!
//! Skipped, where gort deliberately differs (design/CHANNELS.md, Go's `chan`):
//! - the `reserve*`/`Permit`/`OwnedPermit` tests: gort's channel has no permits (a Go send
//!   either hands over its value or waits with it);
//! - `recv_many`, `send_timeout`, `WeakSender`, `max_capacity`/`test_tx_capacity`,
//!   `blocking_send`/`blocking_recv`: no such API (a plain thread uses
//!   `futures::executor::block_on`, ported below as the blocking cases);
//! - `buffer_gteq_one`: `bounded(0)` is Go's unbuffered channel, not a panic (ported below as
//!   a rendezvous check instead);
//! - `try_recv_after_receiver_close`: Tokio's `rx.close()` lets senders' buffered values
//!   drain, as gort does; the case is ported, the permit variant is not (no permits).

mod support;

use futures::FutureExt;
use gort::chan::{bounded, unbounded, TryRecvError, TrySendError};
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::Arc;
use std::time::Duration;
use support::within;

/// A `#[tokio::test]` body: a task on a runtime of `procs` Ps, under the watchdog.
fn rt<Fut>(procs: usize, body: impl FnOnce() -> Fut + Send + 'static)
where
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    within(move || {
        let rt = gort::Builder::new().procs(procs).build().unwrap();
        rt.block_on(rt.spawn(body())).unwrap()
    })
}

// sync_mpsc.rs
#[test]
fn send_recv_with_buffer() {
    rt(1, || async {
        let (tx, rx) = bounded::<i32>(16);
        tx.send(1).await.unwrap();
        tx.try_send(2).unwrap();
        drop(tx);
        assert_eq!(rx.recv().await, Some(1));
        assert_eq!(rx.recv().await, Some(2));
        assert!(rx.recv().await.is_none());
    });
}

// sync_mpsc.rs
#[test]
fn send_recv_stream_with_buffer() {
    rt(2, || async {
        use futures::StreamExt;
        let (tx, rx) = bounded::<i32>(16);
        let mut rx = Box::pin(rx);
        gort::spawn(async move {
            tx.send(1).await.unwrap();
            tx.send(2).await.unwrap();
        });
        assert_eq!(Some(1), rx.next().await);
        assert_eq!(Some(2), rx.next().await);
        assert_eq!(None, rx.next().await);
    });
}

// sync_mpsc.rs
#[test]
fn async_send_recv_with_buffer() {
    rt(2, || async {
        let (tx, rx) = bounded(16);
        gort::spawn(async move {
            tx.send(1).await.unwrap();
            tx.send(2).await.unwrap();
        });
        assert_eq!(Some(1), rx.recv().await);
        assert_eq!(Some(2), rx.recv().await);
        assert_eq!(None, rx.recv().await);
    });
}

// sync_mpsc.rs (`buffer_gteq_one`: Tokio panics on 0; gort's 0 is Go's unbuffered channel)
#[test]
fn buffer_gteq_one() {
    rt(2, || async {
        let (tx, rx) = bounded::<i32>(0);
        // Nobody receives: an unbuffered channel has no room.
        assert!(tx.try_send(1).unwrap_err().is_full());
        let sent = Arc::new(AtomicUsize::new(0));
        let s = sent.clone();
        let h = gort::spawn(async move {
            tx.send(7).await.unwrap();
            s.store(1, SeqCst);
        });
        gort::time::sleep(Duration::from_millis(20)).await;
        // The send waits for a receiver to take its value.
        assert_eq!(sent.load(SeqCst), 0);
        assert_eq!(rx.recv().await, Some(7));
        h.await.unwrap();
        assert_eq!(sent.load(SeqCst), 1);
        assert_eq!(rx.recv().await, None);
    });
}

// sync_mpsc.rs
#[test]
fn send_recv_unbounded() {
    rt(1, || async {
        let (tx, rx) = unbounded::<i32>();
        tx.try_send(1).unwrap();
        tx.try_send(2).unwrap();
        assert_eq!(rx.recv().await, Some(1));
        assert_eq!(rx.recv().await, Some(2));
        drop(tx);
        assert!(rx.recv().await.is_none());
    });
}

// sync_mpsc.rs
#[test]
fn async_send_recv_unbounded() {
    rt(2, || async {
        let (tx, rx) = unbounded();
        gort::spawn(async move {
            tx.try_send(1).unwrap();
            tx.try_send(2).unwrap();
        });
        assert_eq!(Some(1), rx.recv().await);
        assert_eq!(Some(2), rx.recv().await);
        assert_eq!(None, rx.recv().await);
    });
}

// sync_mpsc.rs
#[test]
fn send_recv_stream_unbounded() {
    rt(2, || async {
        use futures::StreamExt;
        let (tx, rx) = unbounded::<i32>();
        let mut rx = Box::pin(rx);
        gort::spawn(async move {
            tx.try_send(1).unwrap();
            tx.try_send(2).unwrap();
        });
        assert_eq!(Some(1), rx.next().await);
        assert_eq!(Some(2), rx.next().await);
        assert_eq!(None, rx.next().await);
    });
}

fn is_debug<T: std::fmt::Debug>(_: &T) {}

// sync_mpsc.rs
#[test]
fn no_t_bounds_buffer() {
    struct NoImpls;
    rt(1, || async {
        let (tx, rx) = bounded(100);
        is_debug(&tx);
        is_debug(&rx);
        assert!(tx.clone().try_send(NoImpls).is_ok());
        assert!(rx.recv().await.is_some());
    });
}

// sync_mpsc.rs
#[test]
fn no_t_bounds_unbounded() {
    struct NoImpls;
    rt(1, || async {
        let (tx, rx) = unbounded();
        is_debug(&tx);
        is_debug(&rx);
        assert!(tx.clone().try_send(NoImpls).is_ok());
        assert!(rx.recv().await.is_some());
    });
}

// sync_mpsc.rs (with `send` in place of `reserve`: the waiting send is woken by the receive)
#[test]
fn send_recv_buffer_limited() {
    within(|| {
        futures::executor::block_on(async {
            let (tx, rx) = bounded::<i32>(1);
            tx.send(1).await.unwrap();
            let mut p2 = support_mock(tx.send(2));
            assert!(p2.poll().is_pending());
            assert_eq!(rx.recv().await, Some(1));
            assert!(p2.is_woken());
            // Go: the waiting sender's value went into the buffer as the receive made room.
            assert!(tx.try_send(1337).is_err());
            assert!(p2.poll().is_ready());
            assert_eq!(rx.recv().await, Some(2));
        })
    });
}

#[path = "support/mock_task.rs"]
mod mock_task;
use mock_task::mock as support_mock;

// sync_mpsc.rs
#[test]
fn recv_close_gets_none_idle() {
    rt(1, || async {
        let (tx, rx) = bounded::<i32>(10);
        rx.close();
        assert!(rx.recv().await.is_none());
        assert!(tx.send(1).await.is_err());
    });
}

// sync_mpsc.rs
#[test]
fn tx_close_gets_none() {
    rt(1, || async {
        let (_, rx) = bounded::<i32>(10);
        assert!(rx.recv().await.is_none());
    });
}

// sync_mpsc.rs
#[test]
fn try_send_fail() {
    rt(1, || async {
        let (tx, rx) = bounded(1);
        tx.try_send("hello").unwrap();
        match tx.try_send("fail") {
            Err(TrySendError::Full(v)) => assert_eq!(v, "fail"),
            other => panic!("{other:?}"),
        }
        assert_eq!(rx.recv().await, Some("hello"));
        tx.try_send("goodbye").unwrap();
        drop(tx);
        assert_eq!(rx.recv().await, Some("goodbye"));
        assert!(rx.recv().await.is_none());
    });
}

// sync_mpsc.rs
#[test]
fn try_send_fail_with_try_recv() {
    let (tx, rx) = bounded(1);
    tx.try_send("hello").unwrap();
    assert!(matches!(tx.try_send("fail"), Err(TrySendError::Full(_))));
    assert_eq!(rx.try_recv(), Ok("hello"));
    tx.try_send("goodbye").unwrap();
    drop(tx);
    assert_eq!(rx.try_recv(), Ok("goodbye"));
    assert_eq!(rx.try_recv(), Err(TryRecvError::Closed));
}

// sync_mpsc.rs (`reserve` is `send`: it fails at once and gives the value back)
#[test]
fn dropping_rx_closes_channel() {
    rt(1, || async {
        let (tx, rx) = bounded(100);
        let msg = Arc::new(());
        tx.try_send(msg.clone()).unwrap();
        drop(rx);
        let back = tx.send(msg.clone()).await.unwrap_err().into_inner();
        drop(back);
        // The buffered value was dropped with the last receiver.
        assert_eq!(1, Arc::strong_count(&msg));
    });
}

// sync_mpsc.rs
#[test]
fn dropping_rx_closes_channel_for_try() {
    let (tx, rx) = bounded(100);
    let msg = Arc::new(());
    tx.try_send(msg.clone()).unwrap();
    drop(rx);
    assert!(matches!(
        tx.try_send(msg.clone()),
        Err(TrySendError::Closed(_))
    ));
    assert_eq!(1, Arc::strong_count(&msg));
}

// sync_mpsc.rs (a parked `send` in place of the parked `reserve`: dropping the receiver wakes
// it and drops the waker, whose `Drop` uses the channel, outside the channel's lock)
#[test]
fn dropping_rx_drops_sender_wakers_outside_lock() {
    use std::future::Future;
    use std::task::{Context, Poll, Wake, Waker};
    struct TxInWaker(std::sync::Mutex<Option<gort::chan::Sender<i32>>>);
    impl Wake for TxInWaker {
        fn wake(self: Arc<Self>) {}
    }
    impl Drop for TxInWaker {
        fn drop(&mut self) {
            // Uses the channel (takes its lock) from the waker's `Drop`.
            if let Some(tx) = self.0.lock().unwrap().take() {
                assert!(tx.try_send(5).is_err());
            }
        }
    }
    within(|| {
        let (tx, rx) = bounded(1);
        tx.try_send(1).unwrap();
        let mut send = Box::pin(tx.send(2));
        let waker = Waker::from(Arc::new(TxInWaker(std::sync::Mutex::new(Some(tx.clone())))));
        assert!(send
            .as_mut()
            .poll(&mut Context::from_waker(&waker))
            .is_pending());
        drop(waker);
        drop(rx);
        let mut cx = Context::from_waker(Waker::noop());
        assert!(matches!(send.as_mut().poll(&mut cx), Poll::Ready(Err(_))));
    });
}

// sync_mpsc.rs
#[test]
fn unconsumed_messages_are_dropped() {
    let msg = Arc::new(());
    let (tx, rx) = bounded(100);
    tx.try_send(msg.clone()).unwrap();
    assert_eq!(2, Arc::strong_count(&msg));
    drop((tx, rx));
    assert_eq!(1, Arc::strong_count(&msg));
}

// sync_mpsc.rs (`blocking_recv` from a plain thread: `futures::executor::block_on`)
#[test]
fn blocking_recv() {
    within(|| {
        let (tx, rx) = bounded::<u8>(1);
        let sync_code = std::thread::spawn(move || {
            assert_eq!(Some(10), futures::executor::block_on(rx.recv()));
        });
        let rt = gort::Builder::new().procs(1).build().unwrap();
        rt.block_on(async move {
            let _ = tx.send(10).await;
        });
        sync_code.join().unwrap()
    });
}

// sync_mpsc.rs (`blocking_send` from a plain thread: `futures::executor::block_on`)
#[test]
fn blocking_send() {
    within(|| {
        let (tx, rx) = bounded::<u8>(1);
        let sync_code = std::thread::spawn(move || {
            futures::executor::block_on(tx.send(10)).unwrap();
        });
        let rt = gort::Builder::new().procs(1).build().unwrap();
        rt.block_on(async move {
            assert_eq!(Some(10), rx.recv().await);
        });
        sync_code.join().unwrap()
    });
}

// sync_mpsc.rs
#[test]
fn try_recv_bounded() {
    let (tx, rx) = bounded(5);
    for _ in 0..5 {
        tx.try_send("hello").unwrap();
    }
    assert!(tx.try_send("hello").is_err());
    for _ in 0..5 {
        assert_eq!(Ok("hello"), rx.try_recv());
    }
    assert_eq!(Err(TryRecvError::Empty), rx.try_recv());

    for _ in 0..4 {
        tx.try_send("hello").unwrap();
    }
    assert_eq!(Ok("hello"), rx.try_recv());
    tx.try_send("hello").unwrap();
    tx.try_send("hello").unwrap();
    assert!(tx.try_send("hello").is_err());
    for _ in 0..5 {
        assert_eq!(Ok("hello"), rx.try_recv());
    }
    assert_eq!(Err(TryRecvError::Empty), rx.try_recv());

    for _ in 0..3 {
        tx.try_send("hello").unwrap();
    }
    drop(tx);
    for _ in 0..3 {
        assert_eq!(Ok("hello"), rx.try_recv());
    }
    assert_eq!(Err(TryRecvError::Closed), rx.try_recv());
}

// sync_mpsc.rs
#[test]
fn try_recv_unbounded() {
    for num in 0..100 {
        let (tx, rx) = unbounded();
        for i in 0..num {
            tx.try_send(i).unwrap();
        }
        for i in 0..num {
            assert_eq!(rx.try_recv(), Ok(i));
        }
        assert_eq!(rx.try_recv(), Err(TryRecvError::Empty));
        drop(tx);
        assert_eq!(rx.try_recv(), Err(TryRecvError::Closed));
    }
}

// sync_mpsc.rs
#[test]
fn try_recv_after_receiver_close() {
    let (_tx, rx) = bounded::<()>(5);
    assert_eq!(Err(TryRecvError::Empty), rx.try_recv());
    rx.close();
    assert_eq!(Err(TryRecvError::Closed), rx.try_recv());
}

// sync_mpsc.rs
#[test]
fn try_recv_close_while_empty_bounded() {
    let (tx, rx) = bounded::<()>(5);
    assert_eq!(Err(TryRecvError::Empty), rx.try_recv());
    drop(tx);
    assert_eq!(Err(TryRecvError::Closed), rx.try_recv());
}

// sync_mpsc.rs
#[test]
fn try_recv_close_while_empty_unbounded() {
    let (tx, rx) = unbounded::<()>();
    assert_eq!(Err(TryRecvError::Empty), rx.try_recv());
    drop(tx);
    assert_eq!(Err(TryRecvError::Closed), rx.try_recv());
}

// sync_oneshot.rs (`send_recv`: `bounded(1)` used once; the send never waits)
#[test]
fn send_recv() {
    let (tx, rx) = bounded(1);
    let mut rx = support_mock(async move { rx.recv().await });
    assert!(rx.poll().is_pending());
    tx.try_send(1).unwrap();
    assert!(rx.is_woken());
    assert_eq!(rx.poll(), std::task::Poll::Ready(Some(1)));
}

// sync_oneshot.rs
#[test]
fn close_tx() {
    let (tx, rx) = bounded::<i32>(1);
    let mut rx = support_mock(async move { rx.recv().await });
    assert!(rx.poll().is_pending());
    drop(tx);
    assert!(rx.is_woken());
    assert_eq!(rx.poll(), std::task::Poll::Ready(None));
}

// sync_oneshot.rs (`close_rx`: the send fails at once, with the value given back)
#[test]
fn close_rx() {
    let (tx, rx) = bounded::<i32>(1);
    drop(rx);
    assert!(tx.is_closed());
    assert_eq!(tx.try_send(1).unwrap_err().into_inner(), 1);
}

// sync_oneshot.rs (`drops_tasks`: a dropped receive future leaves nothing behind)
#[test]
fn drops_tasks() {
    let (tx, rx) = bounded::<i32>(1);
    let mut rx_task = support_mock(async move { rx.recv().await });
    assert!(rx_task.poll().is_pending());
    drop(rx_task);
    // The receiver went with the future: the channel is closed and the send fails.
    assert!(tx.try_send(1).is_err());
}

/// Counts drops of the values sent.
struct Counted(Arc<AtomicUsize>);
impl Drop for Counted {
    fn drop(&mut self) {
        self.0.fetch_add(1, SeqCst);
    }
}

// sync_oneshot.rs (`receiver_changes_task` shape, for drops: each value dropped exactly once,
// whether received, buffered at the channel's drop, or refused by a closed channel)
#[test]
fn values_dropped_exactly_once() {
    let drops = Arc::new(AtomicUsize::new(0));
    let (tx, rx) = bounded(4);
    for _ in 0..3 {
        tx.try_send(Counted(drops.clone())).unwrap();
    }
    drop(rx.try_recv().unwrap());
    assert_eq!(drops.load(SeqCst), 1);
    rx.close();
    let refused = tx.try_send(Counted(drops.clone())).unwrap_err();
    assert_eq!(drops.load(SeqCst), 1);
    drop(refused);
    assert_eq!(drops.load(SeqCst), 2);
    // Two still buffered: they drain after close, then the rest drop with the channel.
    drop(rx.try_recv().unwrap());
    assert_eq!(drops.load(SeqCst), 3);
    drop((tx, rx));
    assert_eq!(drops.load(SeqCst), 4);
}

// sync_mpsc.rs (many senders racing a close: every value is either received or given back,
// and recv ends with None once all is drained)
#[test]
fn many_senders_race_close() {
    rt(2, || async {
        for _ in 0..20 {
            let drops = Arc::new(AtomicUsize::new(0));
            let (tx, rx) = bounded::<Counted>(2);
            let refused = Arc::new(AtomicUsize::new(0));
            let mut hs = Vec::new();
            for _ in 0..8 {
                let (tx, drops, refused) = (tx.clone(), drops.clone(), refused.clone());
                hs.push(gort::spawn(async move {
                    for _ in 0..10 {
                        if tx.send(Counted(drops.clone())).await.is_err() {
                            refused.fetch_add(1, SeqCst);
                        }
                    }
                }));
            }
            drop(tx);
            let mut got = 0;
            for _ in 0..5 {
                if rx.recv().await.is_some() {
                    got += 1;
                }
            }
            rx.close();
            while rx.recv().await.is_some() {
                got += 1;
            }
            for h in hs {
                h.await.unwrap();
            }
            assert_eq!(got + refused.load(SeqCst), 80);
            drop(rx);
            assert_eq!(drops.load(SeqCst), 80);
        }
    });
}

// sync_mpsc.rs (the closure case of a recv parked on an empty channel when the last sender
// drops from another thread: woken with None)
#[test]
fn recv_woken_by_last_sender_drop() {
    rt(2, || async {
        let (tx, rx) = bounded::<i32>(1);
        let tx2 = tx.clone();
        let t = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(10));
            drop(tx);
            std::thread::sleep(Duration::from_millis(10));
            drop(tx2);
        });
        assert_eq!(rx.recv().await, None);
        assert!(rx.recv().now_or_never() == Some(None));
        t.join().unwrap();
    });
}
