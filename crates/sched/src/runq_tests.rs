//! Unit tests of `runq.rs` (the loom models are `tests/loom_runq.rs`).

use super::*;
use std::sync::atomic::AtomicBool;

/// A woken task in a ring that a burst of spawns overflows goes to the `Ready` lane, not
/// behind the burst; a batch of spawns alone goes to `Fresh`.
#[test]
fn an_overflow_keeps_started_work_in_the_ready_lane() {
    let global = Global::default();
    let (mut ring, _) = local::<usize>();
    ring.push(0, &global, Lane::Ready);
    for t in 1..=LOCAL_CAP {
        ring.push(t, &global, Lane::Fresh);
    }
    let mut q = global.lock();
    assert_eq!(
        q.ready.front(),
        Some(&0),
        "the woken task went behind the spawns"
    );
    assert!(q.fresh.is_empty());
    q.ready.clear();
    drop(q);
    global.publish(&global.lock());
    // The ring now holds only spawns: the next overflow is theirs.
    for t in 0..LOCAL_CAP {
        ring.push(1000 + t, &global, Lane::Fresh);
    }
    let q = global.lock();
    assert!(q.ready.is_empty(), "spawns alone went to the Ready lane");
    assert_eq!(q.fresh.len(), HALF as usize + 1);
}

/// Only a task readied by a thread without a P counts as woken (what makes a yield serve the
/// global queue, `P::note_yield`): the overflow of a ring full of started tasks does not.
#[test]
fn only_wakes_off_every_p_count_as_woken() {
    let global = Global::default();
    let (mut ring, _) = local::<usize>();
    for t in 0..=LOCAL_CAP {
        ring.push(t, &global, Lane::Ready);
    }
    assert!(
        global.ready_len() > 0,
        "the ring overflowed into the Ready lane"
    );
    assert_eq!(global.woken(), 0, "an overflow counted as a wake");
    global.push_woken(5000, Lane::Ready);
    assert_eq!(global.woken(), 1);
    global.push_woken(5001, Lane::Fresh);
    assert_eq!(global.woken(), 1, "a spawn counted as a wake");
}

/// The lanes: `Take` decides the order, `Only` never touches the other lane, and each
/// lane is FIFO.
#[test]
fn refill_takes_lanes_in_the_order_asked() {
    let global = Global::default();
    global.push_batch([10, 11, 12].into_iter(), Lane::Fresh);
    global.push_batch([1, 2].into_iter(), Lane::Ready);
    let (mut ring, _) = local::<usize>();
    let drain = |ring: &mut Local<usize>, first: usize| {
        let mut got = vec![first];
        got.extend(std::iter::from_fn(|| ring.pop()));
        got
    };
    let t = ring.refill(&global, 1, Take::First(Lane::Fresh)).unwrap();
    assert_eq!(drain(&mut ring, t), [10]);
    let t = ring.refill(&global, 8, Take::Only(Lane::Ready)).unwrap();
    assert_eq!(drain(&mut ring, t), [1, 2]);
    assert!(ring.refill(&global, 8, Take::Only(Lane::Ready)).is_none());
    assert_eq!(global.len(), 2);
    global.push(3, Lane::Ready);
    let t = ring.refill(&global, 8, Take::First(Lane::Ready)).unwrap();
    assert_eq!(drain(&mut ring, t), [3, 11, 12]);
    assert!(global.is_empty());
}

/// Real threads: an owner pushing (overflowing) and popping, two thieves stealing and
/// draining their own rings. Every task comes out exactly once.
#[test]
fn every_task_comes_out_once_under_real_threads() {
    const N: usize = 200_000;
    let global = std::sync::Arc::new(Global::default());
    let (mut owner, stealer) = local::<usize>();
    let stealer = std::sync::Arc::new(stealer);
    let done = std::sync::Arc::new(AtomicBool::new(false));
    let thieves: Vec<_> = (0..2)
        .map(|_| {
            let (stealer, done, global) = (stealer.clone(), done.clone(), global.clone());
            std::thread::spawn(move || {
                let (mut mine, _) = local::<usize>();
                let mut got = Vec::new();
                while !done.load(SeqCst) || !stealer.is_empty() {
                    if let Some(t) = stealer.steal_into(&mut mine) {
                        got.push(t);
                        while let Some(t) = mine.pop() {
                            got.push(t);
                        }
                    }
                    if let Some(t) = mine.refill(&global, 8, Take::First(Lane::Ready)) {
                        got.push(t);
                        while let Some(t) = mine.pop() {
                            got.push(t);
                        }
                    }
                }
                got
            })
        })
        .collect();
    let mut got = Vec::new();
    for i in 0..N {
        owner.push(
            i,
            &global,
            if i % 2 == 0 { Lane::Ready } else { Lane::Fresh },
        );
        if i % 3 == 0 {
            got.extend(owner.pop());
        }
    }
    while let Some(t) = owner.pop() {
        got.push(t);
    }
    done.store(true, SeqCst);
    for t in thieves {
        got.extend(t.join().unwrap());
    }
    while let Some(t) = global.pop() {
        got.push(t);
    }
    got.sort_unstable();
    assert_eq!(got.len(), N, "tasks lost or duplicated");
    assert!(
        got.iter().enumerate().all(|(i, &t)| i == t),
        "a task came out twice"
    );
}
