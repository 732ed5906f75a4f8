//! The 4-ary min-heap of one `Timers`: Go's `siftupTimer`/`siftdownTimer` with the key stored
//! inline (Go 1.23's `timerWhen`), plus the counters kept under the same lock.
//!
//! Every routine here runs with the heap lock held. An indexed entry's timer records its slot
//! in `Timer::index` (written here on every move) so that a modified-earlier timer can be
//! re-sifted in place in O(log n) instead of being found by a scan (go#41699); other
//! entries' timers are never touched by a sift (see `entry.rs`).

use std::mem::ManuallyDrop;
use std::ops::{Deref, DerefMut};
use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};

use gort_loom::atomic::Ordering::Relaxed;
use gort_loom::MutexGuard;

use crate::clock::Nanos;
pub(crate) use crate::entry::Entry;
use crate::slots::Slots;
use crate::status::bad;
use crate::timer::{Target, Timer};

/// Counters that only lock holders touch, so they are plain integers.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Counters {
    pub(crate) fired: u64,
    pub(crate) added: u64,
    pub(crate) modified: u64,
    pub(crate) moved: u64,
    pub(crate) adjusted: u64,
    pub(crate) sift_steps: u64,
    /// Fired timers by lateness (`now - when`), see [`lateness_bucket`].
    pub(crate) lateness: [u64; LATENESS_BUCKETS],
}

/// Buckets of the lateness histogram ([`TimerStats::lateness`](crate::TimerStats)).
pub const LATENESS_BUCKETS: usize = 16;

/// The lateness bucket of a timer due at `when` run at `now`: bucket 0 holds runs less than
/// 1 µs late, bucket `b` (1..=14) runs `[2^(b-1), 2^b)` µs late, and bucket 15 everything
/// from 2^14 µs (16.4 ms) on. Log2 buckets: one `leading_zeros`, no clock read (the run
/// path has `now` already).
///
/// # Examples
///
/// ```
/// use gort_timer::lateness_bucket;
/// assert_eq!(lateness_bucket(1_000, 1_500), 0); // 0.5 µs late
/// assert_eq!(lateness_bucket(1_000, 4_000), 2); // 3 µs: [2, 4) µs
/// assert_eq!(lateness_bucket(0, 1_000_000_000), 15); // 1 s: the last bucket
/// ```
pub fn lateness_bucket(when: Nanos, now: Nanos) -> usize {
    let micros = now.saturating_sub(when) / 1_000;
    let bits = (i64::BITS - micros.leading_zeros()) as usize;
    bits.min(LATENESS_BUCKETS - 1)
}

/// What `Timers::heap` guards.
#[derive(Default)]
pub(crate) struct Heap {
    pub(crate) v: Slots,
    /// Scratch for the drained modified-earlier list, kept to reuse its allocation.
    pub(crate) spare: Vec<crate::tref::TimerRef>,
    /// Payloads found on timers whose last reference a lock holder let go of
    /// ([`Timer::release`]), dropped by [`Locked`] after unlocking (the payload rule: user
    /// code never runs under the heap lock). Empty, and unallocated, nearly always.
    pub(crate) dead: Vec<Target>,
    pub(crate) c: Counters,
}

/// The heap lock's guard: unlocks, then drops what the holder put in [`Heap::dead`]. A caller
/// that owns a transient status takes `dead` out first ([`Locked::unlock`]) and drops it after
/// the CAS that ends the window.
pub(crate) struct Locked<'a>(ManuallyDrop<MutexGuard<'a, Heap>>);

impl<'a> Locked<'a> {
    pub(crate) fn new(g: MutexGuard<'a, Heap>) -> Locked<'a> {
        Locked(ManuallyDrop::new(g))
    }
}

/// Drops payloads that a lock holder let go of, once the caller holds no lock and owns no
/// transient status. Inline and free in the usual case, an unallocated `Vec` (the drop glue's
/// out-of-line loop cost T1's `add` ~19 instructions per call).
#[inline]
pub(crate) fn drop_dead(dead: Vec<Target>) {
    if dead.capacity() == 0 {
        std::mem::forget(dead); // nothing allocated, nothing to drop
    } else {
        drop_dead_slow(dead);
    }
}

#[cold]
#[inline(never)]
fn drop_dead_slow(dead: Vec<Target>) {
    drop_each(dead);
}

/// Drops the payloads one at a time. Their `Drop`s are user code, of unrelated timers: when
/// one panics, the others are still dropped, each outside any unwinding (had the `Vec`'s own
/// drop glue met a second panic while it unwound from the first, the process would abort),
/// and the first panic is resumed after the last drop, for the caller to catch as before.
pub(crate) fn drop_each(payloads: Vec<Target>) {
    for_each_caught(payloads, drop);
}

/// Calls `f` on each of `items`, user code, under the rule of [`drop_each`].
pub(crate) fn for_each_caught<T>(items: Vec<T>, mut f: impl FnMut(T)) {
    let mut first_panic = None;
    for item in items {
        if let Err(panic) = catch_unwind(AssertUnwindSafe(|| f(item))) {
            match first_panic {
                None => first_panic = Some(panic),
                // The panic already kept is the one resumed; a payload whose own drop panics
                // too is leaked rather than risk a panic in a destructor here.
                Some(_) => std::mem::forget(panic),
            }
        }
    }
    if let Some(panic) = first_panic {
        resume_unwind(panic);
    }
}

impl Locked<'_> {
    /// Unlocks and returns the payloads to drop, for a caller that still owns a transient
    /// status (it drops them after leaving it) or holds a lock of its own.
    #[inline]
    pub(crate) fn unlock(self) -> Vec<Target> {
        let mut this = ManuallyDrop::new(self); // our Drop would look at `dead` again
        let dead = std::mem::take(&mut this.0.dead);
        // SAFETY: `this` is never dropped, so the guard is taken exactly once, here.
        drop(unsafe { ManuallyDrop::take(&mut this.0) });
        dead
    }
}

impl Deref for Locked<'_> {
    type Target = Heap;
    #[inline]
    fn deref(&self) -> &Heap {
        &self.0
    }
}

impl DerefMut for Locked<'_> {
    #[inline]
    fn deref_mut(&mut self) -> &mut Heap {
        &mut self.0
    }
}

impl Drop for Locked<'_> {
    fn drop(&mut self) {
        // Free when empty: no allocation.
        let dead = std::mem::take(&mut self.0.dead);
        // SAFETY: the guard is taken exactly once, here, and `self` is not used after.
        drop(unsafe { ManuallyDrop::take(&mut self.0) });
        drop_dead(dead);
    }
}

impl Heap {
    pub(crate) fn len(&self) -> usize {
        self.v.len()
    }

    /// Records slot `i` in the timer now stored there, if that entry is indexed.
    #[inline]
    fn note(&self, i: usize) {
        let e = &self.v[i];
        if e.indexed() {
            // Relaxed: `index` is written only under this heap's lock (see `entry.rs`).
            e.timer().index.store(i as u32, Relaxed);
        }
    }

    /// Appends `e` and sifts it up; returns its final slot.
    pub(crate) fn push(&mut self, e: Entry) -> usize {
        if self.v.len() >= u32::MAX as usize {
            panic!("gort: more than 2^32 - 1 timers in one heap");
        }
        self.v.push(e);
        let i = self.v.len() - 1;
        self.siftup(i)
    }

    /// Go's `siftupTimer`: moves slot `i` towards the root while it is strictly earlier than
    /// its parent (equal keys stay put); returns its final slot, the smallest index changed.
    pub(crate) fn siftup(&mut self, mut i: usize) -> usize {
        if i >= self.v.len() {
            bad("siftup index out of range");
        }
        let when = self.v[i].when;
        if when <= 0 {
            bad("heaped timer with a non-positive deadline");
        }
        while i > 0 {
            let p = (i - 1) / 4;
            if when >= self.v[p].when {
                break;
            }
            self.v.swap(i, p);
            self.note(i);
            self.c.sift_steps += 1;
            i = p;
        }
        self.note(i);
        i
    }

    /// Go's `siftdownTimer`: per level the minimum of the four children in three comparisons
    /// (min of 1-2, min of 3-4, min of those), stopping once it is not earlier than slot `i`.
    /// Returns the entry's final slot.
    pub(crate) fn siftdown(&mut self, mut i: usize) -> usize {
        let n = self.v.len();
        if i >= n {
            bad("siftdown index out of range");
        }
        let when = self.v[i].when;
        if when <= 0 {
            bad("heaped timer with a non-positive deadline");
        }
        loop {
            self.v.prefetch_grandchildren(i);
            let mut c = i * 4 + 1; // first child
            let mut c3 = c + 2; // third child
            if c >= n {
                break;
            }
            let mut w = self.v[c].when;
            if c + 1 < n && self.v[c + 1].when < w {
                w = self.v[c + 1].when;
                c += 1;
            }
            if c3 < n {
                let mut w3 = self.v[c3].when;
                if c3 + 1 < n && self.v[c3 + 1].when < w3 {
                    w3 = self.v[c3 + 1].when;
                    c3 += 1;
                }
                if w3 < w {
                    w = w3;
                    c = c3;
                }
            }
            if w >= when {
                break;
            }
            self.v.swap(i, c);
            self.note(i);
            self.c.sift_steps += 1;
            i = c;
        }
        self.note(i);
        i
    }

    /// Removes slot `i` by moving the last entry into it and re-sifting (Go's `dodeltimer`
    /// heap part). Returns the removed entry and the smallest index whose content changed.
    pub(crate) fn remove_at(&mut self, i: usize) -> (Entry, usize) {
        if i >= self.v.len() {
            bad("heap removal index out of range");
        }
        let e = self.v.swap_remove(i);
        let mut smallest = i;
        if i < self.v.len() {
            smallest = self.siftup(i);
            if smallest == i {
                self.siftdown(i);
            }
        }
        (e, smallest)
    }

    /// Changes the key of slot `i` and restores the heap order: O(log n).
    pub(crate) fn rekey(&mut self, i: usize, when: Nanos) {
        self.v[i].when = when;
        self.v[i].timer().when.store(when, Relaxed);
        let j = self.siftup(i);
        if j == i {
            self.siftdown(i);
        }
    }

    /// The slot of the promoted timer `t`, from its recorded index, checked.
    pub(crate) fn slot_of(&self, t: &Timer) -> usize {
        let i = t.index.load(Relaxed) as usize;
        match self.v.get(i) {
            Some(e) if e.indexed() && std::ptr::eq(e.as_ptr(), t) => i,
            _ => bad("timer index does not match its heap slot"),
        }
    }

    /// Starts loading the root's timer, which `runtimer` examines next, so that the miss
    /// overlaps the payload run between the two (a large heap's timers are cold).
    pub(crate) fn prefetch_root_timer(&self) {
        if let Some(e) = self.v.first() {
            crate::slots::prefetch(e.as_ptr().cast());
        }
    }

    /// The root entry, if any.
    pub(crate) fn root(&self) -> Option<&Entry> {
        self.v.first()
    }

    /// The root key, or 0 if empty: what `timer0_when` publishes.
    pub(crate) fn root_when(&self) -> Nanos {
        self.root().map_or(0, |e| e.when)
    }
}
