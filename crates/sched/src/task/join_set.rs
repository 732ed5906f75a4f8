//! `JoinSet`: a set of tasks whose outputs come back in the order they finish.
//!
//! Finding a finished task costs no scan: each task's join waker is a small `Arc` of its
//! own (`EntryWaker`) that, when the task finishes, pushes the task's id onto the set's
//! ready queue and wakes whoever awaits `join_next`. A new task's id starts in the queue
//! too, so `join_next` polls every task's `JoinHandle` once to register that waker; after
//! that it polls only tasks that said they finished.
//!
//! `tests/loom_join_set.rs` models it with the task cells: outputs raced against `join_next`
//! come back once each, and no wake-up is lost.

use super::abort::AbortHandle;
use super::id::Id;
use super::join::{JoinError, JoinHandle};
use gort_loom::Mutex;
use std::collections::{HashMap, VecDeque};
use std::fmt;
use std::future::{poll_fn, Future};
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};

/// A set of tasks spawned on a runtime, awaited in the order they finish.
///
/// Dropping the set aborts every task still in it.
///
/// # Examples
///
/// ```
/// let rt = gort::Runtime::new().unwrap();
/// rt.block_on(async {
///     let mut set = gort::task::JoinSet::new();
///     for i in 0..10u64 {
///         set.spawn(async move { i * i });
///     }
///     let mut sum = 0;
///     while let Some(res) = set.join_next().await {
///         sum += res.unwrap();
///     }
///     assert_eq!(sum, 285);
/// });
/// ```
pub struct JoinSet<T> {
    tasks: HashMap<Id, Entry<T>>,
    ready: Arc<Ready>,
}

struct Entry<T> {
    handle: JoinHandle<T>,
    /// This task's join waker (made once: `will_wake` then spares re-registering it).
    waker: Waker,
}

/// Ids of tasks that finished (or were never polled), and the waker of `join_next`.
#[derive(Default)]
struct Ready {
    inner: Mutex<ReadyInner>,
}

#[derive(Default)]
struct ReadyInner {
    ids: VecDeque<Id>,
    waiter: Option<Waker>,
}

impl Ready {
    /// Queues `id` and takes the waiter, to be woken outside the lock.
    fn push(&self, id: Id) -> Option<Waker> {
        let mut r = self.inner.lock();
        r.ids.push_back(id);
        r.waiter.take()
    }

    /// The next ready id, registering nothing.
    fn pop(&self) -> Option<Id> {
        self.inner.lock().ids.pop_front()
    }

    /// The next ready id; if there is none, `waker` is registered as the waiter in the same
    /// lock hold as the check (so a push after it wakes `waker`). A waker is user code: it
    /// is cloned, and the waiter it replaces dropped, outside the lock.
    fn pop_or_register(&self, waker: &Waker) -> Option<Id> {
        let mut fresh: Option<Waker> = None;
        loop {
            let mut r = self.inner.lock();
            if let Some(id) = r.ids.pop_front() {
                return Some(id);
            }
            if r.waiter.as_ref().is_some_and(|w| w.will_wake(waker)) {
                return None;
            }
            match fresh.take() {
                Some(w) => {
                    let replaced = r.waiter.replace(w);
                    drop(r);
                    drop(replaced);
                    return None;
                }
                None => {
                    drop(r);
                    fresh = Some(waker.clone());
                }
            }
        }
    }
}

/// One task's join waker: reports the task to its set.
struct EntryWaker {
    id: Id,
    ready: Arc<Ready>,
}

impl Wake for EntryWaker {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }
    fn wake_by_ref(self: &Arc<Self>) {
        if let Some(w) = self.ready.push(self.id) {
            w.wake();
        }
    }
}

impl<T> JoinSet<T> {
    /// An empty set.
    ///
    /// # Examples
    ///
    /// ```
    /// let set = gort::task::JoinSet::<()>::new();
    /// assert!(set.is_empty());
    /// ```
    pub fn new() -> JoinSet<T> {
        JoinSet {
            tasks: HashMap::new(),
            ready: Arc::default(),
        }
    }

    /// How many tasks are in the set: running, or finished and not yet returned by
    /// [`join_next`](JoinSet::join_next).
    ///
    /// # Examples
    ///
    /// ```
    /// let rt = gort::Runtime::new().unwrap();
    /// let _ctx = rt.handle().enter();
    /// let mut set = gort::task::JoinSet::new();
    /// set.spawn(async {});
    /// assert_eq!(set.len(), 1);
    /// ```
    pub fn len(&self) -> usize {
        self.tasks.len()
    }

    /// Whether the set holds no task.
    ///
    /// # Examples
    ///
    /// ```
    /// assert!(gort::task::JoinSet::<u8>::new().is_empty());
    /// ```
    pub fn is_empty(&self) -> bool {
        self.tasks.is_empty()
    }

    /// Adds a task spawned elsewhere to the set, by its `handle` (not yet awaited to its
    /// end); the set then owns it as if it had spawned it: `join_next` returns its output,
    /// dropping the set aborts it. The spawn methods are this after a spawn; calling it
    /// apart lets the spawn run where the set is not at hand (outside a lock that guards
    /// the set, say, so that a future dropped at once by a shut-down runtime is not dropped
    /// under it).
    ///
    /// # Examples
    ///
    /// ```
    /// let rt = gort::Runtime::new().unwrap();
    /// rt.block_on(async {
    ///     let handle = gort::spawn(async { 7 });
    ///     let mut set = gort::task::JoinSet::new();
    ///     set.insert(handle);
    ///     assert_eq!(set.join_next().await.unwrap().unwrap(), 7);
    /// });
    /// ```
    pub fn insert(&mut self, handle: JoinHandle<T>) -> AbortHandle {
        let id = handle.id();
        let abort = handle.abort_handle();
        let waker = Waker::from(Arc::new(EntryWaker {
            id,
            ready: self.ready.clone(),
        }));
        self.tasks.insert(id, Entry { handle, waker });
        // Until its first poll in `join_next` the task has no join waker: list it as ready.
        if let Some(w) = self.ready.push(id) {
            w.wake();
        }
        abort
    }

    /// Aborts every task in the set. They stay in it: `join_next` returns each (with a
    /// cancelled `JoinError` unless it finished first).
    ///
    /// # Examples
    ///
    /// ```
    /// let rt = gort::Runtime::new().unwrap();
    /// rt.block_on(async {
    ///     let mut set = gort::task::JoinSet::new();
    ///     set.spawn(std::future::pending::<()>());
    ///     set.abort_all();
    ///     assert!(set.join_next().await.unwrap().unwrap_err().is_cancelled());
    /// });
    /// ```
    pub fn abort_all(&mut self) {
        for e in self.tasks.values() {
            e.handle.abort();
        }
    }

    /// Removes every task from the set without aborting it (tokio's `detach_all`): each
    /// runs on as if its [`JoinHandle`] had been dropped, and its output is dropped when it
    /// finishes. The set is then empty and can take new tasks.
    ///
    /// # Examples
    ///
    /// ```
    /// let rt = gort::Runtime::new().unwrap();
    /// rt.block_on(async {
    ///     let (tx, rx) = gort::chan::bounded(1);
    ///     let mut set = gort::task::JoinSet::new();
    ///     set.spawn(async move { tx.send("still ran").await.unwrap() });
    ///     set.detach_all();
    ///     assert!(set.is_empty());
    ///     drop(set); // aborts nothing: the task is no longer in it
    ///     assert_eq!(rx.recv().await, Some("still ran"));
    /// });
    /// ```
    pub fn detach_all(&mut self) {
        let detached = std::mem::take(&mut self.tasks);
        // The detached tasks' join wakers still report to the old ready queue: it goes with
        // them, so that a set detaching again and again keeps no id of a task it let go.
        self.ready = Arc::default();
        drop(detached);
    }

    /// Waits for the next task to finish and returns its output; `None` when the set is
    /// empty. Cancel-safe: dropping the future loses no output.
    ///
    /// # Examples
    ///
    /// ```
    /// let rt = gort::Runtime::new().unwrap();
    /// rt.block_on(async {
    ///     let mut set = gort::task::JoinSet::new();
    ///     set.spawn(async { "done" });
    ///     assert_eq!(set.join_next().await.unwrap().unwrap(), "done");
    ///     assert!(set.join_next().await.is_none());
    /// });
    /// ```
    pub async fn join_next(&mut self) -> Option<Result<T, JoinError>> {
        poll_fn(|cx| self.poll_join_next(cx)).await
    }

    /// The output of a task that has finished, without waiting: `None` when no task in the
    /// set has finished (tokio's `try_join_next`).
    ///
    /// # Examples
    ///
    /// ```
    /// let rt = gort::Runtime::new().unwrap();
    /// rt.block_on(async {
    ///     let mut set = gort::task::JoinSet::new();
    ///     set.spawn(std::future::pending::<u8>());
    ///     assert!(set.try_join_next().is_none()); // still running
    ///     set.spawn(async { 7 });
    ///     let seven = loop {
    ///         if let Some(out) = set.try_join_next() {
    ///             break out.unwrap();
    ///         }
    ///         gort::time::sleep(std::time::Duration::from_millis(1)).await; // do other work
    ///     };
    ///     assert_eq!(seven, 7);
    ///     assert!(set.try_join_next().is_none());
    ///     assert_eq!(set.len(), 1);
    /// });
    /// ```
    pub fn try_join_next(&mut self) -> Option<Result<T, JoinError>> {
        while let Some(id) = self.ready.pop() {
            if let Some(res) = self.poll_entry(id) {
                return Some(res);
            }
        }
        None
    }

    /// Waits for every task in the set and returns their outputs, in the order the tasks
    /// finished, not the order they were spawned (tokio's `join_all`: `join_next` in a loop).
    ///
    /// # Panics
    ///
    /// If a task failed: a task's panic is resumed here with its own payload (the
    /// [`JoinError::into_panic`] of [`join_next`](JoinSet::join_next)'s error), and a
    /// cancelled task (aborted through its [`AbortHandle`]) panics with its `JoinError`'s
    /// message. The set is dropped then, which aborts the tasks still in it. To handle
    /// failures otherwise, call `join_next` in a loop.
    ///
    /// # Examples
    ///
    /// ```
    /// let rt = gort::Runtime::new().unwrap();
    /// rt.block_on(async {
    ///     let mut set = gort::task::JoinSet::new();
    ///     for i in 1..=3u64 {
    ///         set.spawn(async move {
    ///             gort::time::sleep(std::time::Duration::from_millis(30 * (4 - i))).await;
    ///             i
    ///         });
    ///     }
    ///     let mut outputs = set.join_all().await; // in finishing order: most likely 3, 2, 1
    ///     outputs.sort();
    ///     assert_eq!(outputs, [1, 2, 3]);
    /// });
    /// ```
    pub async fn join_all(mut self) -> Vec<T> {
        let mut outputs = Vec::with_capacity(self.len());
        while let Some(res) = self.join_next().await {
            match res {
                Ok(output) => outputs.push(output),
                Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
                Err(e) => panic!("gort: JoinSet::join_all: {e}"),
            }
        }
        outputs
    }

    /// Aborts every task in the set and waits until each has stopped, discarding their
    /// outputs and errors; the set is then empty (tokio's `shutdown`).
    ///
    /// # Examples
    ///
    /// ```
    /// let rt = gort::Runtime::new().unwrap();
    /// rt.block_on(async {
    ///     let mut set = gort::task::JoinSet::new();
    ///     for _ in 0..3 {
    ///         set.spawn(std::future::pending::<()>());
    ///     }
    ///     set.shutdown().await;
    ///     assert!(set.is_empty());
    /// });
    /// ```
    pub async fn shutdown(&mut self) {
        self.abort_all();
        while self.join_next().await.is_some() {}
    }

    /// The output of task `id` if it has finished (it then leaves the set); otherwise its
    /// join waker is registered, to list it as ready when it finishes. `None` also for an id
    /// whose task already left the set (listed twice).
    fn poll_entry(&mut self, id: Id) -> Option<Result<T, JoinError>> {
        let entry = self.tasks.get_mut(&id)?;
        let mut task_cx = Context::from_waker(&entry.waker);
        // Outside the budget: the id is off the ready list, and a `Pending` for budget here
        // would lose it (`poll_join_next` spends the unit, `try_join_next` none).
        let handle = Pin::new(&mut entry.handle);
        let polled = std::panic::catch_unwind(AssertUnwindSafe(|| {
            gort_coop::with_unconstrained(|| handle.poll(&mut task_cx))
        }));
        let res = match polled {
            Ok(Poll::Ready(res)) => res,
            Ok(Poll::Pending) => return None,
            // A handle whose output was taken before it was inserted: the entry, off the
            // ready list for good, leaves the set, or `join_next` would wait for it for ever.
            Err(panic) => {
                self.tasks.remove(&id);
                std::panic::resume_unwind(panic);
            }
        };
        self.tasks.remove(&id);
        Some(res)
    }

    /// The poll behind [`join_next`](JoinSet::join_next).
    fn poll_join_next(&mut self, cx: &mut Context<'_>) -> Poll<Option<Result<T, JoinError>>> {
        // A finished task's output costs a unit of the cooperative budget, as a
        // `JoinHandle`'s; the budget is checked before a ready id is taken off the list.
        gort_coop::poll_budgeted(cx, |cx| self.poll_join_next_unbudgeted(cx))
    }

    fn poll_join_next_unbudgeted(
        &mut self,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<T, JoinError>>> {
        loop {
            if self.tasks.is_empty() {
                return Poll::Ready(None);
            }
            let Some(id) = self.ready.pop_or_register(cx.waker()) else {
                return Poll::Pending;
            };
            if let Some(res) = self.poll_entry(id) {
                return Poll::Ready(Some(res));
            }
        }
    }
}

impl<T> Default for JoinSet<T> {
    fn default() -> JoinSet<T> {
        JoinSet::new()
    }
}

impl<T> Drop for JoinSet<T> {
    fn drop(&mut self) {
        self.abort_all();
    }
}

impl<T> fmt::Debug for JoinSet<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("JoinSet").field("len", &self.len()).finish()
    }
}
