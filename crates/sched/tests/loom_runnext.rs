//! Loom models of the stealable `runnext` slot (`src/runnext.rs`): the real source, compiled
//! here against loom's atomics and cells (`gort_loom` under `--cfg loom`).
//!
//! Each model checks that every task put in the slot comes out exactly once (taken by the
//! holder, kicked out by its next push, handed back by a push that found a thief at work,
//! stolen, or dropped with the slot), whatever the interleaving of the holder with thieves,
//! and loom's cells check that no thief reads the cell while the holder writes it.
//!
//! Run: `RUSTFLAGS="--cfg loom" LOOM_MAX_PREEMPTIONS=2 cargo test --release -p gort-sched --test loom_runnext`
#![cfg(loom)]

#[allow(dead_code)]
#[path = "../src/runnext.rs"]
mod runnext;

use loom::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use loom::sync::Arc;
use loom::thread;
use runnext::{Pushed, RunNext};

#[path = "support/loom_tokens.rs"]
mod loom_tokens;
use loom_tokens::{token, Seen, Token};

/// What the holder's push handed back, if anything.
fn pushed(seen: &mut Seen, p: Pushed<Token>) {
    match p {
        Pushed::Filled => {}
        Pushed::Kicked(t) | Pushed::Busy(t) => seen.add(t),
    }
}

/// A thief: sees the slot, then takes that fill if it is still there.
/// The holder takes what the slot holds, if anything, and fills it with task `id`.
fn take_and_refill(slot: &RunNext<Token>, seen: &mut Seen, id: usize, dropped: &Arc<AtomicUsize>) {
    // SAFETY: the calling thread is the model's only holder.
    if let Some(t) = unsafe { slot.pop() } {
        seen.add(t);
    }
    // SAFETY: as above.
    pushed(seen, unsafe { slot.push(token(id, dropped)) });
}

fn thief(slot: Arc<RunNext<Token>>) -> thread::JoinHandle<Vec<usize>> {
    thread::spawn(move || {
        let mut seen = Seen::default();
        if let Some(t) = slot.seen().and_then(|f| slot.steal(f)) {
            seen.add(t);
        }
        seen.0
    })
}

/// The holder fills the slot, kicks the task out with a second push, and takes what is
/// there, while a thief takes what it saw.
#[test]
fn holder_push_kick_pop_against_a_thief() {
    loom::model(|| {
        let dropped = Arc::new(AtomicUsize::new(0));
        let slot = Arc::new(RunNext::new());
        let mut seen = Seen::default();
        // SAFETY: this thread is the only holder.
        pushed(&mut seen, unsafe { slot.push(token(0, &dropped)) });
        let thief = thief(slot.clone());
        // SAFETY: as above.
        pushed(&mut seen, unsafe { slot.push(token(1, &dropped)) });
        // SAFETY: as above.
        if let Some(t) = unsafe { slot.pop() } {
            seen.add(t);
        }
        seen.merge(thief.join().unwrap());
        // SAFETY: as above; the thief is done.
        if let Some(t) = unsafe { slot.pop() } {
            seen.add(t);
        }
        seen.0.sort();
        assert_eq!(seen.0, vec![0, 1]);
        assert_eq!(dropped.load(SeqCst), 2);
    });
}

/// Two thieves race for one fill while the holder refills after a take: each task comes out
/// once, and one left in the slot is dropped with it.
#[test]
fn two_thieves_and_the_holder_refilling() {
    loom::model(|| {
        let dropped = Arc::new(AtomicUsize::new(0));
        let slot = Arc::new(RunNext::new());
        let mut seen = Seen::default();
        // SAFETY: this thread is the only holder.
        pushed(&mut seen, unsafe { slot.push(token(0, &dropped)) });
        let thieves: Vec<_> = (0..2).map(|_| thief(slot.clone())).collect();
        take_and_refill(&slot, &mut seen, 1, &dropped);
        for t in thieves {
            seen.merge(t.join().unwrap());
        }
        let left = usize::from(slot.seen().is_some());
        drop(slot);
        assert_eq!(seen.0.len() + left, 2, "tasks lost: saw {:?}", seen.0);
        assert_eq!(dropped.load(SeqCst), 2);
    });
}

/// A slow thief while the holder takes, refills, takes again and refills: the thief takes at
/// most the fill it saw (the fill count in the state word), and nothing is lost or doubled.
#[test]
fn a_slow_thief_against_a_holder_that_moves_on() {
    loom::model(|| {
        let dropped = Arc::new(AtomicUsize::new(0));
        let slot = Arc::new(RunNext::new());
        let mut seen = Seen::default();
        // SAFETY: this thread is the only holder.
        pushed(&mut seen, unsafe { slot.push(token(0, &dropped)) });
        let thief = thief(slot.clone());
        for id in 1..3 {
            take_and_refill(&slot, &mut seen, id, &dropped);
        }
        seen.merge(thief.join().unwrap());
        // SAFETY: as above; the thief is done.
        if let Some(t) = unsafe { slot.pop() } {
            seen.add(t);
        }
        seen.0.sort();
        assert_eq!(seen.0, vec![0, 1, 2]);
        assert_eq!(dropped.load(SeqCst), 3);
    });
}
