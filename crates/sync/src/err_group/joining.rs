//! `wait`'s hold on the tasks it joins, which gives back what it found if it is dropped.

use std::any::Any;
use std::sync::PoisonError;

use gort_sched::JoinSet;

use super::ErrGroup;

/// What a running `wait` holds: the tasks it took from the group, and the first panic it
/// found. A `wait` dropped before it ends (a timeout around it) aborts those tasks, but
/// loses no panic: the first one it joined, or that a task it held had finished with, goes
/// back to the group, for the next `wait` to resume.
pub(super) struct Joining<'a, E> {
    pub(super) group: &'a ErrGroup<E>,
    pub(super) batch: JoinSet<()>,
    pub(super) panic: Option<Box<dyn Any + Send>>,
}

impl<E> Joining<'_, E> {
    /// Keeps `payload` if it is the first panic (and cancels the group's context then); a
    /// later one is dropped.
    pub(super) fn keep(&mut self, payload: Box<dyn Any + Send>) {
        if self.panic.is_none() {
            self.panic = Some(payload);
            self.group.first.cancel_context();
        }
    }
}

impl<E> Drop for Joining<'_, E> {
    fn drop(&mut self) {
        while let Some(done) = self.batch.try_join_next() {
            if let Err(e) = done {
                if e.is_panic() {
                    self.keep(e.into_panic());
                }
            }
        }
        let Some(payload) = self.panic.take() else {
            return;
        };
        let spare = {
            let mut tasks = self
                .group
                .tasks
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            match tasks.panic {
                None => {
                    tasks.panic = Some(payload);
                    None
                }
                Some(_) => Some(payload),
            }
        };
        drop(spare); // outside the lock (a payload's Drop is user code)
                     // The batch drops after this: it aborts the tasks still running.
    }
}
