//! Moving a heap's timers elsewhere (Go's `moveTimers`), shutting a heap down, and the
//! debugging views: `stats` and `verify` (Go's `verifyTimerHeap`).

use std::fmt;

use gort_loom::atomic::Ordering::*;
use gort_loom::yield_now;

use crate::clock::Nanos;
use crate::entry::Entry;
use crate::heap::{drop_each, for_each_caught, Heap, Locked};
use crate::slots::Slots;
use crate::status::{bad, Status};
use crate::timer::{Host, Payload, Target, Timer};
use crate::timers::{Shared, Timers};

/// Payloads that [`Timers::move_to`] had to let go of: those of timers whose last reference
/// was the source heap's (a payload installed on an unarmed timer that was then dropped).
/// Usually empty, and then free. Dropping it runs the payloads' `Drop`s, which are user code:
/// drop it once you hold no lock of your own (the payload rule, design/TIMERS.md).
///
/// # Examples
///
/// ```
/// use gort_timer::Timers;
/// let (a, b) = (Timers::new(0), Timers::new(1));
/// let released = a.move_to(&b, &|_| {}); // under a lock of the caller's, say
/// assert!(released.is_empty());
/// drop(released); // after unlocking
/// ```
#[must_use = "drop it once you hold no lock: dropping it runs payload destructors"]
#[derive(Default)]
pub struct Released(Vec<Target>);

/// Counters of one [`Timers`], for tests and benchmarks. A snapshot.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TimerStats {
    /// Live (not stopped) timers in the heap.
    pub pending: u64,
    /// Entries waiting for lazy removal: stopped timers, and the stale entries that promoted
    /// timers left behind (each timer leaves at most one).
    pub deleted: u64,
    /// Callbacks run from this heap.
    pub fired: u64,
    /// `del` calls that stopped a timer of this heap.
    pub stopped: u64,
    /// Re-arms applied here: lazily modified timers re-keyed, and stopped or fired timers
    /// re-inserted by `modify`.
    pub modified: u64,
    /// Timers received from another heap by `move_to`.
    pub moved: u64,
    /// Timers inserted (by `add`, `modify` re-activation and `move_to`).
    pub added: u64,
    /// Timers re-keyed from the modified-earlier list by `check` (go#41699 path).
    pub adjusted: u64,
    /// Entry moves made by sift-up/sift-down: the heap's work counter.
    pub sift_steps: u64,
    /// Callbacks run from this heap by lateness, the time from the timer's `when` to the
    /// run's `now`: bucket 0 is under 1 µs, bucket `b` is `[2^(b-1), 2^b)` µs, the last
    /// bucket is 16.4 ms and more (see [`lateness_bucket`](crate::lateness_bucket)).
    pub lateness: [u64; crate::LATENESS_BUCKETS],
}

impl Released {
    /// How many payloads it holds.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether it holds none.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl Drop for Released {
    fn drop(&mut self) {
        drop_each(std::mem::take(&mut self.0));
    }
}

impl fmt::Debug for Released {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Released")
            .field("payloads", &self.0.len())
            .finish()
    }
}

impl Timers {
    /// Go's `moveTimers` (from `procresize` when a P is destroyed): moves every live timer of
    /// `self` into `dst` through `Moving`, re-keying lazily modified ones and removing stopped
    /// ones; `self` ends empty with every summary zeroed (Go 1.19 left
    /// `timerModifiedEarliest` set; 1.23's `take` zeroes it). Calls
    /// `host.wake_netpoller` if `dst`'s earliest deadline became earlier.
    ///
    /// Takes both heap locks, lower [`id`](Timers::id) first (ties broken by address), so
    /// concurrent moves in opposite directions cannot deadlock. Callers must hold no other
    /// `Timers` lock. Concurrent `del`/`modify` on the moving timers are safe: they wait out
    /// `Moving` and then act on the timer in `dst`.
    ///
    /// Runs no payload code: a payload it has to let go of is returned in [`Released`],
    /// for the caller to drop after releasing its own locks (the scheduler calls this under
    /// its lock).
    ///
    /// # Panics
    ///
    /// If `dst` is `self`.
    #[track_caller]
    pub fn move_to(&self, dst: &Timers, host: &dyn Host) -> Released {
        let (src, d) = (&*self.shared, &*dst.shared);
        assert!(
            !std::ptr::eq(src, d),
            "gort: Timers::move_to: source and destination are the same Timers"
        );
        let (mut hs, mut hd) = self.lock_both(dst);
        let before = hd.root_when();
        let mut entries = std::mem::take(&mut hs.v);
        for e in &entries {
            if e.is_stale() {
                continue; // released with `entries` below; the timer's live entry moves
            }
            move_entry(d, &mut hd, e);
        }
        // Every timer left `self` (each waited past any Modifying holder).
        src.zero_all();
        src.discard_early(&mut hs);
        let after = hd.root_when();
        let mut dead = hd.unlock();
        dead.append(&mut hs.unlock());
        // The source's references, stale entries' included; any may be a timer's last.
        while let Some(i) = entries.len().checked_sub(1) {
            Timer::release(entries.swap_remove(i).into_timer(), &mut dead);
        }
        if after != 0 && (before == 0 || after < before) {
            host.wake_netpoller(after);
        }
        Released(dead)
    }

    /// Locks `self`'s heap and `dst`'s, lower [`id`](Timers::id) first and ties broken by
    /// address: one global lock order, so that two moves in opposite directions cannot
    /// deadlock. Returns the guards as (`self`'s, `dst`'s).
    fn lock_both<'a>(&'a self, dst: &'a Timers) -> (Locked<'a>, Locked<'a>) {
        let (src, d) = (&*self.shared, &*dst.shared);
        let src_first = (self.id(), src as *const _ as usize) < (dst.id(), d as *const _ as usize);
        if src_first {
            let a = self.lock();
            (a, dst.lock())
        } else {
            let b = dst.lock();
            (self.lock(), b)
        }
    }

    /// Shutdown: removes every timer (status `Removed`, owner cleared, payload dropped) and
    /// zeroes the summaries. Concurrent `del`/`modify` stay safe: they wait out `Removing`,
    /// then see `Removed` (`del` returns false; `modify` re-inserts into its `home`).
    /// Payloads are dropped after the lock is released. `Drop` calls this.
    pub fn drain(&self) {
        let (payloads, entries) = self.take_all();
        drop_each(payloads);
        drop(entries);
    }

    /// [`drain`](Self::drain) for a runtime that shuts down: a waker payload is woken instead
    /// of dropped (Tokio's time driver fires every timer at its shutdown), so a thread parked
    /// on a timer outside the runtime's tasks (a blocking closure in `block_on`, which
    /// shutdown waits for) polls again and learns that no timer will fire, where a dropped
    /// waker left it parked for ever. Callbacks are not run: each is told
    /// ([`Fire::shutdown`](crate::Fire::shutdown)) and dropped.
    pub fn drain_waking(&self) {
        let (payloads, entries) = self.take_all();
        for_each_caught(payloads, |t| match t.into_payload() {
            Some(Payload::Waker(w)) => w.wake(),
            Some(Payload::Fire(f)) => f.shutdown(),
            Some(Payload::Cell(c)) => c.shutdown(),
            None => {}
        });
        drop(entries);
    }

    /// The locked part of `drain`: every timer removed, its payload and the heap's entries
    /// returned, to drop (payloads first) after the lock.
    fn take_all(&self) -> (Vec<Target>, Slots) {
        let s = &*self.shared;
        let mut payloads = Vec::new();
        let entries = {
            let mut h = self.lock();
            let entries = std::mem::take(&mut h.v);
            for e in &entries {
                if e.is_stale() {
                    continue;
                }
                let t = e.timer();
                loop {
                    match t.status() {
                        st @ (Status::Waiting
                        | Status::ModifiedEarlier
                        | Status::ModifiedLater
                        | Status::Deleted) => {
                            if !t.cas(st, Status::Removing) {
                                continue;
                            }
                            t.leave_heap();
                            payloads.push(t.take_target());
                            t.cas_owned(Status::Removing, Status::Removed, "drain: lost Removing");
                            break;
                        }
                        Status::Modifying => yield_now(),
                        _ => bad("drain: impossible status in heap"),
                    }
                }
            }
            s.zero_all();
            let mut list = std::mem::take(&mut h.spare);
            s.take_early(&mut h, &mut list);
            drop(h);
            drop(list);
            entries
        };
        (payloads, entries)
    }

    /// Counters of this heap (a snapshot; takes the lock briefly).
    pub fn stats(&self) -> TimerStats {
        let s = &*self.shared;
        let h = self.lock();
        let deleted = s.deleted.load(Relaxed).max(0) as u64;
        TimerStats {
            pending: (h.len() as u64).saturating_sub(deleted),
            deleted,
            fired: h.c.fired,
            stopped: s.stopped.load(Relaxed),
            modified: h.c.modified,
            moved: h.c.moved,
            added: h.c.added,
            adjusted: h.c.adjusted,
            sift_steps: h.c.sift_steps,
            lateness: h.c.lateness,
        }
    }

    /// Go's `verifyTimerHeap`, extended to every invariant checkable under the lock: heap
    /// order, key copies, indices, owners, statuses, `len`, `timer0_when`, the
    /// modified-earliest bound and list membership, and (when no timer is mid-`Modifying`)
    /// the deleted count. Panics with a sentence naming the first violation. O(n); for tests.
    #[doc(hidden)]
    pub fn verify(&self) {
        let s = &*self.shared;
        let h = self.lock();
        let id = self.id();
        let adj = s.modified_earliest.load(SeqCst);
        let (mut deleted, mut modifying) = (0i64, false);
        for (i, e) in h.v.iter().enumerate() {
            verify_order(&h, id, i, e);
            if e.is_stale() {
                // Left behind by a promotion: only its place in the order is checked.
                deleted += 1;
                continue;
            }
            verify_entry(s, id, i, e);
            match verify_status(id, adj, i, e.timer()) {
                Counted::Deleted => deleted += 1,
                Counted::Modifying => modifying = true,
                Counted::Neither => {}
            }
        }
        verify_summaries(s, &h, id, adj);
        let counted = s.deleted.load(Relaxed);
        if !modifying && counted != deleted {
            panic!("gort: bad timer heap {id}: {deleted} deleted entries but the counter says {counted}");
        }
    }
}

/// Go's `moveTimers` for one live entry of the source heap (both heaps locked): a `Waiting`
/// or modified timer goes through `Moving` into `dst`'s heap `hd` (a modified one under its
/// new deadline); a `Deleted` one through `Removing` to `Removed`. Either way its owner is
/// cleared first, inside the transient status. Waits out `Modifying`.
fn move_entry(d: &Shared, hd: &mut Heap, e: &Entry) {
    let t = e.timer();
    loop {
        match t.status() {
            s @ (Status::Waiting | Status::ModifiedEarlier | Status::ModifiedLater) => {
                if !t.cas(s, Status::Moving) {
                    continue;
                }
                let when = if s == Status::Waiting {
                    e.when
                } else {
                    hd.c.modified += 1;
                    t.nextwhen.load(Relaxed)
                };
                t.leave_heap();
                d.doaddtimer(hd, e.clone_timer(), when);
                hd.c.moved += 1;
                t.cas_owned(Status::Moving, Status::Waiting, "moveTimers: lost Moving");
                return;
            }
            s @ Status::Deleted => {
                // Go goes Deleted -> Removed directly under STW; without STW a racing
                // `modify` could re-insert before `owner` is cleared, so we pass
                // through Removing like every other removal.
                if !t.cas(s, Status::Removing) {
                    continue;
                }
                t.leave_heap();
                t.cas_owned(
                    Status::Removing,
                    Status::Removed,
                    "moveTimers: lost Removing",
                );
                return;
            }
            Status::Modifying => yield_now(),
            _ => bad("moveTimers: impossible status in heap"),
        }
    }
}

/// Which of `verify`'s counts a live entry's status adds to.
enum Counted {
    /// A lazily deleted timer: counted against `deleted`.
    Deleted,
    /// A timer mid-`Modifying`: its holder may have counted it already, so the deleted
    /// count cannot be checked.
    Modifying,
    /// Any other allowed status.
    Neither,
}

/// Heap order and a valid key for slot `i`, stale entries included: every key is positive
/// and no earlier than its parent's in the 4-ary heap.
fn verify_order(h: &Heap, id: usize, i: usize, e: &Entry) {
    if e.when <= 0 {
        panic!(
            "gort: bad timer heap {id}: slot {i} has key {} <= 0",
            e.when
        );
    }
    if i > 0 {
        let p = (i - 1) / 4;
        if e.when < h.v[p].when {
            panic!(
                "gort: bad timer heap {id}: slot {i} (key {}) is earlier than its parent \
                 slot {p} (key {})",
                e.when, h.v[p].when
            );
        }
    }
}

/// A live entry agrees with its timer: the timer's `when` is the key, an indexed timer
/// records this slot, and the timer names this heap as its owner.
fn verify_entry(s: &Shared, id: usize, i: usize, e: &Entry) {
    let t = e.timer();
    if t.when.load(Relaxed) != e.when {
        panic!("gort: bad timer heap {id}: slot {i}'s timer.when differs from its key");
    }
    if e.indexed() && t.index.load(Relaxed) as usize != i {
        panic!("gort: bad timer heap {id}: slot {i}'s timer records another index");
    }
    if !s.is(t.owner.load(Relaxed)) {
        panic!("gort: bad timer heap {id}: slot {i}'s timer names another owner");
    }
}

/// A live entry's status is one a heap may hold; a `ModifiedEarlier` timer's new deadline is
/// no earlier than the modified-earliest summary `adj`, and it is on the modified-earlier list.
fn verify_status(id: usize, adj: Nanos, i: usize, t: &Timer) -> Counted {
    match t.status() {
        Status::Waiting | Status::ModifiedLater => Counted::Neither,
        Status::Deleted => Counted::Deleted,
        Status::Modifying => Counted::Modifying,
        Status::ModifiedEarlier => {
            let next = t.nextwhen.load(Relaxed);
            if adj == 0 || adj > next {
                panic!(
                    "gort: bad timer heap {id}: modified-earliest {adj} is above slot \
                     {i}'s new deadline {next}"
                );
            }
            if !t.queued().load(Relaxed) {
                panic!(
                    "gort: bad timer heap {id}: slot {i} is modified earlier but not on \
                     the modified-earlier list"
                );
            }
            Counted::Neither
        }
        st => panic!("gort: bad timer heap {id}: slot {i} has status {st:?}"),
    }
}

/// The heap's summaries agree with its slots: the length counter, `timer0_when` (the root's
/// key) and, for an empty heap, a zero modified-earliest (go#51654).
fn verify_summaries(s: &Shared, h: &Heap, id: usize, adj: Nanos) {
    let num = s.num.load(Relaxed);
    if num != h.len() {
        panic!(
            "gort: bad timer heap {id}: len {} but the counter says {num}",
            h.len()
        );
    }
    let t0 = s.timer0_when.load(SeqCst);
    if t0 != h.root_when() {
        panic!(
            "gort: bad timer heap {id}: timer0_when {t0} but the root key is {}",
            h.root_when()
        );
    }
    if h.v.is_empty() && adj != 0 {
        panic!("gort: bad timer heap {id}: empty but modified-earliest is {adj} (go#51654)");
    }
}

impl Drop for Timers {
    /// Drains, so that no timer keeps a pointer to the freed heap. While unwinding (maybe from
    /// a corruption panic, when draining could panic again and abort) it leaks the heap
    /// instead: leaking keeps every owner pointer valid.
    fn drop(&mut self) {
        if std::thread::panicking() {
            let empty = Box::new(Shared::new(self.id(), None));
            let shared = std::mem::replace(&mut self.shared, empty);
            Box::leak(shared);
            return;
        }
        self.drain();
    }
}
