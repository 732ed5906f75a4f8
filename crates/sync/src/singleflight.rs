//! Go's `golang.org/x/sync/singleflight` for tasks: concurrent calls for one key share one
//! run of the work.
//!
//! A server answering many requests for the same missing cache entry, or the same config,
//! should fetch it once, not once per request. [`Group::call`] gives the first caller of a
//! key a new run of its work; the callers that come while it runs wait for the same
//! result; once the run ends the key is free, and the next call starts a new run (nothing
//! is cached: a cache sits in front of the group, the group fills it).
//!
//! # Examples
//!
//! A cache whose misses are filled once for all the concurrent requests of the same key:
//!
//! ```
//! use std::collections::HashMap;
//! use std::sync::atomic::{AtomicUsize, Ordering};
//! use std::sync::{Arc, Mutex};
//! use gort::sync::singleflight::Group;
//!
//! #[derive(Clone, Default)]
//! struct Cache {
//!     entries: Arc<Mutex<HashMap<String, Arc<str>>>>,
//!     fills: Group<String, Result<Arc<str>, String>>,
//!     fetches: Arc<AtomicUsize>,
//! }
//!
//! impl Cache {
//!     async fn get(&self, key: &str) -> Result<Arc<str>, String> {
//!         if let Some(v) = self.entries.lock().unwrap().get(key) {
//!             return Ok(v.clone());
//!         }
//!         let this = self.clone();
//!         let owned = key.to_string();
//!         let fill = self.fills.call(key.to_string(), move || async move {
//!             // A run that ended between our miss and our call may have filled it.
//!             if let Some(v) = this.entries.lock().unwrap().get(&owned) {
//!                 return Ok(v.clone());
//!             }
//!             this.fetches.fetch_add(1, Ordering::SeqCst);
//!             gort::time::sleep(std::time::Duration::from_millis(20)).await; // the backend
//!             let value: Arc<str> = format!("value of {owned}").into();
//!             this.entries.lock().unwrap().insert(owned, value.clone());
//!             Ok(value)
//!         });
//!         match fill.await {
//!             Ok((result, _shared)) => result,
//!             Err(e) => Err(e.to_string()), // the fill panicked
//!         }
//!     }
//! }
//!
//! let rt = gort::Runtime::new().unwrap();
//! rt.block_on(async {
//!     let cache = Cache::default();
//!     let requests: Vec<_> = (0..10)
//!         .map(|_| {
//!             let cache = cache.clone();
//!             gort::spawn(async move { cache.get("config").await })
//!         })
//!         .collect();
//!     for r in requests {
//!         assert_eq!(&*r.await.unwrap().unwrap(), "value of config");
//!     }
//!     assert_eq!(cache.fetches.load(Ordering::SeqCst), 1); // one fetch for ten requests
//! });
//! ```
//!
//! # How it maps to Go
//!
//! | Go | gort |
//! |---|---|
//! | `singleflight.Group` (keys are strings) | [`Group<K, V>`]: any `K: Hash + Eq + Clone`, a `V: Clone` given to every caller |
//! | `g.Do(key, fn) (v, err, shared)` | `group.call(key, work).await` → `Ok((v, shared))`; an error of the work is part of `V` (a `Result<T, E>` with `E: Clone`) |
//! | `g.DoChan(key, fn) <-chan Result` | the same future: [`Group::call`] registers and starts the work when called, not when first polled, and the future is `'static`, so it can be kept, spawned, or raced in `select!` like Go's channel |
//! | `g.Forget(key)` | [`Group::forget`] |
//! | a panic in `fn` re-panics in the callers (and crashes the process when shared) | every caller gets [`CallError::Panicked`], and the group keeps working |
//!
//! `shared` is Go's: true when more than one call joined the run, i.e. the result was given
//! to more than one caller. A caller counts from the moment it joined, even if its future
//! was dropped before the end (Go's callers cannot leave; counting them keeps `shared` the
//! same for every caller of a run).
//!
//! # Cancellation: the work is its own task
//!
//! In Go, `fn` runs in the first caller's goroutine, and a goroutine cannot be canceled.
//! A Rust future can be dropped at any await, so the work must not live in the first
//! caller's future, or dropping that one caller (a `select!` timeout, a client gone) would
//! cancel the work under every other caller. The work runs as its own task
//! ([`gort::spawn`](gort_sched::spawn)): dropping any caller's future, or all of them,
//! never cancels it. A run whose callers all left still ends, frees its key and drops its
//! result; a call that joins it before that gets its result. The group's lock is held only
//! to look up, insert and remove keys: the work, and the `Drop` of keys, results and panic
//! payloads, run outside it.
//!
//! Cost of a call: a lock and a hash lookup; for the first caller of a key also one spawn
//! and one channel (closed when the run ends, which wakes every waiter at once), and one
//! allocation for the run's shared state. Each caller clones the result.

use std::any::Any;
use std::borrow::Borrow;
use std::collections::HashMap;
use std::fmt;
use std::future::{poll_fn, Future};
use std::hash::Hash;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::pin::pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, PoisonError};
use std::task::Poll;

use gort_chan::{Receiver, Sender};

/// Why a [`Group::call`] has no value to give.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum CallError {
    /// The work panicked (in its own task, which the panic did not escape): the panic's
    /// message, when it was a string. Every caller of the run gets it.
    Panicked(String),
    /// The work's task was dropped before it ended: its runtime shut down (or the call was
    /// made while it was shutting down).
    Shutdown,
}

impl fmt::Display for CallError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CallError::Panicked(message) => write!(f, "singleflight work panicked: {message}"),
            CallError::Shutdown => f.write_str("singleflight work stopped by a runtime shutdown"),
        }
    }
}

impl std::error::Error for CallError {}

/// A namespace of keys whose concurrent calls share one run of their work (Go's
/// `singleflight.Group`). See the [module docs](self) for the mapping to Go.
///
/// Cloning gives another handle to the same group (an `Arc` inside), to move into tasks.
///
/// # Examples
///
/// Shared by tasks through clones; a lone call shares nothing:
///
/// ```
/// use gort::sync::singleflight::Group;
///
/// let rt = gort::Runtime::new().unwrap();
/// rt.block_on(async {
///     let group: Group<u32, String> = Group::new();
///     let g = group.clone();
///     let task = gort::spawn(async move { g.call(1, || async { "one".to_string() }).await });
///     assert_eq!(task.await.unwrap(), Ok(("one".to_string(), false)));
///     assert_eq!(group.in_flight(), 0);
/// });
/// ```
#[doc(alias = "singleflight")]
pub struct Group<K, V> {
    inner: Arc<Inner<K, V>>,
}

struct Inner<K, V> {
    /// The runs in flight, by key. Locked only to look up, insert and remove: no user code
    /// but `K`'s `Hash` and `Eq`.
    flights: Mutex<HashMap<K, Arc<Flight<V>>>>,
}

/// One run of the work for a key, shared by its callers.
struct Flight<V> {
    /// The calls that joined the run, the first included. Written under the group's lock
    /// while the run is in the map only, so final once it is out of the map.
    callers: AtomicUsize,
    /// Cloned by each caller; its only sender is dropped once `outcome` is set, which wakes
    /// them all.
    done: Receiver<()>,
    outcome: OnceLock<Result<(V, bool), CallError>>,
}

/// Owned by the work's task: on drop (the work ended, or its task was dropped unfinished)
/// it frees the key, publishes the outcome and wakes the callers.
struct Pilot<K: Hash + Eq, V> {
    group: Arc<Inner<K, V>>,
    key: Option<K>,
    flight: Arc<Flight<V>>,
    done: Option<Sender<()>>,
    outcome: Option<Result<V, CallError>>,
}

impl<K: Hash + Eq, V> Drop for Pilot<K, V> {
    fn drop(&mut self) {
        let key = self
            .key
            .take()
            .expect("a pilot's key is taken only on drop");
        // Free the key first, unless `forget` already did (and a new run may hold it now).
        let removed = {
            let mut flights = lock(&self.group.flights);
            match flights.get(&key) {
                Some(f) if Arc::ptr_eq(f, &self.flight) => flights.remove_entry(&key),
                _ => None,
            }
        };
        // Out of the map, no caller can join any more: the count is final.
        let shared = self.flight.callers.load(Ordering::Relaxed) > 1;
        let outcome = self
            .outcome
            .take()
            .unwrap_or(Err(CallError::Shutdown))
            .map(|v| (v, shared));
        let set = self.flight.outcome.set(outcome);
        debug_assert!(set.is_ok(), "a run's outcome is set once, by its pilot");
        // Closing the channel wakes every caller; the close orders the `set` before their read.
        drop(self.done.take());
        // The keys go last, outside the lock: `K`'s Drop is user code, and if it panics the
        // callers already have their outcome (before, they woke to a closed channel with
        // no outcome set, and panicked).
        drop((removed, key));
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl<K, V> Group<K, V>
where
    K: Hash + Eq + Clone + Send + Sync + 'static,
    V: Clone + Send + Sync + 'static,
{
    /// An empty group.
    ///
    /// # Examples
    ///
    /// ```
    /// let group = gort::sync::singleflight::Group::<u64, String>::new();
    /// assert_eq!(group.in_flight(), 0);
    /// ```
    pub fn new() -> Group<K, V> {
        Group {
            inner: Arc::new(Inner {
                flights: Mutex::new(HashMap::new()),
            }),
        }
    }

    /// Runs `work` for `key`, or joins the run already in flight for it, and resolves to its
    /// value and whether the value went to more than one caller (Go's `g.Do`, and `g.DoChan`
    /// by keeping the future).
    ///
    /// Called inside a gort runtime, the registration happens now, not at the first poll: the
    /// first caller's `work` is spawned before `call` returns (a joining caller's `work` is
    /// dropped unused), so the returned future may be kept, spawned or raced like Go's
    /// `DoChan` channel, and dropping it cancels only this caller's wait, never the run (see
    /// the module docs). Called outside one (`rt.block_on(group.call(k, w))` builds the
    /// future before `block_on` enters the runtime), it registers at its first poll instead.
    /// The key is free again once the work ends: a later call starts a new run. A `work`
    /// that calls its own key joins its own run and waits for itself, as Go's `Do`
    /// deadlocks: nothing detects it, only that run's callers wait (a timeout around the
    /// inner call ends it).
    ///
    /// # Errors
    ///
    /// [`CallError::Panicked`] to every caller if the work panicked;
    /// [`CallError::Shutdown`] if the runtime shut down before it ended.
    ///
    /// # Panics
    ///
    /// If first polled outside a gort runtime when it must start a run (the key is left free):
    /// the work needs a runtime to run on.
    ///
    /// # Examples
    ///
    /// ```
    /// use gort::sync::singleflight::Group;
    ///
    /// let rt = gort::Runtime::new().unwrap();
    /// rt.block_on(async {
    ///     let group = Group::new();
    ///     let (go, wait_go) = gort::chan::bounded::<()>(0);
    ///     let first = group.call("k", move || async move {
    ///         wait_go.recv().await; // hold the run open until the second caller joined
    ///         42
    ///     });
    ///     let second = group.call("k", || async { unreachable!("joins the run in flight") });
    ///     drop(go);
    ///     assert_eq!(first.await, Ok((42, true)));
    ///     assert_eq!(second.await, Ok((42, true)));
    ///     assert_eq!(group.call("k", || async { 7 }).await, Ok((7, false))); // a new run
    /// });
    /// ```
    #[doc(alias = "Do")]
    #[doc(alias = "DoChan")]
    #[track_caller]
    pub fn call<F, Fut>(
        &self,
        key: K,
        work: F,
    ) -> impl Future<Output = Result<(V, bool), CallError>> + Send + 'static
    where
        F: FnOnce() -> Fut + Send + 'static,
        Fut: Future<Output = V> + Send + 'static,
    {
        // Outside a runtime nothing could be spawned yet: register at the first poll, which
        // `block_on` makes inside it.
        let (started, later) = if gort_sched::timer_api::in_runtime() {
            (Some(self.join_or_start(key, work)), None)
        } else {
            (None, Some((self.clone(), key, work)))
        };
        async move {
            let (flight, done) = match (started, later) {
                (Some(started), _) => started,
                (None, Some((group, key, work))) => group.join_or_start(key, work),
                (None, None) => unreachable!("a call either started or waits to"),
            };
            // `None` once the pilot dropped its sender: the outcome is set.
            let _ = done.recv().await;
            flight
                .outcome
                .get()
                .expect("a run's outcome is set before its channel closes")
                .clone()
        }
    }

    /// Joins the run in flight for `key`, or registers a new one and spawns its work.
    #[track_caller]
    fn join_or_start<F, Fut>(&self, key: K, work: F) -> (Arc<Flight<V>>, Receiver<()>)
    where
        F: FnOnce() -> Fut + Send + 'static,
        Fut: Future<Output = V> + Send + 'static,
    {
        let mut flights = lock(&self.inner.flights);
        if let Some(flight) = flights.get(&key) {
            flight.callers.fetch_add(1, Ordering::Relaxed);
            let joined = (flight.clone(), flight.done.clone());
            drop(flights);
            drop((key, work)); // unused, dropped outside the lock
            return joined;
        }
        let (tx, rx) = gort_chan::bounded(0);
        let flight = Arc::new(Flight {
            callers: AtomicUsize::new(1),
            done: rx.clone(),
            outcome: OnceLock::new(),
        });
        flights.insert(key.clone(), flight.clone());
        drop(flights);
        let pilot = Pilot {
            group: self.inner.clone(),
            key: Some(key),
            flight: flight.clone(),
            done: Some(tx),
            outcome: None,
        };
        // Spawned outside the lock. If the spawn drops the future unrun (a runtime shutting
        // down, or none: then it panics), the pilot's drop frees the key with `Shutdown`.
        drop(gort_sched::spawn(fly(pilot, work)));
        (flight, rx)
    }

    /// Frees `key` now (Go's `g.Forget`): the next call for it starts a new run, while the
    /// run in flight, if any, still ends and gives its result to the callers that joined it.
    ///
    /// # Examples
    ///
    /// ```
    /// use gort::sync::singleflight::Group;
    ///
    /// let rt = gort::Runtime::new().unwrap();
    /// rt.block_on(async {
    ///     let group = Group::new();
    ///     let (go, wait_go) = gort::chan::bounded::<()>(0);
    ///     let stale = group.call("config", move || async move {
    ///         wait_go.recv().await;
    ///         "v1"
    ///     });
    ///     group.forget("config"); // e.g. the config changed while v1 was being read
    ///     let fresh = group.call("config", || async { "v2" }).await;
    ///     assert_eq!(fresh, Ok(("v2", false)));
    ///     drop(go);
    ///     assert_eq!(stale.await, Ok(("v1", false)));
    /// });
    /// ```
    #[doc(alias = "Forget")]
    pub fn forget<Q>(&self, key: &Q)
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        let removed = lock(&self.inner.flights).remove_entry(key);
        drop(removed); // outside the lock
    }

    /// The number of keys with a run in flight (forgotten runs not counted).
    ///
    /// # Examples
    ///
    /// ```
    /// let group = gort::sync::singleflight::Group::<&str, u8>::new();
    /// assert_eq!(group.in_flight(), 0);
    /// ```
    pub fn in_flight(&self) -> usize {
        lock(&self.inner.flights).len()
    }
}

/// The work's task: runs `work` with panics caught, then drops the pilot, which publishes.
async fn fly<K, V, F, Fut>(mut pilot: Pilot<K, V>, work: F)
where
    K: Hash + Eq,
    F: FnOnce() -> Fut,
    Fut: Future<Output = V>,
{
    let outcome = match catch_unwind(AssertUnwindSafe(work)) {
        Ok(fut) => {
            let mut fut = pin!(fut);
            // A panicked future is never polled again: the closure returns Ready at once.
            poll_fn(
                |cx| match catch_unwind(AssertUnwindSafe(|| fut.as_mut().poll(cx))) {
                    Ok(Poll::Pending) => Poll::Pending,
                    Ok(Poll::Ready(v)) => Poll::Ready(Ok(v)),
                    Err(payload) => Poll::Ready(Err(payload)),
                },
            )
            .await
        }
        Err(payload) => Err(payload),
    };
    pilot.outcome = Some(outcome.map_err(|payload| CallError::Panicked(message(payload))));
    drop(pilot);
}

/// The message of a panic payload, which is dropped here (outside any lock). A payload
/// whose own `Drop` panics is forgotten instead: that second panic would end the work's
/// task with no outcome, and its callers would get `Shutdown` for a panic.
fn message(payload: Box<dyn Any + Send>) -> String {
    let message = if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "Box<dyn Any>".to_string()
    };
    if let Err(second) = catch_unwind(AssertUnwindSafe(|| drop(payload))) {
        std::mem::forget(second);
    }
    message
}

impl<K, V> Clone for Group<K, V> {
    fn clone(&self) -> Group<K, V> {
        Group {
            inner: self.inner.clone(),
        }
    }
}

impl<K, V> Default for Group<K, V>
where
    K: Hash + Eq + Clone + Send + Sync + 'static,
    V: Clone + Send + Sync + 'static,
{
    fn default() -> Group<K, V> {
        Group::new()
    }
}

impl<K, V> fmt::Debug for Group<K, V> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Group")
            .field("in_flight", &lock(&self.inner.flights).len())
            .finish()
    }
}
