//! One P's timers: the heap, its lock, the lock-free summaries, insertion and removal (Go's
//! `addtimer`, `doaddtimer`, `dodeltimer`, `dodeltimer0`, `cleantimers`, `checkTimers`,
//! `nobarrierWakeTime`, `updateTimer0When`, `updateTimerModifiedEarliest`) and the
//! modified-earlier list. The run path is in `run.rs`; moving and draining in
//! `lifecycle.rs`.

use std::fmt;

use gort_loom::atomic::{AtomicI64, AtomicU64, AtomicUsize, Ordering::*};
use gort_loom::{Arc, Mutex};

use crate::clock::{nanotime, Nanos};
use crate::heap::{drop_dead, Entry, Heap, Locked};
use crate::run::Run;
use crate::status::{bad, Status};
use crate::timer::{Host, OwnerHost, Target, Timer};
use crate::tref::TimerRef;

/// What [`Timers::check`] found.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Checked {
    /// When to check again: the earliest heap key or modified-earlier bound, 0 = no timers.
    /// Normally `> now`; it is `<= now` only if another thread moved a timer earlier while
    /// `check` ran (that thread also called `wake_netpoller`): check again then.
    pub next: Nanos,
    /// How many callbacks ran.
    pub ran: usize,
}

/// How a batch of due timers takes the heap's lock back after each payload.
#[derive(Clone, Copy)]
enum Relock {
    /// Runs what is due: the owning P's round, the peers' and the stealers' helping hands
    /// (two Ms firing one heap in parallel), a P-less M about to sleep.
    Wait,
    /// Stops when someone else holds the lock ([`Timers::check_giving_way`]).
    GiveWay,
}

/// The shared state of a [`Timers`]; boxed so that its address, which timers record as their
/// owner, survives moves of the `Timers` value. Aligned to whole cache-line pairs (the
/// spatial prefetcher's unit on x86) so that no neighbouring allocation that someone writes
/// shares a line with `timer0_when`, which every M loads in every scheduling round (its own
/// P's, and a peer's in `help_peer`).
#[repr(align(128))]
pub(crate) struct Shared {
    id: usize,
    /// Go's `timersLock` + `timers`.
    pub(crate) heap: Mutex<Heap>,
    /// Go's `timer0When`: the root key or 0. Stored under the lock, loaded by anyone.
    pub(crate) timer0_when: AtomicI64,
    /// Go's `timerModifiedEarliest`: a lower bound on `nextwhen` of every `ModifiedEarlier`
    /// timer here, 0 = none. Lowered by anyone; zeroed only under the lock.
    pub(crate) modified_earliest: AtomicI64,
    /// The root timer's slack (a coalescing hint published with `timer0_when`).
    pub(crate) timer0_slack: AtomicI64,
    /// Go's `numTimers`: the heap length, stored under the lock. A hint for lock-free readers.
    pub(crate) num: AtomicUsize,
    /// Go's `deletedTimers` plus the stale entries (signed: a hint that may be transiently
    /// off). See `del` and `entry.rs`.
    pub(crate) deleted: AtomicI64,
    /// `del` calls that stopped a timer here (stats only).
    pub(crate) stopped: AtomicU64,
    /// Timers marked `ModifiedEarlier` since the last drain (go#41699): pushed by `modify`,
    /// drained by `adjust`. A leaf lock.
    pub(crate) early: Mutex<Vec<TimerRef>>,
    /// The runtime this heap belongs to, if its creator named one ([`Timers::with_owner`]).
    pub(crate) owner: Option<OwnerHost>,
}

/// One P's timers: Go's `p.timers` with `timersLock`, `timer0When`, `timerModifiedEarliest`,
/// `numTimers` and `deletedTimers`.
///
/// Insert with [`add`](Timers::add) (or [`modify`](crate::modify) with this as `home`); run
/// due timers with [`check`](Timers::check); read the next deadline lock-free with
/// [`wake_time`](Timers::wake_time). Dropping it [`drain`](Timers::drain)s it.
///
/// # Examples
///
/// ```
/// use gort_timer::{Timer, Timers};
/// use std::sync::atomic::{AtomicI64, Ordering};
/// use std::sync::Arc;
///
/// let timers = Timers::new(0);
/// let fired = Arc::new(AtomicI64::new(0));
/// let t = Timer::new();
/// let f = fired.clone();
/// t.set_fire(Arc::new(move |when| f.store(when, Ordering::SeqCst)));
/// timers.add(&t, 50, 0, &|_| {});
/// assert_eq!(timers.wake_time(), 50);
/// assert_eq!(timers.check(49, true).next, 50); // not yet due
/// assert_eq!(timers.check(60, true).ran, 1);
/// assert_eq!(fired.load(Ordering::SeqCst), 50); // the callback sees the deadline
/// assert!(timers.is_empty());
/// ```
pub struct Timers {
    pub(crate) shared: Box<Shared>,
}

/// `min` over deadlines where 0 means "none": 0 only if both are 0. The form of every
/// summary this crate publishes ([`Timers::wake_time`], [`Checked::next`]).
///
/// ```
/// assert_eq!(gort_timer::min_nonzero(0, 5), 5);
/// assert_eq!(gort_timer::min_nonzero(7, 5), 5);
/// assert_eq!(gort_timer::min_nonzero(0, 0), 0);
/// ```
pub fn min_nonzero(a: Nanos, b: Nanos) -> Nanos {
    if a == 0 || (b != 0 && b < a) {
        b
    } else {
        a
    }
}

impl Shared {
    pub(crate) fn new(id: usize, owner: Option<OwnerHost>) -> Shared {
        Shared {
            id,
            owner,
            heap: Mutex::new(Heap::default()),
            timer0_when: AtomicI64::new(0),
            modified_earliest: AtomicI64::new(0),
            timer0_slack: AtomicI64::new(0),
            num: AtomicUsize::new(0),
            deleted: AtomicI64::new(0),
            stopped: AtomicU64::new(0),
            early: Mutex::new(Vec::new()),
        }
    }

    pub(crate) fn ptr(&self) -> *mut Shared {
        self as *const Shared as *mut Shared
    }

    pub(crate) fn is(&self, p: *mut Shared) -> bool {
        std::ptr::eq(self.ptr(), p)
    }

    /// Checks under the lock that `t` claims to be in this heap (Go's "bad p" throws).
    #[track_caller]
    pub(crate) fn check_owner(&self, t: &Timer, what: &str) {
        if !self.is(t.owner.load(Relaxed)) {
            bad(what);
        }
    }

    /// Go's `updateTimer0When` (lock held).
    pub(crate) fn update_timer0_when(&self, h: &Heap) {
        // One half of the Dekker hand-off with the scheduler's poller: it publishes "I sleep"
        // and then loads `wake_time` (SeqCst); we publish a deadline and then load its state
        // in `Host::wake_netpoller`, whose contract starts with a SeqCst fence. The fence
        // orders this store before those loads, so the store itself is `Release` (a plain
        // store, where SeqCst was an `xchg`: a locked instruction per heap change;
        // design/PERFORMANCE-LOG.md, "T1's locked instructions"). A store that raises the
        // summary (a removal) needs no hand-off: a stale lower value costs an early look.
        self.timer0_when.store(h.root_when(), Release);
        let slack = h.v.first().map_or(0, |e| e.timer().slack());
        self.timer0_slack.store(slack, Relaxed);
    }

    /// Go's `updateTimerModifiedEarliest`: lowers the summary to `when`, never raises it.
    pub(crate) fn lower_modified_earliest(&self, when: Nanos) {
        let mut old = self.modified_earliest.load(SeqCst);
        loop {
            if old != 0 && old < when {
                return;
            }
            // SeqCst: the poller hand-off as in `update_timer0_when`; and it must land after
            // an `adjust`'s zeroing that preceded our list push (invariant 6 of the docs).
            match self
                .modified_earliest
                .compare_exchange(old, when, SeqCst, SeqCst)
            {
                Ok(_) => return,
                Err(cur) => old = cur,
            }
        }
    }

    /// Stores the heap length and applies the go#51654 fix: an empty heap has no modified
    /// timer, so the summary must not keep reporting a stale (maybe past) deadline.
    pub(crate) fn note_len(&self, h: &Heap) {
        self.num.store(h.len(), Relaxed);
        if h.len() == 0 {
            // No timer is in the heap, so no `modify` can lower the summary meanwhile (it
            // needs a timer whose owner we are): a zero needs no barrier of its own.
            self.modified_earliest.store(0, Release);
        }
    }

    /// Go's `doaddtimer` (lock held): sets the owner, inserts with key `when`.
    pub(crate) fn doaddtimer(&self, h: &mut Heap, t: TimerRef, when: Nanos) {
        if !t.owner.load(Relaxed).is_null() {
            bad("doaddtimer: timer already in a heap");
        }
        // Relaxed: published to the next status owner by our caller's Release CAS.
        t.owner.store(self.ptr(), Relaxed);
        t.when.store(when, Relaxed);
        h.c.added += 1;
        if h.push(Entry::new(when, t)) == 0 {
            self.update_timer0_when(h);
        }
        self.num.store(h.len(), Relaxed);
    }

    /// Go's `dodeltimer0` (lock held): removes the root and returns its timer. (Go's
    /// `dodeltimer` of any slot has no caller left: `adjust` leaves stopped timers lazily.)
    pub(crate) fn dodeltimer0(&self, h: &mut Heap) -> TimerRef {
        if h.v.is_empty() {
            bad("dodeltimer0 on an empty heap");
        }
        self.check_owner(h.v[0].timer(), "dodeltimer: wrong owner");
        h.v[0].timer().leave_heap();
        let (e, _) = h.remove_at(0);
        self.update_timer0_when(h);
        self.note_len(h);
        e.into_timer()
    }

    /// Re-keys the root `ModifiedEarlier/Later` timer `t` that the caller moved to `Moving`:
    /// `when = nextwhen`, remove, re-insert (Go's cleantimers/runtimer), back to `Waiting`.
    pub(crate) fn rekey_root(&self, h: &mut Heap) {
        let t = self.dodeltimer0(h);
        let when = t.nextwhen.load(Relaxed);
        h.c.modified += 1;
        self.doaddtimer(h, t.clone(), when);
        t.cas_owned(Status::Moving, Status::Waiting, "rekey: lost Moving");
    }

    /// Removes the root `Deleted` timer the caller moved to `Removing`, and lets go of the
    /// heap's reference (`Timer::release`: a last reference's payload waits for the unlock).
    pub(crate) fn remove_root_deleted(&self, h: &mut Heap) {
        let t = self.dodeltimer0(h);
        t.cas_owned(Status::Removing, Status::Removed, "remove: lost Removing");
        self.deleted.fetch_sub(1, Relaxed);
        Timer::release(t, &mut h.dead);
    }

    /// Drops the stale entry at the root (lock held; see `entry.rs`). Its timer's status
    /// belongs to the live entry and is not touched.
    pub(crate) fn drop_stale_root(&self, h: &mut Heap) {
        let (e, _) = h.remove_at(0);
        Timer::release(e.into_timer(), &mut h.dead);
        self.deleted.fetch_sub(1, Relaxed);
        self.update_timer0_when(h);
        self.note_len(h);
    }

    /// Go's `cleantimers` (lock held; from `add`): purge deleted and re-key modified timers
    /// at the root, so create/stop churn does not pile up there. (Go also bails out when the
    /// G must be preempted; tasks here are never preempted inside this crate.)
    pub(crate) fn cleantimers(&self, h: &mut Heap) {
        while let Some(e) = h.v.first() {
            if e.is_stale() {
                self.drop_stale_root(h);
                continue;
            }
            let t = e.timer();
            self.check_owner(t, "cleantimers: bad owner");
            match t.status() {
                s @ Status::Deleted => {
                    if !t.cas(s, Status::Removing) {
                        continue;
                    }
                    self.remove_root_deleted(h);
                }
                s @ (Status::ModifiedEarlier | Status::ModifiedLater) => {
                    if !t.cas(s, Status::Moving) {
                        continue;
                    }
                    self.rekey_root(h);
                }
                _ => return,
            }
        }
    }

    /// Puts `t` (now `ModifiedEarlier`, owned as `Modifying` by the caller, in this heap) on
    /// the modified-earlier list unless it is already there. Must precede
    /// `lower_modified_earliest` (invariant 6).
    pub(crate) fn queue_early(&self, t: &TimerRef) {
        let mut list = self.early.lock();
        // Relaxed: `queued` is set only under `self.early`, which we hold, and cleared only
        // under our heap lock while we own the timer (`Timer::queued`), which its holder
        // cannot do while we own `Modifying`.
        if !t.queued().load(Relaxed) {
            t.queued().store(true, Relaxed);
            list.push(t.clone());
        }
    }

    /// Empties the modified-earlier list into `out` (heap lock held), forgetting the entries'
    /// membership. Timers modified earlier after this push themselves again.
    pub(crate) fn take_early(&self, _h: &mut Heap, out: &mut Vec<TimerRef>) {
        let mut list = self.early.lock();
        for t in list.iter() {
            // Under our heap lock `owner == self` is stable. A stale entry (the timer left
            // this heap, which cleared its mark, and may be listed elsewhere now) keeps the
            // mark it has.
            if self.is(t.owner.load(Relaxed)) {
                t.queued().store(false, Relaxed);
            }
        }
        out.append(&mut list);
    }

    /// Forgets the modified-earlier list (lock held) when the caller deals with every timer
    /// of the heap itself (re-keys, moves or drops them), keeping the list's allocation.
    pub(crate) fn discard_early(&self, h: &mut Heap) {
        let mut list = std::mem::take(&mut h.spare);
        self.take_early(h, &mut list);
        for t in list.drain(..) {
            Timer::release(t, &mut h.dead);
        }
        h.spare = list;
    }

    /// Zeroes the counters and summaries once every timer has left the heap (`move_to`,
    /// `drain`; lock held): nobody can touch them on a timer's behalf any more.
    pub(crate) fn zero_all(&self) {
        self.num.store(0, Relaxed);
        self.deleted.store(0, Relaxed);
        self.timer0_when.store(0, SeqCst);
        self.timer0_slack.store(0, Relaxed);
        self.modified_earliest.store(0, SeqCst);
    }

    /// `deleted > len / 4`: Go's trigger for `clearDeletedTimers` (stale entries count as
    /// deleted).
    pub(crate) fn too_many_deleted(&self, len: usize) -> bool {
        self.deleted.load(Relaxed) > (len / 4) as i64
    }

    /// Before an insertion (lock held): Go's addtimer calls `cleantimers`; we also apply the
    /// 1/4 rule here (Go only does in checkTimers), so that a task that arms and stops
    /// timers in a loop without reaching the scheduler keeps its heap within 4/3 of the
    /// live timers instead of growing without bound. Amortised O(log n) per stop.
    pub(crate) fn tidy(&self, h: &mut Heap) {
        self.cleantimers(h);
        if self.too_many_deleted(h.len()) {
            self.clear_deleted(h);
        }
    }
}

impl Timers {
    /// An empty heap for the P numbered `id` (used for lock ordering and in messages).
    pub fn new(id: usize) -> Timers {
        Timers {
            shared: Box::new(Shared::new(id, None)),
        }
    }

    /// [`Timers::new`] for a heap of the runtime `owner`: a timer left pending here and moved
    /// earlier by a thread of another runtime wakes `owner` rather than the caller's host.
    pub fn with_owner(id: usize, owner: OwnerHost) -> Timers {
        Timers {
            shared: Box::new(Shared::new(id, Some(owner))),
        }
    }

    /// The id given to [`Timers::new`].
    pub fn id(&self) -> usize {
        self.shared.id
    }

    pub(crate) fn lock(&self) -> Locked<'_> {
        Locked::new(self.shared.heap.lock())
    }

    /// Go's `addtimer`: arms the fresh timer `t` at `when` (> 0) with `period` (0 = one-shot)
    /// in this heap, then calls `host.wake_netpoller(when)` (always, as Go 1.19 does).
    ///
    /// # Panics
    ///
    /// If `t` is not [`Status::NoStatus`] (use [`modify`](crate::modify) to re-arm), if
    /// `when <= 0`, or if `period < 0`.
    #[track_caller]
    pub fn add(&self, t: &Arc<Timer>, when: Nanos, period: Nanos, host: &dyn Host) {
        assert!(
            when > 0,
            "gort: Timers::add: deadline `when` must be > 0, got {when}"
        );
        assert!(
            period >= 0,
            "gort: Timers::add: `period` must be >= 0, got {period}"
        );
        // Go stores Waiting on an unpublished timer; an `Arc` may be shared already, so we
        // claim it with a CAS through Modifying, like `modify`'s re-activation path.
        if !t.cas(Status::NoStatus, Status::Modifying) {
            panic!(
                "gort: Timers::add called with an initialized timer (status {:?}); use modify",
                t.status()
            );
        }
        t.period.store(period, Relaxed);
        let dead = self.insert(TimerRef::clone(&TimerRef::borrow_arc(t)), when, false);
        t.cas_owned(Status::Modifying, Status::Waiting, "add: lost Modifying");
        host.wake_netpoller(when);
        drop_dead(dead); // the payload rule: after leaving Modifying
    }

    /// Tidies the heap and inserts `t`, the heap's reference of a timer the caller owns as
    /// `Modifying` or alone (`add`, `modify`'s re-activation, `add_cell`). Returns the
    /// payloads tidying freed, for the caller to drop after it left `Modifying`. `rearm`
    /// counts it as a re-arm (`TimerStats::modified`).
    pub(crate) fn insert(&self, t: TimerRef, when: Nanos, rearm: bool) -> Vec<Target> {
        let mut h = self.lock();
        h.c.modified += u64::from(rearm);
        self.shared.tidy(&mut h);
        self.shared.doaddtimer(&mut h, t, when);
        h.unlock()
    }

    /// Go's `checkTimers(pp, now)`: runs every timer due at `now` (0 = read the clock).
    ///
    /// Lock-free early exit when nothing is due (unless `local` and more than a quarter of
    /// the heap is stopped). Otherwise, under the lock: `adjust`, then `runtimer` in a loop,
    /// releasing the lock around each callback; finally, if `local`, the 1/4 cleanup. `local`
    /// is true when the caller's P owns this heap (false when stealing).
    pub fn check(&self, now: Nanos, local: bool) -> Checked {
        self.check_at_most(now, local, usize::MAX)
    }

    /// [`Timers::check`] that runs at most `max` timers (at least one), in deadline order,
    /// and leaves the rest due in the heap; `next` is then already due. A scheduler bounds
    /// a round by the room its run queue has for the tasks the timers wake: a timer left
    /// in the heap keeps its place in deadline order, a woken task that overflows the run
    /// queue waits behind newer work (design/TIMERS.md, "Bounded rounds").
    pub fn check_at_most(&self, now: Nanos, local: bool, max: usize) -> Checked {
        self.check_with(now, local, max, Relock::Wait)
    }

    /// The body of [`Timers::check_at_most`] and [`Timers::check_giving_way`].
    fn check_with(&self, now: Nanos, local: bool, max: usize, relock: Relock) -> Checked {
        let s = &*self.shared;
        let next = self.wake_time();
        if next == 0 {
            return Checked { next: 0, ran: 0 };
        }
        let now = if now == 0 { nanotime() } else { now };
        if now < next && !(local && s.too_many_deleted(s.num.load(Relaxed))) {
            return Checked { next, ran: 0 };
        }
        let h = self.lock();
        self.check_locked(h, now, local, max, relock)
    }

    /// [`Timers::check`] by a helper (never `local`) that backs off when the heap is locked:
    /// whoever holds the lock is already running or changing these timers. Returns `None`
    /// then.
    pub fn try_check(&self, now: Nanos) -> Option<Checked> {
        self.try_check_at_most(now, usize::MAX)
    }

    /// [`Timers::try_check`] that runs at most `max` timers, as [`Timers::check_at_most`].
    pub fn try_check_at_most(&self, now: Nanos, max: usize) -> Option<Checked> {
        let next = self.wake_time();
        if next == 0 || now < next {
            return Some(Checked { next, ran: 0 });
        }
        let h = Locked::new(self.shared.heap.try_lock()?);
        Some(self.check_locked(h, now, false, max, Relock::Wait))
    }

    /// [`Timers::check`] by a thread that does not hold the owning P (never `local`): it
    /// waits for the lock once, so that every call runs at least the earliest due timer,
    /// but after each timer it takes the lock back only if it is free. A holder then is
    /// the P's own M (changing a timer, or in its own round) or a helper running them; the
    /// timers left due stay in the heap, in deadline order, for it or for this caller's
    /// next look (`next` is then already due). Waiting there instead made a P-less
    /// backstop (sysmon) and a P that arms timers trade the lock timer by timer.
    pub fn check_giving_way(&self, now: Nanos) -> Checked {
        self.check_with(now, false, usize::MAX, Relock::GiveWay)
    }

    fn check_locked<'a>(
        &'a self,
        mut h: Locked<'a>,
        now: Nanos,
        local: bool,
        max: usize,
        relock: Relock,
    ) -> Checked {
        let s = &*self.shared;
        let mut ran = 0;
        let mut next = 0;
        if h.len() > 0 {
            s.adjust(&mut h, now);
            loop {
                match s.runtimer(&mut h, now) {
                    Run::Fired {
                        payload,
                        when,
                        keep,
                    } => {
                        h.prefetch_root_timer();
                        drop(h);
                        if let Some(p) = payload {
                            p.run(when);
                        }
                        if let Some(t) = keep {
                            t.recycle(); // mostly the last reference: kept for reuse
                        }
                        ran += 1;
                        let Some(relocked) = self.relock(relock) else {
                            // Given way: the rest stay due, for the holder or a next look.
                            let next = self.wake_time();
                            return Checked { next, ran };
                        };
                        h = relocked;
                        if ran >= max {
                            // The rest stay due in the heap: `next` asks for another round.
                            next = h.root_when();
                            break;
                        }
                    }
                    Run::Next(w) => {
                        next = w;
                        break;
                    }
                    Run::Empty => break,
                }
            }
        }
        if local && s.too_many_deleted(h.len()) {
            s.clear_deleted(&mut h);
            next = h.root_when();
        }
        drop(h);
        Checked {
            next: min_nonzero(next, s.modified_earliest.load(SeqCst)),
            ran,
        }
    }

    /// Takes the lock back after a payload ran: waits for it, or gives way to a holder.
    #[inline]
    fn relock(&self, relock: Relock) -> Option<Locked<'_>> {
        match relock {
            Relock::Wait => Some(self.lock()),
            Relock::GiveWay => self.shared.heap.try_lock().map(Locked::new),
        }
    }

    /// The latest instant the poller may wake for this heap's earliest timer: its deadline
    /// plus its slack ([`Timer::set_slack`]) when the earliest is the root, else the
    /// deadline itself; 0 = no timers. A hint: a later timer of this heap may have less
    /// slack, and may run up to the root's slack late.
    pub fn wake_bound(&self) -> Nanos {
        let root = self.shared.timer0_when.load(Relaxed);
        let next = self.wake_time();
        if next != 0 && next == root {
            next.saturating_add(self.shared.timer0_slack.load(Relaxed))
        } else {
            next
        }
    }

    /// Go's `nobarrierWakeTime`: the minimum non-zero of the root key and the modified-earliest
    /// bound; 0 = no timers. Lock-free; never later than the earliest pending deadline.
    #[inline]
    pub fn wake_time(&self) -> Nanos {
        // SeqCst: the poller's half of the hand-off described at `update_timer0_when`.
        let next = self.shared.timer0_when.load(SeqCst);
        let adj = self.shared.modified_earliest.load(SeqCst);
        min_nonzero(next, adj)
    }

    /// Heap entries, stopped ones included (Go's `numTimers`). Lock-free hint.
    pub fn len(&self) -> usize {
        self.shared.num.load(Relaxed)
    }

    /// Whether the heap has no entries. Lock-free hint.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Stopped timers still in the heap (Go's `deletedTimers`). Lock-free hint.
    pub fn deleted(&self) -> usize {
        self.shared.deleted.load(Relaxed).max(0) as usize
    }

    /// The heap's root for a hang report: how far its key is from `now` (ms), its timer's
    /// status and whether the entry is stale; "locked" if another thread holds the heap's
    /// lock now. Not a stable format; for people, not programs.
    #[doc(hidden)]
    pub fn debug_root(&self, now: Nanos) -> String {
        let Some(heap) = self.shared.heap.try_lock() else {
            return "locked".into();
        };
        match heap.root() {
            None => "empty".into(),
            Some(e) => format!(
                "{:+.3} ms {:?}{}",
                (e.when - now) as f64 / 1e6,
                e.timer().status(),
                if e.is_stale() { " (stale)" } else { "" }
            ),
        }
    }
}

impl fmt::Debug for Timers {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Timers")
            .field("id", &self.id())
            .field("len", &self.len())
            .field("deleted", &self.deleted())
            .field("timer0_when", &self.shared.timer0_when.load(Relaxed))
            .field(
                "modified_earliest",
                &self.shared.modified_earliest.load(Relaxed),
            )
            .finish()
    }
}
