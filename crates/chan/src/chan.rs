//! The shared channel object: the [`Core`] behind its lock, and the lock discipline.

use std::fmt;

use gort_loom::SpinLock;

use crate::core::{Core, InlineSlot, OpCtx};
use crate::fused::Ext;
use crate::select_ctx;
use crate::timer_sender::TimerWakes;
use crate::wake::Deferred;

/// What every [`Sender`](crate::Sender) and [`Receiver`](crate::Receiver) of one channel
/// points to (through a [`ChanRef`](crate::fused::ChanRef)). Not a user API: public only so
/// that a channel timer can hold its channel as its first field ([`Fused`](crate::Fused)).
#[doc(hidden)]
pub struct Chan<T> {
    /// Released by a plain store: the core's sections are short and call out to nothing
    /// (CHANNELS.md, "The lock").
    core: SpinLock<Core<T>>,
    /// A fused channel's functions (set at creation, never changed): how to count references
    /// to the allocation it shares with its timer, and the receive hooks. `None` for a plain
    /// channel, alone in a `gort_loom::Arc`.
    ext: Option<&'static Ext>,
}

impl<T> Chan<T> {
    pub(crate) fn new(cap: Option<usize>, ext: Option<&'static Ext>) -> Self {
        Chan {
            core: SpinLock::new(Core::new(cap)),
            ext,
        }
    }

    /// The fused object's functions, if this channel is part of one.
    #[inline]
    pub(crate) fn ext(&self) -> Option<&'static Ext> {
        self.ext
    }

    /// Under the lock: the capacity is not copied outside it, to keep a channel (a timer's
    /// above all) a word smaller.
    pub(crate) fn capacity(&self) -> Option<usize> {
        self.core.with(|core| core.capacity())
    }

    /// Runs `f` under the lock, then does the deferred wakes and drops with the lock released.
    /// This is the only way to reach the core, so no waker ever runs under the lock.
    #[inline]
    pub(crate) fn with<R>(&self, f: impl FnOnce(&mut Core<T>, &mut Deferred) -> R) -> R {
        let mut d = Deferred::new();
        let r = self.core.with(|core| f(core, &mut d));
        d.run();
        r
    }

    /// [`with`](Chan::with) for a channel operation polled with `ctx`: while a `select!` with
    /// `default` takes its snapshot (`ctx.record`), the section's lock stamps are logged
    /// (`select_ctx::Snapshot`).
    #[inline]
    pub(crate) fn with_op<R>(
        &self,
        ctx: &mut OpCtx<'_>,
        f: impl FnOnce(&mut Core<T>, &mut OpCtx<'_>, &mut Deferred) -> R,
    ) -> R {
        if !ctx.record() {
            return self.with(|core, d| f(core, ctx, d));
        }
        let mut d = Deferred::new();
        let (r, stamp) = self.core.with_stamp(|core| f(core, ctx, &mut d));
        select_ctx::log(self as *const Chan<T> as usize, stamp);
        d.run();
        r
    }

    /// Makes `slot` this plain channel's slot 0 ([`Core::attach_first`]).
    ///
    /// # Safety
    ///
    /// As [`Core::attach_first`].
    pub(crate) unsafe fn attach_first(&self, slot: *const InlineSlot<T>) {
        // SAFETY: the caller's.
        self.core.with(|core| unsafe { core.attach_first(slot) });
    }

    /// A parked receive of this fused channel ended and released its slot: slot 0, if it is
    /// free and alone, is freed ([`Core::trim_first`]), so a timer nobody waits on holds no
    /// slot. A lock section of its own, after the receive's: inside it, the check made R3's
    /// receive poll (which no longer inlined its lock section) 24 instructions longer
    /// (design/PERFORMANCE-LOG.md, "A channel Timer in 144 bytes").
    ///
    /// # Safety
    ///
    /// Only for a fused channel (one with `ext`): its slot 0 is boxed.
    pub(crate) unsafe fn trim_first(&self) {
        debug_assert!(self.ext.is_some(), "trim_first on a plain channel");
        // SAFETY: the caller's.
        self.core.with(|core| unsafe { core.trim_first() });
    }

    /// [`with`](Chan::with), leaving the wakes and drops in `d` for the caller to do once it
    /// holds no lock of its own (a timer's arming lock: the receivers' wakers are user code).
    #[inline]
    pub(crate) fn with_later<R>(
        &self,
        d: &mut Deferred,
        f: impl FnOnce(&mut Core<T>, &mut Deferred) -> R,
    ) -> R {
        self.core.with(|core| f(core, d))
    }

    pub(crate) fn len(&self) -> usize {
        self.core.with(|core| core.len())
    }

    pub(crate) fn is_closed(&self) -> bool {
        self.core.with(|core| core.is_closed())
    }

    pub(crate) fn close(&self) {
        self.with(|core, d| core.close(d));
    }

    /// A fused channel's sending end, for the object it is fused into (gort::time's timer,
    /// which keeps no pointer to its own channel): closes the channel (sends fail; receivers
    /// get what is buffered, then the end). Closing twice is a no-op. Not a user API.
    pub fn close_sending(&self) {
        self.close();
    }

    /// [`TimerSender::try_send_later`](crate::TimerSender::try_send_later), for the object a
    /// channel is fused into. Not a user API.
    pub fn try_send_later(
        &self,
        value: T,
        later: &mut TimerWakes,
    ) -> Result<(), crate::TrySendError<T>> {
        self.with_later(later.get(), |core, d| core.try_send_overtaking(value, d))
    }

    /// [`TimerSender::take_buffered_later`](crate::TimerSender::take_buffered_later), for
    /// the object a channel is fused into. Not a user API.
    pub fn take_buffered_later(&self, later: &mut TimerWakes) -> usize {
        let taken = self.with_later(later.get(), |core, d| core.take_buffered(d));
        taken.len()
    }

    /// The fields a handle's `Debug` shows.
    pub(crate) fn debug(&self, name: &str, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (len, cap, closed) = self
            .core
            .with(|core| (core.len(), core.capacity(), core.is_closed()));
        f.debug_struct(name)
            .field("len", &len)
            .field("capacity", &cap)
            .field("closed", &closed)
            .finish()
    }
}

impl<T> Drop for Chan<T> {
    fn drop(&mut self) {
        if self.ext.is_some() {
            // SAFETY: a channel with `ext` is fused: its slot 0 is boxed.
            let first = self.core.with(|core| unsafe { core.take_first() });
            // Outside the lock: a leaked receive's waker and value are user code.
            drop(first);
        }
    }
}

#[cfg(all(test, not(loom), target_pointer_width = "64"))]
mod tests {
    use super::Chan;

    /// A word-sized value's channel (a timer's): the lock's word, the core (buffer 16, the
    /// counts, `closed` and the free list's head 16, the queues 16, the slab's two pointers
    /// 16) and the fused object's functions 8. A plain channel adds its slot 0 (56) and the
    /// `Arc`'s counts: 152 bytes, a 160-byte glibc chunk; a timer's shares its allocation
    /// with the timer, and holds a slot only while a receive waits (design/TIMERS.md,
    /// "Memory").
    #[test]
    fn a_timer_channel_is_80_bytes() {
        assert_eq!(std::mem::size_of::<Chan<i64>>(), 80);
    }
}
