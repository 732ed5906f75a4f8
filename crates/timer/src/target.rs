//! A timer's payload ([`Target`]: what firing does) and its coalescing slack, kept in one
//! 24-byte cell.
//!
//! A `Mutex<Target>` took 32 bytes (a lock byte, 7 bytes of padding, an enum of two 16-byte
//! variants with an 8-byte tag) and the slack 8 more. Here the lock, the payload's tag, the
//! slack (nanoseconds in a `u32`) and the timer's `queued` flag share one word and the
//! payload is a 16-byte union, so [`Timer`](crate::Timer) is 64 bytes: its `Arc` fits a
//! 96-byte allocator chunk, and a [`TimerCell`](crate::TimerCell) with a one-pointer callback
//! too (design/TIMERS.md, "Memory"). The lock is what the `Mutex` was: a leaf lock,
//! parking waiters, held only to look at, clone, take or replace the payload (never to drop
//! one: a replaced payload is returned to the caller).

use std::mem::ManuallyDrop;
use std::sync::Arc;
use std::task::Waker;

use gort_loom::atomic::{AtomicBool, AtomicU32, Ordering::Relaxed};
use gort_loom::{RawLock, UnsafeCell};

use crate::cell::Holder;
use crate::clock::Nanos;
use crate::timer::{Fire, Payload};

/// What firing does. Kept behind its own small lock so that `del` can drop it at once.
///
/// The payload rule (design/TIMERS.md): a payload is user code, so it is dropped only with no
/// heap lock held and outside every transient status. Whoever takes one out in such a place
/// hands it on (`Heap::dead`, [`Released`](crate::Released), a local dropped after the CAS
/// that ends the window).
///
/// Laid out as the cell keeps it, the value first and the tag in a word of its own, so that
/// taking it out of the cell is one 16-byte copy and every later move copies whole stores
/// (an enum built field by field and then moved cost a store-forwarding stall per move).
#[repr(C)]
pub(crate) struct Target {
    raw: Raw,
    /// [`NONE`], [`FIRE`], [`WAKER`] or [`CELL`]: which field of `raw` is live.
    tag: usize,
}

impl Target {
    /// No payload.
    pub(crate) const fn none() -> Target {
        Target {
            raw: Raw { none: () },
            tag: NONE,
        }
    }

    /// A callback payload.
    pub(crate) fn fire(f: Arc<dyn Fire>) -> Target {
        Target {
            raw: Raw {
                fire: ManuallyDrop::new(f),
            },
            tag: FIRE,
        }
    }

    /// A cell's own callback: a holder reference of the cell (`cell.rs`).
    pub(crate) fn cell(h: Holder) -> Target {
        Target {
            raw: Raw {
                cell: ManuallyDrop::new(h),
            },
            tag: CELL,
        }
    }

    /// A waker payload.
    pub(crate) fn waker(w: Waker) -> Target {
        Target {
            raw: Raw {
                waker: ManuallyDrop::new(w),
            },
            tag: WAKER,
        }
    }

    pub(crate) fn is_none(&self) -> bool {
        self.tag == NONE
    }

    /// What a run of this payload does, if anything.
    pub(crate) fn into_payload(self) -> Option<Payload> {
        let this = ManuallyDrop::new(self);
        // SAFETY: `tag` names the live field, moved out exactly once: `this` is never dropped.
        unsafe {
            match this.tag {
                FIRE => Some(Payload::Fire(std::ptr::read(&*this.raw.fire))),
                WAKER => Some(Payload::Waker(std::ptr::read(&*this.raw.waker))),
                CELL => Some(Payload::Cell(std::ptr::read(&*this.raw.cell))),
                _ => None,
            }
        }
    }
}

impl Drop for Target {
    fn drop(&mut self) {
        // SAFETY: `tag` names the live field, dropped once (the target is being dropped).
        unsafe {
            match self.tag {
                FIRE => ManuallyDrop::drop(&mut self.raw.fire),
                WAKER => ManuallyDrop::drop(&mut self.raw.waker),
                CELL => ManuallyDrop::drop(&mut self.raw.cell),
                _ => {}
            }
        }
    }
}

/// A view of the installed payload, under the lock ([`TargetCell::peek`]).
pub(crate) enum TargetRef<'a> {
    None,
    Fire(&'a Arc<dyn Fire>),
    Waker(&'a Waker),
    Cell(&'a Holder),
}

/// Tag values: which field of [`Raw`] holds a value.
const NONE: usize = 0;
const FIRE: usize = 1;
const WAKER: usize = 2;
const CELL: usize = 3;

/// A [`Target`]'s value without its tag (the cell keeps the tag beside the lock).
union Raw {
    none: (),
    fire: ManuallyDrop<Arc<dyn Fire>>,
    waker: ManuallyDrop<Waker>,
    cell: ManuallyDrop<Holder>,
}

/// The payload and the slack of a timer (module docs).
pub(crate) struct TargetCell {
    lock: RawLock,
    /// Which field of `raw` is live (a [`Target`]'s tag, in a byte); read and written only
    /// with `lock` held or through `&mut self`.
    tag: UnsafeCell<u8>,
    /// How late (ns, saturating) an arming may run to share a poller wake-up; not under the
    /// lock (a relaxed hint, read by the heap when the timer becomes its root).
    slack: AtomicU32,
    /// The timer's `queued` flag ([`Timer::queued`](crate::Timer)), not the payload's: kept
    /// in this cell's spare byte so that the timer is 64 bytes.
    queued: AtomicBool,
    /// The payload named by `tag`; same access rule.
    raw: UnsafeCell<Raw>,
}

// SAFETY: `tag` and `raw` are reached only with `lock` held (`with`) or through `&mut self`,
// so two threads never touch them at once; what they hold (`Arc<dyn Fire>`, `Waker`, a cell's `Holder`) is
// `Send + Sync`. `slack` is atomic.
unsafe impl Sync for TargetCell {}

impl TargetCell {
    /// No payload, no slack.
    pub(crate) fn new() -> TargetCell {
        TargetCell {
            lock: RawLock::new(),
            tag: UnsafeCell::new(NONE as u8),
            slack: AtomicU32::new(0),
            queued: AtomicBool::new(false),
            raw: UnsafeCell::new(Raw { none: () }),
        }
    }

    /// The timer's `queued` flag (see the field).
    pub(crate) fn queued(&self) -> &AtomicBool {
        &self.queued
    }

    /// The slack, ns.
    pub(crate) fn slack(&self) -> Nanos {
        Nanos::from(self.slack.load(Relaxed))
    }

    /// Sets the slack (ns), clamped to `0..=u32::MAX` (about 4.3 s).
    pub(crate) fn set_slack(&self, slack: Nanos) {
        let slack = u32::try_from(slack.max(0)).unwrap_or(u32::MAX);
        self.slack.store(slack, Relaxed);
    }

    /// Takes the payload out, leaving none (for the caller to drop outside every lock).
    #[inline(always)]
    pub(crate) fn take(&self) -> Target {
        // SAFETY: we hold the lock; the cell is left empty, a valid state.
        self.lock.with(|| unsafe { self.take_locked() })
    }

    /// Installs `new` and returns the payload it replaced (for the caller to drop outside
    /// every lock).
    #[inline(always)]
    pub(crate) fn replace(&self, new: Target) -> Target {
        self.lock.with(|| {
            // SAFETY: we hold the lock; the value taken is replaced before it is released.
            unsafe {
                let old = self.take_locked();
                self.put_locked(new);
                old
            }
        })
    }

    /// Installs `new()` unless `keep` says the installed payload will do; returns what it
    /// replaced (`Target::none()` if kept). `keep` and `new` run with the lock held: they only
    /// compare and clone.
    #[inline(always)]
    pub(crate) fn replace_unless(
        &self,
        keep: impl for<'a> FnOnce(TargetRef<'a>) -> bool,
        new: impl FnOnce() -> Target,
    ) -> Target {
        self.lock.with(|| {
            // SAFETY: we hold the lock.
            if keep(unsafe { self.peek_locked() }) {
                return Target::none();
            }
            let new = new();
            // SAFETY: as above; the value taken is replaced before the lock is released.
            unsafe {
                let old = self.take_locked();
                self.put_locked(new);
                old
            }
        })
    }

    /// [`take`](TargetCell::take) without the lock.
    ///
    /// # Safety
    ///
    /// No other thread reaches the payload until the caller's next hand-off (a `Release` it
    /// publishes, such as leaving an owned status): a cell's timer, whose payload is reached
    /// only under a status its reacher owns (`cell.rs`, "The payload without its lock").
    #[inline(always)]
    pub(crate) unsafe fn take_exclusive(&self) -> Target {
        // SAFETY: exclusive access, per this function's contract.
        unsafe { self.take_locked() }
    }

    /// [`peek`](TargetCell::peek) without the lock.
    ///
    /// # Safety
    ///
    /// As [`take_exclusive`](TargetCell::take_exclusive).
    #[inline(always)]
    pub(crate) unsafe fn peek_exclusive<R>(&self, f: impl for<'a> FnOnce(TargetRef<'a>) -> R) -> R {
        // SAFETY: exclusive access, per this function's contract, while the view lives.
        f(unsafe { self.peek_locked() })
    }

    /// [`replace_unless`](TargetCell::replace_unless) without the lock.
    ///
    /// # Safety
    ///
    /// As [`take_exclusive`](TargetCell::take_exclusive).
    #[inline(always)]
    pub(crate) unsafe fn replace_unless_exclusive(
        &self,
        keep: impl for<'a> FnOnce(TargetRef<'a>) -> bool,
        new: impl FnOnce() -> Target,
    ) -> Target {
        // SAFETY: exclusive access, per this function's contract (as the lock gives).
        unsafe {
            if keep(self.peek_locked()) {
                return Target::none();
            }
            let new = new();
            let old = self.take_locked();
            self.put_locked(new);
            old
        }
    }

    /// Runs `f` on a view of the payload with the lock held (to clone it). The view's
    /// lifetime is `f`'s own, so nothing borrowed from it outlives the lock.
    #[inline(always)]
    pub(crate) fn peek<R>(&self, f: impl for<'a> FnOnce(TargetRef<'a>) -> R) -> R {
        // SAFETY: we hold the lock for as long as the view lives (`f` cannot return it).
        self.lock.with(|| f(unsafe { self.peek_locked() }))
    }

    /// A view of the payload.
    ///
    /// # Safety
    ///
    /// The caller holds `lock` for as long as the view is used.
    #[inline(always)]
    unsafe fn peek_locked(&self) -> TargetRef<'_> {
        // SAFETY: the lock is held (contract), so nobody writes the cells meanwhile.
        let tag = usize::from(self.tag.with(|p| unsafe { *p }));
        self.raw.with(|p| {
            // SAFETY: as above; `tag` names the live field, borrowed only while the lock is.
            unsafe {
                match tag {
                    FIRE => TargetRef::Fire(&(*p).fire),
                    WAKER => TargetRef::Waker(&(*p).waker),
                    CELL => TargetRef::Cell(&(*p).cell),
                    _ => TargetRef::None,
                }
            }
        })
    }

    /// Whether the cell holds no payload (through `&mut`: no lock needed).
    #[inline(always)]
    pub(crate) fn is_empty_unique(&mut self) -> bool {
        // SAFETY: `&mut self`: the only access.
        usize::from(self.tag.with(|p| unsafe { *p })) == NONE
    }

    /// Takes the payload out of a cell reached through `&mut` (no lock needed).
    #[inline(always)]
    pub(crate) fn take_unique(&mut self) -> Target {
        // SAFETY: `&mut self`: the only access.
        unsafe { self.take_locked() }
    }

    /// The payload of a cell nobody else can reach.
    pub(crate) fn into_inner(self) -> Target {
        // SAFETY: `self` is owned, so nobody else holds the lock or reaches the cells; the
        // cell is left empty for its `Drop`.
        unsafe { self.take_locked() }
    }

    /// Moves the payload out, leaving the cell empty.
    ///
    /// # Safety
    ///
    /// The caller holds `lock`, or has the only access to `self`.
    #[inline(always)]
    unsafe fn take_locked(&self) -> Target {
        let tag = self.tag.with_mut(|p| {
            // SAFETY: exclusive access, per this function's contract.
            unsafe { std::mem::replace(&mut *p, NONE as u8) }
        });
        // SAFETY: exclusive access (contract); the value named by `tag` is moved out exactly
        // once: the tag now says the cell is empty.
        let raw = self.raw.with(|p| unsafe { std::ptr::read(p) });
        Target {
            raw,
            tag: usize::from(tag),
        }
    }

    /// Moves `target` into the cell.
    ///
    /// # Safety
    ///
    /// As [`take_locked`](TargetCell::take_locked), and the cell is empty (its value was taken).
    #[inline(always)]
    unsafe fn put_locked(&self, target: Target) {
        let target = ManuallyDrop::new(target);
        // SAFETY: exclusive access (contract); the cell is empty, so nothing is overwritten
        // that needed dropping; the value moves into the cell (`target` is never dropped).
        self.raw
            .with_mut(|p| unsafe { p.write(std::ptr::read(&target.raw)) });
        // The tags are 0 to 3.
        let tag = target.tag as u8;
        // SAFETY: as above.
        self.tag.with_mut(|p| unsafe { *p = tag });
    }
}

impl Drop for TargetCell {
    fn drop(&mut self) {
        // SAFETY: `&mut self`: the only access.
        drop(unsafe { self.take_locked() });
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::Timer;

    #[test]
    fn a_timer_fits_a_96_byte_chunk() {
        assert_eq!(std::mem::size_of::<TargetCell>(), 24);
        // With its `Arc` counts 80 bytes, with a cell's header and a one-pointer callback
        // 88: a 96-byte glibc chunk either way (72 bytes made the cell's 112).
        assert_eq!(std::mem::size_of::<Timer>(), 64);
    }

    #[test]
    fn payloads_move_in_and_out_and_drop_with_the_cell() {
        let hits = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let h = hits.clone();
        let f: Arc<dyn Fire> = Arc::new(move |_| {
            h.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        });
        let cell = TargetCell::new();
        assert!(cell.peek(|t| matches!(t, TargetRef::None)));
        let old = cell.replace(Target::fire(f.clone()));
        assert!(old.is_none());
        assert_eq!(Arc::strong_count(&f), 2);
        let waker = std::task::Waker::from(Arc::new(NoWake));
        let kept = cell.replace_unless(
            |t| matches!(t, TargetRef::Fire(g) if Arc::ptr_eq(g, &f)),
            || panic!("the same callback is kept"),
        );
        assert!(kept.is_none());
        match cell.replace(Target::waker(waker)).into_payload() {
            Some(Payload::Fire(g)) => g.fire(0),
            _ => panic!("the callback"),
        }
        assert_eq!(hits.load(std::sync::atomic::Ordering::SeqCst), 1);
        assert_eq!(Arc::strong_count(&f), 1);
        assert!(cell.peek(|t| matches!(t, TargetRef::Waker(_))));
        drop(cell.replace(Target::fire(f.clone())));
        assert_eq!(Arc::strong_count(&f), 2);
        drop(cell);
        assert_eq!(
            Arc::strong_count(&f),
            1,
            "the cell's drop dropped its payload"
        );
    }

    struct NoWake;

    impl std::task::Wake for NoWake {
        fn wake(self: Arc<Self>) {}
    }

    #[test]
    fn slack_saturates() {
        let cell = TargetCell::new();
        cell.set_slack(7);
        assert_eq!(cell.slack(), 7);
        cell.set_slack(-3);
        assert_eq!(cell.slack(), 0);
        cell.set_slack(3_600_000_000_000 / 16);
        assert_eq!(cell.slack(), Nanos::from(u32::MAX));
    }
}
