//! The hidden drain gort's timers use: `Sender::take_buffered` (the receive hook is tested in
//! `recv_hook.rs`).

mod common;

use std::sync::Arc;
use std::task::Poll;

use common::poll_once;
use gort_chan::{bounded, unbounded};

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
