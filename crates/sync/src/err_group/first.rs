//! The first error of a group, the cancel of its context (with the error as the cause, for
//! [`ErrGroup::with_context_cause`](super::ErrGroup::with_context_cause)), and the count of
//! its running tasks.

use std::error::Error as StdError;
use std::sync::{Arc, Mutex, PoisonError};

use gort_context::{CancelCauseFn, CancelFn};

use super::slots::Slot;
use crate::WaitGroup;

/// A task error as a context's cause: a copy of it, boxed.
pub(super) type ToCause<E> = fn(&E) -> Box<dyn StdError + Send + Sync>;

/// How the group cancels its context.
pub(super) enum Canceler<E> {
    /// No context (Go's zero `Group`).
    None,
    /// Without a cause: the context's cause is `Error::Canceled`.
    Plain(CancelFn),
    /// With the first error as the cause (Go's `WithContext` since x/sync 0.7).
    Cause(CancelCauseFn, ToCause<E>),
}

/// The error of the first task that failed, the cancel of the group's context, and the
/// count of the tasks still running.
pub(super) struct FirstError<E> {
    error: Mutex<Option<E>>,
    cancel: Canceler<E>,
    pub(super) running: WaitGroup,
}

/// Counts a task as running from before its spawn until its future is dropped (it ended,
/// panicked, was aborted, or never spawned), and holds its slot if the group has a limit.
pub(super) struct Running<E> {
    pub(super) first: Arc<FirstError<E>>,
    pub(super) slot: Option<Slot>,
}

impl<E> Drop for Running<E> {
    fn drop(&mut self) {
        // The slot first: once `wait` sees no task running, every slot is free again.
        drop(self.slot.take());
        self.first.running.done();
    }
}

impl<E> FirstError<E> {
    pub(super) fn new(cancel: Canceler<E>) -> FirstError<E> {
        FirstError {
            error: Mutex::new(None),
            cancel,
            running: WaitGroup::new(),
        }
    }

    pub(super) fn has_context(&self) -> bool {
        !matches!(self.cancel, Canceler::None)
    }

    /// Keeps `error` if it is the first, and then cancels the context, with the error as the
    /// cause if the group gives one. Only the first error's task cancels: a later one
    /// canceling in between (a context is canceled once) would put its error in the cause.
    pub(super) fn record(&self, error: E) {
        // The copy for the cause is made before the lock: `Clone` is user code.
        let cause = match &self.cancel {
            Canceler::Cause(_, to_cause) => Some(to_cause(&error)),
            _ => None,
        };
        let later = {
            let mut slot = self.error.lock().unwrap_or_else(PoisonError::into_inner);
            match *slot {
                None => {
                    *slot = Some(error);
                    None
                }
                Some(_) => Some(error),
            }
        };
        if later.is_some() {
            // Dropped here, outside the lock (its Drop is user code), with the unused cause.
            drop((later, cause));
            return;
        }
        match (&self.cancel, cause) {
            (Canceler::Cause(cancel, _), Some(cause)) => cancel.cancel(cause),
            _ => self.cancel_context(),
        }
    }

    /// Cancels the context without a cause (a no-op once it is canceled): at `wait`'s end.
    pub(super) fn cancel_context(&self) {
        match &self.cancel {
            Canceler::None => {}
            Canceler::Plain(cancel) => cancel.cancel(),
            Canceler::Cause(cancel, _) => cancel.cancel(gort_context::Error::Canceled),
        }
    }

    pub(super) fn take(&self) -> Option<E> {
        self.error
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take()
    }
}
