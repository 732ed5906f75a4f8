//! The slots of a group with a limit (Go's `SetLimit`): see the module docs of `err_group`.

use std::sync::atomic::{AtomicUsize, Ordering::Acquire, Ordering::Relaxed, Ordering::Release};
use std::sync::Arc;

use gort_chan::{Receiver, Sender};

/// The slots of a group with a limit: a count of the slots never handed out, and a channel
/// of one token per slot handed back (see the module docs). The channel is never closed:
/// the group and every waiting task hold it, with both ends.
pub(super) struct Slots {
    /// Slots not yet handed out: only ever decreases, so once it is 0 every slot goes through
    /// the channel, in the order its waiters came.
    unissued: AtomicUsize,
    /// Tasks `spawn` queued for a slot that have not got one yet ([`Queued`]): while any
    /// waits, [`try_take_behind_queued`](Slots::try_take_behind_queued) finds no slot, even
    /// one freed before the queued task was first polled and parked on the channel.
    queued: AtomicUsize,
    free: Receiver<()>,
    give_back: Sender<()>,
    pub(super) limit: usize,
}

/// A slot held by a task, freed on drop.
pub(super) struct Slot(Arc<Slots>);

impl Slots {
    /// No token is made here: `set_limit(Some(usize::MAX))` (or a billion) must not fill a
    /// channel slot by slot (it hung, as a loop of `usize::MAX` sends).
    pub(super) fn new(limit: usize) -> Arc<Slots> {
        let (give_back, free) = gort_chan::bounded(limit);
        Arc::new(Slots {
            unissued: AtomicUsize::new(limit),
            queued: AtomicUsize::new(0),
            free,
            give_back,
            limit,
        })
    }

    /// A slot never handed out, if one is left. None is left while a task waits on the
    /// channel (it waits only once all were handed out), so this never passes a waiter.
    fn issue(self: &Arc<Self>) -> Option<Slot> {
        self.unissued
            .fetch_update(Relaxed, Relaxed, |n| n.checked_sub(1))
            .ok()
            .map(|_| Slot(self.clone()))
    }

    pub(super) async fn take(self: &Arc<Self>) -> Slot {
        if let Some(slot) = self.issue() {
            return slot;
        }
        let token = self.free.recv().await;
        debug_assert!(token.is_some(), "the slots' channel is never closed");
        Slot(self.clone())
    }

    pub(super) fn try_take(self: &Arc<Self>) -> Option<Slot> {
        self.issue()
            .or_else(|| self.free.try_recv().ok().map(|()| Slot(self.clone())))
    }

    /// [`try_take`](Slots::try_take), unless a task queued by `spawn` still waits for a slot
    /// (it came first).
    pub(super) fn try_take_behind_queued(self: &Arc<Self>) -> Option<Slot> {
        if self.queued.load(Acquire) > 0 {
            return None;
        }
        self.try_take()
    }

    /// Counts a task queued for a slot until the returned guard is dropped (it got one, or
    /// it was dropped waiting).
    pub(super) fn queue(self: &Arc<Self>) -> Queued {
        self.queued.fetch_add(1, Release);
        Queued(self.clone())
    }
}

/// A task `spawn` queued for a slot, counted in `Slots::queued` while it waits.
pub(super) struct Queued(Arc<Slots>);

impl Queued {
    /// Waits for a slot, then stops counting as queued.
    pub(super) async fn take(self) -> Slot {
        self.0.take().await
    }
}

impl Drop for Queued {
    fn drop(&mut self) {
        self.0.queued.fetch_sub(1, Release);
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        // Never full: this slot is out, so at most `limit - 1` tokens are in the channel.
        let back = self.0.give_back.try_send(());
        debug_assert!(back.is_ok(), "a freed slot's token has room");
    }
}
