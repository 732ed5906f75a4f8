//! The sending half and its future.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use crate::chan::Chan;
use crate::core::OpCtx;
use crate::error::{SendError, TrySendError};
use crate::fused::ChanRef;
use crate::select_ctx;

/// The sending half of a channel. Clone it to send from several tasks; the channel closes when
/// the last clone is dropped.
///
/// # Examples
///
/// ```
/// futures::executor::block_on(async {
///     let (tx, rx) = gort::chan::bounded(2);
///     let tx2 = tx.clone();
///     tx.send(1).await.unwrap();
///     tx2.send(2).await.unwrap();
///     drop((tx, tx2));
///     assert_eq!(rx.recv().await, Some(1));
///     assert_eq!(rx.recv().await, Some(2));
///     assert_eq!(rx.recv().await, None);
/// });
/// ```
pub struct Sender<T> {
    pub(crate) chan: ChanRef<T>,
    /// The value sent through the [`Sink`](futures_sink::Sink) impl, until flushed
    /// (allocated on first use).
    pub(crate) sink: SinkSlot<T>,
}

/// A `Sender`'s pending `Sink` send. Only ever touched through `&mut Sender` (the `Sink`
/// methods and `Drop`), never through `&Sender`, so sharing a `&Sender` between threads
/// shares no access to it: a `Sender<T>` stays `Sync` for every `T: Send`, as it was before
/// it was a `Sink` (payloads such as `Box<dyn FnOnce() + Send>` are not `Sync`).
pub(crate) struct SinkSlot<T>(Option<Box<SinkSend<T>>>);

impl<T> SinkSlot<T> {
    /// No send pending (and nothing allocated).
    pub(crate) const EMPTY: SinkSlot<T> = SinkSlot(None);
}

// SAFETY: no method reads or writes a `SinkSlot` through a shared reference (its only field
// is private to this module and reached only from `&mut Sender` in the `Sink` methods and
// `Drop`), so `&SinkSlot<T>` gives no access to `T` and may cross threads; sending it moves
// the `T`, which needs `T: Send` (the auto `Send` impl).
unsafe impl<T: Send> Sync for SinkSlot<T> {}

/// A send started by `Sink::start_send`: the state of a [`SendFuture`], owned.
pub(crate) struct SinkSend<T> {
    value: Option<T>,
    slot: Option<usize>,
}

impl<T> Sender<T> {
    /// Sends `value`, waiting for buffer room or, on an unbuffered channel, for a receiver to
    /// take it (the future resolves only after the hand-off, Go's rendezvous).
    ///
    /// Fails with the value back if the channel is or becomes closed while waiting (Go would
    /// panic; gort returns [`SendError`]).
    ///
    /// # Cancellation
    ///
    /// Dropping the future before it resolves withdraws the value, which is dropped with the
    /// future and never delivered later. The one exception is a value that a receiver already
    /// took before the drop (the future was woken but not polled again): it counts as sent.
    /// Inside [`select!`](crate::select!) even that cannot happen: once another arm is chosen,
    /// no receiver can take this arm's value.
    ///
    /// # Examples
    ///
    /// ```
    /// futures::executor::block_on(async {
    ///     let (tx, rx) = gort::chan::bounded(1);
    ///     tx.send("hi").await.unwrap();
    ///     assert_eq!(rx.recv().await, Some("hi"));
    ///     rx.close();
    ///     assert_eq!(tx.send("late").await.unwrap_err().into_inner(), "late");
    /// });
    /// ```
    pub fn send(&self, value: T) -> SendFuture<'_, T> {
        SendFuture {
            tx: self,
            value: Some(value),
            slot: None,
        }
    }

    /// Sends `value` if that is possible right now: to a waiting receiver, else into free
    /// buffer room. Never waits (it takes the channel's lock for a few instructions), so it
    /// may be called from any context, a scheduler's included.
    ///
    /// # Examples
    ///
    /// ```
    /// use gort::chan::TrySendError;
    ///
    /// let (tx, rx) = gort::chan::bounded(0);
    /// // Unbuffered, and nobody is receiving.
    /// assert_eq!(tx.try_send(1), Err(TrySendError::Full(1)));
    /// drop(rx);
    /// assert_eq!(tx.try_send(1), Err(TrySendError::Closed(1)));
    /// ```
    pub fn try_send(&self, value: T) -> Result<(), TrySendError<T>> {
        self.chan.with(|core, d| core.try_send(value, None, d))
    }

    /// Closes the channel (as Go's `close(ch)`): sends fail from now on, including the ones
    /// waiting; receivers get the buffered values, then `None`. Closing twice is a no-op.
    ///
    /// # Examples
    ///
    /// ```
    /// let (tx, rx) = gort::chan::unbounded();
    /// tx.try_send(7).unwrap();
    /// tx.close();
    /// assert!(tx.is_closed() && rx.is_closed());
    /// assert_eq!(rx.try_recv(), Ok(7));
    /// assert!(rx.try_recv().unwrap_err().is_closed());
    /// ```
    pub fn close(&self) {
        self.chan.close();
    }

    /// Whether the channel is closed (explicitly, or because every sender or every receiver
    /// is gone).
    pub fn is_closed(&self) -> bool {
        self.chan.is_closed()
    }

    /// The number of buffered values (Go's `len(ch)`).
    ///
    /// It can exceed [`capacity`](Sender::capacity) by the values that dropped receive
    /// futures put back (see [`RecvFuture`](crate::RecvFuture)).
    pub fn len(&self) -> usize {
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

    /// Whether `self` and `other` send on the same channel.
    pub fn same_channel(&self, other: &Sender<T>) -> bool {
        self.chan.ptr_eq(&other.chan)
    }

    /// Removes and drops every buffered value; returns how many. Parked senders then move
    /// their values into the freed room, as a receive would let them.
    ///
    /// For gort's timers: Go 1.23's `Timer.Stop`/`Reset` discard a value the timer already
    /// sent, under the timer's lock, so no stale value is ever received.
    #[doc(hidden)]
    pub fn take_buffered(&self) -> usize {
        let taken = self.chan.with(|core, d| core.take_buffered(d));
        taken.len()
    }
}

impl<T> Clone for Sender<T> {
    fn clone(&self) -> Self {
        self.chan.with(|core, _| core.add_sender());
        Sender {
            chan: self.chan.clone(),
            sink: SinkSlot::EMPTY,
        }
    }
}

impl<T> Drop for Sender<T> {
    fn drop(&mut self) {
        // An unflushed `Sink` send is withdrawn, as a dropped `SendFuture`'s is.
        if let Some(slot) = self.sink.0.as_mut().map(|p| &mut p.slot) {
            if slot.is_some() {
                let unsent = self.chan.with(|core, d| core.cancel_send(slot, d));
                drop(unsent);
            }
        }
        self.chan.with(|core, d| core.drop_sender(d));
    }
}

/// A `Sender` is a [`Sink`](futures_sink::Sink) of one value at a time: `start_send` hands
/// the value to the sender, and `poll_flush` (and `poll_ready`, before the next value) waits
/// until it is sent, exactly as `send(value).await` would (an unbuffered channel's flush
/// completes when a receiver took the value). The error gives the value back when the
/// channel is closed.
///
/// `poll_close` only flushes: it does not close the channel, which other senders may still
/// use; the channel closes when every `Sender` is dropped or on [`close`](Sender::close).
/// A value not yet flushed when the `Sender` is dropped is withdrawn, never delivered.
///
/// A flush cut off (its future dropped by a `timeout`, or a `select!` arm that lost) does not
/// take the value back, unlike dropping a [`SendFuture`]: it stays in flight. Cut off by a
/// `timeout` it stays offered, so a receiver that comes later may still take it; a losing
/// `select!` arm's offer is withdrawn until the next `poll_ready` or `poll_flush`, which
/// offers it again. Either way the next flush completes it, or the sender's drop withdraws
/// it; a value that must not arrive late goes through [`send`](Sender::send) (its future
/// withdraws the value when dropped, and [`SendFuture::cancel`] gives it back).
///
/// # Examples
///
/// ```
/// use futures::{SinkExt, StreamExt};
///
/// futures::executor::block_on(async {
///     let (mut tx, rx) = gort::chan::bounded(0);
///     let reader = async { rx.take(3).collect::<Vec<u32>>().await };
///     let writer = async {
///         let mut items = futures::stream::iter([1, 2, 3]).map(Ok);
///         tx.send_all(&mut items).await.unwrap();
///     };
///     let (got, ()) = futures::join!(reader, writer);
///     assert_eq!(got, [1, 2, 3]);
/// });
/// ```
impl<T> futures_sink::Sink<T> for Sender<T> {
    type Error = SendError<T>;

    fn poll_ready(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.poll_flush(cx)
    }

    fn start_send(self: Pin<&mut Self>, item: T) -> Result<(), Self::Error> {
        let this = self.get_mut();
        let pending = this.sink.0.get_or_insert_with(|| {
            Box::new(SinkSend {
                value: None,
                slot: None,
            })
        });
        assert!(
            pending.value.is_none() && pending.slot.is_none(),
            "Sink::start_send on a gort Sender without a successful poll_ready"
        );
        pending.value = Some(item);
        Ok(())
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        let this = self.get_mut();
        let Some(p) = this.sink.0.as_mut() else {
            return Poll::Ready(Ok(()));
        };
        if p.value.is_none() && p.slot.is_none() {
            return Poll::Ready(Ok(()));
        }
        poll_send(&this.chan, &mut p.slot, &mut p.value, cx)
    }

    fn poll_close(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.poll_flush(cx)
    }
}

/// Polls a send (`SendFuture`, or the `Sink`'s flush) parked in `slot` or holding `value`,
/// inside the current select context if any. A completed send costs a unit of the
/// cooperative budget; on a spent one the value stays in the future (or in its parked slot)
/// untouched (lib.rs, "Cooperative budget").
#[inline]
fn poll_send<T>(
    chan: &Chan<T>,
    slot: &mut Option<usize>,
    value: &mut Option<T>,
    cx: &mut Context<'_>,
) -> Poll<Result<(), SendError<T>>> {
    gort_coop::poll_budgeted(cx, |cx| {
        select_ctx::with_op(|select| {
            let mut ctx = OpCtx {
                waker: cx.waker(),
                select,
            };
            chan.with_op(&mut ctx, |core, ctx, d| core.poll_send(slot, value, ctx, d))
        })
    })
}

impl<T> fmt::Debug for Sender<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.chan.debug("Sender", f)
    }
}

/// The future of [`Sender::send`].
///
/// It is `Unpin`, and `Send` when `T` is.
#[must_use = "futures do nothing unless you `.await` or poll them"]
pub struct SendFuture<'a, T> {
    tx: &'a Sender<T>,
    /// The value while it is not offered in a parked slot.
    value: Option<T>,
    /// The slot while parked (and until this future observes the outcome).
    slot: Option<usize>,
}

// No field is ever pinned: the value is moved in and out freely.
impl<T> Unpin for SendFuture<'_, T> {}

impl<T> SendFuture<'_, T> {
    /// Withdraws the send and gives the value back if no receiver has taken it; it is then
    /// never delivered. `None` if a receiver took it (the send happened: the exception in
    /// [`Sender::send`]'s cancellation note) or the future already completed.
    ///
    /// Go keeps the value of a `case ch <- v:` that another case beat; here the value moves
    /// into the future, so a select that must keep it polls `&mut` the future in its arm
    /// and cancels it when another arm wins. Within [`select!`](crate::select!), a losing
    /// arm's value is never taken, so `cancel` always gives it back.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    ///
    /// let rt = gort::Runtime::new().unwrap();
    /// rt.block_on(async {
    ///     let (tx, rx) = gort::chan::bounded::<String>(0); // nobody receives yet
    ///     let mut send = tx.send(String::from("report"));
    ///     let value = gort::select! {
    ///         _ = &mut send => None,
    ///         _ = gort::time::sleep(Duration::from_millis(5)) => send.cancel(),
    ///     };
    ///     assert_eq!(value.as_deref(), Some("report")); // kept for the next try
    ///     assert!(rx.try_recv().is_err());
    /// });
    /// ```
    pub fn cancel(mut self) -> Option<T> {
        if self.slot.is_none() {
            return self.value.take();
        }
        let slot = &mut self.slot;
        // The slot is released here, so `Drop` finds nothing left to withdraw.
        self.tx.chan.with(|core, d| core.cancel_send(slot, d))
    }
}

impl<T> Future for SendFuture<'_, T> {
    type Output = Result<(), SendError<T>>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.get_mut();
        assert!(
            this.value.is_some() || this.slot.is_some(),
            "SendFuture polled after completion"
        );
        poll_send(&this.tx.chan, &mut this.slot, &mut this.value, cx)
    }
}

impl<T> Drop for SendFuture<'_, T> {
    fn drop(&mut self) {
        if self.slot.is_some() {
            let slot = &mut self.slot;
            let unsent = self.tx.chan.with(|core, d| core.cancel_send(slot, d));
            drop(unsent);
        }
    }
}

impl<T> fmt::Debug for SendFuture<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SendFuture")
            .field("parked", &self.slot.is_some())
            .finish_non_exhaustive()
    }
}
