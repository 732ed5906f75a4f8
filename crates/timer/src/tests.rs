//! White-box tests of the heap helpers and corruption checks (the behaviour tests live in
//! `tests/`).

use gort_loom::atomic::Ordering::Relaxed;
use gort_loom::Arc;

use crate::entry::UNINDEXED;
use crate::heap::{Entry, Heap};
use crate::run::next_period;
use crate::timers::min_nonzero;
use crate::*;

/// An entry of a promoted timer: the heap keeps its index.
fn entry(when: Nanos) -> Entry {
    let t = Timer::new();
    t.index.store(0, Relaxed);
    Entry::new(when, crate::tref::TimerRef::from_arc(t))
}

fn check_heap(h: &Heap) {
    for (i, e) in h.v.iter().enumerate() {
        if e.indexed() {
            assert_eq!(
                e.timer().index.load(Relaxed) as usize,
                i,
                "index of slot {i}"
            );
        } else {
            assert_eq!(
                e.timer().index.load(Relaxed),
                UNINDEXED,
                "slot {i} was noted"
            );
        }
        if i > 0 {
            assert!(e.when >= h.v[(i - 1) / 4].when, "order at slot {i}");
        }
    }
}

#[test]
fn push_and_remove_keep_order_and_indices() {
    let mut h = Heap::default();
    // A deterministic shuffle with duplicates; every third timer unindexed, whose entries no
    // sift may write to (`check_heap`).
    for k in 0..200i64 {
        let when = 1 + (k * 7919) % 97;
        h.push(if k % 3 == 0 {
            Entry::new(when, crate::tref::TimerRef::from_arc(Timer::new()))
        } else {
            entry(when)
        });
        check_heap(&h);
    }
    let mut last = 0;
    while !h.v.is_empty() {
        let (e, _) = h.remove_at(0);
        assert!(e.when >= last, "removed out of order");
        last = e.when;
        check_heap(&h);
    }
}

#[test]
fn remove_middle_reports_smallest_changed_slot() {
    let mut h = Heap::default();
    for w in [1, 50, 60, 70, 80, 51, 52, 53, 54, 2] {
        h.push(entry(w));
    }
    check_heap(&h);
    let n = h.len();
    for i in (1..n).rev() {
        let (_, smallest) = h.remove_at(i.min(h.len() - 1));
        assert!(smallest <= i);
        check_heap(&h);
    }
}

#[test]
fn rekey_moves_both_ways() {
    let mut h = Heap::default();
    for w in 1..=100 {
        h.push(entry(w * 10));
    }
    let i = h.slot_of(&h.v[77].clone_timer());
    h.rekey(i, 5); // earlier: up to the root
    check_heap(&h);
    assert_eq!(h.v[0].when, 5);
    h.rekey(0, 10_000); // later: down to a leaf
    check_heap(&h);
    assert_eq!(h.v[0].when, 10);
}

#[test]
fn four_ary_is_shallow() {
    let mut h = Heap::default();
    for w in (1..=4096).rev() {
        h.push(entry(w)); // every insert is a new minimum: full-depth sift-up
    }
    // log4(4096) = 6 levels: at most 6 moves per insert.
    assert!(h.c.sift_steps <= 6 * 4096, "{} sift steps", h.c.sift_steps);
    assert!(h.c.sift_steps >= 4 * 4096, "{} sift steps", h.c.sift_steps);
}

#[test]
#[should_panic(expected = "gort: timer data corruption: siftup index out of range")]
fn siftup_out_of_range_is_corruption() {
    let mut h = Heap::default();
    h.siftup(0);
}

#[test]
#[should_panic(expected = "gort: timer data corruption: heaped timer with a non-positive deadline")]
fn non_positive_key_is_corruption() {
    let mut h = Heap::default();
    h.v.push(entry(0));
    h.siftdown(0);
}

#[test]
#[should_panic(expected = "gort: timer data corruption: unknown status word")]
fn unknown_status_is_corruption() {
    let t = Timer::new();
    t.status.store(42, Relaxed);
    let _ = t.status();
}

#[test]
#[should_panic(expected = "is earlier than its parent")]
fn verify_catches_heap_order() {
    let ts = Timers::new(3);
    let a = Timer::new();
    let b = Timer::new();
    ts.add(&a, 10, 0, &|_| {});
    ts.add(&b, 20, 0, &|_| {});
    ts.lock().v[1].when = 1;
    ts.verify();
}

#[test]
#[should_panic(expected = "empty but modified-earliest")]
fn verify_catches_stale_summary_on_empty_heap() {
    let ts = Timers::new(0);
    ts.shared.modified_earliest.store(5, Relaxed);
    ts.verify();
}

#[test]
#[should_panic(expected = "gort: timer data corruption: runtimer: root in an impossible status")]
fn runtimer_panics_on_impossible_root() {
    let ts = Timers::new(0);
    let t = Timer::new();
    ts.add(&t, 10, 0, &|_| {});
    t.status.store(Status::Removed as u32, Relaxed);
    ts.check(10, true);
}

#[test]
fn periodic_next_skips_missed_ticks_and_saturates() {
    assert_eq!(next_period(10, 10, 10), 20);
    assert_eq!(next_period(10, 10, 19), 20);
    assert_eq!(next_period(10, 10, 20), 30);
    assert_eq!(next_period(10, 10, 95), 100);
    assert_eq!(next_period(NEVER - 5, 10, NEVER - 5), NEVER);
    assert_eq!(next_period(1, i64::MAX, 2), NEVER);
}

#[test]
fn min_nonzero_treats_zero_as_none() {
    assert_eq!(min_nonzero(0, 0), 0);
    assert_eq!(min_nonzero(0, 7), 7);
    assert_eq!(min_nonzero(7, 0), 7);
    assert_eq!(min_nonzero(3, 7), 3);
    assert_eq!(min_nonzero(9, 7), 7);
}

#[test]
fn entry_is_sixteen_bytes() {
    assert_eq!(std::mem::size_of::<Entry>(), 16);
}

#[test]
fn timers_survive_a_move_of_the_value() {
    // Timers point at the boxed state, not at the `Timers` value.
    let ts = Timers::new(0);
    let t = Timer::new();
    ts.add(&t, 10, 0, &|_| {});
    let moved = vec![ts];
    assert!(del(&t));
    moved[0].verify();
    assert_eq!(moved[0].deleted(), 1);
    let keep: Arc<Timer> = t.clone();
    drop(moved); // drains
    assert_eq!(keep.status(), Status::Removed);
}

/// design/TIMERS.md is the crate's one specification: it must name every status and every
/// public operation, so that a status or an operation added to the code without its rows in
/// the spec fails here.
#[test]
fn the_spec_names_every_status_and_operation() {
    let spec = include_str!("../../../design/TIMERS.md");
    for s in Status::ALL {
        let name = format!("{s:?}");
        assert!(spec.contains(&name), "design/TIMERS.md never names {name}");
    }
    let operations = [
        "add",
        "del",
        "modify",
        "modify_fire",
        "reset",
        "check",
        "try_check",
        "check_giving_way",
        "move_to",
        "drain",
        "wake_time",
        "wake_bound",
        "verify",
        "cleantimers",
        "runtimer",
        "adjust",
        "clear_deleted",
    ];
    for op in operations {
        let named = spec.contains(&format!("`{op}`")) || spec.contains(&format!("{op}("));
        assert!(named, "design/TIMERS.md never names {op}");
    }
}

/// `check_giving_way` (sysmon's) stops when, between two timers, the heap's lock is held: the
/// holder (the owning P arming a timer, or its round) is not made to trade the lock with it
/// timer by timer, and the rest stay due, in order. A holder thread takes the lock while the
/// first timer's payload runs and keeps it until the batch returns (or 2 s).
#[test]
fn checking_while_giving_way_stops_at_a_lock_taken_between_two_timers() {
    use std::sync::atomic::AtomicUsize;
    use std::sync::mpsc::channel;
    use std::sync::Mutex as StdMutex;
    use std::time::Duration;

    let ts = Timers::new(0);
    let (take_tx, take_rx) = channel::<()>();
    let (taken_tx, taken_rx) = channel::<()>();
    let (release_tx, release_rx) = channel::<()>();
    // The first payload to run asks the holder to take the lock, and returns once it has.
    let handshake = Arc::new(StdMutex::new(Some((take_tx, taken_rx))));
    let fired = Arc::new(AtomicUsize::new(0));
    let timers: Vec<_> = (0..3)
        .map(|i| {
            let t = Timer::new();
            let (fired, handshake) = (fired.clone(), handshake.clone());
            t.set_fire(std::sync::Arc::new(move |_| {
                fired.fetch_add(1, Relaxed);
                if let Some((take, taken)) = handshake.lock().unwrap().take() {
                    take.send(()).unwrap();
                    taken.recv().unwrap();
                }
            }));
            ts.add(&t, 10 + i, 0, &|_| {});
            t
        })
        .collect();
    let c = std::thread::scope(|s| {
        let ts = &ts;
        s.spawn(move || {
            take_rx.recv().unwrap();
            let h = ts.lock();
            taken_tx.send(()).unwrap();
            let _ = release_rx.recv_timeout(Duration::from_secs(2));
            drop(h);
        });
        let c = ts.check_giving_way(100);
        let _ = release_tx.send(()); // the holder may have given up waiting
        c
    });
    assert_eq!(c.ran, 1, "ran past a held lock");
    assert_eq!(fired.load(Relaxed), 1);
    assert_eq!((c.next, ts.len()), (11, 2), "the rest stay due");
    let c = ts.check(100, false);
    assert_eq!((c.ran, c.next, ts.len()), (2, 0, 0));
    drop(timers);
}
