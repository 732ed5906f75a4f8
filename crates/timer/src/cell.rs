//! [`TimerCell`]: a timer and its callback in one allocation (Go's `time.AfterFunc` timer,
//! whose `f` is a field of the timer), [`CellTimer`], the thin handle of one, and
//! [`CellRef`], a callback holder's reference.
//!
//! The cell keeps its own two reference counts in a header beside the timer, as Tokio's task
//! header does, rather than a std `Arc`'s (both in one word, [`Counts`], so that the header
//! with the vtable is 16 bytes and a one-pointer callback's cell fits a 96-byte glibc chunk):
//! - the *holder* count: the callback's holders (the handle, the timer's installed payload,
//!   a run or the run queue while a firing waits to run); the last one drops `P`;
//! - the *memory* count: the heaps' and the modified-earlier lists' references
//!   ([`TimerRef`] with the cell tag), plus one for all the holders together; the last one
//!   frees the allocation.
//!
//! A heap thus keeps reading the timer (all atomics, or behind its payload lock) through its
//! reference after the callback is gone, and the callback's drop never aliases it: `P` is
//! dropped in place through a raw pointer to the payload field alone, the allocation is freed
//! only once nobody can read it, and no `&mut` of the whole cell is ever made while others
//! may read it. (A std `Arc`'s last strong drop passes its value to `drop_in_place` through a
//! `&mut` of the whole value: with the timer in it, that `&mut` aliased the heaps' reads.)
//! The timer is never dropped: the only payload ever installed on a cell's timer is the cell
//! itself (a holder reference, taken out by a run, a stop or a drain before the holder count
//! can reach zero), because the timer is reachable only through [`CellTimer`]'s methods and
//! [`modify_cell`](crate::modify_cell), never [`Timer::set_fire`].
//!
//! **The payload without its lock.** A cell's payload is reached only by a thread that owns
//! a transient status of its timer (`Modifying` to install or take it, `Running` to claim
//! it, `Removing` to drain it) or that alone references the cell
//! ([`CellTimer::is_alone`]): nothing outside this crate reaches a cell's timer, and the
//! crate never calls `Timer::set_fire`/`set_waker` on one. The status word orders those
//! accesses (each owner's exit is a `Release` its next owner acquires), so the installs,
//! stops and runs ([`add_cell`](crate::add_cell), [`modify_cell`](crate::modify_cell),
//! [`CellTimer::stop`], a heap's claim) skip the payload lock (two locked instructions each).
//!
//! The payload rule holds as for a separate callback: a stale heap entry keeps the timer's
//! memory, never `P`, and every holder drops its reference where user code may run, never
//! under a heap lock. The counts are modelled in tests/loom_cell.rs.

use std::marker::PhantomData;
use std::mem::ManuallyDrop;
use std::ops::Deref;
use std::ptr::NonNull;

use gort_loom::atomic::{
    fence, AtomicU64, Ordering::Acquire, Ordering::Relaxed, Ordering::Release,
};

use crate::clock::Nanos;
use crate::timer::Timer;
use crate::tref::{TimerRef, CELL};

/// The callback of a [`TimerCell`]: what a firing does, given a holder reference of the cell
/// (so that it can queue the cell as its own unit of work without allocating).
pub trait CellFire: Send + Sync + Sized + 'static {
    /// Called once per due deadline with a holder reference of the cell (see
    /// [`Fire::fire`](crate::Fire::fire)).
    fn fire(cell: CellRef<Self>, when: Nanos);

    /// The runtime shuts down and lets this callback go unrun (see
    /// [`Fire::shutdown`](crate::Fire::shutdown)). Drops the reference by default.
    fn shutdown(cell: CellRef<Self>) {
        drop(cell);
    }
}

/// What every cell starts with, whatever `P` is: the timer (first, so that the cell's address
/// is the timer's and a `TimerRef` is the cell's pointer), the vtable and the counts.
#[repr(C)]
struct Header {
    /// Never dropped (module docs): freed with the memory, its payload cell empty.
    timer: ManuallyDrop<Timer>,
    /// Written once, before the cell is shared.
    vtable: &'static CellVtable,
    /// Both counts.
    counts: Counts,
}

/// The cell's two counts in one word: the memory count (heap and list references, plus one
/// for all the holders) in the low half, the holder count (references that keep `P`) in the
/// high half. Each count changes by its own read-modify-write of the word, so each behaves
/// as if it had the word alone (the other half only rides along); they share a word to keep
/// the header small (module docs). A count past `MAX` means leaked references: the process
/// aborts before a half could carry into the other, as std's `Arc` does before it wraps.
struct Counts(AtomicU64);

impl Counts {
    /// One memory reference.
    const REF: u64 = 1;
    /// One holder reference.
    const HOLDER: u64 = 1 << 32;
    /// The low half.
    const REFS: u64 = Self::HOLDER - 1;
    /// The most references of either kind: half of a half's range.
    const MAX: u64 = 1 << 31;

    /// `refs` memory and `holders` holder references.
    fn new(refs: u64, holders: u64) -> Counts {
        Counts(AtomicU64::new(Self::word(refs, holders)))
    }

    fn word(refs: u64, holders: u64) -> u64 {
        holders * Self::HOLDER + refs * Self::REF
    }

    /// (memory, holders) now.
    #[cfg_attr(not(test), allow(dead_code))]
    fn load(&self) -> (u64, u64) {
        let w = self.0.load(Acquire);
        (w & Self::REFS, w >> 32)
    }

    /// Adds a memory reference.
    fn add_ref(&self) {
        if self.0.fetch_add(Self::REF, Relaxed) & Self::REFS >= Self::MAX {
            std::process::abort();
        }
    }

    /// Adds a holder reference.
    fn add_holder(&self) {
        if self.0.fetch_add(Self::HOLDER, Relaxed) >> 32 >= Self::MAX {
            std::process::abort();
        }
    }

    /// Lets go of a memory reference; true if it was the last.
    fn release_ref(&self) -> bool {
        // Release: our reads of the timer happen before whoever frees it.
        self.0.fetch_sub(Self::REF, Release) & Self::REFS == 1
    }

    /// Lets go of a holder reference; true if it was the last.
    fn release_holder(&self) -> bool {
        // Release: our uses of `P` happen before its drop.
        self.0.fetch_sub(Self::HOLDER, Release) >> 32 == 1
    }

    /// Whether these are exactly `refs` memory and `holders` holder references (Acquire:
    /// pairs with the Release decrements of the references let go, so that their accesses
    /// to the timer happened before the caller's).
    fn are(&self, refs: u64, holders: u64) -> bool {
        self.0.load(Acquire) == Self::word(refs, holders)
    }

    /// Sets the counts, for a caller nobody else can count beside.
    fn set_alone(&self, refs: u64, holders: u64) {
        self.0.store(Self::word(refs, holders), Relaxed);
    }
}

/// A timer and its callback `P` in one allocation; see [`CellTimer`].
#[repr(C)]
pub struct TimerCell<P> {
    header: Header,
    /// Dropped in place by the last holder (`drop_payload`), never by the cell.
    payload: ManuallyDrop<P>,
}

impl<P> TimerCell<P> {
    /// The callback.
    pub fn payload(&self) -> &P {
        &self.payload
    }
}

/// What a cell's code needs to know of `P`, reached from the timer's address.
pub(crate) struct CellVtable {
    /// Runs a firing, adopting a holder reference.
    fire: unsafe fn(*const Timer, Nanos),
    /// Tells the callback of a shutdown, adopting a holder reference.
    shutdown: unsafe fn(*const Timer),
    /// Drops `P` in place (the holder count reached zero).
    drop_payload: unsafe fn(*const Timer),
    /// Frees the allocation (the memory count reached zero).
    free: unsafe fn(*const Timer),
}

/// The vtable of `TimerCell<P>`.
fn vtable<P: CellFire>() -> &'static CellVtable {
    &CellVtable {
        fire: fire::<P>,
        shutdown: shutdown::<P>,
        drop_payload: drop_payload::<P>,
        free: free::<P>,
    }
}

/// The header of the cell whose timer is at `p`.
///
/// # Safety
///
/// `p` is the address of a cell's timer, with the provenance of the whole cell (a pointer
/// from [`CellTimer::new`]'s allocation, never one narrowed through a `&Timer`), and a
/// reference of the caller keeps the memory.
#[inline(always)]
unsafe fn header<'a>(p: *const Timer) -> &'a Header {
    // SAFETY: `repr(C)`: the header is at the cell's address whatever `P` is; the caller's
    // reference keeps it allocated. The borrow covers the header alone, never the payload,
    // and every field of it is read-only or atomic.
    unsafe { &*p.cast::<Header>() }
}

/// Adds a heap's or a list's reference.
///
/// # Safety
///
/// As [`header`]: the caller holds a reference (either count) of the cell at `p`.
#[inline]
pub(crate) unsafe fn clone_ref(p: *const Timer) {
    // SAFETY: per this function's contract.
    unsafe { header(p) }.counts.add_ref();
}

/// Lets go of a memory reference; the last one frees the cell.
///
/// # Safety
///
/// `p` is a cell's timer and the caller owns one memory reference, given up here.
#[inline]
pub(crate) unsafe fn drop_ref(p: *const Timer) {
    // SAFETY: our reference keeps the header until the decrement.
    let h = unsafe { header(p) };
    if !h.counts.release_ref() {
        return;
    }
    // Acquire: everyone else's reads of the timer and the payload's drop happened before.
    fence(Acquire);
    let free = h.vtable.free;
    // SAFETY: the count was ours alone: nobody can reach the cell any more.
    unsafe { free(p) }
}

/// Adds a holder reference.
///
/// # Safety
///
/// The caller holds a holder reference of the cell at `p` (so `P` is alive).
#[inline]
unsafe fn clone_holder(p: *const Timer) {
    // SAFETY: per this function's contract.
    unsafe { header(p) }.counts.add_holder();
}

/// Lets go of a holder reference: the last one drops `P`, then the holders' memory reference.
///
/// # Safety
///
/// `p` is a cell's timer and the caller owns one holder reference, given up here.
#[inline]
unsafe fn drop_holder(p: *const Timer) {
    // SAFETY: our holder reference keeps the memory (the holders' memory reference).
    let h = unsafe { header(p) };
    if !h.counts.release_holder() {
        return;
    }
    fence(Acquire);
    /// Gives up the holders' memory reference even if `P`'s drop panics.
    struct Unref(*const Timer);
    impl Drop for Unref {
        fn drop(&mut self) {
            // SAFETY: the holders' memory reference, given up once, after `P` went.
            unsafe { drop_ref(self.0) }
        }
    }
    let unref = Unref(p);
    let drop_payload = h.vtable.drop_payload;
    // SAFETY: the holder count reached zero: `P` is ours alone, dropped once (no holder can
    // be made again: one is cloned only from another).
    unsafe { drop_payload(p) };
    drop(unref);
}

/// # Safety
///
/// `p` is a `TimerCell<P>`'s timer; the caller gives up a holder reference.
unsafe fn fire<P: CellFire>(p: *const Timer, when: Nanos) {
    // SAFETY: adopts the caller's holder reference of a `TimerCell<P>`.
    P::fire(unsafe { CellRef::adopt(p) }, when)
}

/// # Safety
///
/// As [`fire`].
unsafe fn shutdown<P: CellFire>(p: *const Timer) {
    // SAFETY: as in `fire`.
    P::shutdown(unsafe { CellRef::adopt(p) })
}

/// # Safety
///
/// `p` is a `TimerCell<P>`'s timer whose holder count reached zero; called once.
unsafe fn drop_payload<P>(p: *const Timer) {
    let cell = p.cast_mut().cast::<TimerCell<P>>();
    // SAFETY: the pointer has the whole cell's provenance; the place projection makes no
    // reference to the cell, only a raw pointer to the payload field, which nobody else
    // reaches any more (the heaps read only the header). `ManuallyDrop<P>` is
    // `repr(transparent)`.
    unsafe { std::ptr::drop_in_place(std::ptr::addr_of_mut!((*cell).payload).cast::<P>()) }
}

/// # Safety
///
/// `p` is a `TimerCell<P>`'s timer whose memory count reached zero; called once.
unsafe fn free<P>(p: *const Timer) {
    // SAFETY: the cell came from `Box::new` in `CellTimer::new` (as `ManuallyDrop` of the
    // same layout, so that freeing drops nothing: the payload went before, the timer is never
    // dropped); nobody holds a reference.
    drop(unsafe { Box::from_raw(p.cast_mut().cast::<ManuallyDrop<TimerCell<P>>>()) });
}

/// A holder reference of a cell, one word and type-erased: what the cell's timer keeps as
/// its installed payload, and a run claims.
pub(crate) struct Holder {
    /// The cell's timer address, owning one holder reference.
    ptr: NonNull<Timer>,
}

// SAFETY: a holder of a `TimerCell<P>` with `P: CellFire` (`Send + Sync`); the header is
// atomics and read-only fields.
unsafe impl Send for Holder {}
// SAFETY: as above.
unsafe impl Sync for Holder {}

impl Holder {
    /// A new holder reference of the cell at `p`.
    ///
    /// # Safety
    ///
    /// `p` is a cell's timer (whole-cell provenance) and a holder reference of it lives
    /// meanwhile.
    #[inline]
    pub(crate) unsafe fn new(p: *const Timer) -> Holder {
        // SAFETY: per this function's contract.
        unsafe { clone_holder(p) };
        Holder {
            // SAFETY: a live cell's address is not null.
            ptr: unsafe { NonNull::new_unchecked(p.cast_mut()) },
        }
    }

    /// Adopts a holder reference of the cell at `p` that the caller counted already.
    ///
    /// # Safety
    ///
    /// `p` is a cell's timer (whole-cell provenance), and one holder reference counted in
    /// its header is given to the result.
    #[inline]
    pub(crate) unsafe fn adopt(p: *const Timer) -> Holder {
        Holder {
            // SAFETY: a live cell's address is not null.
            ptr: unsafe { NonNull::new_unchecked(p.cast_mut()) },
        }
    }

    /// The cell's timer address.
    #[inline]
    pub(crate) fn as_ptr(&self) -> *const Timer {
        self.ptr.as_ptr()
    }

    /// Runs the firing (the callback's [`CellFire::fire`]), giving it this reference.
    #[inline]
    pub(crate) fn fire(self, when: Nanos) {
        let p = ManuallyDrop::new(self).as_ptr();
        // SAFETY: our reference keeps the header; the callee adopts it.
        unsafe { (header(p).vtable.fire)(p, when) }
    }

    /// Tells the callback of a shutdown ([`CellFire::shutdown`]), giving it this reference.
    pub(crate) fn shutdown(self) {
        let p = ManuallyDrop::new(self).as_ptr();
        // SAFETY: as in `fire`.
        unsafe { (header(p).vtable.shutdown)(p) }
    }
}

impl Clone for Holder {
    #[inline]
    fn clone(&self) -> Holder {
        // SAFETY: our reference is a holder of this cell.
        unsafe { Holder::new(self.as_ptr()) }
    }
}

impl Drop for Holder {
    #[inline]
    fn drop(&mut self) {
        // SAFETY: we own one holder reference, given up once here; where our owner drops us
        // (never under a heap lock: the payload rule).
        unsafe { drop_holder(self.as_ptr()) }
    }
}

/// A holder reference of a [`TimerCell<P>`]: what [`CellFire::fire`] is given, one word. It
/// keeps the callback `P` alive (the last holder drops it); clone adds a holder.
///
/// # Examples
///
/// ```
/// use gort_timer::{modify_cell, CellFire, CellRef, CellTimer, Nanos, Timers};
/// use std::sync::Mutex;
///
/// static KEPT: Mutex<Vec<CellRef<Keep>>> = Mutex::new(Vec::new());
/// struct Keep(u32);
/// impl CellFire for Keep {
///     fn fire(cell: CellRef<Self>, _when: Nanos) {
///         KEPT.lock().unwrap().push(cell); // the callback outlives its handle
///     }
/// }
/// let timers = Timers::new(0);
/// let t = CellTimer::new(Keep(7));
/// modify_cell(&t, 10, 0, &timers, &|_| {});
/// timers.check(10, true);
/// drop(t);
/// assert_eq!(KEPT.lock().unwrap()[0].payload().0, 7);
/// ```
pub struct CellRef<P> {
    /// The cell, owning one holder reference.
    ptr: NonNull<TimerCell<P>>,
    _owns: PhantomData<TimerCell<P>>,
}

// SAFETY: a holder shares `P` between threads (`&P` through `Deref`, `P`'s drop wherever the
// last holder goes): `Send + Sync` iff `P` is; the header is atomics and read-only fields.
unsafe impl<P: Send + Sync> Send for CellRef<P> {}
// SAFETY: as above.
unsafe impl<P: Send + Sync> Sync for CellRef<P> {}

impl<P> CellRef<P> {
    /// Adopts a holder reference of the `TimerCell<P>` whose timer is at `p`.
    ///
    /// # Safety
    ///
    /// `p` is such a cell's timer (whole-cell provenance); the caller gives up a holder
    /// reference of it.
    #[inline]
    unsafe fn adopt(p: *const Timer) -> CellRef<P> {
        CellRef {
            // SAFETY: a live cell's address is not null.
            ptr: unsafe { NonNull::new_unchecked(p.cast_mut().cast()) },
            _owns: PhantomData,
        }
    }

    /// The cell's timer address, with the whole cell's provenance.
    #[inline]
    fn timer_ptr(&self) -> *const Timer {
        self.ptr.as_ptr().cast_const().cast()
    }

    /// The pointer that stands for this reference, which it now owns (undo with
    /// [`from_raw`](CellRef::from_raw)): how a run queue keeps a cell in one word.
    #[inline]
    pub fn into_raw(this: CellRef<P>) -> NonNull<()> {
        ManuallyDrop::new(this).ptr.cast()
    }

    /// The reference back from [`into_raw`](CellRef::into_raw).
    ///
    /// # Safety
    ///
    /// `raw` came from `CellRef::<P>::into_raw` (same `P`) and is adopted once.
    #[inline]
    pub unsafe fn from_raw(raw: NonNull<()>) -> CellRef<P> {
        CellRef {
            ptr: raw.cast(),
            _owns: PhantomData,
        }
    }
}

impl<P> Deref for CellRef<P> {
    type Target = TimerCell<P>;

    #[inline]
    fn deref(&self) -> &TimerCell<P> {
        // SAFETY: our holder reference keeps the memory and `P` alive; the heaps never write
        // the cell (the timer's fields are atomics or behind its lock).
        unsafe { self.ptr.as_ref() }
    }
}

impl<P> Clone for CellRef<P> {
    #[inline]
    fn clone(&self) -> CellRef<P> {
        let p = self.timer_ptr();
        // SAFETY: our reference is a holder of this cell; the new one is adopted.
        unsafe {
            clone_holder(p);
            CellRef::adopt(p)
        }
    }
}

impl<P> Drop for CellRef<P> {
    #[inline]
    fn drop(&mut self) {
        // SAFETY: we own one holder reference, given up once here (the last one drops `P`,
        // where our owner drops us).
        unsafe { drop_holder(self.timer_ptr()) }
    }
}

/// The handle of a [`TimerCell`]: one holder reference, one word, whatever `P` is. Arm it
/// with [`modify_cell`](crate::modify_cell), stop it with [`stop`](CellTimer::stop).
///
/// # Examples
///
/// ```
/// use gort_timer::{modify_cell, CellFire, CellRef, CellTimer, Nanos, Timers};
/// use std::sync::atomic::{AtomicUsize, Ordering};
///
/// static RAN: AtomicUsize = AtomicUsize::new(0);
/// struct Count;
/// impl CellFire for Count {
///     fn fire(_cell: CellRef<Self>, _when: Nanos) {
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
    /// The cell's timer address (whole-cell provenance), owning one holder reference.
    ptr: NonNull<Timer>,
}

// SAFETY: a `CellTimer` owns a holder of a `TimerCell<P>` with `P: CellFire` (`Send + Sync`).
unsafe impl Send for CellTimer {}
// SAFETY: as above; `&CellTimer` only hands out `&Timer`.
unsafe impl Sync for CellTimer {}

impl CellTimer {
    /// A fresh timer ([`Status::NoStatus`](crate::Status::NoStatus)) whose callback is
    /// `payload`, in one allocation.
    pub fn new<P: CellFire>(payload: P) -> CellTimer {
        let cell = Box::new(TimerCell {
            header: Header {
                timer: ManuallyDrop::new(Timer::fresh()),
                vtable: vtable::<P>(),
                // Ours, and the holders' one memory reference.
                counts: Counts::new(1, 1),
            },
            payload: ManuallyDrop::new(payload),
        });
        let p = Box::into_raw(cell).cast::<Timer>();
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
        // non-null. It stands for our holder reference and is never dropped, and cloning it
        // adds a memory reference, which our holder keeps possible.
        ManuallyDrop::new(unsafe {
            TimerRef::from_tagged(NonNull::new_unchecked(tagged.cast::<Timer>()))
        })
    }

    /// The timer. Not public: only this crate installs a cell's payload (the cell itself), so
    /// that no other payload can be left on its timer when the last holder goes.
    #[inline]
    pub(crate) fn timer(&self) -> &Timer {
        // SAFETY: our holder reference keeps the cell, and so its timer, alive.
        unsafe { self.ptr.as_ref() }
    }

    /// Stops the timer: [`del`](crate::del).
    #[inline]
    pub fn stop(&self) -> bool {
        crate::ops::del_cell(self)
    }

    /// Whether this handle is the cell's only reference: no other holder (so no payload
    /// installed, no run or queued firing) and no heap or list reference. Through `&mut`,
    /// nobody borrows the handle either: no other thread can reach the timer.
    #[inline]
    pub(crate) fn is_alone(&mut self) -> bool {
        // SAFETY: our holder reference keeps the header.
        let h = unsafe { header(self.ptr.as_ptr()) };
        h.counts.are(1, 1)
    }

    /// For a cell this handle alone references ([`is_alone`](CellTimer::is_alone)): installs
    /// the cell as its timer's payload (a holder reference) and makes the reference a heap
    /// will hold, both counted with plain stores (holders 1 to 2, memory 1 to 2: nobody else
    /// counts). Returns the heap's reference, and what the install replaced (nothing: an
    /// alone cell has no payload installed; the caller drops it anyway, outside any lock).
    #[inline]
    pub(crate) fn install_alone(&mut self) -> (TimerRef, crate::timer::Target) {
        debug_assert!(self.is_alone());
        let p = self.ptr.as_ptr();
        // SAFETY: our holder reference keeps the header; alone, nobody else counts.
        let h = unsafe { header(p) };
        h.counts.set_alone(2, 2);
        // SAFETY: the holder count just added is the new holder's; `p` is the cell's address.
        let holder = unsafe { Holder::adopt(p) };
        let tagged = p.cast::<u8>().wrapping_add(CELL).cast::<Timer>();
        // SAFETY: a cell reference (the cell's address, tagged), adopting the memory count
        // just added; non-null.
        let heap_ref = unsafe { TimerRef::from_tagged(NonNull::new_unchecked(tagged)) };
        // SAFETY: alone, per this function's contract.
        let replaced = unsafe { self.timer().install_cell_alone(holder) };
        (heap_ref, replaced)
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
    #[inline]
    fn drop(&mut self) {
        // SAFETY: we own one holder reference, given up once here; this may drop the
        // callback, where our owner dropped us (never under a heap lock).
        unsafe { drop_holder(self.ptr.as_ptr()) }
    }
}

impl std::fmt::Debug for CellTimer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Debug::fmt(self.timer(), f)
    }
}

#[cfg(all(test, not(loom)))]
#[path = "cell_tests.rs"]
mod tests;
