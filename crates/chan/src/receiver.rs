//! The receiving half, its future, and its `Stream` implementation.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use futures_core::Stream;
use gort_loom::atomic::{AtomicU32, Ordering::Relaxed};

use crate::core::OpCtx;
use crate::error::TryRecvError;
use crate::fused::ChanRef;
use crate::select_ctx;

/// The receiving half of a channel. Clone it to receive from several tasks (each value goes
/// to exactly one receiver); when the last clone is dropped, sends fail.
///
/// It is also a [`Stream`] of the values, which ends when the channel is closed and drained.
///
/// # Examples
///
/// ```
/// use futures::StreamExt;
///
/// futures::executor::block_on(async {
///     let (tx, rx) = gort::chan::unbounded();
///     for i in 0..3 {
///         tx.try_send(i).unwrap();
///     }
///     drop(tx);
///     assert_eq!(rx.collect::<Vec<_>>().await, [0, 1, 2]);
/// });
/// ```
pub struct Receiver<T> {
    pub(crate) chan: ChanRef<T>,
    /// The parked slot of the `Stream` implementation ([`NO_STREAM`] for none): a `u32`, as
    /// every slot index is (`core/waiters.rs`), so that a receiver is two words, not three.
    /// Atomic because [`recv`](Receiver::recv) and [`try_recv`](Receiver::try_recv) take it
    /// back through `&self` ([`Receiver::reclaim_stream`]); the slot itself is the core's,
    /// under the channel lock, so `Relaxed` suffices.
    stream: AtomicU32,
}

/// No parked `Stream` receive (slot indices are below `u32::MAX`).
const NO_STREAM: u32 = u32::MAX;

impl<T> Receiver<T> {
    pub(crate) fn new(chan: ChanRef<T>) -> Self {
        Receiver {
            chan,
            stream: AtomicU32::new(NO_STREAM),
        }
    }

    /// Withdraws the receive that a `Stream` poll left parked (its future, `next()`, was
    /// dropped: a `timeout` or a `select!` cut it off), putting back a value a sender handed
    /// to it, before this receiver receives another way. Otherwise that value would wait in
    /// the stream's slot for a stream poll that may never come: `recv` on this receiver
    /// would wait for the next value (or for ever), and the other receivers of a closed
    /// channel would never see the end (`tests/abuse_sync.rs`).
    #[inline]
    fn reclaim_stream(&self) {
        if self.stream.load(Relaxed) != NO_STREAM {
            self.reclaim_stream_slow();
        }
    }

    /// [`reclaim_stream`](Receiver::reclaim_stream) with a stream receive parked: out of
    /// line, so that a `recv` pays one load and a branch.
    #[cold]
    #[inline(never)]
    fn reclaim_stream_slow(&self) {
        let taken = self.stream.swap(NO_STREAM, Relaxed);
        if taken == NO_STREAM {
            return; // another `recv` on a shared `&Receiver` took it first
        }
        let mut slot = Some(widen(taken));
        let stale = self.chan.with(|core, d| core.cancel_recv(&mut slot, d));
        drop(stale); // after the lock
        self.chan.unparked();
    }

    /// Receives the next value, waiting for one; `None` once the channel is closed and every
    /// buffered value has been received (Go's `v, ok := <-ch` with `ok == false`).
    ///
    /// # Cancellation
    ///
    /// Cancel-safe: dropping the future never loses a value. A value that a sender handed to
    /// this future before it was dropped goes to the next waiting receiver, or back to the
    /// front of the buffer (so [`len`](Receiver::len) may briefly exceed the capacity).
    /// Until such a future is polled or dropped, other receivers of a closed channel wait for
    /// that value rather than report the end; a leaked (`mem::forget`) one keeps them waiting.
    ///
    /// # Examples
    ///
    /// ```
    /// futures::executor::block_on(async {
    ///     let (tx, rx) = gort::chan::bounded(1);
    ///     tx.send(5).await.unwrap();
    ///     drop(tx);
    ///     assert_eq!(rx.recv().await, Some(5));
    ///     assert_eq!(rx.recv().await, None);
    /// });
    /// ```
    pub fn recv(&self) -> RecvFuture<'_, T> {
        self.reclaim_stream();
        RecvFuture {
            rx: self,
            slot: None,
            done: false,
        }
    }

    /// Receives a value if one is available right now: buffered, or offered by a waiting
    /// sender (so it succeeds on an unbuffered channel too, as Go's non-blocking receive does).
    ///
    /// # Examples
    ///
    /// ```
    /// use gort::chan::TryRecvError;
    ///
    /// let (tx, rx) = gort::chan::bounded(1);
    /// assert_eq!(rx.try_recv(), Err(TryRecvError::Empty));
    /// tx.try_send('x').unwrap();
    /// assert_eq!(rx.try_recv(), Ok('x'));
    /// ```
    pub fn try_recv(&self) -> Result<T, TryRecvError> {
        self.reclaim_stream();
        self.chan.before_recv();
        self.chan.with(|core, d| core.try_recv(None, d))
    }

    /// Closes the channel; see [`Sender::close`](crate::Sender::close).
    pub fn close(&self) {
        self.chan.close();
    }

    /// Whether the channel is closed (values may still be buffered).
    pub fn is_closed(&self) -> bool {
        self.chan.is_closed()
    }

    /// The number of buffered values (Go's `len(ch)`).
    pub fn len(&self) -> usize {
        self.chan.before_recv();
        self.chan.len()
    }

    /// Whether no value is buffered.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The buffer's capacity (Go's `cap(ch)`): `Some(0)` for an unbuffered channel, `None`
    /// for an unbounded one.
    pub fn capacity(&self) -> Option<usize> {
        self.chan.capacity()
    }

    /// Whether `self` and `other` receive from the same channel.
    pub fn same_channel(&self, other: &Receiver<T>) -> bool {
        self.chan.ptr_eq(&other.chan)
    }
}

impl<T> Clone for Receiver<T> {
    fn clone(&self) -> Self {
        self.chan.with(|core, _| core.add_receiver());
        Receiver::new(self.chan.clone())
    }
}

impl<T> Drop for Receiver<T> {
    fn drop(&mut self) {
        let mut stream = Some(self.stream.swap(NO_STREAM, Relaxed))
            .filter(|&s| s != NO_STREAM)
            .map(widen);
        let parked = stream.is_some();
        let (stale, (unreceivable, last)) = self
            .chan
            .with(|core, d| (core.cancel_recv(&mut stream, d), core.drop_receiver(d)));
        drop((stale, unreceivable)); // after the lock
        if parked {
            self.chan.unparked();
        }
        if last {
            self.chan.last_receiver_dropped();
        }
    }
}

impl<T> fmt::Debug for Receiver<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.chan.debug("Receiver", f)
    }
}

impl<T> Stream for Receiver<T> {
    type Item = T;

    /// Cancel-safe like [`Receiver::recv`]: a value handed to the stream while it waits
    /// (its `next()` future cut off by a `timeout` or a `select!`) is kept for its next poll,
    /// or put back for everyone when this receiver is dropped or receives by
    /// [`recv`](Receiver::recv) or [`try_recv`](Receiver::try_recv). Until then, as with a
    /// [`RecvFuture`] neither polled nor dropped, the other receivers of a closed channel
    /// wait for that value rather than report the end.
    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<T>> {
        let this = self.get_mut();
        let mut slot = Some(this.stream.load(Relaxed))
            .filter(|&s| s != NO_STREAM)
            .map(widen);
        let out = poll_recv(&this.chan, &mut slot, cx);
        this.stream.store(slot.map_or(NO_STREAM, narrow), Relaxed);
        out
    }
}

// A receiver is two words: a timer's handle holds one (design/TIMERS.md, "Memory").
#[cfg(not(loom))]
const _: () = assert!(std::mem::size_of::<Receiver<u64>>() == 2 * std::mem::size_of::<usize>());

/// A slot index as the core takes it.
fn widen(slot: u32) -> usize {
    slot as usize
}

/// A slot index as a receiver keeps it; the core numbers slots below `u32::MAX`.
fn narrow(slot: usize) -> u32 {
    u32::try_from(slot).expect("gort::chan: slot indices are u32s")
}

/// Polls a receive parked in `slot` under the cooperative budget: a received value (or the
/// end of the channel) costs a unit, and on a spent budget the receive takes no new value
/// and returns `Pending`, unless a sender already handed its parked slot one: that value is
/// returned (lib.rs, "Cooperative budget"), so that a `timeout` cutting the receive off next
/// does not put it back behind values delivered since.
#[inline]
fn poll_recv<T>(
    chan: &ChanRef<T>,
    slot: &mut Option<usize>,
    cx: &mut Context<'_>,
) -> Poll<Option<T>> {
    gort_coop::poll_budgeted_or_held(
        cx,
        slot,
        |slot| take_handed(chan, slot),
        |slot, cx| poll_recv_op(chan, slot, cx),
    )
}

/// The value a sender handed to the receive parked in `slot`, if any (the slot is then
/// released), without looking at anything else in the channel.
#[cold]
fn take_handed<T>(chan: &ChanRef<T>, slot: &mut Option<usize>) -> Option<Option<T>> {
    slot.as_ref()?;
    let v = chan.with(|core, d| core.take_handed(slot, d))?;
    chan.unparked();
    Some(Some(v))
}

/// Polls a receive parked in `slot`, inside the current select context if any, and tells a
/// timer channel's hook when the receive parks or stops being parked.
fn poll_recv_op<T>(
    chan: &ChanRef<T>,
    slot: &mut Option<usize>,
    cx: &mut Context<'_>,
) -> Poll<Option<T>> {
    let fused = chan.ext().is_some();
    if fused {
        chan.before_recv();
    }
    let was_parked = slot.is_some();
    let out = select_ctx::with_op(|select| {
        let mut ctx = OpCtx {
            waker: cx.waker(),
            select,
        };
        chan.with_op(&mut ctx, |core, ctx, d| core.poll_recv(slot, ctx, d))
    });
    if fused {
        match (was_parked, slot.is_some()) {
            (false, true) => chan.parked(),
            (true, false) => chan.unparked(),
            _ => {}
        }
    }
    out
}

/// The future of [`Receiver::recv`].
///
/// It is `Unpin`, and `Send` when `T` is. See [`Receiver::recv`] for its cancel-safety.
#[must_use = "futures do nothing unless you `.await` or poll them"]
pub struct RecvFuture<'a, T> {
    rx: &'a Receiver<T>,
    slot: Option<usize>,
    done: bool,
}

impl<T> Future for RecvFuture<'_, T> {
    type Output = Option<T>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<T>> {
        let this = self.get_mut();
        assert!(!this.done, "RecvFuture polled after completion");
        let out = poll_recv(&this.rx.chan, &mut this.slot, cx);
        this.done = out.is_ready();
        out
    }
}

impl<T> Drop for RecvFuture<'_, T> {
    fn drop(&mut self) {
        if self.slot.is_some() {
            let slot = &mut self.slot;
            let stale = self.rx.chan.with(|core, d| core.cancel_recv(slot, d));
            drop(stale); // after the lock
            self.rx.chan.unparked();
        }
    }
}

impl<T> fmt::Debug for RecvFuture<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RecvFuture")
            .field("parked", &self.slot.is_some())
            .field("done", &self.done)
            .finish_non_exhaustive()
    }
}
