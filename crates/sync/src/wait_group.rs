//! [`WaitGroup`]: Go's `sync.WaitGroup` for tasks.
//!
//! One lock guards the counter and the parked waiters. A waiter remembers the *generation*
//! it parked in; the counter reaching zero starts a new generation and wakes every waiter of
//! the old one, so a waiter returns even if another `add` raises the counter again before it
//! runs (as in Go, where `Wait` returns once the counter it watched reached zero). Wakers are
//! woken and dropped only after the lock is released, each even if another panics.

use std::fmt;
use std::future::Future;
use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};
use std::pin::Pin;
use std::task::{Context, Poll, Waker};

use gort_loom::{Arc, Mutex};

/// Waits for a collection of tasks to finish (Go's `sync.WaitGroup`).
///
/// [`add`](WaitGroup::add) raises the counter by the number of tasks to wait for, each task
/// calls [`done`](WaitGroup::done) when it finishes, and [`wait`](WaitGroup::wait) resolves
/// once the counter is zero. Clones share one counter.
///
/// As in Go, call `add` before starting the task it counts (not inside it), so that `wait`
/// cannot see a zero counter before the task has been counted.
///
/// # Panics
///
/// `add` and `done` panic with Go's message `sync: negative WaitGroup counter` if the counter
/// would go below zero (the counter is left unchanged).
///
/// # Examples
///
/// ```
/// let rt = gort::Runtime::new().unwrap();
/// let total = rt.block_on(async {
///     let wg = gort::sync::WaitGroup::new();
///     let (tx, rx) = gort::chan::unbounded();
///     for i in 1..=3 {
///         wg.add(1);
///         let (wg, tx) = (wg.clone(), tx.clone());
///         gort::spawn(async move {
///             tx.send(i).await.unwrap();
///             wg.done();
///         });
///     }
///     wg.wait().await;
///     let mut total = 0;
///     while let Ok(i) = rx.try_recv() {
///         total += i;
///     }
///     total
/// });
/// assert_eq!(total, 6);
/// ```
#[derive(Clone)]
pub struct WaitGroup {
    inner: Arc<Mutex<State>>,
}

#[derive(Default)]
struct State {
    count: isize,
    /// Bumped each time the counter reaches zero; parked waiters of older generations are done.
    generation: u64,
    /// Parked waiters of the current generation, by slot.
    waiters: Vec<Option<Waker>>,
    /// Empty slots of `waiters`.
    free: Vec<usize>,
}

const NEGATIVE: &str = "sync: negative WaitGroup counter";

impl WaitGroup {
    /// A wait group with a zero counter.
    ///
    /// # Examples
    ///
    /// ```
    /// let wg = gort::sync::WaitGroup::new();
    /// futures::executor::block_on(wg.wait()); // zero: returns at once
    /// ```
    pub fn new() -> WaitGroup {
        WaitGroup {
            inner: Arc::new(Mutex::new(State::default())),
        }
    }

    /// Adds `delta` (which may be negative) to the counter; when it reaches zero, every task
    /// waiting in [`wait`](WaitGroup::wait) is woken.
    ///
    /// # Panics
    ///
    /// If the counter would become negative (`sync: negative WaitGroup counter`) or overflow.
    ///
    /// # Examples
    ///
    /// ```
    /// let wg = gort::sync::WaitGroup::new();
    /// wg.add(2);
    /// wg.add(-1);
    /// wg.done();
    /// futures::executor::block_on(wg.wait());
    /// ```
    #[doc(alias = "Add")]
    #[track_caller]
    pub fn add(&self, delta: isize) {
        let woken = {
            let mut s = self.inner.lock();
            let new = s
                .count
                .checked_add(delta)
                .unwrap_or_else(|| panic!("sync: WaitGroup counter overflow"));
            if new < 0 {
                drop(s);
                panic!("{NEGATIVE}");
            }
            s.count = new;
            if new == 0 && delta != 0 {
                s.generation += 1;
                s.free.clear();
                std::mem::take(&mut s.waiters)
            } else {
                Vec::new()
            }
        };
        wake_all(woken);
    }

    /// Decrements the counter by one (`add(-1)`).
    ///
    /// # Panics
    ///
    /// If the counter is already zero (`sync: negative WaitGroup counter`).
    ///
    /// # Examples
    ///
    /// ```
    /// let wg = gort::sync::WaitGroup::new();
    /// wg.add(1);
    /// wg.done();
    /// let r = std::panic::catch_unwind(|| wg.done());
    /// assert!(r.is_err(), "a second done drives the counter negative");
    /// ```
    #[doc(alias = "Done")]
    #[track_caller]
    pub fn done(&self) {
        self.add(-1);
    }

    /// Resolves once the counter is zero (at once if it is zero now).
    ///
    /// Cancel-safe: dropping the future before it resolves leaves the group unchanged.
    /// Under gort's scheduler a wait that resolves spends a unit of the task's cooperative
    /// budget, as a channel receive does, so a loop over a ready `wait` still yields.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// let rt = gort::Runtime::new().unwrap();
    /// rt.block_on(async {
    ///     let wg = gort::sync::WaitGroup::new();
    ///     wg.add(1);
    ///     // Still one to go: the wait times out.
    ///     assert!(gort::time::timeout(Duration::from_millis(5), wg.wait()).await.is_err());
    ///     wg.done();
    ///     wg.wait().await;
    /// });
    /// ```
    #[doc(alias = "Wait")]
    pub fn wait(&self) -> impl Future<Output = ()> + Send {
        Wait {
            inner: self.inner.clone(),
            parked: None,
        }
    }

    /// The current counter (for diagnostics; it may change at once).
    ///
    /// # Examples
    ///
    /// ```
    /// let wg = gort::sync::WaitGroup::new();
    /// wg.add(3);
    /// assert_eq!(wg.count(), 3);
    /// ```
    pub fn count(&self) -> isize {
        self.inner.lock().count
    }
}

// A panic never leaves the state half-updated (the misuse panic fires before any change, a
// waker's once the change is complete), so a group seen after a caught panic is consistent.
impl std::panic::UnwindSafe for WaitGroup {}
impl std::panic::RefUnwindSafe for WaitGroup {}

impl Default for WaitGroup {
    /// [`WaitGroup::new`].
    fn default() -> WaitGroup {
        WaitGroup::new()
    }
}

impl fmt::Debug for WaitGroup {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WaitGroup")
            .field("count", &self.count())
            .finish()
    }
}

/// Wakes every waiter of a finished generation, even past a waker that panics (a waker is
/// user code: a foreign executor's): each is woken under its own `catch_unwind`, and the
/// first panic resumes once all are woken, so it reaches the caller of `add` without
/// stranding the waiters behind it.
fn wake_all(woken: Vec<Option<Waker>>) {
    let mut first_panic = None;
    for waker in woken.into_iter().flatten() {
        if let Err(panic) = catch_unwind(AssertUnwindSafe(|| waker.wake())) {
            match first_panic {
                None => first_panic = Some(panic),
                // Dropping a second payload could panic again.
                Some(_) => std::mem::forget(panic),
            }
        }
    }
    if let Some(panic) = first_panic {
        resume_unwind(panic);
    }
}

/// The future of [`WaitGroup::wait`].
struct Wait {
    inner: Arc<Mutex<State>>,
    /// `(generation, slot)` while parked.
    parked: Option<(u64, usize)>,
}

impl Future for Wait {
    type Output = ();

    /// Under gort's cooperative budget, as a channel receive: a wait that finds the counter
    /// at zero spends a unit, so a loop around a ready `wait` yields every 128 rounds (it
    /// held its only P for good; `tests/abuse_sync.rs`), and on a spent budget the wait
    /// yields before it looks (a parked one stays parked, its generation still counts).
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let this = self.get_mut();
        gort_coop::poll_budgeted(cx, |cx| this.poll_counter(cx))
    }
}

impl Wait {
    /// Ready if the counter is zero (or the generation this wait parked in ended), else
    /// parks with the task's waker.
    fn poll_counter(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        let this = self;
        let mut s = this.inner.lock();
        let done = match this.parked {
            Some((generation, _)) => generation != s.generation,
            None => s.count == 0,
        };
        if done {
            this.parked = None;
            return Poll::Ready(());
        }
        let old = match this.parked {
            Some((_, slot)) => s.waiters[slot].replace(cx.waker().clone()),
            None => {
                let waker = Some(cx.waker().clone());
                let slot = match s.free.pop() {
                    Some(slot) => {
                        s.waiters[slot] = waker;
                        slot
                    }
                    None => {
                        s.waiters.push(waker);
                        s.waiters.len() - 1
                    }
                };
                this.parked = Some((s.generation, slot));
                None
            }
        };
        drop(s);
        drop(old); // a waker's drop runs outside the lock
        Poll::Pending
    }
}

impl Drop for Wait {
    fn drop(&mut self) {
        let Some((generation, slot)) = self.parked else {
            return;
        };
        let mut s = self.inner.lock();
        if s.generation != generation {
            return; // woken: the slot belongs to the old generation, already cleared
        }
        let old = s.waiters[slot].take();
        s.free.push(slot);
        drop(s);
        drop(old);
    }
}
