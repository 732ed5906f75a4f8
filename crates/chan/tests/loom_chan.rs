//! loom models of the channel core: hand-off, close races, and cancelled receives.
//!
//! Run with `RUSTFLAGS="--cfg loom" LOOM_MAX_PREEMPTIONS=2 cargo test --release -p gort-chan
//! --test loom_chan`.
#![cfg(loom)]

mod loom_support;

use std::task::Poll;

use gort_chan::{bounded, SendError};
use loom::thread;
use loom_support::{block_on, poll_once};

/// Two sends on an unbuffered channel meet two receives, in order.
#[test]
fn handoff_unbuffered() {
    loom::model(|| {
        let (tx, rx) = bounded(0);
        let t = thread::spawn(move || {
            block_on(async {
                tx.send(1).await.unwrap();
                tx.send(2).await.unwrap();
            })
        });
        assert_eq!(block_on(rx.recv()), Some(1));
        assert_eq!(block_on(rx.recv()), Some(2));
        t.join().unwrap();
        assert_eq!(block_on(rx.recv()), None, "the sender is gone");
    });
}

/// The same through a one-slot buffer, where the second send may park on a full buffer.
#[test]
fn handoff_capacity_one() {
    loom::model(|| {
        let (tx, rx) = bounded(1);
        let t = thread::spawn(move || {
            block_on(async {
                tx.send(1).await.unwrap();
                tx.send(2).await.unwrap();
            })
        });
        assert_eq!(block_on(rx.recv()), Some(1));
        assert_eq!(block_on(rx.recv()), Some(2));
        t.join().unwrap();
    });
}

/// `close` races a send and a receive: a send succeeds exactly when the receive gets it.
#[test]
fn close_races_send_and_recv() {
    for cap in [0, 1] {
        loom::model(move || {
            let (tx, rx) = bounded(cap);
            let closer = tx.clone();
            let sender = thread::spawn(move || block_on(tx.send(7)));
            let close = thread::spawn(move || closer.close());
            let got = block_on(rx.recv());
            let sent = sender.join().unwrap();
            close.join().unwrap();
            match sent {
                Ok(()) => assert_eq!(got, Some(7), "cap {cap}: a sent value was lost"),
                Err(SendError(v)) => {
                    assert_eq!(v, 7);
                    assert_eq!(got, None, "cap {cap}: a refused value was received");
                }
            }
        });
    }
}

/// The last sender's drop wakes a parked receiver.
#[test]
fn last_sender_drop_wakes_receiver() {
    loom::model(|| {
        let (tx, rx) = bounded::<u8>(0);
        let t = thread::spawn(move || drop(tx));
        assert_eq!(block_on(rx.recv()), None);
        t.join().unwrap();
    });
}

/// The last receiver's drop fails a parked send with its value.
#[test]
fn last_receiver_drop_fails_parked_send() {
    loom::model(|| {
        let (tx, rx) = bounded::<u8>(0);
        let t = thread::spawn(move || drop(rx));
        assert_eq!(block_on(tx.send(3)), Err(SendError(3)));
        t.join().unwrap();
    });
}

/// A receive is polled once, then dropped, possibly after a sender handed it the value:
/// the value (and its wake-up) must reach the other receiver, unless the first poll already
/// received it.
#[test]
fn cancelled_recv_passes_its_value_on() {
    loom::model(|| {
        let (tx, rx) = bounded::<u8>(0);
        let rx2 = rx.clone();
        let canceller = thread::spawn(move || {
            let mut fut = rx2.recv();
            match poll_once(&mut fut) {
                Poll::Ready(v) => v,
                Poll::Pending => None, // dropped here
            }
        });
        // The sender's drop at the end closes the channel, so `rx` sees `None` if the
        // canceller received the value.
        let sender = thread::spawn(move || block_on(tx.send(1)).unwrap());
        let got = block_on(rx.recv());
        let cancelled_got = canceller.join().unwrap();
        sender.join().unwrap();
        assert_eq!(
            [got, cancelled_got].iter().flatten().count(),
            1,
            "received {got:?} and {cancelled_got:?}"
        );
    });
}

/// A timer-style `take_buffered` races a `try_send`: the value is either discarded (and
/// counted) or received, never both, never neither.
#[test]
fn take_buffered_races_try_send() {
    loom::model(|| {
        let (tx, rx) = bounded::<u8>(1);
        let tx2 = tx.clone();
        let t = thread::spawn(move || tx2.try_send(1).is_ok());
        let taken = tx.take_buffered();
        let sent = t.join().unwrap();
        assert!(sent, "a one-slot buffer with one send is never full");
        let received = rx.try_recv().is_ok();
        assert_eq!(taken + usize::from(received), 1);
    });
}

/// Two last receivers dropped on two threads: the drop hook runs exactly once.
#[test]
fn drop_hook_runs_once() {
    use loom::sync::atomic::{AtomicUsize, Ordering};
    use loom::sync::Arc;

    struct Count(Arc<AtomicUsize>);
    impl gort_chan::RecvHook for Count {
        fn before_recv(&self) {}
        fn parked(self: std::sync::Arc<Self>) {}
        fn unparked(self: std::sync::Arc<Self>) {}
        fn last_receiver_dropped(&self) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    loom::model(|| {
        let runs = Arc::new(AtomicUsize::new(0));
        let hook = std::sync::Arc::new(Count(runs.clone()));
        let (_tx, rx) = gort_chan::bounded_with_hook::<u8>(1, hook);
        let rx2 = rx.clone();
        let t = thread::spawn(move || drop(rx2));
        drop(rx);
        t.join().unwrap();
        assert_eq!(runs.load(Ordering::SeqCst), 1);
    });
}

/// Two senders, one receiver: every value arrives once, each sender's in order.
#[test]
fn two_senders_one_receiver() {
    for cap in [0, 1] {
        loom::model(move || {
            let (tx, rx) = bounded::<(u8, u8)>(cap);
            let senders: Vec<_> = (0..2u8)
                .map(|s| {
                    let tx = tx.clone();
                    thread::spawn(move || {
                        block_on(async {
                            tx.send((s, 0)).await.unwrap();
                            tx.send((s, 1)).await.unwrap();
                        })
                    })
                })
                .collect();
            drop(tx);
            let mut next = [0u8; 2];
            while let Some((s, seq)) = block_on(rx.recv()) {
                assert_eq!(
                    seq,
                    next[usize::from(s)],
                    "cap {cap}: sender {s} out of order"
                );
                next[usize::from(s)] += 1;
            }
            assert_eq!(next, [2, 2], "cap {cap}: values lost");
            for s in senders {
                s.join().unwrap();
            }
        });
    }
}

/// A stream receive left parked (its `next()` given up) races an unbuffered send; `recv` on
/// the same receiver withdraws it first (`Receiver::reclaim_stream`), so the value arrives
/// exactly once, by whichever of the two got it, and the end after it.
#[test]
fn a_parked_stream_receive_withdrawn_by_recv_races_a_send() {
    use futures::StreamExt;
    loom::model(|| {
        let (tx, mut rx) = bounded(0);
        let t = thread::spawn(move || block_on(tx.send(1)).unwrap());
        let mut next = rx.next();
        let first = poll_once(&mut next);
        drop(next);
        match first {
            Poll::Ready(v) => assert_eq!(v, Some(1)),
            Poll::Pending => assert_eq!(block_on(rx.recv()), Some(1)),
        }
        t.join().unwrap();
        assert_eq!(block_on(rx.recv()), None, "the sender is gone");
    });
}
