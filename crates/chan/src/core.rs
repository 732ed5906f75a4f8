//! The channel's state, always accessed under the channel's one lock ([`crate::chan::Chan`]).
//!
//! The design is Go's `hchan` (`src/runtime/chan.go`): a ring buffer, a queue of parked
//! senders that offer their value, and a queue of parked receivers that a sender hands its
//! value to directly. Parked operations live in a slab of [`Slot`]s indexed from the queues,
//! so parking allocates only when the slab grows (or, in a fused channel, when slot 0 is
//! taken), and the only `unsafe` here is slot 0's pointer (`core/waiters.rs`).
//!
//! # Fields and who touches them
//!
//! Everything is guarded by the channel lock. A slot is *owned* by exactly one future (a
//! [`SendFuture`](crate::SendFuture), a [`RecvFuture`](crate::RecvFuture) or a receiver's
//! stream state) from `alloc` to `release`; only the owner releases it. While the slot is
//! `queued` its index is in exactly one queue (`sendq` for a send slot, `recvq` for a receive
//! slot), and any operation may unlink it there to complete it.
//!
//! # Invariants
//!
//! 1. `closed` ⇒ `sendq` is empty, and `recvq` is empty unless `handed > 0`: `close` unlinks
//!    every waiter, and after it a receiver parks only to wait for a handed value that may be
//!    put back (see 6).
//! 2. A queued send slot holds its value (`Some`); an unlinked one holds `None` iff the value
//!    was taken (sent) and `Some` iff it was unlinked without being taken (closed, or its
//!    select chose another arm), in which case its owner retries or fails.
//! 3. A queued receive slot holds `None`; an unlinked one holds `Some` iff a value was handed
//!    to it. Dropping such a slot's owner puts the value back ([`Core::bounce`]).
//! 4. `buf.len() <= cap` except after a bounce, which may put a value back at the front of a
//!    full (or unbuffered) channel: it was sent, so it must stay receivable.
//! 5. A receiver parks only when nothing it may take is buffered or offered; a sender parks
//!    only when no receiver it may complete is parked and the buffer is full. Waiters of a
//!    select that is polling ([`Claim::Busy`]) are the exception: they are skipped and woken,
//!    and look again when polled. So a receiver may be parked while values are buffered; a
//!    sender that completes it hands it the buffer's front, never a newer value.
//! 6. `handed` counts the receive slots of invariant 3 that hold a value. A receive reports
//!    the end (`None`) only when `closed`, the buffer is empty *and* `handed == 0`: a value
//!    handed to a future that is then dropped comes back, and a receiver that had already
//!    reported the end would otherwise see it after. When `handed` drops to 0 on a closed
//!    channel, the receivers still parked are woken to see the end ([`Core::settle`]).
//!
//! # Completing a parked operation
//!
//! 1. Find the first waiter in the queue that may complete now ([`Core::pop_claimable`]):
//!    a plain waiter always may; a select's waiter only if its group is won for its arm.
//! 2. Unlink it, move the value (into its slot, or out of it), take its waker.
//! 3. Wake it after the lock is released ([`Deferred`]).
//!
//! # Where the code is
//!
//! This file holds the state, the non-blocking operations, the send and receive futures and
//! the buffer; `core/waiters.rs` the slab of slots and the two wait queues (parking, steps 1
//! and 2 above); `core/close.rs` the close protocol and the handle counts.

mod close;
mod waiters;

use std::task::{Poll, Waker};

use crate::buf::Buf;
use crate::error::{SendError, TryRecvError, TrySendError};
use crate::group::Group;
use crate::queue::Queue;
use crate::select_ctx::SelectCtx;
use crate::wake::Deferred;
pub(crate) use waiters::InlineSlot;
use waiters::{Side, Slots};

/// The caller of a poll: its waker and, inside a `select!` arm, the select context.
pub(crate) struct OpCtx<'a> {
    pub(crate) waker: &'a Waker,
    pub(crate) select: Option<&'a mut SelectCtx>,
}

impl OpCtx<'_> {
    fn me(&self) -> Option<*const Group> {
        self.select.as_ref().and_then(|s| s.me())
    }

    fn nonblocking(&self) -> bool {
        self.select.as_ref().is_some_and(|s| s.nonblocking)
    }

    /// A select with `default` is taking a snapshot: log this operation's lock section.
    #[inline]
    pub(crate) fn record(&self) -> bool {
        self.select.as_ref().is_some_and(|s| s.record)
    }
}

/// The bit of `Core::senders` that says the channel is closed (1 byte of its own took a word
/// with padding).
const CLOSED: u32 = 1 << 31;

/// The state behind the channel lock.
pub(crate) struct Core<T> {
    /// The buffer, which knows the capacity.
    buf: Buf<T>,
    /// Values handed to receive slots and not yet taken by their owners (invariant 6); at
    /// most one per slot.
    handed: u32,
    /// Handle counts. `u32`, as nothing can hold four billion handles of one channel: the
    /// counts, `closed` (the top bit of `senders`, [`CLOSED`]) and the free list's head take
    /// two words of the core.
    senders: u32,
    receivers: u32,
    sendq: Queue,
    recvq: Queue,
    slots: Slots<T>,
    /// The first free slot ([`waiters::NO_SLOT`]: none); each links to the next.
    free: u32,
}

impl<T> Core<T> {
    /// A core with one sender and one receiver.
    pub(crate) fn new(cap: Option<usize>) -> Self {
        Core {
            buf: Buf::new(cap),
            handed: 0,
            senders: 1,
            receivers: 1,
            sendq: Queue::new(),
            recvq: Queue::new(),
            slots: Slots::new(),
            // The free list starts as slot 0 alone (attached or boxed later).
            free: 0,
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.buf.len()
    }

    pub(crate) fn is_closed(&self) -> bool {
        self.senders & CLOSED != 0
    }

    pub(crate) fn capacity(&self) -> Option<usize> {
        self.buf.capacity()
    }

    fn has_room(&self) -> bool {
        self.buf.has_room()
    }

    // ---- non-blocking operations ------------------------------------------------------------

    /// Sends without parking: to a parked receiver, else into the buffer.
    pub(crate) fn try_send(
        &mut self,
        v: T,
        me: Option<*const Group>,
        d: &mut Deferred,
    ) -> Result<(), TrySendError<T>> {
        if self.is_closed() {
            return Err(TrySendError::Closed(v));
        }
        if let Some(r) = Self::pop_claimable(&mut self.recvq, &mut self.slots, me, d) {
            self.give_in_order(r, v, d);
            return Ok(());
        }
        if self.has_room() {
            self.buf.push_back(v);
            return Ok(());
        }
        Err(TrySendError::Full(v))
    }

    /// [`try_send`](Core::try_send) for a timer's channel, whose values are instants in
    /// increasing order (a ticker's ticks): first marks every value handed to a receive and
    /// not yet taken as overtaken, so that a receive cut off from now on drops its value
    /// instead of putting it back, where the next receive would get it after this newer one
    /// (see "Order" in design/CHANNELS.md). A ticker may drop a tick; it may not deliver one
    /// older than a tick delivered before.
    pub(crate) fn try_send_overtaking(
        &mut self,
        v: T,
        d: &mut Deferred,
    ) -> Result<(), TrySendError<T>> {
        if self.handed > 0 {
            self.mark_handed_overtaken();
        }
        self.try_send(v, None, d)
    }

    /// Marks every receive slot holding a handed value as overtaken (out of line: values
    /// are rarely handed and not yet taken when the next one comes).
    #[cold]
    #[inline(never)]
    fn mark_handed_overtaken(&mut self) {
        for i in 0..self.slots.len() {
            if i == 0 && !self.slots.has_first() {
                continue; // a fused channel's slot 0, free and not allocated
            }
            let s = &mut self.slots[i];
            if !s.queued && s.recv && s.value.is_some() {
                s.overtaken = true;
            }
        }
    }

    /// Receives without parking: from the buffer (refilling it from a parked sender, as Go
    /// does), else from a parked sender.
    pub(crate) fn try_recv(
        &mut self,
        me: Option<*const Group>,
        d: &mut Deferred,
    ) -> Result<T, TryRecvError> {
        if let Some(v) = self.buf.pop_front() {
            self.refill(me, d);
            return Ok(v);
        }
        if let Some(s) = Self::pop_claimable(&mut self.sendq, &mut self.slots, me, d) {
            return Ok(self.take(s, d));
        }
        Err(if self.is_closed() && self.handed == 0 {
            TryRecvError::Closed
        } else {
            TryRecvError::Empty
        })
    }

    // ---- futures ----------------------------------------------------------------------------

    /// Polls a send whose parked state is `slot` and whose unparked value is `value`.
    pub(crate) fn poll_send(
        &mut self,
        slot: &mut Option<usize>,
        value: &mut Option<T>,
        ctx: &mut OpCtx<'_>,
        d: &mut Deferred,
    ) -> Poll<Result<(), SendError<T>>> {
        let me = ctx.me();
        if let Some(i) = *slot {
            if self.slots[i].queued {
                // Normally a counterparty completes a parked sender, but one may have skipped
                // it while its select was polling (invariant 5): look again.
                if let Some(r) = Self::pop_claimable(&mut self.recvq, &mut self.slots, me, d) {
                    let v = self.unpark_sender(i);
                    self.give_in_order(r, v, d);
                    self.release(slot, d);
                    return Poll::Ready(Ok(()));
                }
                if self.has_room() {
                    let v = self.unpark_sender(i);
                    self.buf.push_back(v);
                    self.release(slot, d);
                    return Poll::Ready(Ok(()));
                }
                self.refresh(i, ctx, d);
                return Poll::Pending;
            }
            match self.slots[i].value.take() {
                None => {
                    self.release(slot, d);
                    return Poll::Ready(Ok(()));
                }
                // Unlinked untaken: closed, or dropped by a finished select; retry below.
                Some(v) => *value = Some(v),
            }
        }
        let v = value.take().expect("SendFuture polled after completion");
        match self.try_send(v, me, d) {
            Ok(()) => {
                self.release(slot, d);
                Poll::Ready(Ok(()))
            }
            Err(TrySendError::Closed(v)) => {
                self.release(slot, d);
                Poll::Ready(Err(SendError(v)))
            }
            Err(TrySendError::Full(v)) if ctx.nonblocking() => {
                *value = Some(v);
                self.release(slot, d);
                Poll::Pending
            }
            Err(TrySendError::Full(v)) => {
                let i = self.slot(slot);
                self.slots[i].value = Some(v);
                self.park(i, Side::Send, ctx, d);
                Poll::Pending
            }
        }
    }

    /// Polls a receive whose parked state is `slot`.
    pub(crate) fn poll_recv(
        &mut self,
        slot: &mut Option<usize>,
        ctx: &mut OpCtx<'_>,
        d: &mut Deferred,
    ) -> Poll<Option<T>> {
        let me = ctx.me();
        if let Some(i) = *slot {
            if self.slots[i].queued {
                // As in `poll_send`: a skipped receiver looks again.
                if let Some(v) = self.buf.pop_front() {
                    self.unpark(i, Side::Recv);
                    self.release(slot, d);
                    self.refill(me, d);
                    return Poll::Ready(Some(v));
                }
                if let Some(s) = Self::pop_claimable(&mut self.sendq, &mut self.slots, me, d) {
                    self.unpark(i, Side::Recv);
                    self.release(slot, d);
                    return Poll::Ready(Some(self.take(s, d)));
                }
                self.refresh(i, ctx, d);
                return Poll::Pending;
            }
            if let Some(v) = self.slots[i].value.take() {
                self.release(slot, d);
                self.handed -= 1;
                self.settle(d);
                return Poll::Ready(Some(v));
            }
            // Unlinked with nothing: closed, or dropped by a finished select; retry below.
        }
        match self.try_recv(me, d) {
            Ok(v) => {
                self.release(slot, d);
                Poll::Ready(Some(v))
            }
            Err(TryRecvError::Closed) => {
                self.release(slot, d);
                Poll::Ready(None)
            }
            Err(TryRecvError::Empty) if ctx.nonblocking() => {
                self.release(slot, d);
                Poll::Pending
            }
            Err(TryRecvError::Empty) => {
                let i = self.slot(slot);
                self.park(i, Side::Recv, ctx, d);
                Poll::Pending
            }
        }
    }

    /// A send future is dropped: unlink it; its value, if not sent, is returned for dropping
    /// after unlocking. It is never delivered later.
    pub(crate) fn cancel_send(&mut self, slot: &mut Option<usize>, d: &mut Deferred) -> Option<T> {
        let i = (*slot)?;
        if self.slots[i].queued {
            self.unpark(i, Side::Send);
        }
        let v = self.slots[i].value.take();
        self.release(slot, d);
        v
    }

    /// The value a sender handed to the receive parked in `slot` (the slot is then released),
    /// or `None` if it has none; nothing else is looked at (a poll on a spent cooperative
    /// budget takes no new value).
    pub(crate) fn take_handed(&mut self, slot: &mut Option<usize>, d: &mut Deferred) -> Option<T> {
        let i = (*slot)?;
        if self.slots[i].queued {
            return None;
        }
        let v = self.slots[i].value.take()?;
        self.release(slot, d);
        self.handed -= 1;
        self.settle(d);
        Some(v)
    }

    /// A receive future is dropped: unlink it, and put back a value handed to it, unless a
    /// timer's newer value overtook it; that one is returned, for dropping after unlocking.
    pub(crate) fn cancel_recv(&mut self, slot: &mut Option<usize>, d: &mut Deferred) -> Option<T> {
        let i = (*slot)?;
        if self.slots[i].queued {
            self.unpark(i, Side::Recv);
        }
        let v = self.slots[i].value.take();
        let overtaken = std::mem::take(&mut self.slots[i].overtaken);
        self.release(slot, d);
        let v = v?;
        self.handed -= 1;
        let stale = if overtaken {
            Some(v)
        } else {
            self.bounce(v, d);
            None
        };
        self.settle(d);
        stale
    }

    // ---- the buffer ---------------------------------------------------------------------------

    /// Puts back a value a dropped receiver was handed: to the next receiver, else to the
    /// front of the buffer, where it was next in line (invariant 4).
    fn bounce(&mut self, v: T, d: &mut Deferred) {
        match Self::pop_claimable(&mut self.recvq, &mut self.slots, None, d) {
            Some(r) => self.give(r, v, d),
            None => self.buf.push_front(v),
        }
    }

    /// Hands a parked receiver `r` the oldest value: `v` if nothing is buffered, else the
    /// buffer's front, `v` going to the back. Buffered values and a parked receiver coexist
    /// only when a send skipped the receiver while its select was polling (invariant 5);
    /// handing it `v` then would deliver `v` ahead of older values.
    fn give_in_order(&mut self, r: usize, v: T, d: &mut Deferred) {
        let oldest = match self.buf.pop_front() {
            Some(front) => {
                self.buf.push_back(v);
                front
            }
            None => v,
        };
        self.give(r, oldest, d);
    }

    /// Moves offered values of parked senders into free buffer room.
    fn refill(&mut self, me: Option<*const Group>, d: &mut Deferred) {
        while self.buf.is_bounded() && self.has_room() {
            let Some(s) = Self::pop_claimable(&mut self.sendq, &mut self.slots, me, d) else {
                break;
            };
            let v = self.take(s, d);
            self.buf.push_back(v);
        }
    }
}
