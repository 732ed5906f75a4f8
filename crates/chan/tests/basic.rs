//! Single-threaded behaviour: sends, receives, capacities, closing, errors, `Stream`.

mod common;

use std::task::Poll;

use common::poll_once;
use futures::executor::block_on;
use futures::StreamExt;
use gort_chan::{bounded, unbounded, SendError, TryRecvError, TrySendError};

#[test]
fn smoke_bounded() {
    let (tx, rx) = bounded(2);
    block_on(async {
        tx.send(1).await.unwrap();
        tx.send(2).await.unwrap();
        assert_eq!(tx.try_send(3), Err(TrySendError::Full(3)));
        assert_eq!(rx.recv().await, Some(1));
        assert_eq!(rx.try_recv(), Ok(2));
        assert_eq!(rx.try_recv(), Err(TryRecvError::Empty));
    });
}

#[test]
fn smoke_unbounded() {
    let (tx, rx) = unbounded();
    for i in 0..10_000 {
        tx.try_send(i).unwrap();
    }
    assert_eq!(rx.len(), 10_000);
    for i in 0..10_000 {
        assert_eq!(rx.try_recv(), Ok(i));
    }
    assert!(rx.is_empty());
}

#[test]
fn len_capacity_is_empty() {
    let (tx, rx) = bounded::<u8>(3);
    assert_eq!((tx.capacity(), rx.capacity()), (Some(3), Some(3)));
    assert!(tx.is_empty() && rx.is_empty());
    tx.try_send(1).unwrap();
    tx.try_send(2).unwrap();
    assert_eq!((tx.len(), rx.len()), (2, 2));
    assert!(!rx.is_empty());
    let (tx0, _rx0) = bounded::<u8>(0);
    assert_eq!(tx0.capacity(), Some(0));
    let (txu, _rxu) = unbounded::<u8>();
    assert_eq!(txu.capacity(), None);
}

#[test]
fn unbuffered_try_send_needs_a_waiting_receiver() {
    let (tx, rx) = bounded(0);
    assert_eq!(tx.try_send(1), Err(TrySendError::Full(1)));
    let mut recv = rx.recv();
    assert!(poll_once(&mut recv).is_pending());
    assert_eq!(tx.try_send(2), Ok(()));
    assert_eq!(poll_once(&mut recv), Poll::Ready(Some(2)));
    assert_eq!(
        tx.len(),
        0,
        "an unbuffered hand-off never touches the buffer"
    );
}

#[test]
fn unbuffered_try_recv_takes_from_a_waiting_sender() {
    let (tx, rx) = bounded(0);
    let mut send = tx.send(9);
    assert!(poll_once(&mut send).is_pending());
    assert_eq!(rx.try_recv(), Ok(9));
    assert_eq!(poll_once(&mut send), Poll::Ready(Ok(())));
}

#[test]
fn rendezvous_send_completes_only_after_hand_off() {
    let (tx, rx) = bounded(0);
    let mut send = tx.send("v");
    for _ in 0..3 {
        assert!(poll_once(&mut send).is_pending(), "no receiver yet");
    }
    let mut recv = rx.recv();
    assert_eq!(poll_once(&mut recv), Poll::Ready(Some("v")));
    assert_eq!(poll_once(&mut send), Poll::Ready(Ok(())));
}

#[test]
fn full_sender_is_refilled_in_order() {
    let (tx, rx) = bounded(1);
    tx.try_send(1).unwrap();
    let mut s2 = tx.send(2);
    let mut s3 = tx.send(3);
    assert!(poll_once(&mut s2).is_pending());
    assert!(poll_once(&mut s3).is_pending());
    // Receiving 1 moves 2 (the first parked sender) into the buffer, as Go does.
    assert_eq!(rx.try_recv(), Ok(1));
    assert_eq!(rx.len(), 1);
    assert_eq!(poll_once(&mut s2), Poll::Ready(Ok(())));
    assert!(poll_once(&mut s3).is_pending());
    assert_eq!(rx.try_recv(), Ok(2));
    assert_eq!(rx.try_recv(), Ok(3));
    assert_eq!(poll_once(&mut s3), Poll::Ready(Ok(())));
}

#[test]
fn close_from_sender_drains_then_ends() {
    let (tx, rx) = bounded(2);
    tx.try_send(1).unwrap();
    tx.try_send(2).unwrap();
    tx.close();
    assert!(tx.is_closed() && rx.is_closed());
    assert_eq!(tx.try_send(3), Err(TrySendError::Closed(3)));
    assert_eq!(block_on(tx.send(4)), Err(SendError(4)));
    assert_eq!(block_on(rx.recv()), Some(1));
    assert_eq!(rx.try_recv(), Ok(2));
    assert_eq!(block_on(rx.recv()), None);
    assert_eq!(rx.try_recv(), Err(TryRecvError::Closed));
}

#[test]
fn close_from_receiver_fails_pending_and_future_sends() {
    let (tx, rx) = bounded(1);
    tx.try_send(1).unwrap();
    let mut pending = tx.send(2);
    assert!(poll_once(&mut pending).is_pending());
    rx.close();
    assert_eq!(poll_once(&mut pending), Poll::Ready(Err(SendError(2))));
    assert_eq!(tx.try_send(3), Err(TrySendError::Closed(3)));
    assert_eq!(rx.try_recv(), Ok(1), "buffered values survive the close");
    assert_eq!(rx.try_recv(), Err(TryRecvError::Closed));
}

#[test]
fn close_wakes_pending_receivers_with_none() {
    let (tx, rx) = bounded::<u8>(0);
    let rx2 = rx.clone();
    let mut r1 = rx.recv();
    let mut r2 = rx2.recv();
    assert!(poll_once(&mut r1).is_pending());
    assert!(poll_once(&mut r2).is_pending());
    tx.close();
    assert_eq!(poll_once(&mut r1), Poll::Ready(None));
    assert_eq!(poll_once(&mut r2), Poll::Ready(None));
}

#[test]
fn close_twice_is_a_no_op() {
    let (tx, rx) = bounded::<u8>(1);
    tx.try_send(5).unwrap();
    tx.close();
    rx.close();
    assert_eq!(rx.try_recv(), Ok(5));
}

#[test]
fn dropping_every_sender_closes() {
    let (tx, rx) = bounded::<u8>(1);
    let tx2 = tx.clone();
    let mut recv = rx.recv();
    assert!(poll_once(&mut recv).is_pending());
    drop(tx);
    assert!(!rx.is_closed(), "one sender is left");
    assert!(poll_once(&mut recv).is_pending());
    drop(tx2);
    assert!(rx.is_closed());
    assert_eq!(poll_once(&mut recv), Poll::Ready(None));
}

#[test]
fn dropping_every_receiver_fails_sends_with_the_value() {
    let (tx, rx) = bounded::<String>(0);
    let rx2 = rx.clone();
    let mut pending = tx.send("parked".into());
    assert!(poll_once(&mut pending).is_pending());
    drop(rx);
    assert!(poll_once(&mut pending).is_pending(), "one receiver is left");
    drop(rx2);
    assert!(tx.is_closed());
    match poll_once(&mut pending) {
        Poll::Ready(Err(e)) => assert_eq!(e.into_inner(), "parked"),
        other => panic!("expected the value back, got {other:?}"),
    }
    assert_eq!(
        tx.try_send("x".into()),
        Err(TrySendError::Closed("x".into()))
    );
    assert_eq!(block_on(tx.send("y".into())).unwrap_err().0, "y");
}

#[test]
fn dropping_every_receiver_drops_buffered_values() {
    let marker = std::sync::Arc::new(());
    let (tx, rx) = bounded(2);
    tx.try_send(marker.clone()).unwrap();
    tx.try_send(marker.clone()).unwrap();
    assert_eq!(std::sync::Arc::strong_count(&marker), 3);
    drop(rx);
    assert_eq!(std::sync::Arc::strong_count(&marker), 1);
    assert_eq!(tx.len(), 0);
}

#[test]
fn sends_from_one_sender_arrive_in_order_across_the_buffer_boundary() {
    let (tx, rx) = bounded(3);
    block_on(async {
        let send_all = async {
            for i in 0..100 {
                tx.send(i).await.unwrap();
            }
            drop(tx);
        };
        let recv_all = async {
            let mut got = Vec::new();
            while let Some(v) = rx.recv().await {
                got.push(v);
            }
            got
        };
        let ((), got) = futures::join!(send_all, recv_all);
        assert_eq!(got, (0..100).collect::<Vec<_>>());
    });
}

#[test]
fn stream_yields_values_then_ends() {
    let (tx, rx) = bounded(4);
    block_on(async {
        let producer = async move {
            for i in 0..20 {
                tx.send(i).await.unwrap();
            }
        };
        let (_, got) = futures::join!(producer, rx.collect::<Vec<i32>>());
        assert_eq!(got, (0..20).collect::<Vec<_>>());
    });
}

#[test]
fn stream_keeps_a_handed_value_across_polls_and_drop_returns_it() {
    let (tx, rx) = bounded::<u8>(0);
    let mut rx1 = rx.clone();
    assert!(poll_once(&mut rx1.next()).is_pending());
    // The stream is parked: the sender hands the value to it.
    assert_eq!(tx.try_send(1), Ok(()));
    // Dropping that receiver puts the value back for the other one.
    drop(rx1);
    assert_eq!(rx.try_recv(), Ok(1));
}

#[test]
fn errors_display_debug_and_into_inner() {
    let e = SendError(vec![1]);
    assert_eq!(e.to_string(), "sending on a closed channel");
    assert_eq!(format!("{e:?}"), "SendError(..)");
    assert_eq!(e.clone().into_inner(), vec![1]);
    let full = TrySendError::Full(1);
    let closed = TrySendError::Closed(2);
    assert!(full.is_full() && !full.is_closed() && closed.is_closed());
    assert_eq!(full.to_string(), "sending on a full channel");
    assert_eq!(closed.to_string(), "sending on a closed channel");
    assert_eq!(format!("{full:?}"), "Full(..)");
    assert_eq!((full.into_inner(), closed.into_inner()), (1, 2));
    assert_eq!(TrySendError::from(SendError(3)), TrySendError::Closed(3));
    assert_eq!(
        TryRecvError::Empty.to_string(),
        "receiving on an empty channel"
    );
    assert!(TryRecvError::Closed.is_closed() && TryRecvError::Empty.is_empty());
    let boxed: Box<dyn std::error::Error + Send + Sync> = Box::new(SendError(()));
    assert_eq!(boxed.to_string(), "sending on a closed channel");
}

#[test]
fn handles_and_futures_are_debug() {
    let (tx, rx) = bounded::<u8>(2);
    tx.try_send(1).unwrap();
    assert_eq!(
        format!("{tx:?}"),
        "Sender { len: 1, capacity: Some(2), closed: false }"
    );
    assert!(format!("{rx:?}").starts_with("Receiver { len: 1"));
    assert!(format!("{:?}", tx.send(1)).starts_with("SendFuture"));
    assert!(format!("{:?}", rx.recv()).starts_with("RecvFuture"));
    assert!(tx.same_channel(&tx.clone()) && rx.same_channel(&rx.clone()));
    let (other, _r) = bounded::<u8>(2);
    assert!(!tx.same_channel(&other));
}

#[test]
#[should_panic(expected = "polled after completion")]
fn recv_future_polled_after_completion_panics() {
    let (tx, rx) = bounded(1);
    tx.try_send(1).unwrap();
    let mut recv = rx.recv();
    let _ = poll_once(&mut recv);
    let _ = poll_once(&mut recv);
}

#[test]
fn many_parked_receivers_leave_from_anywhere_and_the_rest_keep_fifo_order() {
    let (tx, rx) = bounded::<usize>(0);
    let mut parked: Vec<_> = (0..1_000).map(|_| rx.recv()).collect();
    for f in &mut parked {
        assert!(poll_once(f).is_pending());
    }
    // Cancel every other receive (and the first and last), from the back.
    let mut kept = Vec::new();
    for (i, f) in parked.into_iter().enumerate().rev() {
        if i % 2 == 0 || i == 999 {
            drop(f);
        } else {
            kept.push((i, f));
        }
    }
    kept.reverse();
    for v in 0..kept.len() {
        assert_eq!(
            tx.try_send(v),
            Ok(()),
            "a receiver is parked for every value"
        );
    }
    assert!(
        tx.try_send(usize::MAX).unwrap_err().is_full(),
        "no receiver left"
    );
    for (n, (i, f)) in kept.iter_mut().enumerate() {
        assert_eq!(
            poll_once(f),
            Poll::Ready(Some(n)),
            "receiver {i} out of order"
        );
    }
}

/// A bounded buffer was allocated whole at creation: `bounded(1 << 40)` asked for 8 TiB and
/// the allocation failure aborted the process; `usize::MAX - 1` panicked ("capacity
/// overflow"). A large buffer now grows as values come.
#[test]
fn a_huge_capacity_allocates_only_what_is_sent() {
    for cap in [1usize << 40, usize::MAX - 1] {
        let (tx, rx) = bounded::<u64>(cap);
        for i in 0..10_000 {
            tx.try_send(i).unwrap();
        }
        assert_eq!((rx.len(), rx.capacity()), (10_000, Some(cap)));
        assert_eq!(rx.try_recv(), Ok(0));
    }
}
