//! `JoinSet`'s spawn methods: the part of the set that needs a runtime (the rest, in
//! `task/join_set.rs`, is runtime-agnostic so that the loom models compile it).

use crate::runtime::Handle;
use crate::task::{AbortHandle, JoinSet};
use std::future::Future;

impl<T: Send + 'static> JoinSet<T> {
    /// Spawns `future` on the current runtime (as [`spawn`](crate::spawn)) and adds it to
    /// the set; the returned handle can abort it.
    ///
    /// # Panics
    ///
    /// Outside a gort runtime (enter one with [`Handle::enter`](Handle::enter)
    /// on a plain thread, or use [`spawn_on`](JoinSet::spawn_on)).
    ///
    /// # Examples
    ///
    /// ```
    /// let rt = gort::Runtime::new().unwrap();
    /// rt.block_on(async {
    ///     let mut set = gort::task::JoinSet::new();
    ///     let abort = set.spawn(std::future::pending::<()>());
    ///     abort.abort();
    ///     assert!(set.join_next().await.unwrap().unwrap_err().is_cancelled());
    /// });
    /// ```
    #[track_caller]
    pub fn spawn<F>(&mut self, future: F) -> AbortHandle
    where
        F: Future<Output = T> + Send + 'static,
    {
        self.insert(crate::spawn(future))
    }

    /// Spawns `future` on the runtime of `handle` and adds it to the set.
    ///
    /// # Examples
    ///
    /// ```
    /// let rt = gort::Runtime::new().unwrap();
    /// let mut set = gort::task::JoinSet::new();
    /// set.spawn_on(async { 7 }, rt.handle());
    /// assert_eq!(rt.block_on(set.join_next()).unwrap().unwrap(), 7);
    /// ```
    pub fn spawn_on<F>(&mut self, future: F, handle: &Handle) -> AbortHandle
    where
        F: Future<Output = T> + Send + 'static,
    {
        self.insert(handle.spawn(future))
    }

    /// Runs the blocking closure `f` on the current runtime's blocking pool (as
    /// [`spawn_blocking`](crate::spawn_blocking)) and adds it to the set.
    ///
    /// # Panics
    ///
    /// Outside a gort runtime.
    ///
    /// # Examples
    ///
    /// ```
    /// let rt = gort::Runtime::new().unwrap();
    /// rt.block_on(async {
    ///     let mut set = gort::task::JoinSet::new();
    ///     set.spawn_blocking(|| 5);
    ///     assert_eq!(set.join_next().await.unwrap().unwrap(), 5);
    /// });
    /// ```
    #[track_caller]
    pub fn spawn_blocking<F>(&mut self, f: F) -> AbortHandle
    where
        F: FnOnce() -> T + Send + 'static,
    {
        self.insert(crate::spawn_blocking(f))
    }
}
