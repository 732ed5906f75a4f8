//! `wait`'s hold on the tasks it joins, which gives them back if it is dropped.

use std::any::Any;
use std::sync::PoisonError;

use gort_sched::JoinSet;

use super::ErrGroup;

/// What a running `wait` holds: the sets of tasks it took from the group, and the first
/// panic it found. A `wait` dropped before it ends (a timeout around it) aborts those tasks,
/// as the group's drop would, but loses nothing: the sets go back to the group, aborted,
/// with the panic, for the next `wait` to join (a task that panicked, even as it was being
/// aborted, is resumed there). Before, a cut-off `wait` dropped the panic it had joined.
pub(super) struct Joining<'a, E> {
    pub(super) group: &'a ErrGroup<E>,
    /// Joined from the last; a set leaves once empty.
    pub(super) batches: Vec<JoinSet<()>>,
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

    /// Joins every task of the batches, keeping the first panic.
    pub(super) async fn join_all(&mut self) {
        while let Some(batch) = self.batches.last_mut() {
            match batch.join_next().await {
                Some(Err(e)) if e.is_panic() => self.keep(e.into_panic()),
                Some(_) => {}
                None => drop(self.batches.pop()),
            }
        }
    }
}

impl<E> Drop for Joining<'_, E> {
    fn drop(&mut self) {
        let mut batches = std::mem::take(&mut self.batches);
        batches.retain(|batch| !batch.is_empty());
        for batch in &mut batches {
            batch.abort_all();
        }
        let panic = self.panic.take();
        if batches.is_empty() && panic.is_none() {
            return;
        }
        let spare = {
            let mut tasks = self
                .group
                .tasks
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            tasks.aborted.append(&mut batches); // moved, not dropped, under the lock
            match (&tasks.panic, panic) {
                (None, Some(payload)) => {
                    tasks.panic = Some(payload);
                    None
                }
                (_, spare) => spare,
            }
        };
        drop(spare); // outside the lock (a payload's Drop is user code)
    }
}
