//! loom models of `select!`'s commit protocol (`group.rs`): at most one arm takes effect.
//!
//! Run with `RUSTFLAGS="--cfg loom" LOOM_MAX_PREEMPTIONS=2 cargo test --release -p gort-chan
//! --test loom_select`.
#![cfg(loom)]

mod loom_support;

use gort_chan::{bounded, select, TryRecvError};
use loom::thread;
use loom_support::block_on;

/// Two senders race to complete a select over two receives: it takes exactly one value, and
/// the other stays in its channel.
#[test]
fn select_receives_exactly_one() {
    loom::model(|| {
        let (tx_a, rx_a) = bounded::<u8>(1);
        let (tx_b, rx_b) = bounded::<u8>(1);
        let a = thread::spawn(move || tx_a.try_send(1).unwrap());
        let b = thread::spawn(move || tx_b.try_send(2).unwrap());
        let got = block_on(async {
            select! {
                v = rx_a.recv() => v,
                v = rx_b.recv() => v,
            }
        });
        a.join().unwrap();
        b.join().unwrap();
        let (other, other_value) = match got {
            Some(1) => (&rx_b, 2),
            Some(2) => (&rx_a, 1),
            other => panic!("select returned {other:?}"),
        };
        assert_eq!(
            other.try_recv(),
            Ok(other_value),
            "the other value was lost"
        );
        assert_eq!(rx_a.try_recv().err(), Some(TryRecvError::Closed));
        assert_eq!(rx_b.try_recv().err(), Some(TryRecvError::Closed));
    });
}

/// A receiver takes the value of a parked send arm while the other arm's channel closes:
/// the select reports the send exactly when the receiver got the value.
#[test]
fn select_send_arm_is_exact() {
    loom::model(|| {
        let (tx, rx) = bounded::<u8>(0);
        let (quit_tx, quit_rx) = bounded::<()>(0);
        let taker = thread::spawn(move || rx.try_recv());
        let quitter = thread::spawn(move || quit_tx.close());
        let sent = block_on(async {
            select! {
                r = tx.send(5) => r.is_ok(),
                _ = quit_rx.recv() => false,
            }
        });
        let taken = taker.join().unwrap();
        quitter.join().unwrap();
        assert_eq!(
            sent,
            taken == Ok(5),
            "select said sent={sent}, receiver got {taken:?}"
        );
    });
}

/// A select over two sends meets a select over the matching two receives: both complete, on
/// the same channel, through parked arms, busy skips and wake-ups.
#[test]
fn select_meets_select() {
    for cap in [0, 1] {
        loom::model(move || {
            let (tx_a, rx_a) = bounded::<u8>(cap);
            let (tx_b, rx_b) = bounded::<u8>(cap);
            let receiver = thread::spawn(move || {
                block_on(async {
                    select! {
                        v = rx_a.recv() => ('a', v),
                        v = rx_b.recv() => ('b', v),
                    }
                })
            });
            let sent_on = block_on(async {
                select! {
                    r = tx_a.send(1) => { r.unwrap(); 'a' }
                    r = tx_b.send(2) => { r.unwrap(); 'b' }
                }
            });
            let (got_on, v) = receiver.join().unwrap();
            assert_eq!(sent_on, got_on, "cap {cap}");
            assert_eq!(v, Some(if sent_on == 'a' { 1 } else { 2 }), "cap {cap}");
        });
    }
}

/// A select is dropped while a sender may be completing its parked receive arm: the value
/// is either received by the select or put back, never lost.
#[test]
fn dropped_select_puts_a_claimed_value_back() {
    use loom_support::poll_once;
    use std::task::Poll;

    loom::model(|| {
        let (tx, rx) = bounded::<u8>(0);
        let (_tx2, rx2) = bounded::<u8>(0);
        let sender = thread::spawn(move || tx.try_send(1).is_ok());
        let mut sel = Box::pin(async {
            select! {
                v = rx.recv() => v,
                v = rx2.recv() => v,
            }
        });
        let first = poll_once(&mut sel);
        drop(sel);
        let sent = sender.join().unwrap();
        let got_by_select = matches!(first, Poll::Ready(Some(1)));
        let left = rx.try_recv().is_ok();
        assert_eq!(
            usize::from(got_by_select) + usize::from(left),
            usize::from(sent),
            "sent={sent} select={first:?} left={left}"
        );
    });
}

/// `default` races a sender: either the select receives the value or it stays sendable.
#[test]
fn select_default_races_sender() {
    loom::model(|| {
        let (tx, rx) = bounded::<u8>(1);
        let sender = thread::spawn(move || tx.try_send(1).unwrap());
        let got = block_on(async {
            select! {
                v = rx.recv() => v,
                default => None,
            }
        });
        sender.join().unwrap();
        let left = rx.try_recv().ok();
        assert_eq!(got.xor(left), Some(1), "select got {got:?}, left {left:?}");
    });
}

/// A refutable pattern rejects the value a sender committed to its parked arm while another
/// arm's sender races: the select reopens (`Group::reopen`) and takes the other arm's value;
/// no wake-up is lost (a loom deadlock otherwise) and no value of the other arm is lost.
#[test]
fn rejected_commit_reopens_the_select() {
    loom::model(|| {
        let (tx_a, rx_a) = bounded::<u8>(0);
        let (tx_b, rx_b) = bounded::<u8>(1);
        let a = thread::spawn(move || {
            let _ = tx_a.try_send(5); // rejected by the pattern if the select takes it
        });
        let b = thread::spawn(move || tx_b.try_send(2).unwrap());
        let got = block_on(async {
            select! {
                Some(1) = rx_a.recv() => 1,
                Some(v) = rx_b.recv() => v,
            }
        });
        a.join().unwrap();
        b.join().unwrap();
        assert_eq!(got, 2, "the rejected arm was chosen");
        assert_eq!(rx_b.try_recv().err(), Some(TryRecvError::Closed));
    });
}

/// Go's TestNonblockSelectRace: from the moment the select starts, `c1` or `c2` holds a value
/// (another thread fills `c2`, then empties `c1`), so a select with `default` never takes
/// `default`. `biased;` looks at `c2` first, the order in which one pass alone could see `c2`
/// before it was filled and `c1` after it was emptied (CHANNELS.md, "`default` is a
/// snapshot").
#[test]
fn default_is_a_snapshot() {
    loom::model(|| {
        let (tx1, rx1) = bounded::<u8>(1);
        let (tx2, rx2) = bounded::<u8>(1);
        tx1.try_send(1).unwrap();
        let rx1b = rx1.clone();
        let other = thread::spawn(move || {
            tx2.try_send(2).unwrap();
            let _ = rx1b.try_recv();
        });
        let got = block_on(async {
            select! {
                biased;
                v = rx2.recv() => v,
                v = rx1.recv() => v,
                default => None,
            }
        });
        other.join().unwrap();
        assert!(got.is_some(), "took `default` while a channel held a value");
    });
}
