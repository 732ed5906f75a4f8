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
//!
//! A group may live as long as a server (one task per connection, `wait` at shutdown), so
//! finished tasks must not pile up in the set until `wait`: Go's errgroup keeps a counter,
//! not the goroutines. `spawn` reaps the finished tasks (`try_join_next`, no waiting) each
//! time the set has doubled since the last reap (from 64), which costs O(1) per task; the
//! first panic reaped is kept for `wait` to resume. Before, a group spawning a task per
//! request kept each finished task's cell and entry, about 350 bytes per task
//! (`tests/err_group_memory.rs`).
//!
//! A limit (Go's `SetLimit`) is a channel holding one token per free slot: a task takes a
//! token (in `spawn` itself when one is free, so that a `try_spawn` right after finds it
//! taken, as Go's; else queued, before its body runs, counted so that `try_spawn` does not
//! pass the queue) and puts it back when its future is dropped (it ended,
//! panicked, or was aborted), before it stops counting as running. The tokens are minted
//! on first use, from a count of the slots never handed out, so that a limit of
//! `usize::MAX` costs nothing to set (filling the channel up front hung). Go sends to take a slot
//! and receives to free it; here taking is the receive, because a receive is cancel-safe (a
//! token handed to a dropped receive goes to the next waiter, or back to the buffer) where a
//! send that a receiver completed just before its future was dropped counts as sent, and
//! would leak the slot of an aborted task.

use std::any::Any;
use std::fmt;
use std::future::Future;
use std::panic::resume_unwind;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use gort_context::Context;
use gort_sched::{JoinError, JoinSet};

mod first;
mod joining;
mod slots;
use first::{Canceler, FirstError, Running};
use joining::Joining;
use slots::{Queued, Slot, Slots};

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
///   [`JoinSet`](gort_sched::JoinSet)); so does dropping `wait`'s future before it ends
///   (a timeout around it) for the tasks it had taken, but they go back to the group,
///   aborted, and the next `wait` joins them: a panic among them is resumed there.
///   Tasks holding an `Arc` of the group keep it alive until they finish.
/// - [`set_limit`](ErrGroup::set_limit) runs at most `n` of its tasks at once (Go's
///   `SetLimit`); [`try_spawn`](ErrGroup::try_spawn) spawns only if a slot is free (Go's
///   `TryGo`), and [`spawn_limited`](ErrGroup::spawn_limited) waits for one (Go's `Go`
///   under a limit), while [`spawn`](ErrGroup::spawn) never waits: its task queues for a slot.
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
    /// The tasks not yet taken by a `wait`. Locked only to insert, reap or take: no user code.
    tasks: Mutex<Tasks>,
    first: Arc<FirstError<E>>,
    /// The free slots, with a limit.
    slots: Option<Arc<Slots>>,
}

/// The tasks of a group not yet taken by a `wait`, and what reaping them found.
#[derive(Default)]
struct Tasks {
    set: JoinSet<()>,
    /// Reap when the set holds this many tasks.
    reap_at: usize,
    /// The first panic reaped, or found by a `wait` dropped before its end, for `wait` to
    /// resume.
    panic: Option<Box<dyn Any + Send>>,
    /// The tasks of `wait`s dropped before their end, aborted, for the next `wait` to join
    /// (or the group's drop to drop).
    aborted: Vec<JoinSet<()>>,
}

/// The set's size below which `spawn` reaps nothing.
const REAP_FLOOR: usize = 64;

impl Tasks {
    /// Inserts `handle` and, if the set has doubled since the last reap, takes the finished
    /// tasks out of it. Returns the panics reaped after the first, to be dropped by the
    /// caller outside the lock (a payload's `Drop` is user code).
    fn insert(&mut self, handle: gort_sched::JoinHandle<()>) -> Vec<JoinError> {
        self.set.insert(handle);
        let mut later = Vec::new();
        if self.set.len() < self.reap_at.max(REAP_FLOOR) {
            return later;
        }
        while let Some(done) = self.set.try_join_next() {
            match done {
                Err(e) if e.is_panic() && self.panic.is_none() => self.panic = Some(e.into_panic()),
                Err(e) => later.push(e),
                Ok(()) => {}
            }
        }
        self.reap_at = 2 * self.set.len();
        later
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
        ErrGroup::with_cancel(Canceler::None)
    }

    /// A group and a context derived from `parent`, canceled as soon as a task returns an
    /// error, and at the latest when [`wait`](ErrGroup::wait) returns (Go's
    /// `errgroup.WithContext`). Tasks watch `ctx.done()` to stop early. The context's
    /// [`cause`](gort_context::Context::cause) is [`Error::Canceled`](gort_context::Error::Canceled);
    /// [`with_context_cause`](ErrGroup::with_context_cause) makes it the first error, as Go's
    /// does.
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
        (ErrGroup::with_cancel(Canceler::Plain(cancel)), ctx)
    }

    /// [`with_context`](ErrGroup::with_context) whose context is canceled with the first
    /// error as its cause: [`Context::cause`](gort_context::Context::cause) gives a copy of
    /// the error (downcast it to `E`, or to `String` for a `String` error), or
    /// [`Error::Canceled`](gort_context::Error::Canceled) once `wait` returns without one
    /// (Go's `WithContext` since x/sync 0.7, which cancels with `WithCancelCause`). It needs
    /// `E: Clone` (`wait` still returns the error itself) and a conversion to a boxed error,
    /// which `String`, `&str` and every `std::error::Error` have.
    ///
    /// # Examples
    ///
    /// ```
    /// use gort::context::Context;
    /// use gort::sync::ErrGroup;
    ///
    /// let rt = gort::Runtime::new().unwrap();
    /// rt.block_on(async {
    ///     let (group, ctx) = ErrGroup::with_context_cause(&Context::background());
    ///     let watcher = ctx.clone();
    ///     group.spawn(async move {
    ///         watcher.done().recv().await; // stopped by its sibling's failure
    ///         Err(format!("stopped: {}", watcher.cause().unwrap()))
    ///     });
    ///     group.spawn(async { Err("disk full".to_string()) });
    ///     assert_eq!(group.wait().await, Err("disk full".to_string()));
    ///     assert_eq!(ctx.cause().unwrap().to_string(), "disk full");
    /// });
    /// ```
    #[doc(alias = "WithContext")]
    pub fn with_context_cause(parent: &Context) -> (ErrGroup<E>, Context)
    where
        E: Clone + Into<Box<dyn std::error::Error + Send + Sync>>,
    {
        let (ctx, cancel) = gort_context::with_cancel_cause(parent);
        let to_cause: first::ToCause<E> = |error| error.clone().into();
        (
            ErrGroup::with_cancel(Canceler::Cause(cancel, to_cause)),
            ctx,
        )
    }

    fn with_cancel(cancel: Canceler<E>) -> ErrGroup<E> {
        ErrGroup {
            tasks: Mutex::new(Tasks::default()),
            first: Arc::new(FirstError::new(cancel)),
            slots: None,
        }
    }

    fn lock_tasks(&self) -> MutexGuard<'_, Tasks> {
        self.tasks.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Spawns `task` in the group (Go's `g.Go`). If it returns an error and it is the first,
    /// the group's context is canceled at once. Takes `&self`: the group's own tasks may
    /// call it, through an `Arc` of the group.
    ///
    /// Never waits. Under a [limit](ErrGroup::set_limit) the task takes a free slot before
    /// `spawn` returns (as Go's `g.Go`: a `try_spawn` right after finds it taken); with every
    /// slot taken, the task is spawned but queues for a slot before its first poll (first
    /// come, first served), as many as are spawned, and [`try_spawn`](ErrGroup::try_spawn)
    /// refuses while any waits. [`spawn_limited`](ErrGroup::spawn_limited) makes the caller
    /// wait instead, as Go's `g.Go` does. A queued task counts as running for `wait`.
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
        match &self.slots {
            None => self.start(task, None, None),
            // A free slot is taken here, so that a `try_spawn` or `spawn_limited` made next
            // finds it taken (Go's `g.Go` takes its slot before it returns).
            Some(slots) => match slots.try_take_behind_queued() {
                Some(slot) => self.start(task, Some(slot), None),
                None => self.start(task, None, Some(slots.queue())),
            },
        }
    }

    /// Spawns `task` if the group has a free slot (always, without a limit) and returns
    /// `true`; returns `false`, dropping `task` unstarted, if [`set_limit`](ErrGroup::set_limit)'s
    /// number of tasks are running (Go's `g.TryGo`). Tasks queued by [`spawn`](ErrGroup::spawn)
    /// for a slot come first: while any waits, every slot is taken.
    ///
    /// # Panics
    ///
    /// Outside a gort runtime, when it would spawn.
    ///
    /// # Examples
    ///
    /// ```
    /// use gort::sync::ErrGroup;
    ///
    /// let rt = gort::Runtime::new().unwrap();
    /// rt.block_on(async {
    ///     let mut group = ErrGroup::<()>::new();
    ///     group.set_limit(Some(1));
    ///     let (release, wait_release) = gort::chan::bounded::<()>(0);
    ///     assert!(group.try_spawn(async move {
    ///         wait_release.recv().await;
    ///         Ok(())
    ///     }));
    ///     assert!(!group.try_spawn(async { Ok(()) })); // the one slot is taken
    ///     drop(release);
    ///     assert_eq!(group.wait().await, Ok(()));
    ///     assert!(group.try_spawn(async { Ok(()) })); // free again
    ///     assert_eq!(group.wait().await, Ok(()));
    /// });
    /// ```
    #[doc(alias = "TryGo")]
    #[track_caller]
    pub fn try_spawn<F>(&self, task: F) -> bool
    where
        F: Future<Output = Result<(), E>> + Send + 'static,
    {
        let slot = match &self.slots {
            None => None,
            Some(slots) => match slots.try_take_behind_queued() {
                Some(slot) => Some(slot),
                None => return false,
            },
        };
        self.start(task, slot, None);
        true
    }

    /// Waits for a free slot, then spawns `task` (Go's `g.Go` under a limit, which blocks
    /// its caller): a loop spawning from an endless source gets back-pressure, where
    /// [`spawn`](ErrGroup::spawn) would queue every task. Without a limit it spawns at once.
    ///
    /// Cancel-safe: dropping the future before it resolves spawns nothing and holds no slot.
    /// A task of the group that calls it waits while holding its own slot: as in Go, if every
    /// running task does so, none ever gets one; a task spawns siblings with `spawn`.
    ///
    /// # Panics
    ///
    /// Outside a gort runtime.
    ///
    /// # Examples
    ///
    /// Two workers at a time over a stream of jobs; the producer waits for a free one:
    ///
    /// ```
    /// use gort::sync::ErrGroup;
    ///
    /// let rt = gort::Runtime::new().unwrap();
    /// rt.block_on(async {
    ///     let mut group = ErrGroup::<String>::new();
    ///     group.set_limit(Some(2));
    ///     for job in 0..10u64 {
    ///         group
    ///             .spawn_limited(async move {
    ///                 gort::time::sleep(std::time::Duration::from_millis(job % 3)).await;
    ///                 Ok(())
    ///             })
    ///             .await;
    ///     }
    ///     assert_eq!(group.wait().await, Ok(()));
    /// });
    /// ```
    pub async fn spawn_limited<F>(&self, task: F)
    where
        F: Future<Output = Result<(), E>> + Send + 'static,
    {
        let slot = match &self.slots {
            Some(slots) => Some(slots.take().await),
            None => None,
        };
        self.start(task, slot, None);
    }

    /// Runs at most `limit` of the group's tasks at once from now on, `None` for no limit
    /// (the default; Go's `g.SetLimit(n)` with a negative `n`). Tasks beyond the limit wait
    /// for a slot: [`spawn`](ErrGroup::spawn)'s in the runtime, before their first poll;
    /// [`spawn_limited`](ErrGroup::spawn_limited)'s caller; [`try_spawn`](ErrGroup::try_spawn)
    /// does not spawn. A task frees its slot when it ends, panics or is aborted.
    ///
    /// Takes `&mut self`: set it before sharing the group.
    ///
    /// # Panics
    ///
    /// - If tasks of the group are running, queued ones included (Go panics likewise when
    ///   tasks hold slots: their slots would be counted against the wrong limit).
    /// - With `Some(0)`: no task could ever run, and `wait` would never return (Go's
    ///   `SetLimit(0)` deadlocks its next `Go` instead).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
    /// use std::sync::Arc;
    /// use gort::sync::ErrGroup;
    ///
    /// let rt = gort::Runtime::new().unwrap();
    /// rt.block_on(async {
    ///     let mut group = ErrGroup::<()>::new();
    ///     group.set_limit(Some(3));
    ///     let (now, most) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    ///     for _ in 0..20 {
    ///         let (now, most) = (now.clone(), most.clone());
    ///         group.spawn(async move {
    ///             most.fetch_max(now.fetch_add(1, SeqCst) + 1, SeqCst);
    ///             gort::time::sleep(std::time::Duration::from_millis(1)).await;
    ///             now.fetch_sub(1, SeqCst);
    ///             Ok(())
    ///         });
    ///     }
    ///     group.wait().await.unwrap();
    ///     assert!(most.load(SeqCst) <= 3);
    /// });
    /// ```
    #[doc(alias = "SetLimit")]
    #[track_caller]
    pub fn set_limit(&mut self, limit: Option<usize>) {
        let running = self.first.running.count();
        assert!(
            running == 0,
            "gort: ErrGroup::set_limit while {running} tasks of the group are running"
        );
        assert!(
            limit != Some(0),
            "gort: an ErrGroup limit of 0 would never run a task (None is no limit)"
        );
        self.slots = limit.map(Slots::new);
    }

    /// The limit [`set_limit`](ErrGroup::set_limit) set, `None` for none.
    ///
    /// # Examples
    ///
    /// ```
    /// let mut group = gort::sync::ErrGroup::<()>::new();
    /// assert_eq!(group.limit(), None);
    /// group.set_limit(Some(8));
    /// assert_eq!(group.limit(), Some(8));
    /// ```
    pub fn limit(&self) -> Option<usize> {
        self.slots.as_ref().map(|slots| slots.limit)
    }

    /// Spawns `task`, counted as running at once, holding `slot`, or first taking one as
    /// `queued` in the spawned task.
    #[track_caller]
    fn start<F>(&self, task: F, slot: Option<Slot>, queued: Option<Queued>)
    where
        F: Future<Output = Result<(), E>> + Send + 'static,
    {
        self.first.running.add(1);
        let mut running = Running {
            first: self.first.clone(),
            slot,
        };
        let handle = gort_sched::spawn(async move {
            if let Some(queued) = queued {
                running.slot = Some(queued.take().await);
            }
            if let Err(error) = task.await {
                running.first.record(error);
            }
            drop(running);
        });
        let later_panics = self.lock_tasks().insert(handle);
        drop(later_panics); // outside the lock
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
    /// So x/sync/errgroup's pipeline example, which closes its results channel in
    /// `go func() { g.Wait(); close(c) }()` and then calls `g.Wait()` again for the error,
    /// ported literally could return the partial results with `Ok(())` when the first
    /// `wait` took the error. On gort the channel closes by itself once the last task's
    /// `Sender` drops, so that first `wait` is not needed; if it is kept, it sends its result
    /// on (`tests/go_programs_pipelines.rs` ports the example).
    ///
    /// A task that never finished because its runtime was dropped (the group outlived the
    /// runtime its tasks ran on, and `wait` runs on another) has neither an error nor a
    /// panic to give, and `wait` counts it as done: `Ok(())` if no other task failed. Go has
    /// no such case (one runtime for the process). A group that may outlive its runtime
    /// records its tasks' completion itself where that matters.
    ///
    /// Dropped before it ends (a timeout around it), it aborts the tasks it had taken, as
    /// the group's drop would, and gives them back to the group with the first panic it
    /// found: the next `wait` joins them, and resumes a panic of theirs (also of a task that
    /// panicked as it was being aborted).
    /// Called from one of the group's own tasks, it waits for that task, that is for ever,
    /// as Go's `Wait` in a group's goroutine does: nothing detects it (as with a task that
    /// awaits its own `JoinHandle`).
    ///
    /// # Panics
    ///
    /// With the panic of the first task that panicked, once every other task has finished.
    #[doc(alias = "Wait")]
    pub async fn wait(&self) -> Result<(), E> {
        let mut joining = Joining {
            group: self,
            batches: Vec::new(),
            panic: None,
        };
        loop {
            joining.take_tasks();
            if joining.batches.is_empty() {
                break;
            }
            joining.join_all().await;
        }
        // Tasks another `wait` took are still counted.
        self.first.running.wait().await;
        self.first.cancel_context();
        if let Some(payload) = joining.panic.take() {
            resume_unwind(payload.into_inner());
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
            .field("has_context", &self.first.has_context())
            .field("limit", &self.slots.as_ref().map(|slots| slots.limit))
            .finish_non_exhaustive()
    }
}
