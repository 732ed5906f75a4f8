//! One timer: the atomic status word, the fields it guards, and the payload that firing runs.

use std::fmt;
use std::task::Waker;

use gort_loom::atomic::{AtomicBool, AtomicI64, AtomicPtr, AtomicU32, Ordering::*};
use gort_loom::{yield_now, Arc};

use crate::clock::Nanos;
use crate::status::{bad, Status};
pub(crate) use crate::target::Target;
use crate::target::{TargetCell, TargetRef};
use crate::timers::Shared;
use crate::tref::TimerRef;

/// The callback of a timer: Go's `f(arg, seq)`.
///
/// It runs with no heap lock held, on whatever thread ran the timer (the owner P's, or a
/// stealer's), and must not block. `when` is the deadline that came due, so that a late run
/// can back-date what it reports (Go 1.23's `delay`).
///
/// Any `Fn(Nanos) + Send + Sync + 'static` closure is a `Fire`.
pub trait Fire: Send + Sync + 'static {
    /// Called once per due deadline, with a reference of its own, so that a callback that
    /// must outlive the call (a task it spawns) keeps `self` instead of allocating.
    fn fire(self: std::sync::Arc<Self>, when: Nanos);

    /// The runtime shuts down and lets this callback go unrun
    /// ([`Timers::drain_waking`](crate::Timers::drain_waking)): one that something waits on
    /// (a channel timer's receivers) tells it here that the deadline will never come. Does
    /// nothing by default.
    fn shutdown(self: std::sync::Arc<Self>) {}
}

impl<F: Fn(Nanos) + Send + Sync + 'static> Fire for F {
    fn fire(self: std::sync::Arc<Self>, when: Nanos) {
        (*self)(when)
    }
}

/// The scheduler's side of Go's `wakeNetPoller`: called after a timer was added, or moved
/// earlier, with its new deadline, so that a poller sleeping past `when` can be woken.
///
/// A host that reads a poller's state to decide whether to wake it must first issue a
/// `fence(SeqCst)`: the heap publishes its new earliest deadline with a `Release` store
/// (`Shared::update_timer0_when`), and the fence is the adder's half of the Dekker hand-off
/// with a poller that publishes "I sleep" and then reads the heaps' wake times.
///
/// Any `Fn(Nanos)` closure is a `Host` (handy in tests).
pub trait Host {
    /// A timer now wants to run at `when`.
    fn wake_netpoller(&self, when: Nanos);

    /// Which runtime this host wakes, compared with the key of a heap's [`OwnerHost`]: a timer
    /// left pending in a heap of another runtime and moved earlier must wake that runtime,
    /// not this one. 0 (the default) for a host of no particular runtime.
    fn key(&self) -> usize {
        0
    }
}

/// The runtime that owns a heap ([`Timers::with_owner`](crate::Timers::with_owner)): what a
/// timer left pending there and moved earlier wakes when the caller's [`Host`] is another
/// runtime's (Go has one runtime a process, so its `modtimer` never meets this case).
///
/// Held weakly: the runtime owns its heaps, and a wake-up for a runtime already gone is
/// nothing to do.
///
/// # Examples
///
/// ```
/// use gort_timer::{Host, OwnerHost, Timers};
/// use std::sync::Arc;
/// struct Runtime;
/// impl Host for Runtime {
///     fn wake_netpoller(&self, _when: i64) {}
/// }
/// let rt: Arc<dyn Host + Send + Sync> = Arc::new(Runtime);
/// let timers = Timers::with_owner(0, OwnerHost::new(1, Arc::downgrade(&rt)));
/// assert!(timers.is_empty());
/// ```
pub struct OwnerHost {
    key: usize,
    host: std::sync::Weak<dyn Host + Send + Sync>,
}

impl OwnerHost {
    /// The owner `host`, whose own [`Host::key`] returns `key` (not 0).
    pub fn new(key: usize, host: std::sync::Weak<dyn Host + Send + Sync>) -> OwnerHost {
        assert_ne!(key, 0, "gort: OwnerHost::new: key 0 names no runtime");
        OwnerHost { key, host }
    }

    /// The owner if `caller` is another runtime's host: a handle to wake it with, taken
    /// while the heap is known to live (the caller owns a transient status of a timer in
    /// it). `None` when `caller` is the owner, the cheap and common case.
    pub(crate) fn if_foreign(
        &self,
        caller: &dyn Host,
    ) -> Option<std::sync::Weak<dyn Host + Send + Sync>> {
        (caller.key() != self.key).then(|| self.host.clone())
    }
}

impl<F: Fn(Nanos)> Host for F {
    fn wake_netpoller(&self, when: Nanos) {
        self(when)
    }
}

/// `Arc::into_inner`: the value if `t` was the last reference, decided atomically by the one
/// decrement (no second holder can drop in between and leave the last drop to us).
#[cfg(not(loom))]
fn arc_into_inner(t: Arc<Timer>) -> Option<Timer> {
    Arc::into_inner(t)
}

/// loom's `Arc` has no `into_inner`; `try_unwrap` then drop is the same outside a race with
/// another last holder, which no model has.
#[cfg(loom)]
fn arc_into_inner(t: Arc<Timer>) -> Option<Timer> {
    Arc::try_unwrap(t).ok()
}

/// The payload claimed by `run_one` while the timer is `Running`, run after the heap lock is
/// released.
pub(crate) enum Payload {
    Fire(std::sync::Arc<dyn Fire>),
    Waker(Waker),
    /// A cell's own callback (`cell.rs`).
    Cell(crate::cell::Holder),
}

impl Payload {
    pub(crate) fn run(self, when: Nanos) {
        match self {
            Payload::Fire(f) => f.fire(when),
            Payload::Waker(w) => w.wake(),
            Payload::Cell(c) => c.fire(when),
        }
    }
}

/// One timer: Go's `runtime.timer`. Shared (`Arc`) between its user, at most one heap and
/// transiently a modified-earlier list.
///
/// Only this crate changes the fields; the user installs a payload with [`set_fire`] or
/// [`set_waker`], then arms it with [`Timers::add`](crate::Timers::add) or
/// [`modify`](crate::modify), and stops it with [`del`](crate::del).
///
/// [`set_fire`]: Timer::set_fire
/// [`set_waker`]: Timer::set_waker
///
/// # Examples
///
/// ```
/// use gort_timer::{del, Status, Timer, Timers};
/// let timers = Timers::new(0);
/// let t = Timer::new();
/// t.set_fire(std::sync::Arc::new(|when| println!("due at {when}")));
/// timers.add(&t, 100, 0, &|_| {});
/// assert_eq!(t.status(), Status::Waiting);
/// assert!(del(&t));
/// assert_eq!(timers.check(100, true).ran, 0);
/// ```
pub struct Timer {
    /// A [`Status`] word; every transition is a CAS (see the crate docs).
    pub(crate) status: AtomicU32,
    /// Heap slot of the live entry once the timer was promoted (see `entry.rs`), else
    /// `UNINDEXED`, to which it never returns. Written only under the lock of the heap
    /// holding the live indexed entry.
    pub(crate) index: AtomicU32,
    /// Go's `t.pp`: the heap holding this timer, null when in none. Written only under that
    /// heap's lock by the owner of a transient status; dereferenced only by the owner of
    /// `Modifying` (see `owner_ref`).
    pub(crate) owner: AtomicPtr<Shared>,
    /// The heap key's copy. Written under the heap lock (or by the `Modifying` owner before
    /// insertion); read by the `Modifying` owner and by [`Timer::when`].
    pub(crate) when: AtomicI64,
    /// The pending deadline while `ModifiedEarlier`/`ModifiedLater`; written by `Modifying`.
    pub(crate) nextwhen: AtomicI64,
    /// 0 = one-shot, > 0 = periodic. Written by `Modifying`/`add`; read by `Running`.
    pub(crate) period: AtomicI64,
    /// The payload, behind a leaf lock (nothing else is locked while holding it), and how
    /// late this arming may run to share a poller wake-up ([`Timer::set_slack`]).
    target: TargetCell,
}

impl Timer {
    /// A fresh timer: [`Status::NoStatus`], no payload. It may be one that this thread
    /// kept for reuse ([`Timer::recycle`]), reset to exactly this state.
    pub fn new() -> Arc<Timer> {
        crate::recycle::take().unwrap_or_else(|| Arc::new(Timer::fresh()))
    }

    /// The state of a new timer.
    pub(crate) fn fresh() -> Timer {
        Timer {
            status: AtomicU32::new(Status::NoStatus as u32),
            index: AtomicU32::new(crate::entry::UNINDEXED),
            owner: AtomicPtr::new(std::ptr::null_mut()),
            when: AtomicI64::new(0),
            nextwhen: AtomicI64::new(0),
            period: AtomicI64::new(0),
            target: TargetCell::new(),
        }
    }

    /// Resets a timer nobody else references to [`Timer::fresh`]'s state, field by field in
    /// place (a whole-struct replace copies it twice), and hands its payload, if any, to
    /// `payload`.
    #[inline]
    pub(crate) fn refresh(&mut self, payload: impl FnOnce(Target)) {
        self.status.store(Status::NoStatus as u32, Relaxed);
        self.index.store(crate::entry::UNINDEXED, Relaxed);
        self.owner.store(std::ptr::null_mut(), Relaxed);
        self.when.store(0, Relaxed);
        self.nextwhen.store(0, Relaxed);
        self.period.store(0, Relaxed);
        self.queued().store(false, Relaxed);
        self.target.set_slack(0);
        if !self.target.is_empty_unique() {
            payload(self.target.take_unique());
        }
    }

    /// Whether the timer sits in its owner's modified-earlier list (`Shared::queue_early`).
    /// Set under that list's lock by the owner of `Modifying`; cleared under the owner's
    /// heap lock, by the list's taker (`Shared::take_early`) or when the timer leaves the
    /// heap ([`Timer::leave_heap`]), so that a stale entry in an old owner's list never
    /// makes a new owner skip its push. A flag, not the list's address, kept in the payload
    /// cell's spare byte: the timer is 64 bytes (design/TIMERS.md, "Memory").
    #[inline]
    pub(crate) fn queued(&self) -> &AtomicBool {
        self.target.queued()
    }

    /// The timer leaves its heap (under that heap's lock, by the owner of a transient
    /// status): no owner, and no longer listed as modified earlier there (an entry left in
    /// that list is stale; its taker skips it).
    #[inline]
    pub(crate) fn leave_heap(&self) {
        self.owner.store(std::ptr::null_mut(), Relaxed);
        self.queued().store(false, Relaxed);
    }

    /// Gives back a timer its user is done with: if this was its last reference (it is in
    /// no heap and nothing else holds it), its payload is dropped here and the timer is reset
    /// and kept for the next [`Timer::new`] on this thread (at most 256 per thread); otherwise
    /// the reference is just dropped. Call it where a payload's `Drop` may run (no runtime lock held).
    ///
    /// # Examples
    ///
    /// ```
    /// use gort_timer::{Status, Timer};
    /// let t = Timer::new();
    /// t.set_slack(5);
    /// Timer::recycle(t);
    /// let u = Timer::new(); // maybe the same memory, never the old state
    /// assert_eq!(u.status(), Status::NoStatus);
    /// assert_eq!(u.when(), 0);
    /// ```
    pub fn recycle(this: Arc<Timer>) {
        let mut payload = None;
        let rest = crate::recycle::keep(this, |p| payload = Some(p));
        drop(rest);
        drop(payload);
    }

    /// The current status (a snapshot).
    pub fn status(&self) -> Status {
        // Acquire: pairs with the Release half of every status CAS, so a caller that sees
        // `NoStatus` after a run also sees everything the run published before it.
        Status::from_u32(self.status.load(Acquire))
    }

    /// The current deadline: `nextwhen` while a re-arm is pending, else the heap key; 0 for a
    /// fresh timer. A snapshot.
    pub fn when(&self) -> Nanos {
        match self.status() {
            Status::ModifiedEarlier | Status::ModifiedLater => self.nextwhen.load(Relaxed),
            _ => self.when.load(Relaxed),
        }
    }

    /// The period: 0 for a one-shot timer.
    pub fn period(&self) -> Nanos {
        self.period.load(Relaxed)
    }

    /// Sets how late (ns) the next arming may fire so that the poller can serve it in one
    /// wake-up with other timers: a hint for coalescing, never a reason to fire early.
    /// Callers derive it from the duration asked for (gort::time uses 1/16 of it), so a
    /// 50 µs timer keeps microsecond precision while a one-second one may share a wake-up.
    /// 0 (the default) = as precise as the runtime can.
    /// Kept to about 4.3 s at most (a `u32` of nanoseconds, for the timer's size).
    pub fn set_slack(&self, slack: Nanos) {
        self.target.set_slack(slack);
    }

    /// The slack set by [`set_slack`](Timer::set_slack).
    pub(crate) fn slack(&self) -> Nanos {
        self.target.slack()
    }

    /// Installs a callback payload, replacing any previous one. A periodic run keeps it; a
    /// one-shot run and [`del`](crate::del) release it at once (so a stale heap entry never
    /// keeps a callback's captures alive): re-arm a fired or stopped timer with a new
    /// `set_fire`, or with [`modify_fire`](crate::modify_fire).
    pub fn set_fire(&self, f: std::sync::Arc<dyn Fire>) {
        let old = self.target.replace(Target::fire(f));
        drop(old); // outside the lock: a payload's Drop may run arbitrary code
    }

    /// Installs `f` unless it is installed already (same allocation): what a re-arm after
    /// a possible [`del`](crate::del) or a one-shot run needs, without the reference-count
    /// traffic of [`set_fire`](Timer::set_fire) when the payload is still there. Called by
    /// [`modify_fire`](crate::modify_fire) inside `Modifying`, so it returns the replaced
    /// payload instead of dropping it: the caller drops it after leaving `Modifying`.
    #[must_use = "the replaced payload must be dropped outside Modifying"]
    #[inline]
    pub(crate) fn ensure_fire(&self, f: &std::sync::Arc<dyn Fire>) -> Target {
        self.target.replace_unless(
            |old| matches!(old, TargetRef::Fire(old) if std::sync::Arc::ptr_eq(old, f)),
            || Target::fire(f.clone()),
        )
    }

    /// [`ensure_fire`](Timer::ensure_fire) for a timer that lives in a cell, `this` being
    /// its reference: installs the cell itself as the payload unless it is installed already.
    ///
    /// # Safety
    ///
    /// `this` is a cell reference to this timer, and a holder reference of the cell lives
    /// meanwhile (the arming's `CellTimer`).
    #[must_use = "the replaced payload must be dropped outside Modifying"]
    #[inline]
    pub(crate) unsafe fn ensure_cell(&self, this: &TimerRef) -> Target {
        // SAFETY: a cell's payload is reached only under a status its reacher owns (`cell.rs`,
        // "The payload without its lock"); the caller owns `Modifying`.
        unsafe {
            self.target.replace_unless_exclusive(
                |old| matches!(old, TargetRef::Cell(old) if std::ptr::eq(old.as_ptr(), this.as_ptr())),
                // SAFETY: per this function's contract.
                || Target::cell(this.cell_payload()),
            )
        }
    }

    /// Installs or replaces a [`Waker`] payload; a no-op if the installed one `will_wake` the
    /// same task. Firing wakes it: a one-shot run consumes it, a periodic run clones it.
    ///
    /// A waiter must install its waker first and then ask [`is_pending`](Timer::is_pending)
    /// (which waits out `Running`): a run claims the payload under this lock while it still
    /// owns `Running`, so either the run takes the new waker, or `is_pending` sees the run's
    /// final status. Reading the status without waiting out `Running` can lose a wake-up.
    pub fn set_waker(&self, w: &Waker) {
        let old = self.target.replace_unless(
            |old| matches!(old, TargetRef::Waker(old) if old.will_wake(w)),
            || Target::waker(w.clone()),
        );
        drop(old);
    }

    /// Drops the payload now.
    pub fn clear_target(&self) {
        drop(self.take_target());
    }

    /// Whether the timer is in a heap and not stopped: it will fire unless stopped. Waits out
    /// the short transient statuses (as [`del`](crate::del) does); a periodic timer that is
    /// being run stays pending.
    pub fn is_pending(&self) -> bool {
        loop {
            match self.status() {
                Status::Waiting
                | Status::ModifiedEarlier
                | Status::ModifiedLater
                | Status::Moving => return true,
                Status::NoStatus | Status::Deleted | Status::Removing | Status::Removed => {
                    return false
                }
                Status::Running | Status::Modifying => yield_now(),
            }
        }
    }

    /// The payload of a timer nobody else references (no locking).
    #[inline]
    pub(crate) fn into_target(self) -> Target {
        self.target.into_inner()
    }

    /// Takes the payload out (the caller drops it outside any lock).
    #[inline]
    pub(crate) fn take_target(&self) -> Target {
        self.target.take()
    }

    /// [`take_target`](Timer::take_target) of a cell's timer, without the payload lock.
    ///
    /// # Safety
    ///
    /// The timer lives in a cell and the caller owns a transient status of it (`cell.rs`,
    /// "The payload without its lock").
    #[inline]
    pub(crate) unsafe fn take_cell_target(&self) -> Target {
        // SAFETY: per this function's contract, nobody else reaches the payload meanwhile.
        unsafe { self.target.take_exclusive() }
    }

    /// Installs the cell `holder` (a holder reference of the cell this timer lives in) on a
    /// timer nobody else reaches, without the payload lock; returns what it replaced.
    ///
    /// # Safety
    ///
    /// No other thread reaches this timer (its cell is referenced by the caller's handle
    /// alone: `CellTimer::is_alone`).
    #[inline]
    pub(crate) unsafe fn install_cell_alone(&self, holder: crate::cell::Holder) -> Target {
        // SAFETY: per this function's contract.
        unsafe {
            self.target
                .replace_unless_exclusive(|_| false, || Target::cell(holder))
        }
    }

    /// Claims what a run must do, while the caller owns `Running` (so a racing `del` that
    /// returns false cannot have dropped it first). A periodic run clones the payload; a
    /// one-shot run takes it out, so that it is released as soon as it ran (the payload
    /// rule: a stale heap entry may keep this `Timer` alive for a long time, never its
    /// payload). A cell's timer (`cell`) is claimed without the payload lock (`cell.rs`,
    /// "The payload without its lock").
    pub(crate) fn claim_payload(&self, periodic: bool, cell: bool) -> Option<Payload> {
        let clone = |t: TargetRef<'_>| match t {
            TargetRef::None => Target::none(),
            TargetRef::Fire(f) => Target::fire(f.clone()),
            TargetRef::Waker(w) => Target::waker(w.clone()),
            TargetRef::Cell(c) => Target::cell(c.clone()),
        };
        let target = match (periodic, cell) {
            (false, false) => self.target.take(),
            (true, false) => self.target.peek(clone),
            // SAFETY: a cell's timer, and the caller owns Running.
            (false, true) => unsafe { self.target.take_exclusive() },
            // SAFETY: as above.
            (true, true) => unsafe { self.target.peek_exclusive(clone) },
        };
        target.into_payload()
    }

    /// Lets go of a reference that a heap or a list held, under that heap's lock. If it was
    /// the last one, the timer is freed here, and its payload, if any, goes to `dead` for the
    /// caller to drop once it holds no lock (a payload is left only when someone installed
    /// one on an unarmed timer and then dropped the timer). The rest of a `Timer` runs no
    /// user code when dropped. A cell's reference is one of its memory count, whose drop
    /// frees memory at most (`cell.rs`).
    pub(crate) fn release(this: TimerRef, dead: &mut Vec<Target>) {
        let Ok(this) = this.into_arc() else {
            return; // the cell reference was dropped
        };
        // A unique timer is reset and kept for reuse (`recycle.rs`); its payload goes to
        // `dead` like a freed one's.
        let rest = crate::recycle::keep(this, |payload| dead.push(payload));
        let Some(this) = rest else {
            return;
        };
        if let Some(t) = arc_into_inner(this) {
            let payload = t.into_target();
            if !payload.is_none() {
                dead.push(payload);
            }
        }
    }

    /// CAS `from` → `to`. AcqRel: taking a status acquires the fields its last owner wrote;
    /// leaving one releases ours to the next owner (the status word is the hand-off).
    pub(crate) fn cas(&self, from: Status, to: Status) -> bool {
        self.status
            .compare_exchange(from as u32, to as u32, AcqRel, Acquire)
            .is_ok()
    }

    /// Leaves a transient status we own (`Modifying`, `Running`, `Removing`, `Moving`) for
    /// `to`. Nobody else changes a transient status: every other thread that finds one
    /// waits for it to end (the crate docs' rule), so the exit is a `Release` store (the
    /// hand-off to the next owner), not a CAS: one locked instruction less per transition,
    /// ~5 ns on this machine's CPUs (design/PERFORMANCE-LOG.md, "T1's locked instructions").
    /// The load before it still catches a broken protocol (`what`), at the price of a read
    /// of a line we own.
    #[track_caller]
    #[inline]
    pub(crate) fn cas_owned(&self, from: Status, to: Status, what: &str) {
        if self.status.load(Relaxed) != from as u32 {
            bad(what)
        }
        self.status.store(to as u32, Release);
    }

    /// Go's `t.pp.ptr()`, dereferenced.
    ///
    /// # Safety
    ///
    /// The caller owns `Modifying`, and took it from a heaped status (`Waiting`, `Deleted`,
    /// `ModifiedEarlier`/`Later`). Then `owner` is non-null and names the `Shared` whose heap
    /// holds this timer; that `Shared` cannot be freed before we leave `Modifying`, because
    /// `Timers::drop` runs `drain`, which must CAS every heaped timer out of its status and
    /// waits while it is `Modifying`.
    pub(crate) unsafe fn owner_ref(&self) -> &Shared {
        let p = self.owner.load(Relaxed);
        if p.is_null() {
            bad("heaped timer without an owner");
        }
        // SAFETY: per this function's contract the pointee is alive until we leave Modifying,
        // which outlives the returned borrow in every caller.
        unsafe { &*p }
    }
}

impl fmt::Debug for Timer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Timer")
            .field("status", &self.status())
            .field("when", &self.when.load(Relaxed))
            .field("nextwhen", &self.nextwhen.load(Relaxed))
            .field("period", &self.period.load(Relaxed))
            .field("heaped", &!self.owner.load(Relaxed).is_null())
            .finish_non_exhaustive()
    }
}
