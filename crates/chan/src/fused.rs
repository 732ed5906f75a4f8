//! How the handles reach their channel ([`ChanRef`]), and a channel that shares one allocation
//! with the object it serves ([`Fused`]: a channel timer, as Go's `hchan` carries its `timer`).
//!
//! A plain channel is a [`Chan`] and its slot 0 in a `gort_loom::Arc` ([`Plain`]). A fused one
//! is the first field of a `#[repr(C)]` object `X` in a `std::sync::Arc<X>`: one allocation,
//! one pair of counts, and the handles point at the channel inside it. A handle cannot be an
//! `Arc<Chan<T>>` then (it would free the allocation by the wrong layout), so it is a
//! [`ChanRef`]: the channel's address, counted through the channel's [`Ext`] when it has one
//! (the functions of its `X`, which know the real layout) and as an `Arc<Plain<T>>` when it
//! has none. The handle
//! types stay the same ([`Receiver<T>`] is a timer's `c()` and clones, selects and streams as
//! any other), and a plain channel's hot paths test one pointer for `None`, as the
//! `Option<Arc<dyn RecvHook>>` they tested before (design/CHANNELS.md, "Layout").

use std::marker::PhantomData;
use std::mem::ManuallyDrop;
use std::ops::Deref;
use std::pin::Pin;
use std::ptr::NonNull;
use std::sync::Arc;
use std::task::{Context, Poll};

use crate::chan::Chan;
use crate::core::InlineSlot;
use crate::receiver::Receiver;

/// A counted reference to a channel: an `Arc<Plain<T>>` for a plain channel, a reference to
/// the whole fused object for a fused one (module docs).
pub(crate) struct ChanRef<T> {
    /// From `Arc::into_raw` (of the [`Plain`] or the fused `X` whose first field the channel
    /// is), so it may reach the whole object; owns one of its strong references.
    ptr: NonNull<Chan<T>>,
    _owns: PhantomData<Chan<T>>,
}

// SAFETY: a `ChanRef` is a shared, counted reference to a `Chan<T>` (and its slot 0, reached
// only under the channel's lock, or, for a fused one, an `X: Send + Sync`), as an
// `Arc<Chan<T>>` is, whose counts are atomic: it may be sent and shared when the channel may
// be shared.
unsafe impl<T> Send for ChanRef<T> where Chan<T>: Send + Sync {}
// SAFETY: as for `Send`.
unsafe impl<T> Sync for ChanRef<T> where Chan<T>: Send + Sync {}

// Never pinned through: a reference, as an `Arc` is `Unpin` whatever it points to.
impl<T> Unpin for ChanRef<T> {}

impl<T> ChanRef<T> {
    /// A new plain channel's first reference.
    pub(crate) fn plain(cap: Option<usize>) -> Self {
        let raw = gort_loom::Arc::into_raw(gort_loom::Arc::new(Plain {
            chan: Chan::<T>::new(cap, None),
            first: InlineSlot::new(),
        }));
        // SAFETY: `raw` is alive (we hold its one reference); its slot 0 lives as long as its
        // channel, in the same allocation, and nothing else reaches it.
        unsafe {
            let first = std::ptr::addr_of!((*raw).first);
            (*raw).chan.attach_first(first);
        }
        ChanRef {
            ptr: NonNull::new(raw.cast_mut().cast::<Chan<T>>()).expect("not null"),
            _owns: PhantomData,
        }
    }

    /// Whether `self` and `other` are the same channel.
    #[inline]
    pub(crate) fn ptr_eq(&self, other: &ChanRef<T>) -> bool {
        self.ptr == other.ptr
    }

    /// The hook before a receive looks at the channel (Go's `maybeRunChan`), if fused.
    #[inline]
    pub(crate) fn before_recv(&self) {
        if let Some(ext) = self.ext() {
            // SAFETY: `ext` is this fused channel's, and `self` holds a reference to it.
            unsafe { (ext.before_recv)(self.ptr.cast()) }
        }
    }

    /// The hook after a receive parked (Go's `blockTimerChan`), if fused.
    #[inline]
    pub(crate) fn parked(&self) {
        if let Some(ext) = self.ext() {
            // SAFETY: as in `before_recv`.
            unsafe { (ext.parked)(self.ptr.cast()) }
        }
    }

    /// A parked receive ended and released its slot: a fused channel frees its slot 0 if
    /// nothing else uses it, and tells its hook (Go's `unblockTimerChan`).
    #[inline]
    pub(crate) fn unparked(&self) {
        if let Some(ext) = self.ext() {
            // SAFETY: a channel with `ext` is fused.
            unsafe { self.trim_first() };
            // SAFETY: as in `before_recv`.
            unsafe { (ext.unparked)(self.ptr.cast()) }
        }
    }

    /// The hook after the last receiver went, if fused.
    pub(crate) fn last_receiver_dropped(&self) {
        if let Some(ext) = self.ext() {
            // SAFETY: as in `before_recv`.
            unsafe { (ext.last_receiver_dropped)(self.ptr.cast()) }
        }
    }
}

impl<T> ChanRef<T> {
    /// A plain channel's whole allocation.
    fn plain_ptr(&self) -> *const Plain<T> {
        self.ptr.as_ptr().cast::<Plain<T>>()
    }
}

/// A plain channel's allocation: the channel, then its slot 0 (`core/waiters.rs`).
#[repr(C)]
struct Plain<T> {
    chan: Chan<T>,
    first: InlineSlot<T>,
}

impl<T> Deref for ChanRef<T> {
    type Target = Chan<T>;

    #[inline]
    fn deref(&self) -> &Chan<T> {
        // SAFETY: `self` owns a strong reference, so the channel is alive; it is only ever
        // shared (its state is behind its lock).
        unsafe { self.ptr.as_ref() }
    }
}

impl<T> Clone for ChanRef<T> {
    fn clone(&self) -> Self {
        match self.ext() {
            // SAFETY: `ptr` came from `gort_loom::Arc::<Plain<T>>::into_raw` (a channel with no
            // `ext` is made only by `plain`), and `self`'s reference keeps it alive.
            None => unsafe { gort_loom::Arc::increment_strong_count(self.plain_ptr()) },
            // SAFETY: `ext` is this fused channel's, and `self` holds a reference to it.
            Some(ext) => unsafe { (ext.acquire)(self.ptr.cast()) },
        }
        ChanRef {
            ptr: self.ptr,
            _owns: PhantomData,
        }
    }
}

impl<T> Drop for ChanRef<T> {
    fn drop(&mut self) {
        // Read before the release, which may free the channel.
        match self.ext() {
            // SAFETY: as in `clone`; this gives up `self`'s reference, used no more.
            None => unsafe { gort_loom::Arc::decrement_strong_count(self.plain_ptr()) },
            // SAFETY: as in `clone`.
            Some(ext) => unsafe { (ext.release)(self.ptr.cast()) },
        }
    }
}

/// A fused channel's functions, each given the channel's address (a pointer to the whole
/// fused object, whose first field the channel is) by a holder of a reference to it.
pub(crate) struct Ext {
    acquire: unsafe fn(NonNull<()>),
    release: unsafe fn(NonNull<()>),
    before_recv: unsafe fn(NonNull<()>),
    parked: unsafe fn(NonNull<()>),
    unparked: unsafe fn(NonNull<()>),
    last_receiver_dropped: unsafe fn(NonNull<()>),
}

/// The functions of a channel fused into an `X`.
fn ext<T, X: Fused<T>>() -> &'static Ext {
    &Ext {
        acquire: acquire::<X>,
        release: release::<X>,
        before_recv: before_recv::<T, X>,
        parked: parked::<T, X>,
        unparked: unparked::<T, X>,
        last_receiver_dropped: last_receiver_dropped::<T, X>,
    }
}

// The functions below share one contract.
//
// # Safety
//
// `p` is the channel's address in an `X` made by `bounded_fused` (so the `X`'s address, from
// `Arc::into_raw`), and the caller holds one of its strong references for the call.

unsafe fn acquire<X>(p: NonNull<()>) {
    // SAFETY: the function contract: `p` is an `Arc<X>`'s, alive.
    unsafe { Arc::increment_strong_count(p.cast::<X>().as_ptr()) }
}

unsafe fn release<X>(p: NonNull<()>) {
    // SAFETY: the function contract; the caller gives its reference up.
    unsafe { Arc::decrement_strong_count(p.cast::<X>().as_ptr()) }
}

/// The `Arc<X>` of `p`, borrowed: not counted, so never dropped.
///
/// # Safety
///
/// The function contract; the result is not used after the caller's reference is gone.
unsafe fn borrow_arc<X>(p: NonNull<()>) -> ManuallyDrop<Arc<X>> {
    // SAFETY: `p` is an `Arc<X>`'s pointer, alive; the `ManuallyDrop` takes no count.
    ManuallyDrop::new(unsafe { Arc::from_raw(p.cast::<X>().as_ptr()) })
}

unsafe fn before_recv<T, X: Fused<T>>(p: NonNull<()>) {
    // SAFETY: the function contract: an `X`, alive for the call, only ever shared.
    X::before_recv(unsafe { p.cast::<X>().as_ref() })
}

unsafe fn parked<T, X: Fused<T>>(p: NonNull<()>) {
    // SAFETY: the function contract.
    let this = unsafe { borrow_arc::<X>(p) };
    X::parked(&this)
}

unsafe fn unparked<T, X: Fused<T>>(p: NonNull<()>) {
    // SAFETY: the function contract.
    let this = unsafe { borrow_arc::<X>(p) };
    X::unparked(&this)
}

unsafe fn last_receiver_dropped<T, X: Fused<T>>(p: NonNull<()>) {
    // SAFETY: the function contract.
    X::last_receiver_dropped(unsafe { p.cast::<X>().as_ref() })
}

/// An object that carries its channel in its own allocation (a channel timer), and is told
/// about the channel's receivers as a [`RecvHook`](crate::RecvHook) is, with the same
/// promises (every call with no channel lock held; one `parked` then one `unparked` per
/// parked receive). The channel holds the object as long as the channel lives; the object
/// may own the channel's [`TimerSender`](crate::TimerSender) (or close the channel itself),
/// and must drop it when told that the last receiver is gone. Not a user API.
///
/// # Safety
///
/// `Self` is `#[repr(C)]` and its first field is the [`Chan`] that [`bounded_fused`] gave to
/// its `make` (so that the object's address is the channel's, and the channel's functions
/// find the object); [`chan`](Fused::chan) returns that field.
#[doc(hidden)]
pub unsafe trait Fused<T>: Sized + Send + Sync + 'static {
    /// The channel field (checked at creation to be at the object's address).
    fn chan(&self) -> &Chan<T>;
    /// A receive or `len` is about to look at the channel.
    fn before_recv(&self);
    /// A receive operation parked.
    fn parked(this: &Arc<Self>);
    /// A parked receive operation ended.
    fn unparked(this: &Arc<Self>);
    /// The last receiver was dropped.
    fn last_receiver_dropped(&self);
}

/// A bounded channel fused into the object `make` builds around it (see [`Fused`]): its
/// receiver, through which the object is reached. The channel has one sender, the object,
/// which sends through the channel it holds (`Chan::try_send_later`) and closes it
/// (`Chan::close_sending`) when told that the last receiver went; the object's own
/// references are its receivers' (and any `Arc` of it the object hands out). Not a user API.
///
/// # Panics
///
/// If `make` did not put the channel at the object's address (a wrong `Fused` impl).
#[doc(hidden)]
pub fn bounded_fused<T, X: Fused<T>>(
    cap: usize,
    make: impl FnOnce(Chan<T>) -> X,
) -> FusedReceiver<T, X> {
    FusedReceiver {
        rx: Receiver::new(fused(cap, make)),
        _x: PhantomData,
    }
}

/// [`bounded_fused`]'s channel: its first reference (the `Arc`'s).
pub(crate) fn fused<T, X: Fused<T>>(cap: usize, make: impl FnOnce(Chan<T>) -> X) -> ChanRef<T> {
    let x = Arc::new(make(Chan::new(Some(cap), Some(ext::<T, X>()))));
    assert!(
        std::ptr::eq(x.chan(), Arc::as_ptr(&x).cast::<Chan<T>>()),
        "gort::chan: a Fused object's channel must be its first field"
    );
    let ptr = NonNull::new(Arc::into_raw(x).cast::<Chan<T>>().cast_mut()).expect("not null");
    ChanRef {
        ptr,
        _owns: PhantomData,
    }
}

/// The receiver of a channel fused into an `X`, which it reaches without a pointer of its
/// own (a channel `Timer`'s whole handle). Not a user API.
#[doc(hidden)]
pub struct FusedReceiver<T, X> {
    /// Never replaced: a `&mut` to it is never handed out, so it stays this `X`'s channel.
    rx: Receiver<T>,
    _x: PhantomData<fn() -> X>,
}

impl<T, X: Fused<T>> FusedReceiver<T, X> {
    /// The receiver.
    #[inline]
    pub fn rx(&self) -> &Receiver<T> {
        &self.rx
    }

    /// The receiver alone (the channel keeps the object).
    pub fn into_rx(self) -> Receiver<T> {
        self.rx
    }

    /// The object.
    #[inline]
    pub fn fused(&self) -> &X {
        // SAFETY: `rx`'s channel is the first field of an `X` (`bounded_fused`, and `rx` is
        // never replaced), alive while `rx` holds its reference, and only ever shared.
        unsafe { self.rx.chan.ptr.cast::<X>().as_ref() }
    }

    /// A counted reference to the object.
    pub fn arc(&self) -> Arc<X> {
        let p = self.rx.chan.ptr.cast::<X>().as_ptr();
        // SAFETY: `p` is the object's `Arc` pointer (as in `fused`), alive while `rx` holds
        // its reference; the count taken here is the returned `Arc`'s.
        unsafe {
            Arc::increment_strong_count(p);
            Arc::from_raw(p)
        }
    }
}

impl<T, X> futures_core::Stream for FusedReceiver<T, X> {
    type Item = T;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<T>> {
        Pin::new(&mut self.get_mut().rx).poll_next(cx)
    }
}

impl<T, X> std::fmt::Debug for FusedReceiver<T, X> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.rx.fmt(f)
    }
}
