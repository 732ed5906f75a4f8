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
    pub(super) panic: Option<Payload>,
}

/// A panic payload that `wait` holds across its `.await`s: `Sync`, so that `wait`'s future
/// is `Sync` as Tokio's futures are (`tests/tokio_async_send_sync.rs`).
pub(super) struct Payload(Box<dyn Any + Send>);

// SAFETY: `Payload` has no `&self` method and its field is private to this module, which
// only moves it: a shared reference to one gives no access to the payload.
unsafe impl Sync for Payload {}

impl Payload {
    /// The payload, to resume or to drop.
    pub(super) fn into_inner(self) -> Box<dyn Any + Send> {
        self.0
    }
}

impl<E: Send + 'static> Joining<'_, E> {
    /// Keeps `payload` if it is the first panic (and cancels the group's context then); a
    /// later one is dropped.
    pub(super) fn keep(&mut self, payload: Box<dyn Any + Send>) {
        if self.panic.is_none() {
            self.panic = Some(Payload(payload));
            self.group.first.cancel_context();
        }
    }

    /// Takes the group's tasks (and the aborted ones of `wait`s dropped before their end)
    /// and the panic reaped from them. A function of its own so that no payload stays in
    /// `wait`'s future across its `.await`s but in [`Payload`] (the future stays `Sync`).
    pub(super) fn take_tasks(&mut self) {
        let (batch, aborted, reaped) = {
            let mut tasks = self.group.lock_tasks();
            let aborted = std::mem::take(&mut tasks.aborted);
            (std::mem::take(&mut tasks.set), aborted, tasks.panic.take())
        };
        self.batches.extend(aborted);
        self.batches.push(batch);
        self.batches.retain(|batch| !batch.is_empty());
        if let Some(payload) = reaped {
            self.keep(payload);
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
        let panic = self.panic.take().map(Payload::into_inner);
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
