//! The sending end a channel timer keeps: a [`Sender`](crate::Sender) without the `Sink`
//! state, one word, for the one sender of a channel made by
//! [`bounded_with_hook`](crate::bounded_with_hook).

use std::fmt;

use gort_loom::Arc;

use crate::chan::Chan;
use crate::error::TrySendError;

/// The only sender of a timer's channel (gort::time's `Timer`/`Ticker`). Not a user API.
///
/// Dropping it closes the channel, as dropping the last [`Sender`](crate::Sender) does.
#[doc(hidden)]
pub struct TimerSender<T> {
    chan: Arc<Chan<T>>,
}

impl<T> TimerSender<T> {
    pub(crate) fn new(chan: Arc<Chan<T>>) -> Self {
        TimerSender { chan }
    }

    /// [`Sender::try_send`](crate::Sender::try_send).
    pub fn try_send(&self, value: T) -> Result<(), TrySendError<T>> {
        self.chan.with(|core, d| core.try_send(value, None, d))
    }

    /// [`Sender::take_buffered`](crate::Sender::take_buffered): removes every buffered value
    /// (and one handed to a receive future not yet polled); returns how many there were.
    pub fn take_buffered(&self) -> usize {
        let taken = self.chan.with(|core, d| core.take_buffered(d));
        taken.len()
    }
}

impl<T> Drop for TimerSender<T> {
    fn drop(&mut self) {
        self.chan.with(|core, d| core.drop_sender(d));
    }
}

impl<T> fmt::Debug for TimerSender<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.chan.debug("TimerSender", f)
    }
}
