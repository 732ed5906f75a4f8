//! The lock-free half of the state machine: Go's `deltimer`, `modtimer` and `resettimer`.
//! They own a timer through `Modifying` and never lock a heap that holds it.

use gort_loom::atomic::Ordering::Relaxed;
use gort_loom::{yield_now, Arc};

use crate::cell::CellTimer;
use crate::clock::Nanos;
use crate::heap::drop_dead;
use crate::status::Status;
use crate::timer::{Fire, Host, Target, Timer};
use crate::timers::Timers;
use crate::tref::TimerRef;

/// Go's `deltimer`: stops `t`. Returns true if it was pending (armed and not yet run for this
/// arming); it will then never fire for this arming.
///
/// Lock-free and O(1): it only marks the timer `Deleted` and leaves the heap entry for its
/// owner to remove lazily, but it drops the payload at once (go#61542, go#60144: stopped
/// timers must not keep their captures alive). Waits out a run in progress, so a `false`
/// for a one-shot timer means its callback has been claimed (it may still be running).
///
/// # Examples
///
/// ```
/// use gort_timer::{del, Timer, Timers};
/// let timers = Timers::new(0);
/// let t = Timer::new();
/// assert!(!del(&t)); // never armed
/// timers.add(&t, 10, 0, &|_| {});
/// assert!(del(&t));
/// assert!(!del(&t)); // already stopped
/// ```
#[doc(alias = "Stop")]
pub fn del(t: &Timer) -> bool {
    deltimer(t, false)
}

/// [`del`] for a cell's timer ([`CellTimer::stop`]), which takes the payload out without its
/// lock (`cell.rs`, "The payload without its lock").
#[inline]
pub(crate) fn del_cell(t: &CellTimer) -> bool {
    deltimer(t.timer(), true)
}

/// The body of [`del`] and [`del_cell`]; `cell`: `t` lives in a cell.
#[inline]
fn deltimer(t: &Timer, cell: bool) -> bool {
    loop {
        match t.status() {
            s @ (Status::Waiting | Status::ModifiedEarlier | Status::ModifiedLater) => {
                if !t.cas(s, Status::Modifying) {
                    continue;
                }
                // SAFETY: we own Modifying, taken from a heaped status (see `owner_ref`).
                let owner = unsafe { t.owner_ref() };
                // Counted before leaving Modifying (Go counts after): a remover can then never
                // decrement first (design/reference/go-timers.md §7.7), and the owner is not touched after
                // Modifying ends, when it might be freed.
                owner.deleted.fetch_add(1, Relaxed);
                owner.stopped.fetch_add(1, Relaxed);
                let payload = if cell {
                    // SAFETY: a cell's timer, and we own Modifying.
                    unsafe { t.take_cell_target() }
                } else {
                    t.take_target()
                };
                t.cas_owned(
                    Status::Modifying,
                    Status::Deleted,
                    "deltimer: lost Modifying",
                );
                drop(payload); // outside Modifying: a payload's Drop may call back into us
                return true;
            }
            Status::Deleted | Status::Removing | Status::Removed | Status::NoStatus => {
                return false
            }
            Status::Running | Status::Moving | Status::Modifying => yield_now(),
        }
    }
}

/// Go's `modtimer`: (re)arms `t` at `when` (> 0) with `period` (0 = one-shot). Returns
/// whether it was pending before the call.
///
/// - In a heap (pending, or stopped but not yet removed): records `when` as `nextwhen` and
///   marks the timer `ModifiedEarlier`/`ModifiedLater` against its heap key, without taking
///   that heap's lock. An earlier deadline is queued on the owner's modified-earlier list,
///   lowers the owner's summary and calls `host.wake_netpoller(when)`.
/// - In no heap (fresh, fired, or stopped and removed): inserts it into `home` (the caller's
///   P) under `home`'s lock and calls `host.wake_netpoller(when)`.
///
/// Install the payload before arming (after [`del`] or a one-shot run it is gone; or use
/// [`modify_fire`], which installs it inside the arming).
///
/// # Panics
///
/// If `when <= 0` or `period < 0`.
///
/// # Examples
///
/// ```
/// use gort_timer::{modify, Status, Timer, Timers};
/// let timers = Timers::new(0);
/// let t = Timer::new();
/// t.set_fire(std::sync::Arc::new(|_| {}));
/// assert!(!modify(&t, 100, 0, &timers, &|_| {})); // first arming
/// assert!(modify(&t, 40, 0, &timers, &|_| {})); // moved earlier, lazily
/// assert_eq!(t.status(), Status::ModifiedEarlier);
/// assert_eq!(timers.wake_time(), 40);
/// assert_eq!(timers.check(40, true).ran, 1);
/// ```
#[doc(alias = "Reset")]
#[track_caller]
#[inline]
pub fn modify(t: &Arc<Timer>, when: Nanos, period: Nanos, home: &Timers, host: &dyn Host) -> bool {
    modtimer(&TimerRef::borrow_arc(t), when, period, None, home, host)
}

/// [`modify`] for a timer whose callback is `fire`: installs `fire` while it owns
/// `Modifying` unless the timer is still pending (a pending timer keeps its payload; only
/// [`del`] drops it). Go's `modtimer` sets `t.f` the same way, inside the status it owns.
///
/// Because the install happens inside `Modifying`, a [`del`] from another thread is ordered
/// wholly before or wholly after it: a stop can never fall between the install and the
/// arming and leave an armed timer without its callback. The caller needs no lock of its own,
/// and a reset of a pending timer touches no payload at all (two CASes, as in Go).
///
/// # Panics
///
/// If `when <= 0` or `period < 0`.
///
/// # Examples
///
/// ```
/// use gort_timer::{del, modify_fire, Fire, Timer, Timers};
/// use std::sync::Arc;
/// let timers = Timers::new(0);
/// let t = Timer::new();
/// let f: Arc<dyn Fire> = Arc::new(|_| {});
/// assert!(!modify_fire(&t, 100, 0, &f, &timers, &|_| {})); // installs f, arms
/// assert!(del(&t)); // drops f
/// assert!(!modify_fire(&t, 50, 0, &f, &timers, &|_| {})); // installs it again
/// assert_eq!(timers.check(100, true).ran, 1);
/// ```
#[doc(alias = "Reset")]
#[track_caller]
#[inline]
pub fn modify_fire(
    t: &Arc<Timer>,
    when: Nanos,
    period: Nanos,
    fire: &std::sync::Arc<dyn Fire>,
    home: &Timers,
    host: &dyn Host,
) -> bool {
    modtimer(
        &TimerRef::borrow_arc(t),
        when,
        period,
        Some(fire),
        home,
        host,
    )
}

/// [`modify_fire`] for a timer that lives with its callback in a [`TimerCell`]: the payload
/// installed is the cell itself, under the same rule (inside `Modifying`, only if a stop or
/// a one-shot run released it).
///
/// # Panics
///
/// If `when <= 0` or `period < 0`.
///
/// [`TimerCell`]: crate::TimerCell
#[doc(alias = "Reset")]
#[track_caller]
#[inline]
pub fn modify_cell(
    t: &CellTimer,
    when: Nanos,
    period: Nanos,
    home: &Timers,
    host: &dyn Host,
) -> bool {
    // The cell reference tells `modtimer` to install the cell itself; `t` is the holder
    // reference that installing needs.
    modtimer(&t.borrow_ref(), when, period, None, home, host)
}

/// Go's `addtimer` for a cell only `t` references (a callback timer just made, or one whose
/// firing is over and whose heap let go of it): arms it at `when` (> 0) with `period`
/// (0 = one-shot) in `home`, then calls `host.wake_netpoller(when)`. Returns whether it was
/// pending before (as [`modify_cell`]).
///
/// Nobody else can reach such a timer (`&mut` of its only handle, no heap or list reference),
/// so, as Go stores `timerWaiting` on a timer it has not published, it takes no status CAS
/// and installs the payload without its lock: five locked instructions fewer than
/// [`modify_cell`] (a CAS, the payload lock's two, the holder and memory counts;
/// design/PERFORMANCE-LOG.md, "T1's locked instructions"). A cell that is referenced
/// elsewhere is armed by [`modify_cell`].
///
/// # Panics
///
/// If `when <= 0` or `period < 0`.
///
/// # Examples
///
/// ```
/// use gort_timer::{add_cell, CellFire, CellRef, CellTimer, Nanos, Timers};
/// struct Ring;
/// impl CellFire for Ring {
///     fn fire(_: CellRef<Self>, _: Nanos) {}
/// }
/// let timers = Timers::new(0);
/// let mut t = CellTimer::new(Ring);
/// assert!(!add_cell(&mut t, 10, 0, &timers, &|_| {}));
/// assert!(t.is_pending());
/// assert_eq!(timers.check(10, true).ran, 1);
/// ```
#[track_caller]
pub fn add_cell(
    t: &mut CellTimer,
    when: Nanos,
    period: Nanos,
    home: &Timers,
    host: &dyn Host,
) -> bool {
    if !t.is_alone() {
        return modify_cell(t, when, period, home, host);
    }
    assert!(
        when > 0,
        "gort: add_cell: deadline `when` must be > 0, got {when}"
    );
    assert!(
        period >= 0,
        "gort: add_cell: `period` must be >= 0, got {period}"
    );
    let rearm = t.timer().when.load(Relaxed) != 0;
    let (heap_ref, replaced) = t.install_alone();
    let timer = t.timer();
    timer.period.store(period, Relaxed);
    // Relaxed: the heap lock that inserts the timer publishes it with its fields.
    timer.status.store(Status::Waiting as u32, Relaxed);
    let dead = home.insert(heap_ref, when, rearm);
    host.wake_netpoller(when);
    drop_dead(dead);
    drop(replaced);
    false
}

/// The body of [`modify`], [`modify_fire`] and [`modify_cell`]: installs `fire` if given,
/// or the cell itself if `t` is a cell reference (only `modify_cell` passes one, holding the
/// cell's handle meanwhile).
#[track_caller]
fn modtimer(
    t: &TimerRef,
    when: Nanos,
    period: Nanos,
    fire: Option<&std::sync::Arc<dyn Fire>>,
    home: &Timers,
    host: &dyn Host,
) -> bool {
    assert!(
        when > 0,
        "gort: modify: deadline `when` must be > 0, got {when}"
    );
    assert!(
        period >= 0,
        "gort: modify: `period` must be >= 0, got {period}"
    );
    let (was_removed, pending) = loop {
        match t.status() {
            s @ (Status::Waiting | Status::ModifiedEarlier | Status::ModifiedLater) => {
                if t.cas(s, Status::Modifying) {
                    break (false, true);
                }
            }
            s @ (Status::NoStatus | Status::Removed) => {
                if t.cas(s, Status::Modifying) {
                    break (true, false);
                }
            }
            s @ Status::Deleted => {
                if t.cas(s, Status::Modifying) {
                    // SAFETY: we own Modifying, taken from a heaped status (see `owner_ref`).
                    unsafe { t.owner_ref() }.deleted.fetch_sub(1, Relaxed);
                    break (false, false);
                }
            }
            Status::Running | Status::Removing | Status::Moving | Status::Modifying => yield_now(),
        }
    };
    t.period.store(period, Relaxed);
    if pending {
        // The hot path (a reset of a pending timer): its payload stays, nothing to drop.
        rekey_lazily(t, when, host);
        return true;
    }
    // Not pending: a `del` or a one-shot run released the payload, so `ensure_fire` installs
    // `fire` (or only compares pointers, if a `set_fire` put it back already). A replaced
    // payload is dropped after Modifying ends (the payload rule).
    let replaced = if t.is_cell() {
        // SAFETY: a cell reference comes only from `modify_cell`, whose `CellTimer` is a
        // holder reference of the cell for the whole call.
        unsafe { t.ensure_cell(t) }
    } else {
        fire.map_or(Target::none(), |f| t.ensure_fire(f))
    };
    if was_removed {
        drop_dead(reactivate(t, when, home, host));
    } else {
        rekey_lazily(t, when, host);
    }
    drop(replaced);
    false
}

/// `modtimer` on a timer in no heap, owned as `Modifying`: inserts it into `home`, leaves
/// `Modifying`, wakes the poller. Returns what tidying freed, for the caller to drop now
/// that it owns no status.
fn reactivate(t: &TimerRef, when: Nanos, home: &Timers, host: &dyn Host) -> Vec<Target> {
    t.when.store(when, Relaxed);
    let dead = home.insert(TimerRef::clone(t), when, true);
    t.cas_owned(
        Status::Modifying,
        Status::Waiting,
        "modtimer: lost Modifying",
    );
    host.wake_netpoller(when);
    dead
}

/// `modtimer` on a timer still in its heap, owned as `Modifying` taken from a heaped status:
/// records `when` as `nextwhen` and marks it ModifiedEarlier/Later for its owner to re-key.
///
/// The timer stays in its heap, which may be another runtime's than the caller's: an earlier
/// deadline then wakes the heap's runtime ([`OwnerHost`](crate::OwnerHost)), whose Ms
/// would otherwise sleep on until the old deadline. The handle is taken while Modifying
/// keeps the heap alive and used after it ends (a wake-up may take scheduler locks, which
/// must never be waited for in a transient status).
fn rekey_lazily(t: &TimerRef, when: Nanos, host: &dyn Host) {
    t.nextwhen.store(when, Relaxed);
    // Compared with the heap key, not an older nextwhen, as Go does.
    let earlier = when < t.when.load(Relaxed);
    let mut foreign = None;
    if earlier {
        // SAFETY: we own Modifying, taken from a heaped status (see `owner_ref`).
        let owner = unsafe { t.owner_ref() };
        // Invariant 6: list push, then summary, then the status store that leaves Modifying.
        owner.queue_early(t);
        owner.lower_modified_earliest(when);
        foreign = owner.owner.as_ref().and_then(|o| o.if_foreign(host));
    }
    let to = if earlier {
        Status::ModifiedEarlier
    } else {
        Status::ModifiedLater
    };
    t.cas_owned(Status::Modifying, to, "modtimer: lost Modifying");
    if earlier {
        match foreign {
            // A runtime already gone has nobody to wake.
            Some(owner) => {
                if let Some(owner) = owner.upgrade() {
                    owner.wake_netpoller(when);
                }
            }
            None => host.wake_netpoller(when),
        }
    }
}

/// Go's `resettimer`: [`modify`] keeping the timer's current period.
///
/// # Panics
///
/// If `when <= 0`.
#[track_caller]
pub fn reset(t: &Arc<Timer>, when: Nanos, home: &Timers, host: &dyn Host) -> bool {
    modify(t, when, t.period.load(Relaxed), home, host)
}
