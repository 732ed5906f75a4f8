//! The errors of channel operations. Every error that carries the unsent value gives it back
//! through `into_inner`, so a failed send never loses anything.

use std::error::Error;
use std::fmt;

/// The value given back by [`Sender::send`](crate::Sender::send) when the channel is closed.
///
/// A channel is closed by [`close`](crate::Sender::close) on either side, by dropping every
/// [`Sender`](crate::Sender), or by dropping every [`Receiver`](crate::Receiver).
///
/// `Debug` does not print the value, so the error is usable for any `T`.
///
/// # Examples
///
/// ```
/// let (tx, rx) = gort::chan::bounded::<String>(1);
/// drop(rx);
/// let err = futures::executor::block_on(tx.send("hi".to_string())).unwrap_err();
/// assert_eq!(err.into_inner(), "hi");
/// ```
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct SendError<T>(pub T);

impl<T> SendError<T> {
    /// Returns the value that could not be sent.
    pub fn into_inner(self) -> T {
        self.0
    }
}

impl<T> fmt::Debug for SendError<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("SendError(..)")
    }
}

impl<T> fmt::Display for SendError<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("sending on a closed channel")
    }
}

impl<T> Error for SendError<T> {}

/// Why [`Sender::try_send`](crate::Sender::try_send) could not send; the value comes back.
///
/// # Examples
///
/// ```
/// use gort::chan::TrySendError;
///
/// let (tx, _rx) = gort::chan::bounded(1);
/// assert_eq!(tx.try_send(1), Ok(()));
/// assert_eq!(tx.try_send(2), Err(TrySendError::Full(2)));
/// tx.close();
/// assert_eq!(tx.try_send(3), Err(TrySendError::Closed(3)));
/// ```
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum TrySendError<T> {
    /// The buffer is full (or, unbuffered, no receiver is waiting).
    Full(T),
    /// The channel is closed.
    Closed(T),
}

impl<T> TrySendError<T> {
    /// Returns the value that could not be sent.
    pub fn into_inner(self) -> T {
        match self {
            TrySendError::Full(v) | TrySendError::Closed(v) => v,
        }
    }

    /// Whether the send failed because the channel had no room.
    pub fn is_full(&self) -> bool {
        matches!(self, TrySendError::Full(_))
    }

    /// Whether the send failed because the channel is closed.
    pub fn is_closed(&self) -> bool {
        matches!(self, TrySendError::Closed(_))
    }
}

impl<T> From<SendError<T>> for TrySendError<T> {
    fn from(err: SendError<T>) -> Self {
        TrySendError::Closed(err.0)
    }
}

impl<T> fmt::Debug for TrySendError<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TrySendError::Full(_) => f.write_str("Full(..)"),
            TrySendError::Closed(_) => f.write_str("Closed(..)"),
        }
    }
}

impl<T> fmt::Display for TrySendError<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TrySendError::Full(_) => f.write_str("sending on a full channel"),
            TrySendError::Closed(_) => f.write_str("sending on a closed channel"),
        }
    }
}

impl<T> Error for TrySendError<T> {}

/// Why [`Receiver::try_recv`](crate::Receiver::try_recv) returned no value.
///
/// # Examples
///
/// ```
/// use gort::chan::TryRecvError;
///
/// let (tx, rx) = gort::chan::bounded::<u8>(1);
/// assert_eq!(rx.try_recv(), Err(TryRecvError::Empty));
/// drop(tx);
/// assert_eq!(rx.try_recv(), Err(TryRecvError::Closed));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TryRecvError {
    /// Nothing is buffered and no sender is waiting, but a value may still come: the
    /// channel is open, or (closed) a receive future that was handed a value has not yet
    /// taken it or put it back.
    Empty,
    /// The channel is closed and every buffered value has been received.
    Closed,
}

impl TryRecvError {
    /// Whether the channel was merely empty.
    pub fn is_empty(&self) -> bool {
        matches!(self, TryRecvError::Empty)
    }

    /// Whether the channel is closed and drained.
    pub fn is_closed(&self) -> bool {
        matches!(self, TryRecvError::Closed)
    }
}

impl fmt::Display for TryRecvError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TryRecvError::Empty => f.write_str("receiving on an empty channel"),
            TryRecvError::Closed => f.write_str("receiving on an empty and closed channel"),
        }
    }
}

impl Error for TryRecvError {}
