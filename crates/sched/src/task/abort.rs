//! `AbortHandle`: the right to cancel a task, without its output.

use super::id::Id;
use super::raw::RawTask;
use super::state::COMPLETE;
use std::fmt;

/// Cancels a task from anywhere; made by [`JoinHandle::abort_handle`](crate::JoinHandle) and
/// [`JoinSet::spawn`](crate::task::JoinSet::spawn). Cloning it is cheap; dropping it does
/// nothing to the task.
///
/// # Examples
///
/// ```
/// let rt = gort::Runtime::new().unwrap();
/// let h = rt.spawn(std::future::pending::<()>());
/// let abort = h.abort_handle();
/// std::thread::spawn(move || abort.abort()).join().unwrap();
/// assert!(rt.block_on(h).unwrap_err().is_cancelled());
/// ```
#[derive(Clone)]
pub struct AbortHandle {
    raw: RawTask,
}

impl AbortHandle {
    pub(crate) fn new(raw: RawTask) -> AbortHandle {
        AbortHandle { raw }
    }

    /// Cancels the task: its future is dropped at its next scheduling point (at once if it is
    /// idle), and its `JoinHandle` yields a cancelled `JoinError`. No effect on a task that
    /// already finished.
    ///
    /// # Examples
    ///
    /// ```
    /// let rt = gort::Runtime::new().unwrap();
    /// let h = rt.spawn(std::future::pending::<()>());
    /// h.abort_handle().abort();
    /// assert!(rt.block_on(h).unwrap_err().is_cancelled());
    /// ```
    pub fn abort(&self) {
        self.raw.abort();
    }

    /// Whether the task has finished: completed, panicked, or been cancelled.
    ///
    /// # Examples
    ///
    /// ```
    /// let rt = gort::Runtime::new().unwrap();
    /// let h = rt.spawn(async {});
    /// let abort = h.abort_handle();
    /// rt.block_on(h).unwrap();
    /// assert!(abort.is_finished());
    /// ```
    pub fn is_finished(&self) -> bool {
        self.raw.header().state.load() & COMPLETE != 0
    }

    /// The task's id.
    ///
    /// # Examples
    ///
    /// ```
    /// let rt = gort::Runtime::new().unwrap();
    /// let h = rt.spawn(async {});
    /// assert_eq!(h.abort_handle().id(), h.id());
    /// ```
    pub fn id(&self) -> Id {
        self.raw.header().id
    }
}

impl fmt::Debug for AbortHandle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AbortHandle")
            .field("id", &self.id())
            .field("finished", &self.is_finished())
            .finish()
    }
}
