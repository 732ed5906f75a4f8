//! FIFO order survives a receiver that a send skipped while its `select!` was polling
//! (invariant 5 of `core.rs`): such a receiver stays parked while values are buffered, and a
//! later sender must not hand it a newer value ahead of them.

mod common;

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use common::poll_once;
use gort_chan::{bounded, select, Receiver, Sender};

/// A `select!` arm that never completes; on the first poll after `go` is set it runs
/// `during_poll` on another thread, while the select it belongs to is polling.
struct WhilePolling<F> {
    go: Arc<AtomicBool>,
    during_poll: Option<F>,
}

impl<F: FnOnce() + Send + Unpin + 'static> Future for WhilePolling<F> {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<()> {
        if self.go.load(Ordering::SeqCst) {
            if let Some(f) = self.during_poll.take() {
                std::thread::spawn(f).join().unwrap();
            }
        }
        Poll::Pending
    }
}

/// A select receiving on `rx`, polled so that its receive parks and then stays queued while
/// `during_poll` runs on another thread in the select's next poll (which parks again).
fn select_skipped_while_polling(
    rx: Receiver<u32>,
    during_poll: impl FnOnce() + Send + Unpin + 'static,
) -> Pin<Box<dyn Future<Output = Option<u32>>>> {
    let go = Arc::new(AtomicBool::new(false));
    let arm = WhilePolling {
        go: go.clone(),
        during_poll: Some(during_poll),
    };
    let mut sel: Pin<Box<dyn Future<Output = Option<u32>>>> = Box::pin(async move {
        select! {
            biased;
            v = rx.recv() => v,
            _ = arm => None,
        }
    });
    assert!(poll_once(&mut sel).is_pending()); // the receive parks
    go.store(true, Ordering::SeqCst);
    assert!(poll_once(&mut sel).is_pending()); // `during_poll` runs; the receive stays queued
    sel
}

/// Fills the buffer of a channel of capacity 2 with 1 and 2.
fn fill(tx: &Sender<u32>) -> impl FnOnce() + Send + Unpin + 'static {
    let tx = tx.clone();
    move || {
        tx.try_send(1).unwrap();
        tx.try_send(2).unwrap();
    }
}

#[test]
fn try_send_to_a_skipped_receiver_keeps_fifo_order() {
    let (tx, rx) = bounded::<u32>(2);
    let rx2 = rx.clone();
    let mut sel = select_skipped_while_polling(rx, fill(&tx));
    tx.try_send(3).unwrap();
    assert_eq!(poll_once(&mut sel), Poll::Ready(Some(1)));
    assert_eq!(rx2.try_recv(), Ok(2));
    assert_eq!(rx2.try_recv(), Ok(3));
}

#[test]
fn parked_send_to_a_skipped_receiver_keeps_fifo_order() {
    let (tx, rx) = bounded::<u32>(2);
    let rx2 = rx.clone();
    let tx: &'static Sender<u32> = Box::leak(Box::new(tx));
    let send = Arc::new(Mutex::new(Box::pin(tx.send(3))));
    let parked = send.clone();
    let fill = fill(tx);
    let mut sel = select_skipped_while_polling(rx, move || {
        fill();
        // The buffer is full and the receiver busy: the send parks.
        assert!(poll_once(&mut *parked.lock().unwrap()).is_pending());
    });
    // The parked send looks again (as after a spurious wake-up) and completes the receiver.
    assert_eq!(poll_once(&mut *send.lock().unwrap()), Poll::Ready(Ok(())));
    assert_eq!(poll_once(&mut sel), Poll::Ready(Some(1)));
    assert_eq!(rx2.try_recv(), Ok(2));
    assert_eq!(rx2.try_recv(), Ok(3));
}
