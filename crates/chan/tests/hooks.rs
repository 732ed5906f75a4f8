//! The two hidden hooks gort's timers use: `Receiver::set_drop_hook` and
//! `Sender::take_buffered`.

mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::Poll;

use common::poll_once;
use gort_chan::{bounded, unbounded, DropHook, TrySendError};

/// A drop hook that counts its runs.
#[derive(Default)]
struct Count(AtomicUsize);

impl DropHook for Count {
    fn last_receiver_dropped(&self) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

fn counter() -> (Arc<Count>, Arc<dyn DropHook>) {
    let n = Arc::new(Count::default());
    (n.clone(), n)
}

/// A drop hook that checks it runs outside the channel's lock.
struct TrySend(gort_chan::Sender<u8>, Arc<Count>);

impl DropHook for TrySend {
    fn last_receiver_dropped(&self) {
        // Would deadlock if the hook ran under the channel lock.
        assert_eq!(self.0.try_send(1), Err(TrySendError::Closed(1)));
        assert!(self.0.is_closed());
        self.1.last_receiver_dropped();
    }
}

#[test]
fn drop_hook_runs_once_when_the_last_receiver_drops() {
    let (tx, rx) = bounded::<u8>(1);
    let (runs, hook) = counter();
    rx.set_drop_hook(hook);
    let rx2 = rx.clone();
    let rx3 = rx2.clone();
    drop(rx);
    drop(rx2);
    assert_eq!(
        runs.0.load(Ordering::SeqCst),
        0,
        "a receiver is still alive"
    );
    drop(tx);
    assert_eq!(runs.0.load(Ordering::SeqCst), 0, "senders do not matter");
    drop(rx3);
    assert_eq!(runs.0.load(Ordering::SeqCst), 1);
}

#[test]
fn drop_hook_replaced_runs_only_the_new_one() {
    let (_tx, rx) = bounded::<u8>(1);
    let (old_runs, old) = counter();
    let (new_runs, new) = counter();
    rx.set_drop_hook(old);
    rx.set_drop_hook(new);
    drop(rx);
    assert_eq!(old_runs.0.load(Ordering::SeqCst), 0);
    assert_eq!(new_runs.0.load(Ordering::SeqCst), 1);
}

#[test]
fn drop_hook_runs_outside_the_lock() {
    let (tx, rx) = bounded::<u8>(1);
    let tx2 = tx.clone();
    let (runs, _) = counter();
    rx.set_drop_hook(Arc::new(TrySend(tx2, runs.clone())));
    drop(rx);
    assert_eq!(runs.0.load(Ordering::SeqCst), 1);
    drop(tx);
}

#[test]
fn take_buffered_drops_and_counts_buffered_values() {
    let marker = Arc::new(());
    let (tx, rx) = bounded(3);
    for _ in 0..3 {
        tx.try_send(marker.clone()).unwrap();
    }
    assert_eq!(Arc::strong_count(&marker), 4);
    assert_eq!(tx.take_buffered(), 3);
    assert_eq!(Arc::strong_count(&marker), 1, "the values were dropped");
    assert_eq!((tx.len(), rx.len()), (0, 0));
    assert_eq!(tx.take_buffered(), 0);
    assert!(rx.try_recv().is_err());
}

#[test]
fn take_buffered_single_value_like_a_timer() {
    let (tx, rx) = bounded::<u64>(1);
    tx.try_send(42).unwrap();
    assert_eq!(tx.take_buffered(), 1);
    // The stale value is gone; the next one is received.
    tx.try_send(43).unwrap();
    assert_eq!(rx.try_recv(), Ok(43));
}

#[test]
fn take_buffered_lets_a_parked_sender_in() {
    let (tx, rx) = bounded(1);
    tx.try_send(1).unwrap();
    let mut parked = tx.send(2);
    assert!(poll_once(&mut parked).is_pending());
    assert_eq!(tx.take_buffered(), 1);
    assert_eq!(poll_once(&mut parked), Poll::Ready(Ok(())));
    assert_eq!(rx.try_recv(), Ok(2));
}

#[test]
fn take_buffered_leaves_parked_receivers_alone() {
    let (tx, rx) = bounded::<u8>(0);
    let mut recv = rx.recv();
    assert!(poll_once(&mut recv).is_pending());
    assert_eq!(tx.take_buffered(), 0);
    assert_eq!(tx.try_send(5), Ok(()));
    assert_eq!(poll_once(&mut recv), Poll::Ready(Some(5)));
}

#[test]
fn take_buffered_on_unbounded() {
    let (tx, _rx) = unbounded();
    for i in 0..100 {
        tx.try_send(i).unwrap();
    }
    assert_eq!(tx.take_buffered(), 100);
    assert!(tx.is_empty());
}

#[test]
fn take_buffered_reclaims_a_value_handed_to_an_unpolled_receiver() {
    // A receiver parks; a value is handed to it; before its owner polls again, the timer layer
    // drains the channel (Timer::stop). The value must be taken back, and dropping the receive
    // future afterwards must not resurrect it (a stale timer value, go#37196).
    let (tx, rx) = bounded::<u8>(1);
    let mut fut = rx.recv();
    assert!(poll_once(&mut fut).is_pending());
    tx.try_send(7).unwrap();
    assert_eq!(tx.take_buffered(), 1, "the handed value was not reclaimed");
    drop(fut);
    assert!(rx.try_recv().is_err(), "a drained value came back");
    // The channel still works, and a re-polled receiver gets the next value.
    let mut fut = rx.recv();
    assert!(poll_once(&mut fut).is_pending());
    tx.try_send(8).unwrap();
    assert_eq!(poll_once(&mut fut), Poll::Ready(Some(8)));
}

#[test]
fn a_reclaimed_receiver_parks_again_and_gets_the_next_value() {
    let (tx, rx) = bounded::<u8>(1);
    let mut fut = rx.recv();
    assert!(poll_once(&mut fut).is_pending());
    tx.try_send(1).unwrap();
    assert_eq!(tx.take_buffered(), 1);
    assert!(
        poll_once(&mut fut).is_pending(),
        "woken spuriously, parks again"
    );
    tx.try_send(2).unwrap();
    assert_eq!(poll_once(&mut fut), Poll::Ready(Some(2)));
}
