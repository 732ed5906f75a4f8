//! Loom models of the run queues (`src/runq.rs`): the real source, compiled here against
//! loom's atomics, cells and mutex (`gort_loom` under `--cfg loom`), with a 4-slot ring so
//! that overflow to the global queue is reached in a few pushes.
//!
//! Each model checks that every task pushed comes out exactly once (popped by the owner,
//! stolen by a thief, moved to the global queue, or dropped with the ring) whatever the
//! interleaving of the owner's pushes and pops with thieves.
//!
//! Run: `RUSTFLAGS="--cfg loom" LOOM_MAX_PREEMPTIONS=2 cargo test --release -p gort-sched --test loom_runq`
#![cfg(loom)]

#[allow(dead_code)]
#[path = "../src/runq.rs"]
mod runq;

use loom::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use loom::sync::Arc;
use loom::thread;
use runq::{Global, Lane, Local, Stealer, Take, LOCAL_CAP};

#[path = "support/loom_tokens.rs"]
mod loom_tokens;
use loom_tokens::{token, Seen, Token};

impl Seen {
    fn drain_local(&mut self, q: &mut Local<Token>) {
        while let Some(t) = q.pop() {
            self.add(t);
        }
    }

    /// Drains what is left in the owner's ring and the global queue, then checks that all
    /// `n` tasks came out, each dropped once.
    fn finish(
        mut self,
        owner: &mut Local<Token>,
        g: &Global<Token>,
        n: usize,
        dropped: &AtomicUsize,
    ) {
        self.drain_local(owner);
        self.drain_global(g);
        assert_eq!(self.0.len(), n, "tasks lost: saw {:?}", self.0);
        assert_eq!(dropped.load(SeqCst), n);
    }

    fn drain_global(&mut self, g: &Global<Token>) {
        while let Some(t) = g.pop() {
            self.add(t);
        }
    }
}

/// A thief thread: steals once into a ring of its own, drains it, and reports the ids.
fn thief(stealer: Arc<Stealer<Token>>) -> thread::JoinHandle<Vec<usize>> {
    thread::spawn(move || {
        let (mut mine, _) = runq::local();
        let mut seen = Seen::default();
        if let Some(t) = stealer.steal_into(&mut mine) {
            seen.add(t);
        }
        seen.drain_local(&mut mine);
        seen.0
    })
}

/// A ring holding tokens `0..n` (pushed by its owner, overflowing into `global` past
/// `LOCAL_CAP`).
fn filled(
    n: usize,
    dropped: &Arc<AtomicUsize>,
    global: &Global<Token>,
) -> (Local<Token>, Stealer<Token>) {
    let (mut owner, stealer) = runq::local();
    for i in 0..n {
        owner.push(token(i, dropped), global, Lane::Ready);
    }
    (owner, stealer)
}

/// The owner pushes past the ring's capacity (overflowing half to the global queue) and pops,
/// while a thief steals into its own ring.
#[test]
fn owner_push_pop_overflow_against_a_thief() {
    const N: usize = LOCAL_CAP + 2;
    loom::model(|| {
        let dropped = Arc::new(AtomicUsize::new(0));
        let global = Global::default();
        let (mut owner, stealer) = runq::local();
        let thief = thief(Arc::new(stealer));
        let mut seen = Seen::default();
        for i in 0..N {
            owner.push(token(i, &dropped), &global, Lane::Ready);
            if i == 2 {
                if let Some(t) = owner.pop() {
                    seen.add(t);
                }
            }
        }
        seen.drain_local(&mut owner);
        seen.merge(thief.join().unwrap());
        seen.drain_global(&global);
        assert_eq!(seen.0.len(), N, "tasks lost: saw {:?}", seen.0);
        assert_eq!(dropped.load(SeqCst), N);
    });
}

/// Two thieves race for one ring while its owner pops and pushes more; each task goes to
/// exactly one of them, and the owner never writes over a slot one of them is still copying.
#[test]
fn two_thieves_and_the_owner() {
    const N: usize = LOCAL_CAP;
    const MORE: usize = LOCAL_CAP - 1;
    loom::model(|| {
        let dropped = Arc::new(AtomicUsize::new(0));
        let global = Global::default();
        let (mut owner, stealer) = filled(N, &dropped, &global);
        let stealer = Arc::new(stealer);
        let thieves: Vec<_> = (0..2).map(|_| thief(stealer.clone())).collect();
        let mut seen = Seen::default();
        if let Some(t) = owner.pop() {
            seen.add(t);
        }
        for i in N..N + MORE {
            owner.push(token(i, &dropped), &global, Lane::Ready);
        }
        for t in thieves {
            seen.merge(t.join().unwrap());
        }
        seen.finish(&mut owner, &global, N + MORE, &dropped);
    });
}

/// The owner keeps pushing while a thief copies out: the owner must not overwrite a slot the
/// thief has claimed but not yet copied (the `steal` index), and a push that finds the ring
/// full during a steal goes to the global queue instead.
#[test]
fn pushes_during_a_steal_never_overwrite_claimed_slots() {
    loom::model(|| {
        let dropped = Arc::new(AtomicUsize::new(0));
        let global = Global::default();
        let (mut owner, stealer) = filled(LOCAL_CAP, &dropped, &global);
        let thief = thief(Arc::new(stealer));
        let mut seen = Seen::default();
        let first = owner.pop().expect("the ring was full");
        seen.add(first);
        owner.push(token(LOCAL_CAP, &dropped), &global, Lane::Ready);
        owner.push(token(LOCAL_CAP + 1, &dropped), &global, Lane::Ready);
        seen.merge(thief.join().unwrap());
        seen.finish(&mut owner, &global, LOCAL_CAP + 2, &dropped);
    });
}

/// Refilling from the global queue (Go's globrunqget), started work first, while a thief
/// steals the refilled tasks; tasks left in a ring when it is dropped are dropped with it, once.
#[test]
fn refill_against_a_thief_and_drop_with_tasks_inside() {
    loom::model(|| {
        let dropped = Arc::new(AtomicUsize::new(0));
        let global = Global::default();
        // Token 0 is new work, queued before the two started ones.
        global.push(token(0, &dropped), Lane::Fresh);
        for i in 1..3 {
            global.push(token(i, &dropped), Lane::Ready);
        }
        let (mut owner, stealer) = runq::local();
        let first = owner
            .refill(&global, 3, Take::First(Lane::Ready))
            .expect("the global queue had tasks");
        assert_eq!(first.id, 1, "the oldest started task comes first");
        let thief = thread::spawn(move || {
            let (mut mine, _) = runq::local();
            // Whatever it steals stays in its ring (minus the one returned) and is dropped
            // with it.
            stealer.steal_into(&mut mine).map(|t| t.id)
        });
        let stolen = thief.join().unwrap();
        assert_ne!(stolen, Some(first.id));
        drop(first);
        drop(owner);
        drop(global);
        assert_eq!(dropped.load(SeqCst), 3);
    });
}
