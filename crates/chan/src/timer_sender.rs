//! The sending end a channel timer keeps: a [`Sender`](crate::Sender) without the `Sink`
//! state, one word, for the one sender of a channel made by
//! [`bounded_with_hook`](crate::bounded_with_hook).

use std::fmt;

use crate::error::TrySendError;
use crate::fused::ChanRef;
use crate::wake::Deferred;

/// The only sender of a timer's channel (gort::time's `Timer`/`Ticker`). Not a user API.
///
/// Dropping it closes the channel, as dropping the last [`Sender`](crate::Sender) does.
#[doc(hidden)]
pub struct TimerSender<T> {
    chan: ChanRef<T>,
}

impl<T> TimerSender<T> {
    pub(crate) fn new(chan: ChanRef<T>) -> Self {
        TimerSender { chan }
    }

    /// [`Sender::try_send`](crate::Sender::try_send), for values in increasing order: a value
    /// handed to a receive before this one is dropped if that receive is cut off
    /// (`Core::try_send_overtaking`).
    pub fn try_send(&self, value: T) -> Result<(), TrySendError<T>> {
        self.chan.with(|core, d| core.try_send_overtaking(value, d))
    }

    /// [`Sender::len`](crate::Sender::len): the number of buffered values.
    pub fn len(&self) -> usize {
        self.chan.len()
    }

    /// Whether no value is buffered.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// [`Sender::take_buffered`](crate::Sender::take_buffered): removes every buffered value
    /// (and one handed to a receive future not yet polled); returns how many there were.
    pub fn take_buffered(&self) -> usize {
        let taken = self.chan.with(|core, d| core.take_buffered(d));
        taken.len()
    }

    /// [`try_send`](TimerSender::try_send), leaving the wake-up of the receiver it completes
    /// in `later`, for a caller that holds a lock of its own (a timer's arming lock: a
    /// receiver's waker is user code, and may stop or reset that very timer).
    pub fn try_send_later(&self, value: T, later: &mut TimerWakes) -> Result<(), TrySendError<T>> {
        self.chan.try_send_later(value, later)
    }

    /// [`take_buffered`](TimerSender::take_buffered), leaving its wake-ups in `later`.
    pub fn take_buffered_later(&self, later: &mut TimerWakes) -> usize {
        self.chan.take_buffered_later(later)
    }
}

/// Wake-ups (and waker drops) that a timer's channel operations left for their caller, done
/// when this is dropped: after the caller released its own lock. Not a user API.
///
/// Empty until an operation needs it: a timer's `reset` or `stop` with nothing buffered (most
/// of them) then builds and drops one word, not a `Deferred` and its drop glue, which made
/// `Timer::reset` 30 % slower (design/PERFORMANCE-LOG.md, "At 3afe468").
#[doc(hidden)]
#[derive(Default)]
pub struct TimerWakes(Option<Deferred>);

impl TimerWakes {
    pub(crate) fn get(&mut self) -> &mut Deferred {
        self.0.get_or_insert_with(Deferred::new)
    }
}

impl Drop for TimerWakes {
    #[inline]
    fn drop(&mut self) {
        if let Some(d) = self.0.take() {
            d.run();
        }
    }
}

impl fmt::Debug for TimerWakes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TimerWakes").finish_non_exhaustive()
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
