//! Cancel-safety: send and receive futures dropped at random points (polled once with a
//! no-op waker, then dropped) never lose or duplicate a value.
//!
//! Every value is a token whose `Drop` records "dropped undelivered" in a ledger; a receiver
//! disarms it and records "received". A sender whose dropped future's token was dropped sends
//! it again. At the end every token must be received exactly once.

mod common;

use std::sync::atomic::{AtomicU8, AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::Poll;
use std::thread;

use common::{poll_once, Rng};
use futures::executor::block_on;
use gort_chan::{bounded, select, unbounded, Receiver, Sender};

const IN_FLIGHT: u8 = 0;
const DROPPED: u8 = 1;
const RECEIVED: u8 = 2;

struct Ledger {
    state: Vec<AtomicU8>,
    received: AtomicUsize,
    /// Send futures dropped whose token was dropped too (and is sent again).
    resent: AtomicUsize,
    /// Send futures dropped after a receiver had already taken the token.
    taken_before_drop: AtomicUsize,
}

impl Ledger {
    fn new(n: usize) -> Arc<Self> {
        Arc::new(Ledger {
            state: (0..n).map(|_| AtomicU8::new(IN_FLIGHT)).collect(),
            received: AtomicUsize::new(0),
            resent: AtomicUsize::new(0),
            taken_before_drop: AtomicUsize::new(0),
        })
    }

    fn mark(&self, id: usize, to: u8) {
        let from = self.state[id].swap(to, Ordering::SeqCst);
        assert_eq!(from, IN_FLIGHT, "token {id}: moved to {to} from {from}");
    }

    /// After a send future was dropped: whether its token was dropped (so it must be resent).
    fn was_dropped(&self, id: usize) -> bool {
        self.state[id]
            .compare_exchange(DROPPED, IN_FLIGHT, Ordering::SeqCst, Ordering::SeqCst)
            .is_ok()
    }
}

struct Token {
    id: usize,
    ledger: Arc<Ledger>,
    armed: bool,
}

impl Drop for Token {
    fn drop(&mut self) {
        if self.armed {
            self.ledger.mark(self.id, DROPPED);
        }
    }
}

fn receive(mut tok: Token) {
    tok.armed = false;
    tok.ledger.mark(tok.id, RECEIVED);
    tok.ledger.received.fetch_add(1, Ordering::SeqCst);
}

fn sender(tx: Sender<Token>, ledger: Arc<Ledger>, ids: std::ops::Range<usize>, seed: u64) {
    let mut rng = Rng::new(seed);
    for id in ids {
        loop {
            let tok = Token {
                id,
                ledger: ledger.clone(),
                armed: true,
            };
            let mut fut = tx.send(tok);
            match poll_once(&mut fut) {
                Poll::Ready(r) => {
                    assert!(r.is_ok(), "channel closed early");
                    break;
                }
                Poll::Pending if rng.chance(1, 2) => {
                    drop(fut);
                    if ledger.was_dropped(id) {
                        ledger.resent.fetch_add(1, Ordering::Relaxed);
                        continue;
                    }
                    // A receiver took it before the drop: it counts as sent.
                    ledger.taken_before_drop.fetch_add(1, Ordering::Relaxed);
                    break;
                }
                Poll::Pending => {
                    assert!(block_on(fut).is_ok());
                    break;
                }
            }
        }
    }
}

/// `with_select`: receive inside a select whose other arm is ready half the time, so a
/// parked receive arm is regularly dropped.
fn receiver(rx: Receiver<Token>, seed: u64, with_select: bool) {
    let mut rng = Rng::new(seed);
    loop {
        if with_select {
            let ready_other = rng.chance(1, 2);
            let got = block_on(async {
                select! {
                    v = rx.recv() => Some(v),
                    _ = async {
                        if !ready_other {
                            futures::future::pending::<()>().await;
                        }
                    } => None,
                }
            });
            match got {
                Some(Some(tok)) => receive(tok),
                Some(None) => return,
                None => {}
            }
            continue;
        }
        let mut fut = rx.recv();
        match poll_once(&mut fut) {
            Poll::Ready(Some(tok)) => receive(tok),
            Poll::Ready(None) => return,
            Poll::Pending if rng.chance(1, 2) => drop(fut),
            Poll::Pending => match block_on(fut) {
                Some(tok) => receive(tok),
                None => return,
            },
        }
    }
}

fn run(cap: Option<usize>, with_select: bool) {
    const SENDERS: usize = 3;
    const RECEIVERS: usize = 3;
    const PER_SENDER: usize = 3_000;
    let n = SENDERS * PER_SENDER;
    let ledger = Ledger::new(n);
    let (tx, rx) = match cap {
        Some(cap) => bounded(cap),
        None => unbounded(),
    };
    let senders: Vec<_> = (0..SENDERS)
        .map(|s| {
            let (tx, ledger) = (tx.clone(), ledger.clone());
            let ids = s * PER_SENDER..(s + 1) * PER_SENDER;
            thread::spawn(move || sender(tx, ledger, ids, s as u64 + 1))
        })
        .collect();
    drop(tx);
    let receivers: Vec<_> = (0..RECEIVERS)
        .map(|r| {
            let rx = rx.clone();
            thread::spawn(move || receiver(rx, 100 + r as u64, with_select && r % 2 == 0))
        })
        .collect();
    drop(rx);
    for t in senders.into_iter().chain(receivers) {
        t.join().unwrap();
    }
    assert_eq!(ledger.received.load(Ordering::SeqCst), n, "cap {cap:?}");
    let resent = ledger.resent.load(Ordering::Relaxed);
    eprintln!(
        "cap {cap:?}, select {with_select}: {resent} sends withdrawn and resent, {} taken before \
         their future was dropped",
        ledger.taken_before_drop.load(Ordering::Relaxed)
    );
    if cap == Some(0) {
        assert!(resent > 0, "the test never withdrew a send");
    }
    for (id, s) in ledger.state.iter().enumerate() {
        assert_eq!(
            s.load(Ordering::SeqCst),
            RECEIVED,
            "cap {cap:?}: token {id}"
        );
    }
}

#[test]
fn cancel_safety_unbuffered() {
    run(Some(0), false);
}

#[test]
fn cancel_safety_capacity_one() {
    run(Some(1), false);
}

#[test]
fn cancel_safety_capacity_four() {
    run(Some(4), false);
}

#[test]
fn cancel_safety_unbounded() {
    run(None, false);
}

#[test]
fn cancel_safety_in_select_unbuffered() {
    run(Some(0), true);
}

#[test]
fn cancel_safety_in_select_capacity_one() {
    run(Some(1), true);
}

#[test]
fn dropped_send_future_never_delivers_later() {
    let (tx, rx) = bounded(0);
    let mut fut = tx.send(1);
    assert!(poll_once(&mut fut).is_pending());
    drop(fut);
    assert!(rx.try_recv().is_err());
    let mut recv = rx.recv();
    assert!(poll_once(&mut recv).is_pending());
    assert!(tx.try_send(2).is_ok());
    assert_eq!(poll_once(&mut recv), Poll::Ready(Some(2)));
}

#[test]
fn dropped_recv_future_passes_its_value_to_the_next_receiver() {
    let (tx, rx) = bounded::<u8>(0);
    let mut first = rx.recv();
    let mut second = rx.recv();
    assert!(poll_once(&mut first).is_pending());
    assert!(poll_once(&mut second).is_pending());
    assert!(tx.try_send(1).is_ok());
    // `first` was handed the value and woken, but is dropped instead of polled.
    drop(first);
    assert_eq!(poll_once(&mut second), Poll::Ready(Some(1)));
}

#[test]
fn dropped_recv_future_puts_its_value_back_at_the_front() {
    let (tx, rx) = bounded::<u8>(1);
    let mut first = rx.recv();
    assert!(poll_once(&mut first).is_pending());
    assert!(
        tx.try_send(1).is_ok(),
        "handed straight to the parked receiver"
    );
    assert!(tx.try_send(2).is_ok(), "so the buffer still has room");
    drop(first);
    assert_eq!(rx.len(), 2, "the put-back value may exceed the capacity");
    assert_eq!(rx.try_recv(), Ok(1));
    assert_eq!(rx.try_recv(), Ok(2));
}

#[test]
fn cancel_gives_back_a_value_never_offered_or_offered_and_not_taken() {
    let (tx, rx) = bounded::<String>(0);
    // Never polled: the value was never offered.
    assert_eq!(tx.send("a".into()).cancel().as_deref(), Some("a"));
    // Parked, offered to receivers, not taken.
    let mut fut = tx.send("b".into());
    assert!(poll_once(&mut fut).is_pending());
    assert_eq!(fut.cancel().as_deref(), Some("b"));
    assert!(
        rx.try_recv().is_err(),
        "a withdrawn value is never delivered"
    );
    let mut recv = rx.recv();
    assert!(poll_once(&mut recv).is_pending());
    assert!(tx.try_send("c".into()).is_ok());
    assert_eq!(poll_once(&mut recv), Poll::Ready(Some("c".into())));
}

#[test]
fn cancel_after_a_receiver_took_the_value_reports_it_sent() {
    let (tx, rx) = bounded::<u8>(0);
    let mut fut = tx.send(7);
    assert!(poll_once(&mut fut).is_pending());
    assert_eq!(rx.try_recv(), Ok(7)); // taken from the parked sender
    assert_eq!(fut.cancel(), None);
    // A completed future has nothing to give back either.
    let (tx, _rx) = bounded::<u8>(1);
    let mut fut = tx.send(8);
    assert_eq!(poll_once(&mut fut), Poll::Ready(Ok(())));
    assert_eq!(fut.cancel(), None);
}

#[test]
fn cancel_keeps_the_value_of_a_send_arm_that_lost_a_select() {
    block_on(async {
        let (tx, rx) = bounded::<Vec<u8>>(0);
        let (quit_tx, quit_rx) = unbounded::<()>();
        quit_tx.try_send(()).unwrap();
        let mut pending = Some(vec![1, 2, 3]);
        let mut rounds = 0;
        while let Some(v) = pending.take() {
            rounds += 1;
            let mut send = tx.send(v);
            select! {
                res = &mut send => res.unwrap(),
                _ = quit_rx.recv() => pending = send.cancel(),
            }
            if rounds == 1 {
                assert_eq!(
                    pending.as_deref(),
                    Some(&[1, 2, 3][..]),
                    "quit won: value kept"
                );
                assert!(rx.try_recv().is_err(), "and never delivered");
                // Now a receiver waits, and the value goes out on the next round.
                let rx = rx.clone();
                std::thread::spawn(move || block_on(rx.recv()));
            }
        }
        assert_eq!(rounds, 2);
    });
}
