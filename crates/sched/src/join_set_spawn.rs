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

/// Spawns every future of the iterator on the current runtime into a new set (Tokio's
/// `FromIterator` for `JoinSet`).
///
/// # Panics
///
/// Outside a gort runtime, as [`JoinSet::spawn`].
///
/// # Examples
///
/// ```
/// let rt = gort::Runtime::new().unwrap();
/// rt.block_on(async {
///     let set: gort::task::JoinSet<u32> = (1..=3).map(|i| async move { i * 10 }).collect();
///     let mut out = set.join_all().await;
///     out.sort();
///     assert_eq!(out, [10, 20, 30]);
/// });
/// ```
impl<T, F> FromIterator<F> for JoinSet<T>
where
    F: Future<Output = T> + Send + 'static,
    T: Send + 'static,
{
    #[track_caller]
    fn from_iter<I: IntoIterator<Item = F>>(iter: I) -> Self {
        let mut set = JoinSet::new();
        set.extend(iter);
        set
    }
}

/// Spawns every future of the iterator on the current runtime into the set (Tokio's
/// `Extend` for `JoinSet`).
///
/// # Panics
///
/// Outside a gort runtime, as [`JoinSet::spawn`].
///
/// # Examples
///
/// ```
/// let rt = gort::Runtime::new().unwrap();
/// rt.block_on(async {
///     let mut set = gort::task::JoinSet::new();
///     set.spawn(async { 1 });
///     set.extend((2..=3).map(|i| async move { i }));
///     assert_eq!(set.len(), 3);
/// });
/// ```
impl<T, F> Extend<F> for JoinSet<T>
where
    F: Future<Output = T> + Send + 'static,
    T: Send + 'static,
{
    #[track_caller]
    fn extend<I: IntoIterator<Item = F>>(&mut self, iter: I) {
        for future in iter {
            self.spawn(future);
        }
    }
}
