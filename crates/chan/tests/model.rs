//! Property test: random single-threaded schedules of sends, receives, polls, drops of
//! futures, `close` and `take_buffered`. Every value ends in exactly one place (received,
//! given back by a failed send, or dropped by a withdrawn send or `take_buffered`), a value
//! whose send succeeded is received unless `take_buffered` discarded it, and once a receive
//! has seen the end, nothing is received after.

mod common;

use std::cell::RefCell;
use std::rc::Rc;
use std::task::Poll;

use common::poll_once;
use gort_chan::{bounded, unbounded, RecvFuture, SendFuture, TrySendError};
use proptest::prelude::*;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Fate {
    InFlight,
    Received,
    GivenBack,
    Dropped,
}

#[derive(Default)]
struct Ledger {
    fate: Vec<Fate>,
    /// The send of this value reported success.
    confirmed: Vec<bool>,
}

type Shared = Rc<RefCell<Ledger>>;

struct Token {
    id: usize,
    ledger: Shared,
    armed: bool,
}

impl Token {
    fn new(ledger: &Shared) -> Self {
        let mut l = ledger.borrow_mut();
        l.fate.push(Fate::InFlight);
        l.confirmed.push(false);
        Token {
            id: l.fate.len() - 1,
            ledger: ledger.clone(),
            armed: true,
        }
    }

    fn settle(mut self, fate: Fate) {
        self.armed = false;
        let old = std::mem::replace(&mut self.ledger.borrow_mut().fate[self.id], fate);
        assert_eq!(old, Fate::InFlight, "token {} became {fate:?}", self.id);
    }
}

impl Drop for Token {
    fn drop(&mut self) {
        if self.armed {
            let old = std::mem::replace(&mut self.ledger.borrow_mut().fate[self.id], Fate::Dropped);
            assert_eq!(
                old,
                Fate::InFlight,
                "token {} dropped after {old:?}",
                self.id
            );
        }
    }
}

#[derive(Clone, Debug)]
enum Op {
    StartSend(usize),
    PollSend(usize),
    DropSend(usize),
    StartRecv(usize),
    PollRecv(usize),
    DropRecv(usize),
    TrySend,
    TryRecv,
    Close,
    TakeBuffered,
}

fn op() -> impl Strategy<Value = Op> {
    let slot = 0..3usize;
    prop_oneof![
        slot.clone().prop_map(Op::StartSend),
        slot.clone().prop_map(Op::PollSend),
        slot.clone().prop_map(Op::DropSend),
        slot.clone().prop_map(Op::StartRecv),
        slot.clone().prop_map(Op::PollRecv),
        slot.prop_map(Op::DropRecv),
        Just(Op::TrySend),
        Just(Op::TryRecv),
        Just(Op::Close),
        Just(Op::TakeBuffered),
    ]
}

fn run(cap: Option<usize>, ops: &[Op]) {
    let ledger: Shared = Rc::default();
    let (tx, rx) = match cap {
        Some(cap) => bounded::<Token>(cap),
        None => unbounded(),
    };
    let mut sends: Vec<Option<(usize, SendFuture<'_, Token>)>> = (0..3).map(|_| None).collect();
    let mut recvs: Vec<Option<RecvFuture<'_, Token>>> = (0..3).map(|_| None).collect();
    let mut ended = false;
    let mut discarded = 0;
    let received = |tok: Token, ended: bool| {
        assert!(!ended, "received token {} after the end", tok.id);
        tok.settle(Fate::Received);
    };
    for op in ops {
        match op.clone() {
            Op::StartSend(i) => {
                if sends[i].is_none() {
                    let tok = Token::new(&ledger);
                    sends[i] = Some((tok.id, tx.send(tok)));
                }
            }
            Op::PollSend(i) => {
                if let Some((id, f)) = &mut sends[i] {
                    match poll_once(f) {
                        Poll::Ready(Ok(())) => {
                            ledger.borrow_mut().confirmed[*id] = true;
                            sends[i] = None;
                        }
                        Poll::Ready(Err(e)) => {
                            e.into_inner().settle(Fate::GivenBack);
                            sends[i] = None;
                        }
                        Poll::Pending => {}
                    }
                }
            }
            Op::DropSend(i) => sends[i] = None,
            Op::StartRecv(i) => {
                if recvs[i].is_none() {
                    recvs[i] = Some(rx.recv());
                }
            }
            Op::PollRecv(i) => {
                if let Some(f) = &mut recvs[i] {
                    match poll_once(f) {
                        Poll::Ready(Some(tok)) => received(tok, ended),
                        Poll::Ready(None) => ended = true,
                        Poll::Pending => continue,
                    }
                    recvs[i] = None;
                }
            }
            Op::DropRecv(i) => recvs[i] = None,
            Op::TrySend => {
                let tok = Token::new(&ledger);
                let id = tok.id;
                match tx.try_send(tok) {
                    Ok(()) => ledger.borrow_mut().confirmed[id] = true,
                    Err(TrySendError::Full(t) | TrySendError::Closed(t)) => {
                        t.settle(Fate::GivenBack)
                    }
                }
            }
            Op::TryRecv => match rx.try_recv() {
                Ok(tok) => received(tok, ended),
                Err(e) => ended |= e.is_closed(),
            },
            Op::Close => tx.close(),
            Op::TakeBuffered => discarded += tx.take_buffered(),
        }
        if let Some(cap) = cap {
            // Only values put back by dropped receives may exceed the capacity.
            assert!(rx.len() <= cap + 3, "len {} with capacity {cap}", rx.len());
        }
    }
    // Wind down: withdraw everything, then drain what is left.
    drop(sends);
    drop(recvs);
    tx.close();
    while let Ok(tok) = rx.try_recv() {
        received(tok, ended);
    }
    drop((tx, rx));
    let l = ledger.borrow();
    let (mut confirmed_dropped, mut dropped) = (0, 0);
    for (id, (&fate, &confirmed)) in l.fate.iter().zip(&l.confirmed).enumerate() {
        assert_ne!(fate, Fate::InFlight, "token {id} vanished");
        dropped += usize::from(fate == Fate::Dropped);
        if confirmed {
            assert_ne!(
                fate,
                Fate::GivenBack,
                "token {id} was both sent and given back"
            );
            confirmed_dropped += usize::from(fate == Fate::Dropped);
        }
    }
    // take_buffered may also discard a value a parked sender had moved into the buffer before
    // its future was dropped unobserved, so `discarded` is only bounded.
    assert!(
        confirmed_dropped <= discarded && discarded <= dropped,
        "only take_buffered may drop a sent value: {confirmed_dropped} sent values dropped, \
         {discarded} discarded, {dropped} dropped in all"
    );
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]

    #[test]
    fn unbuffered(ops in proptest::collection::vec(op(), 1..60)) {
        run(Some(0), &ops);
    }

    #[test]
    fn capacity_two(ops in proptest::collection::vec(op(), 1..60)) {
        run(Some(2), &ops);
    }

    #[test]
    fn unbounded_channel(ops in proptest::collection::vec(op(), 1..60)) {
        run(None, &ops);
    }
}
