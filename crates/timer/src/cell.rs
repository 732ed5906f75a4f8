//! [`TimerCell`]: a timer and its callback in one allocation (Go's `time.AfterFunc` timer,
//! whose `f` is a field of the timer), and [`CellTimer`], the thin handle of one.
//!
//! The cell is an `Arc<TimerCell<P>>` laid out as the timer, a vtable pointer, then the
//! payload `P`. Its strong references are the callback's: the handle, the timer's installed
//! payload (an `Arc<dyn Fire>` of the cell itself, taken out by a run, a stop or a drain, as
//! any payload is) and the run queue's while a firing waits to run. The heaps and the
//! modified-earlier lists hold `Weak`s ([`TimerRef`] with the cell tag), which keep the
//! timer's memory and never `P`: the payload rule holds as for a separate callback (a stale
//! heap entry never keeps the captures alive; `P` is dropped with the last strong reference,
//! and every holder of one drops it where user code may run, never under a heap lock).
//!
//! The timer sits in a `ManuallyDrop`, so the cell's drop at the last strong reference (which
//! drops `P`) leaves it intact for the heaps' weak references until the memory is freed. Its
//! payload cell is then empty: the only payload ever installed on a cell's timer is the cell
//! itself (a strong reference), because the timer is reachable only through [`CellTimer`]'s
//! methods and [`modify_cell`](crate::modify_cell), never [`Timer::set_fire`]. (`Arc`'s drop
//! passes the cell to `drop_in_place` through a `&mut` while a heap may still read the timer
//! through its `Weak`: that drop writes nothing of the timer, a `ManuallyDrop` whose fields
//! are all atomics or behind its payload lock.)

use std::mem::ManuallyDrop;
use std::ptr::NonNull;
use std::sync::{Arc, Weak};

use crate::clock::Nanos;
use crate::timer::{Fire, Timer};
use crate::tref::{TimerRef, CELL};

/// The callback of a [`TimerCell`]: what a firing does, given the cell itself (so that it can
/// queue it as its own unit of work without allocating).
pub trait CellFire: Send + Sync + Sized + 'static {
    /// Called once per due deadline with a strong reference of the cell (see [`Fire::fire`]).
    fn fire(cell: Arc<TimerCell<Self>>, when: Nanos);

    /// The runtime shuts down and lets this callback go unrun (see [`Fire::shutdown`]).
    /// Drops the reference by default.
    fn shutdown(cell: Arc<TimerCell<Self>>) {
        drop(cell);
    }
}

/// A timer and its callback `P` in one allocation; see [`CellTimer`].
#[repr(C)]
pub struct TimerCell<P> {
    /// First, so that the cell's address is the timer's (a `TimerRef` is the cell's pointer).
    timer: ManuallyDrop<Timer>,
    /// At a fixed offset whatever `P` is (`repr(C)`), read through a timer's address.
    vtable: &'static CellVtable,
    payload: P,
}

impl<P> TimerCell<P> {
    /// The callback.
    pub fn payload(&self) -> &P {
        &self.payload
    }
}

impl<P: CellFire> Fire for TimerCell<P> {
    fn fire(self: Arc<Self>, when: Nanos) {
        P::fire(self, when)
    }

    fn shutdown(self: Arc<Self>) {
        P::shutdown(self)
    }
}

/// How a heap reaches a cell it only knows by its timer's address.
pub(crate) struct CellVtable {
    /// Adds a `Weak` of the cell (a heap's or a list's reference).
    pub(crate) clone_weak: unsafe fn(*const Timer),
    /// Lets go of a `Weak` of the cell.
    pub(crate) drop_weak: unsafe fn(*const Timer),
    /// Lets go of a strong reference (the handle's).
    drop_strong: unsafe fn(*const Timer),
    /// A new strong reference, as the payload to install.
    pub(crate) new_fire: unsafe fn(*const Timer) -> Arc<dyn Fire>,
}

/// The vtable of `TimerCell<P>`.
fn vtable<P: CellFire>() -> &'static CellVtable {
    &CellVtable {
        clone_weak: clone_weak::<P>,
        drop_weak: drop_weak::<P>,
        drop_strong: drop_strong::<P>,
        new_fire: new_fire::<P>,
    }
}

/// The vtable of the cell holding the timer at `p`.
///
/// # Safety
///
/// `p` is the address of a live `TimerCell`'s timer, with the provenance of the whole cell
/// (a pointer from `Arc::into_raw` or `Weak::into_raw` of the cell, never one narrowed
/// through a `&Timer`).
#[inline]
pub(crate) unsafe fn vtable_of(p: *const Timer) -> &'static CellVtable {
    let at = p
        .cast::<u8>()
        .wrapping_add(std::mem::offset_of!(TimerCell<()>, vtable));
    // SAFETY: `repr(C)` puts `vtable` at the same offset in every `TimerCell<P>` (the timer
    // before it has a fixed size and alignment); it is written once, before the cell is
    // shared, and never changes; the caller's pointer may read the whole cell.
    unsafe { *at.cast::<&'static CellVtable>() }
}

/// # Safety
///
/// `p` is a `TimerCell<P>`'s timer whose memory a reference of the caller keeps.
unsafe fn clone_weak<P: CellFire>(p: *const Timer) {
    // SAFETY: `p` is the cell's `Arc::into_raw`/`Weak::into_raw` pointer (the same address and
    // provenance), the weak count is above zero while the caller's reference lives, and the
    // borrowed `Weak` is never dropped.
    let w = ManuallyDrop::new(unsafe { Weak::from_raw(p.cast::<TimerCell<P>>()) });
    std::mem::forget(Weak::clone(&w));
}

/// # Safety
///
/// `p` is a `TimerCell<P>`'s timer and the caller owns one of its `Weak`s, given up here.
unsafe fn drop_weak<P: CellFire>(p: *const Timer) {
    // SAFETY: adopts the caller's `Weak`, released once.
    drop(unsafe { Weak::from_raw(p.cast::<TimerCell<P>>()) });
}

/// # Safety
///
/// `p` is a `TimerCell<P>`'s timer and the caller owns one of its strong references, given
/// up here.
unsafe fn drop_strong<P: CellFire>(p: *const Timer) {
    // SAFETY: adopts the caller's strong reference, released once.
    drop(unsafe { Arc::from_raw(p.cast::<TimerCell<P>>()) });
}

/// # Safety
///
/// `p` is a `TimerCell<P>`'s timer and the caller holds a strong reference of it.
unsafe fn new_fire<P: CellFire>(p: *const Timer) -> Arc<dyn Fire> {
    let p = p.cast::<TimerCell<P>>();
    // SAFETY: `p` came from `Arc::into_raw` and the caller's strong reference keeps the count
    // above zero while we add one and adopt it.
    unsafe {
        Arc::increment_strong_count(p);
        Arc::from_raw(p)
    }
}

/// The handle of a [`TimerCell`]: one strong reference, one word, whatever `P` is. Arm it
/// with [`modify_cell`](crate::modify_cell), stop it with [`stop`](CellTimer::stop).
///
/// # Examples
///
/// ```
/// use gort_timer::{modify_cell, CellFire, CellTimer, Nanos, TimerCell, Timers};
/// use std::sync::atomic::{AtomicUsize, Ordering};
/// use std::sync::Arc;
///
/// static RAN: AtomicUsize = AtomicUsize::new(0);
/// struct Count;
/// impl CellFire for Count {
///     fn fire(_cell: Arc<TimerCell<Self>>, _when: Nanos) {
///         RAN.fetch_add(1, Ordering::SeqCst);
///     }
/// }
/// let timers = Timers::new(0);
/// let t = CellTimer::new(Count);
/// assert!(!modify_cell(&t, 10, 0, &timers, &|_| {}));
/// assert_eq!(timers.check(10, true).ran, 1);
/// assert!(!modify_cell(&t, 20, 0, &timers, &|_| {})); // fired: armed again
/// assert!(t.stop());
/// assert_eq!(RAN.load(Ordering::SeqCst), 1);
/// ```
pub struct CellTimer {
    /// `Arc::into_raw` of the cell (its timer's address), owning one strong reference.
    ptr: NonNull<Timer>,
}

// SAFETY: a `CellTimer` owns an `Arc<TimerCell<P>>` with `P: CellFire` (`Send + Sync`).
unsafe impl Send for CellTimer {}
// SAFETY: as above; `&CellTimer` only hands out `&Timer`.
unsafe impl Sync for CellTimer {}

impl CellTimer {
    /// A fresh timer ([`Status::NoStatus`](crate::Status::NoStatus)) whose callback is
    /// `payload`, in one allocation.
    pub fn new<P: CellFire>(payload: P) -> CellTimer {
        let cell = Arc::new(TimerCell {
            timer: ManuallyDrop::new(Timer::fresh()),
            vtable: vtable::<P>(),
            payload,
        });
        let p = Arc::into_raw(cell).cast::<Timer>().cast_mut();
        CellTimer {
            // SAFETY: `into_raw` never returns null.
            ptr: unsafe { NonNull::new_unchecked(p) },
        }
    }

    /// The timer as a heap reference would name it, borrowed (never dropped).
    #[inline]
    pub(crate) fn borrow_ref(&self) -> ManuallyDrop<TimerRef> {
        let tagged = self.ptr.as_ptr().cast::<u8>().wrapping_add(CELL);
        // SAFETY: a cell's address with the cell tag: `TimerRef`'s form of a cell reference;
        // non-null. It stands for our strong reference and is never dropped, and cloning it
        // adds a `Weak`, which our strong reference keeps possible.
        ManuallyDrop::new(unsafe {
            TimerRef::from_tagged(NonNull::new_unchecked(tagged.cast::<Timer>()))
        })
    }

    /// The timer. Not public: only this crate installs a cell's payload (the cell itself), so
    /// that no other payload can be left on its timer when the last strong reference goes.
    #[inline]
    pub(crate) fn timer(&self) -> &Timer {
        // SAFETY: our strong reference keeps the cell, and so its timer, alive.
        unsafe { self.ptr.as_ref() }
    }

    /// Stops the timer: [`del`](crate::del).
    #[inline]
    pub fn stop(&self) -> bool {
        crate::del(self.timer())
    }

    /// The timer's status: [`Timer::status`].
    pub fn status(&self) -> crate::Status {
        self.timer().status()
    }

    /// The timer's deadline: [`Timer::when`].
    pub fn when(&self) -> Nanos {
        self.timer().when()
    }

    /// Whether the timer will fire unless stopped: [`Timer::is_pending`].
    pub fn is_pending(&self) -> bool {
        self.timer().is_pending()
    }

    /// How late the next arming may fire: [`Timer::set_slack`].
    #[inline]
    pub fn set_slack(&self, slack: Nanos) {
        self.timer().set_slack(slack);
    }
}

impl Drop for CellTimer {
    fn drop(&mut self) {
        let p = self.ptr.as_ptr().cast_const();
        // SAFETY: we own one strong reference, given up once here; this may drop the
        // callback, where our owner dropped us (never under a heap lock).
        unsafe { (vtable_of(p).drop_strong)(p) }
    }
}

impl std::fmt::Debug for CellTimer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Debug::fmt(self.timer(), f)
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use std::mem::{align_of, offset_of, size_of};

    struct Nothing;

    impl CellFire for Nothing {
        fn fire(_cell: Arc<TimerCell<Self>>, _when: Nanos) {}
    }

    /// A payload wider and more aligned than the timer.
    #[repr(C, align(64))]
    struct Wide {
        _bytes: [u8; 100],
    }

    /// What `vtable_of` and the reference tags rely on: the timer at the cell's address, the
    /// vtable right after it whatever the payload, and three free low bits in its address.
    #[test]
    fn the_vtable_sits_after_the_timer_whatever_the_payload() {
        let at = size_of::<Timer>();
        assert_eq!(offset_of!(TimerCell<()>, vtable), at);
        assert_eq!(offset_of!(TimerCell<u8>, vtable), at);
        assert_eq!(offset_of!(TimerCell<[u64; 9]>, vtable), at);
        assert_eq!(offset_of!(TimerCell<Wide>, vtable), at);
        assert_eq!(offset_of!(TimerCell<Wide>, timer), 0);
        assert_eq!(offset_of!(TimerCell<u8>, timer), 0);
        assert!(align_of::<Timer>() > crate::tref::TAGS);
        // The cell of a one-pointer payload with its `Arc` counts: 104 bytes (a 112-byte
        // glibc chunk), 8 more than a plain timer's `Arc`.
        assert_eq!(size_of::<TimerCell<usize>>() + 16, 104);
    }

    /// The counts of the cell behind `t`, read through a borrowed `Arc`.
    fn counts(t: &CellTimer) -> (usize, usize) {
        let p = t.ptr.as_ptr().cast_const().cast::<TimerCell<Nothing>>();
        // SAFETY: `t` holds a strong reference of this `TimerCell<Nothing>`; the borrowed
        // `Arc` is never dropped.
        let a = ManuallyDrop::new(unsafe { Arc::from_raw(p) });
        (Arc::strong_count(&a), Arc::weak_count(&a))
    }

    /// A cell reference is a `Weak` (clone adds one, drop takes it back, the strong count
    /// stays the callback's); the installed payload is a strong reference of the cell itself.
    #[test]
    fn cell_references_are_weak_and_the_payload_strong() {
        let t = CellTimer::new(Nothing);
        assert_eq!(counts(&t), (1, 0));
        let p = t.ptr.as_ptr().cast_const();
        // SAFETY: the handle's pointer is the cell's and keeps it alive.
        let stored = unsafe { (*p.cast::<TimerCell<Nothing>>()).vtable };
        // SAFETY: as above; the pointer has the whole cell's provenance.
        assert!(std::ptr::eq(unsafe { vtable_of(p) }, stored));
        let r = t.borrow_ref();
        assert!(r.is_cell());
        assert!(std::ptr::eq(r.as_ptr(), p));
        let weak = TimerRef::clone(&r);
        assert!(weak.is_cell());
        assert_eq!(counts(&t), (1, 1));
        let weak2 = weak.clone();
        assert_eq!(counts(&t), (1, 2));
        drop(weak);
        drop(weak2);
        assert_eq!(counts(&t), (1, 0));
        // SAFETY: `r` is a cell reference and `t` holds a strong reference meanwhile.
        let f = unsafe { r.cell_payload() };
        assert!(r.is_own_payload(&f));
        let other = CellTimer::new(Nothing);
        // SAFETY: as above, for `other`.
        assert!(!r.is_own_payload(&unsafe { other.borrow_ref().cell_payload() }));
        assert_eq!(counts(&t), (2, 0));
        drop(f);
        assert_eq!(counts(&t), (1, 0));
        assert!(TimerRef::clone(&r).into_arc().is_err());
    }

    /// A heap entry keeps a cell reference's tag beside its own (bit 0, indexed): the timer,
    /// a clone and the reference taken back are the cell's, whichever bits are set.
    #[test]
    fn entries_keep_the_cell_tag_beside_the_indexed_one() {
        use crate::entry::Entry;
        use gort_loom::atomic::Ordering::Relaxed;
        let t = CellTimer::new(Nothing);
        let p = t.ptr.as_ptr().cast_const();
        for promoted in [false, true] {
            if promoted {
                t.timer().index.store(0, Relaxed);
            }
            let e = Entry::new(7, TimerRef::clone(&t.borrow_ref()));
            assert_eq!(e.indexed(), promoted);
            assert!(std::ptr::eq(e.timer(), t.timer()));
            let c = e.clone_timer();
            assert!(c.is_cell() && std::ptr::eq(c.as_ptr(), p));
            assert_eq!(counts(&t), (1, 2));
            drop(c);
            let back = e.into_timer();
            assert!(back.is_cell() && std::ptr::eq(back.as_ptr(), p));
            drop(back);
            assert_eq!(counts(&t), (1, 0));
        }
    }
}
