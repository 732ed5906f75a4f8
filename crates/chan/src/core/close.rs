//! Closing a channel core and counting its handles: `close` (Go's `closechan`), the last
//! sender or receiver closing it (the last receiver's drop is told to a timer channel's hook,
//! after unlocking), and the buffer taken back by a timer's `stop` or `reset`. Everything here
//! runs under the channel lock.

use super::waiters::Slots;
use super::{Core, CLOSED};
use crate::buf::Taken;
use crate::group::Claim;
use crate::queue::Queue;
use crate::wake::{Bag, Deferred};

/// The panic of a handle count that would overflow its `u32`.
const TOO_MANY: &str = "gort::chan: more than 2^31 senders or 2^32 receivers of one channel";

impl<T> Core<T> {
    /// Closes the channel: every parked operation is unlinked and woken to fail (senders) or
    /// to drain the buffer and then see the end (receivers).
    ///
    /// Like Go's `closechan`, closing completes a parked select arm, so it also claims the
    /// arm's group: no other arm of that select can take effect afterwards.
    pub(crate) fn close(&mut self, d: &mut Deferred) {
        if self.is_closed() {
            return;
        }
        self.senders |= CLOSED;
        Self::unlink_all(&mut self.sendq, &mut self.slots, d);
        Self::unlink_all(&mut self.recvq, &mut self.slots, d);
    }

    /// Invariant 6: once nothing can come back to a closed channel, the receivers parked to
    /// wait for it are woken to see the end.
    pub(super) fn settle(&mut self, d: &mut Deferred) {
        if self.is_closed() && self.handed == 0 {
            Self::unlink_all(&mut self.recvq, &mut self.slots, d);
        }
    }

    /// Unlinks every waiter of `q` and wakes it to retry (and find the channel closed).
    pub(super) fn unlink_all(q: &mut Queue, slots: &mut Slots<T>, d: &mut Deferred) {
        while let Some(i) = q.pop_front(slots) {
            let s = &mut slots[i];
            s.queued = false;
            let claim = s.claim(None);
            if let Some(w) = s.waker.take() {
                match claim {
                    // Busy: its owner polls again and sees the close itself.
                    Claim::Won | Claim::Busy | Claim::Own => d.wake(w),
                    Claim::Gone => d.discard(w),
                }
            }
        }
    }

    pub(crate) fn add_sender(&mut self) {
        let count = (self.senders & !CLOSED)
            .checked_add(1)
            .filter(|&n| n < CLOSED);
        self.senders = count.expect(TOO_MANY) | (self.senders & CLOSED);
    }

    pub(crate) fn add_receiver(&mut self) {
        self.receivers = self.receivers.checked_add(1).expect(TOO_MANY);
    }

    /// One sender fewer; the last one closes the channel.
    pub(crate) fn drop_sender(&mut self, d: &mut Deferred) {
        self.senders -= 1;
        if self.senders & !CLOSED == 0 {
            self.close(d);
        }
    }

    /// One receiver fewer; the last one closes the channel and hands back the buffered values
    /// (nobody can receive them, to drop after unlocking) and true.
    pub(crate) fn drop_receiver(&mut self, d: &mut Deferred) -> (Taken<T>, bool) {
        self.receivers -= 1;
        if self.receivers > 0 {
            return (Taken::None, false);
        }
        self.close(d);
        (self.buf.take(), true)
    }

    /// Removes every buffered value (for dropping after unlocking), then lets parked senders
    /// fill the room, as receives would.
    ///
    /// A value already handed to a plain receive future whose owner has not polled it yet is
    /// taken back too, and that receiver parks again: otherwise, if the future were then
    /// dropped, `cancel_recv` would put the value back after the timer's `stop` had returned
    /// (a stale value, go#37196). Select arms keep theirs: their select committed to them.
    pub(crate) fn take_buffered(&mut self, d: &mut Deferred) -> Bag<T> {
        let mut taken = Bag::default();
        while let Some(v) = self.buf.pop_front() {
            taken.push(v);
        }
        if self.handed > 0 {
            for i in 0..self.slots.len() {
                if i == 0 && !self.slots.has_first() {
                    continue; // a fused channel's slot 0, free and not allocated
                }
                let s = &mut self.slots[i];
                if s.queued || !s.recv || s.group.is_some() {
                    continue;
                }
                if let Some(v) = s.value.take() {
                    taken.push(v);
                    self.handed -= 1;
                    // Its owner was woken and will find itself parked again (spurious wake).
                    self.slots[i].queued = true;
                    self.recvq.push_back(&mut self.slots, i);
                }
            }
            self.settle(d);
        }
        self.refill(None, d);
        taken
    }
}
