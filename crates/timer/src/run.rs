//! The run path of a heap, all under its lock: Go's `adjusttimers` (rewritten for
//! go#41699), `runtimer`, `runOneTimer` and `clearDeletedTimers`.

use gort_loom::atomic::Ordering::*;
use gort_loom::yield_now;

use crate::clock::{Nanos, NEVER};
use crate::entry::{Entry, UNINDEXED};
use crate::heap::Heap;
use crate::status::{bad, Status};
use crate::timer::{Payload, Timer};
use crate::timers::{min_nonzero, Shared};
use crate::tref::TimerRef;

/// How many slots ahead `clear_deleted` prefetches a timer: about the misses a core keeps
/// in flight, at the walk's few nanoseconds per slot.
const CLEAR_PREFETCH: usize = 16;

/// What `runtimer` did with the root.
pub(crate) enum Run {
    /// Ran one timer: run `payload` with `when` after unlocking; `keep` is the fired
    /// one-shot's heap reference, dropped after unlocking too.
    Fired {
        payload: Option<Payload>,
        when: Nanos,
        keep: Option<TimerRef>,
    },
    /// The root is not due until this key.
    Next(Nanos),
    /// The heap became empty.
    Empty,
}

/// The next periodic deadline: the first point of `when`'s phase strictly after `now`
/// (missed ticks are skipped, never burst), saturating at `NEVER` instead of wrapping.
pub(crate) fn next_period(when: Nanos, period: Nanos, now: Nanos) -> Nanos {
    // now >= when > 0, so `now - when` cannot overflow.
    let k = 1 + (now - when) / period;
    period
        .checked_mul(k)
        .and_then(|d| when.checked_add(d))
        .unwrap_or(NEVER)
}

impl Shared {
    /// Go's `adjusttimers` (lock held), rewritten for go#41699: instead of scanning the heap
    /// it re-sifts only the timers on the modified-earlier list, O(k log n) for k of them.
    /// Runs only once the earliest modified deadline is due, as in Go. Go's
    /// `addAdjustedTimers` is folded in: each listed timer goes Moving -> re-sift in place ->
    /// Waiting, instead of being removed during a scan and re-added after it. The first time
    /// a timer is listed it has no recorded slot: it is promoted instead, a second entry
    /// pushed and the first left stale (`entry.rs`).
    pub(crate) fn adjust(&self, h: &mut Heap, now: Nanos) {
        let first = self.modified_earliest.load(SeqCst);
        if first == 0 || first > now {
            return;
        }
        // Invariant 6: zero the summary, *then* take the list. A `modify` that pushes after
        // our take lowers the summary after our zero, so it survives.
        self.zero_modified_earliest(h);
        let mut list = std::mem::take(&mut h.spare);
        self.take_early(h, &mut list);
        for t in list.drain(..) {
            self.adjust_one(h, &t);
            // The list's reference may be the last (the timer fired or was stopped since).
            Timer::release(t, &mut h.dead);
        }
        h.spare = list;
        self.update_timer0_when(h);
    }

    /// Re-keys one timer taken from the modified-earlier list (lock held), promoting it the
    /// first time.
    fn adjust_one(&self, h: &mut Heap, t: &TimerRef) {
        // Under our lock, `owner == self` is stable: only our lock holders change it.
        if !self.is(t.owner.load(Relaxed)) {
            return; // fired, removed or moved since it was queued
        }
        loop {
            match t.status() {
                // Re-keyed at the root already, or stopped since: a stopped timer's
                // entry goes lazily, like any other.
                Status::Waiting | Status::Deleted => break,
                s @ (Status::ModifiedEarlier | Status::ModifiedLater) => {
                    if !t.cas(s, Status::Moving) {
                        continue;
                    }
                    let when = t.nextwhen.load(Relaxed);
                    if t.index.load(Relaxed) == UNINDEXED {
                        // First time: promote. The old entry turns stale and counts as
                        // deleted; the new one is indexed from its push on.
                        t.index.store(0, Relaxed);
                        self.deleted.fetch_add(1, Relaxed);
                        t.when.store(when, Relaxed);
                        h.push(Entry::new(when, t.clone()));
                        self.note_len(h);
                    } else {
                        let i = h.slot_of(t);
                        h.rekey(i, when);
                    }
                    h.c.modified += 1;
                    h.c.adjusted += 1;
                    t.cas_owned(Status::Moving, Status::Waiting, "adjust: lost Moving");
                    break;
                }
                Status::Modifying => yield_now(),
                _ => bad("adjust: listed timer in an impossible status"),
            }
        }
    }

    /// Zeroes the modified-earliest summary (lock held) after folding it into `timer0_when`,
    /// so that lock-free `wake_time` readers keep seeing the modified deadline while the
    /// caller re-keys (Go 1.23's `adjust` order; 1.19 showed neither for a moment). A modify
    /// landing between the load and the zeroing pushed to the list first (invariant 6), so
    /// the caller fixes it; until then only its own `wake_netpoller` announces it. The
    /// caller restores `timer0_when` with `update_timer0_when` before unlocking.
    fn zero_modified_earliest(&self, h: &Heap) {
        let adj = self.modified_earliest.load(SeqCst);
        // SeqCst: see `update_timer0_when`.
        self.timer0_when
            .store(min_nonzero(h.root_when(), adj), SeqCst);
        self.modified_earliest.store(0, SeqCst);
    }

    /// Go's `runtimer` (lock held, heap non-empty): examines the root until it runs one timer,
    /// finds it not yet due, or empties the heap.
    pub(crate) fn runtimer(&self, h: &mut Heap, now: Nanos) -> Run {
        loop {
            let Some(e) = h.v.first() else {
                return Run::Empty;
            };
            if e.is_stale() {
                self.drop_stale_root(h);
                continue;
            }
            let t = e.timer();
            self.check_owner(t, "runtimer: bad owner");
            match t.status() {
                s @ Status::Waiting => {
                    if e.when > now {
                        return Run::Next(e.when);
                    }
                    if !t.cas(s, Status::Running) {
                        continue;
                    }
                    return self.run_one(h, now);
                }
                s @ Status::Deleted => {
                    if !t.cas(s, Status::Removing) {
                        continue;
                    }
                    self.remove_root_deleted(h);
                    if h.v.is_empty() {
                        return Run::Empty;
                    }
                }
                s @ (Status::ModifiedEarlier | Status::ModifiedLater) => {
                    if !t.cas(s, Status::Moving) {
                        continue;
                    }
                    self.rekey_root(h);
                }
                Status::Modifying => yield_now(),
                _ => bad("runtimer: root in an impossible status"),
            }
        }
    }

    /// Go's `runOneTimer` (lock held, root `Running`): claims the payload, re-arms (periodic)
    /// or removes (one-shot) the timer, and leaves `Running`, all before the lock is dropped.
    fn run_one(&self, h: &mut Heap, now: Nanos) -> Run {
        let when = h.v[0].when;
        let period = h.v[0].timer().period.load(Relaxed);
        // Claimed while Running: a racing `del` waits for us, then returns false, so the
        // payload it would drop is one we already hold.
        let payload = h.v[0].timer().claim_payload(period > 0, h.v[0].is_cell());
        h.c.fired += 1;
        h.c.lateness[crate::heap::lateness_bucket(when, now)] += 1;
        if period > 0 {
            let next = next_period(when, period, now);
            h.v[0].when = next;
            h.v[0].timer().when.store(next, Relaxed);
            let j = h.siftdown(0);
            h.v[j].timer().cas_owned(
                Status::Running,
                Status::Waiting,
                "runOneTimer: lost Running",
            );
            self.update_timer0_when(h);
            Run::Fired {
                payload,
                when,
                keep: None,
            }
        } else {
            let t = self.dodeltimer0(h);
            t.cas_owned(
                Status::Running,
                Status::NoStatus,
                "runOneTimer: lost Running",
            );
            Run::Fired {
                payload,
                when,
                keep: Some(t),
            }
        }
    }

    /// Go's `clearDeletedTimers` (lock held; local P only, under the 1/4 rule): one in-place
    /// pass that drops deleted timers and re-keys modified ones, then re-heapifies by sifting
    /// each kept entry up as it is compacted.
    pub(crate) fn clear_deleted(&self, h: &mut Heap) {
        // Every modified timer is re-keyed below, so the summary and list start afresh
        // (same order as `adjust`, for invariant 6).
        self.zero_modified_earliest(h);
        self.discard_early(h);

        let n = h.len();
        let mut to = 0;
        let mut changed = false;
        let mut cdel = 0;
        for i in 0..n {
            // A large heap's timers are cold: start loading one a few slots ahead, so the
            // misses of this walk overlap instead of queueing one per slot.
            if let Some(e) = h.v.get(i + CLEAR_PREFETCH) {
                crate::slots::prefetch(e.as_ptr().cast());
            }
            match clear_slot(h, i, to, changed) {
                Cleared::Kept => to += 1,
                Cleared::Rekeyed => {
                    to += 1;
                    changed = true;
                }
                Cleared::Dropped => {
                    cdel += 1;
                    changed = true;
                }
            }
        }
        drop_tail(h, to);
        self.deleted.fetch_sub(cdel, Relaxed);
        self.note_len(h);
        self.update_timer0_when(h);
    }
}

/// What `clear_deleted` did with one slot. A kept or re-keyed entry now ends the compacted
/// prefix (at slot `to`); a dropped one stays behind the prefix, to be removed at the end.
enum Cleared {
    /// A `Waiting` timer, kept with its key.
    Kept,
    /// A modified timer, given its new key (which breaks the order behind it).
    Rekeyed,
    /// A stale entry or a deleted timer (now `Removed`, owner cleared).
    Dropped,
}

/// One slot of `clear_deleted`'s pass: slot `i` goes to slot `to` unless it is dropped.
/// Once anything before it was dropped or re-keyed (`changed`), every kept entry is sifted up
/// from `to`, so that the compacted prefix stays a heap. Waits out `Modifying`: every other
/// status a heap entry can have is settled here, under the heap lock.
#[inline]
fn clear_slot(h: &mut Heap, i: usize, to: usize, changed: bool) -> Cleared {
    if h.v[i].is_stale() {
        // Dropped with the deleted ones; its timer's status is the live entry's.
        return Cleared::Dropped;
    }
    loop {
        let t = h.v[i].timer();
        match t.status() {
            Status::Waiting => {
                if changed {
                    h.v.swap(to, i);
                    h.siftup(to);
                }
                return Cleared::Kept;
            }
            s @ (Status::ModifiedEarlier | Status::ModifiedLater) => {
                if !t.cas(s, Status::Moving) {
                    continue;
                }
                rekey_moving(h, i, to);
                return Cleared::Rekeyed;
            }
            s @ Status::Deleted => {
                if !t.cas(s, Status::Removing) {
                    continue;
                }
                t.leave_heap();
                t.cas_owned(Status::Removing, Status::Removed, "clear: lost Removing");
                return Cleared::Dropped;
            }
            Status::Modifying => yield_now(),
            _ => bad("clearDeletedTimers: impossible status in heap"),
        }
    }
}

/// Gives slot `i`'s timer, which this heap holds in `Moving`, its new deadline as its key,
/// moves it to slot `to` and sifts it up; only then is it `Waiting` again, so that nobody
/// sees it `Waiting` under a key it no longer has.
#[inline]
fn rekey_moving(h: &mut Heap, i: usize, to: usize) {
    let t = h.v[i].timer();
    let when = t.nextwhen.load(Relaxed);
    t.when.store(when, Relaxed);
    h.v[i].when = when;
    h.v.swap(to, i);
    let j = h.siftup(to);
    h.c.modified += 1;
    h.v[j]
        .timer()
        .cas_owned(Status::Moving, Status::Waiting, "clear: lost Moving");
}

/// Removes the entries `clear_deleted` dropped, all swapped into `[to, len)` with their
/// timers' owners cleared. Any of them may hold a timer's last reference: it goes through
/// `Timer::release`, whose payload lands in the heap's dead list (dropped after unlocking).
#[inline]
fn drop_tail(h: &mut Heap, to: usize) {
    while h.v.len() > to {
        let e = h.v.swap_remove(h.v.len() - 1);
        Timer::release(e.into_timer(), &mut h.dead);
    }
}
