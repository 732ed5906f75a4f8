//! [`ErrGroup`]: Go's `errgroup.Group` (`golang.org/x/sync/errgroup`) for tasks.
//!
//! Each task is wrapped so that its error is recorded the moment it returns, and the group's
//! context canceled then, not when `wait` gets to it: the other tasks stop while the failed
//! one's siblings are still running, as in Go.
//!
//! `spawn` takes `&self`, as Go's `g.Go` may be called from the group's own tasks: the
//! tasks' join set sits behind a lock, held only to insert a spawned task's handle (the
//! spawn itself, which drops the future at once on a shut-down runtime, runs outside it).
//! `wait` takes the set out of the lock and joins it unlocked, then again for the tasks
//! spawned meanwhile, until the set stays empty; a counter of running tasks covers those a
//! concurrent `wait` took.

use std::fmt;
use std::future::Future;
use std::panic::resume_unwind;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use gort_context::{CancelFn, Context};
use gort_sched::JoinSet;

use crate::WaitGroup;

/// A group of tasks working on one job: [`wait`](ErrGroup::wait) waits for all of them and
/// returns the first error any returned; with [`with_context`](ErrGroup::with_context), that
/// first error (or the end of `wait`) also cancels a context the tasks watch, so the others
/// stop early (Go's `errgroup.WithContext`).
///
/// - "First" is in time: the error of the task that failed first, whatever the spawn order.
///   Later errors are dropped.
/// - A task that panics makes `wait` cancel the context, wait for the other tasks, then
///   resume the panic (as Go's errgroup re-panics in `Wait`).
/// - [`spawn`](ErrGroup::spawn) takes `&self`: share the group as an `Arc<ErrGroup>` and a
///   task may spawn siblings (Go's `g.Go` from a group's goroutine); `wait` returns once
///   they have finished too.
/// - Dropping the group without calling `wait` aborts its tasks (it holds them in a
///   [`JoinSet`](gort_sched::JoinSet)); so does dropping `wait`'s future before it ends.
///   Tasks holding an `Arc` of the group keep it alive until they finish.
/// - To run at most `n` tasks at once (Go's `SetLimit`), have each task hold a permit of a
///   `tokio::sync::Semaphore` of `n` permits.
///
/// # Examples
///
/// Fetch three parts; the second fails, which cancels the third's long wait:
///
/// ```
/// use std::time::Duration;
/// use gort::context::Context;
/// use gort::sync::ErrGroup;
///
/// let rt = gort::Runtime::new().unwrap();
/// rt.block_on(async {
///     let (group, ctx) = ErrGroup::with_context(&Context::background());
///     for part in 0..3u64 {
///         let ctx = ctx.clone();
///         group.spawn(async move {
///             match part {
///                 1 => Err(format!("part {part}: not found")),
///                 _ => gort::select! {
///                     _ = gort::time::sleep(Duration::from_millis(part * 1000)) => Ok(()),
///                     _ = ctx.done().recv() => Err(format!("part {part}: canceled")),
///                 },
///             }
///         });
///     }
///     assert_eq!(group.wait().await, Err("part 1: not found".to_string()));
///     assert!(ctx.err().is_some());
/// });
/// ```
#[doc(alias = "errgroup")]
pub struct ErrGroup<E> {
    /// The tasks not yet taken by a `wait`. Locked only to insert or take: no user code.
    tasks: Mutex<JoinSet<()>>,
    first: Arc<FirstError<E>>,
}

/// The error of the first task that failed, the cancel of the group's context, and the
/// count of the tasks still running.
struct FirstError<E> {
    error: Mutex<Option<E>>,
    cancel: Option<CancelFn>,
    running: WaitGroup,
}

/// Counts a task as running from before its spawn until its future is dropped (it ended,
/// panicked, was aborted, or never spawned).
struct Running<E>(Arc<FirstError<E>>);

impl<E> Drop for Running<E> {
    fn drop(&mut self) {
        self.0.running.done();
    }
}

impl<E> FirstError<E> {
    /// Keeps `error` if it is the first, and cancels the context either way.
    fn record(&self, error: E) {
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
        // A later error is dropped here, outside the lock (its Drop is user code).
        drop(later);
        self.cancel_context();
    }

    fn cancel_context(&self) {
        if let Some(cancel) = &self.cancel {
            cancel.cancel();
        }
    }

    fn take(&self) -> Option<E> {
        self.error
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take()
    }
}

impl<E: Send + 'static> ErrGroup<E> {
    /// A group without a context (Go's zero `errgroup.Group`): an error does not stop the
    /// other tasks; `wait` still returns the first one.
    ///
    /// # Examples
    ///
    /// ```
    /// let rt = gort::Runtime::new().unwrap();
    /// rt.block_on(async {
    ///     let group = gort::sync::ErrGroup::new();
    ///     for n in [1u32, 2, 3] {
    ///         group.spawn(async move { if n == 2 { Err(n) } else { Ok(()) } });
    ///     }
    ///     assert_eq!(group.wait().await, Err(2));
    /// });
    /// ```
    pub fn new() -> ErrGroup<E> {
        ErrGroup::with_cancel(None)
    }

    /// A group and a context derived from `parent`, canceled as soon as a task returns an
    /// error, and at the latest when [`wait`](ErrGroup::wait) returns (Go's
    /// `errgroup.WithContext`). Tasks watch `ctx.done()` to stop early.
    ///
    /// # Examples
    ///
    /// ```
    /// use gort::context::{Context, Error};
    ///
    /// let rt = gort::Runtime::new().unwrap();
    /// rt.block_on(async {
    ///     let (group, ctx) = gort::sync::ErrGroup::<()>::with_context(&Context::background());
    ///     group.spawn(async { Ok(()) });
    ///     assert_eq!(group.wait().await, Ok(()));
    ///     assert_eq!(ctx.err(), Some(Error::Canceled)); // wait's end cancels it, as in Go
    /// });
    /// ```
    #[doc(alias = "WithContext")]
    pub fn with_context(parent: &Context) -> (ErrGroup<E>, Context) {
        let (ctx, cancel) = gort_context::with_cancel(parent);
        (ErrGroup::with_cancel(Some(cancel)), ctx)
    }

    fn with_cancel(cancel: Option<CancelFn>) -> ErrGroup<E> {
        ErrGroup {
            tasks: Mutex::new(JoinSet::new()),
            first: Arc::new(FirstError {
                error: Mutex::new(None),
                cancel,
                running: WaitGroup::new(),
            }),
        }
    }

    fn lock_tasks(&self) -> MutexGuard<'_, JoinSet<()>> {
        self.tasks.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Spawns `task` in the group (Go's `g.Go`). If it returns an error and it is the first,
    /// the group's context is canceled at once. Takes `&self`: the group's own tasks may
    /// call it, through an `Arc` of the group.
    ///
    /// # Panics
    ///
    /// Outside a gort runtime.
    ///
    /// # Examples
    ///
    /// A task spawns its sibling, whose error `wait` returns:
    ///
    /// ```
    /// use std::sync::Arc;
    /// use gort::sync::ErrGroup;
    ///
    /// let rt = gort::Runtime::new().unwrap();
    /// rt.block_on(async {
    ///     let group = Arc::new(ErrGroup::new());
    ///     let g = group.clone();
    ///     group.spawn(async move {
    ///         g.spawn(async { Err("sibling failed") });
    ///         Ok(())
    ///     });
    ///     assert_eq!(group.wait().await, Err("sibling failed"));
    /// });
    /// ```
    #[doc(alias = "Go")]
    #[track_caller]
    pub fn spawn<F>(&self, task: F)
    where
        F: Future<Output = Result<(), E>> + Send + 'static,
    {
        self.first.running.add(1);
        let running = Running(self.first.clone());
        let handle = gort_sched::spawn(async move {
            if let Err(error) = task.await {
                running.0.record(error);
            }
            drop(running);
        });
        self.lock_tasks().insert(handle);
    }

    /// Waits for every task, those spawned meanwhile included, cancels the group's context,
    /// and returns the first error (Go's `g.Wait`). The error is taken: a later `wait`
    /// returns only errors of tasks spawned after it.
    ///
    /// Several `wait`s at once all return once every task has finished, but the first
    /// error goes to ONE of them (whichever takes it first); the others return `Ok(())`.
    /// Go's `Wait` gives every caller the same error; here `E` need not be `Clone`, and the
    /// error moves out as a task's output does from its `JoinHandle`. Wait in one task and
    /// pass the result on (a channel, an `Arc`) when several need it. A panic is resumed,
    /// likewise, by the one `wait` that joined the task that panicked.
    ///
    /// A task that never finished because its runtime was dropped (the group outlived the
    /// runtime its tasks ran on, and `wait` runs on another) has neither an error nor a
    /// panic to give, and `wait` counts it as done: `Ok(())` if no other task failed. Go has
    /// no such case (one runtime for the process). A group that may outlive its runtime
    /// records its tasks' completion itself where that matters.
    ///
    /// # Panics
    ///
    /// With the panic of the first task that panicked, once every other task has finished.
    #[doc(alias = "Wait")]
    pub async fn wait(&self) -> Result<(), E> {
        let mut panic = None;
        loop {
            let mut batch = std::mem::take(&mut *self.lock_tasks());
            if batch.is_empty() {
                break;
            }
            while let Some(done) = batch.join_next().await {
                if let Err(e) = done {
                    if e.is_panic() && panic.is_none() {
                        panic = Some(e.into_panic());
                        self.first.cancel_context();
                    }
                }
            }
        }
        // Tasks another `wait` took are still counted.
        self.first.running.wait().await;
        self.first.cancel_context();
        if let Some(payload) = panic {
            resume_unwind(payload);
        }
        match self.first.take() {
            Some(error) => Err(error),
            None => Ok(()),
        }
    }
}

impl<E: Send + 'static> Default for ErrGroup<E> {
    fn default() -> ErrGroup<E> {
        ErrGroup::new()
    }
}

impl<E> fmt::Debug for ErrGroup<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ErrGroup")
            .field("running", &self.first.running.count())
            .field("has_context", &self.first.cancel.is_some())
            .finish_non_exhaustive()
    }
}
