//! `Handle`: a cloneable reference to a runtime, usable from any thread to spawn, run
//! blocking closures and block on futures, and to make a runtime current (`enter`).

use crate::blocking::BlockingTask;
use crate::context;
use crate::runtime::spawn_on;
use crate::shared::Shared;
use crate::task::{self, JoinHandle, Schedule};
use std::fmt;
use std::future::Future;
use std::marker::PhantomData;
use std::sync::Arc;

/// A handle to a runtime: [`Runtime::handle`](crate::Runtime::handle), or
/// [`Handle::current`] inside one. Cloning it is cheap; it does not keep the runtime's
/// threads alive: once the `Runtime` is dropped, tasks spawned through it are cancelled at
/// once, and timers armed in its `block_on` never fire (no thread is left to run them).
///
/// # Examples
///
/// ```
/// let rt = gort::Runtime::new().unwrap();
/// let handle = rt.handle().clone();
/// let n = std::thread::spawn(move || handle.block_on(handle.spawn(async { 2 + 2 })))
///     .join()
///     .unwrap();
/// assert_eq!(n.unwrap(), 4);
/// ```
#[derive(Clone)]
pub struct Handle {
    pub(crate) shared: Arc<Shared>,
}

/// A runtime's state stays consistent when a panic unwinds past a `Handle`: no user code
/// runs under its locks (Tokio's `Handle` is unwind-safe for the same reason).
impl std::panic::UnwindSafe for Handle {}
impl std::panic::RefUnwindSafe for Handle {}

const OUTSIDE: &str = "gort: Handle::current called outside a gort runtime (inside \
     Runtime::block_on, a task, a blocking closure, or under Handle::enter); keep a \
     Runtime::handle() clone to reach a runtime from a plain thread";

impl Handle {
    pub(crate) fn new(shared: Arc<Shared>) -> Handle {
        Handle { shared }
    }

    /// The handle of the runtime this thread is in.
    ///
    /// # Panics
    ///
    /// Outside a runtime (see [`try_current`](Handle::try_current)).
    ///
    /// # Examples
    ///
    /// ```
    /// let rt = gort::Runtime::new().unwrap();
    /// let procs = rt.block_on(async { gort::runtime::Handle::current().procs() });
    /// assert_eq!(procs, rt.procs());
    /// ```
    #[track_caller]
    pub fn current() -> Handle {
        match Handle::try_current() {
            Ok(h) => h,
            Err(_) => panic!("{OUTSIDE}"),
        }
    }

    /// The handle of the runtime this thread is in, or an error outside one.
    ///
    /// # Examples
    ///
    /// ```
    /// use gort::runtime::Handle;
    /// assert!(Handle::try_current().unwrap_err().is_missing_context());
    /// let rt = gort::Runtime::new().unwrap();
    /// let _guard = rt.handle().enter();
    /// assert!(Handle::try_current().is_ok());
    /// ```
    pub fn try_current() -> Result<Handle, TryCurrentError> {
        match context::try_current() {
            Ok(Some(shared)) => Ok(Handle { shared }),
            Ok(None) => Err(TryCurrentError { destroyed: false }),
            Err(_) => Err(TryCurrentError { destroyed: true }),
        }
    }

    /// Makes this runtime the current one of this thread until the guard is dropped, so
    /// that [`spawn`](crate::spawn), `JoinSet::spawn`, [`Handle::current`] and the timers
    /// work on a plain thread. Guards must be dropped in the reverse order of their making.
    ///
    /// Inside a task or a blocking closure, a guard of another runtime that is still in force
    /// when the task's poll or the closure returns (leaked with `mem::forget`, or guards
    /// dropped out of order) would leave the thread in that runtime: the thread puts itself
    /// back into its own and panics saying so (caught, counted in `Metrics::user_panics`);
    /// the task or closure itself is unaffected.
    ///
    /// # Examples
    ///
    /// ```
    /// let rt = gort::Runtime::new().unwrap();
    /// let h = {
    ///     let _guard = rt.handle().enter();
    ///     gort::spawn(async { "spawned from a plain thread" })
    /// };
    /// assert_eq!(rt.block_on(h).unwrap(), "spawned from a plain thread");
    /// ```
    pub fn enter(&self) -> EnterGuard<'_> {
        EnterGuard {
            _ctx: context::enter_keep_own(self.shared.clone()),
            _handle: PhantomData,
        }
    }

    /// Spawns a task on this runtime, from any thread (see [`spawn`](crate::spawn)).
    ///
    /// # Examples
    ///
    /// ```
    /// let rt = gort::Runtime::new().unwrap();
    /// let h = rt.handle().spawn(async { 1 });
    /// assert_eq!(rt.block_on(h).unwrap(), 1);
    /// ```
    pub fn spawn<F>(&self, future: F) -> JoinHandle<F::Output>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        spawn_on(&self.shared, future)
    }

    /// Runs a blocking closure on this runtime's blocking pool, from any thread (see
    /// [`spawn_blocking`](crate::spawn_blocking)).
    ///
    /// # Examples
    ///
    /// ```
    /// let rt = gort::Runtime::new().unwrap();
    /// let h = rt.handle().spawn_blocking(|| std::thread::current().name().map(String::from));
    /// assert_eq!(rt.block_on(h).unwrap().as_deref(), Some("gort-blocking"));
    /// ```
    pub fn spawn_blocking<F, R>(&self, f: F) -> JoinHandle<R>
    where
        F: FnOnce() -> R + Send + 'static,
        R: Send + 'static,
    {
        spawn_blocking_on(&self.shared, f)
    }

    /// Runs `future` to completion on the current thread, which parks between polls (as
    /// [`Runtime::block_on`](crate::Runtime::block_on)). Works on a plain thread and inside
    /// a blocking closure of any runtime.
    ///
    /// # Panics
    ///
    /// In a task or inside another `block_on` (in either, outside
    /// [`block_in_place`](crate::block_in_place)): parking there would stall the tasks the
    /// thread should run, or the outer future. Use `.await`
    /// there. Likewise in a `Drop` that a runtime's shutdown runs (a task's future, a timer's
    /// payload): the message then says so. Inside `block_in_place` the thread has handed its P to another M, so
    /// `block_on` works there, as Tokio's `Handle::current().block_on` does (example in
    /// [`block_in_place`](crate::block_in_place)).
    ///
    /// Under a paused clock (`gort::time::pause`) the thread holds the clock only while the
    /// future runs or is woken: parked, it waits on the runtime. In a blocking closure or
    /// `block_in_place` of the same runtime, it lends the hold those take for their user code
    /// out until it returns (or unwinds), so a sleep in the future ends by the clock's jump.
    ///
    /// # Examples
    ///
    /// ```
    /// let rt = gort::Runtime::new().unwrap();
    /// let handle = rt.handle().clone();
    /// let h = rt.spawn_blocking(move || handle.block_on(async { 6 * 7 }));
    /// assert_eq!(rt.block_on(h).unwrap(), 42);
    /// ```
    #[track_caller]
    pub fn block_on<F: Future>(&self, future: F) -> F::Output {
        if !context::may_block_on() {
            refuse_block_on();
        }
        // Read before `enter`, which clears it for the future's polls.
        let lend_thread_hold = context::holds_clock_here(&self.shared);
        let _ctx = context::enter(self.shared.clone());
        crate::block_on::run(&self.shared, future, lend_thread_hold)
    }

    /// The runtime's current number of Ps.
    ///
    /// # Examples
    ///
    /// ```
    /// let rt = gort::Builder::new().procs(3).build().unwrap();
    /// assert_eq!(rt.handle().procs(), 3);
    /// ```
    pub fn procs(&self) -> usize {
        self.shared.nprocs()
    }
}

impl fmt::Debug for Handle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Handle")
            .field("procs", &self.procs())
            .finish_non_exhaustive()
    }
}

/// Runs `f` on the blocking pool of `shared`.
pub(crate) fn spawn_blocking_on<F, R>(shared: &Arc<Shared>, f: F) -> JoinHandle<R>
where
    F: FnOnce() -> R + Send + 'static,
    R: Send + 'static,
{
    let raw = task::Cell::spawn(BlockingTask::new(f), shared.blocking.clone());
    shared.blocking.schedule(task::Task::Raw(raw.clone()));
    // SAFETY: the cell's future is a `BlockingTask<F>`, whose output is `R`.
    unsafe { JoinHandle::new(raw) }
}

/// Keeps a runtime current on this thread; made by [`Handle::enter`]. Not `Send`: it must
/// be dropped on the thread that made it. `Sync`, as Tokio's is (a future or struct holding
/// a `&EnterGuard` stays `Sync`).
///
/// # Examples
///
/// ```
/// let rt = gort::Runtime::new().unwrap();
/// let guard = rt.handle().enter();
/// assert!(gort::runtime::Handle::try_current().is_ok());
/// drop(guard);
/// assert!(gort::runtime::Handle::try_current().is_err());
/// ```
pub struct EnterGuard<'a> {
    _ctx: context::EnterGuard,
    _handle: PhantomData<&'a Handle>,
}

// SAFETY: a shared reference to the guard reaches nothing: it has no `&self` method that
// reads its fields (`Debug` prints none), and only its drop, on the thread that made it,
// restores the thread's previous runtime from them.
unsafe impl Sync for EnterGuard<'_> {}

impl fmt::Debug for EnterGuard<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EnterGuard").finish_non_exhaustive()
    }
}

/// Why [`Handle::try_current`] found no runtime.
///
/// # Examples
///
/// ```
/// let err = gort::runtime::Handle::try_current().unwrap_err();
/// assert!(err.is_missing_context());
/// assert!(err.to_string().contains("no gort runtime"));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TryCurrentError {
    destroyed: bool,
}

impl TryCurrentError {
    /// This thread is not in a runtime.
    ///
    /// # Examples
    ///
    /// ```
    /// let err = gort::runtime::Handle::try_current().unwrap_err();
    /// assert!(err.is_missing_context());
    /// ```
    pub fn is_missing_context(&self) -> bool {
        !self.destroyed
    }

    /// This thread's locals are being destroyed (the call came from a thread-local's `Drop`).
    ///
    /// # Examples
    ///
    /// ```
    /// let err = gort::runtime::Handle::try_current().unwrap_err();
    /// assert!(!err.is_thread_local_destroyed()); // a plain thread, alive
    /// ```
    pub fn is_thread_local_destroyed(&self) -> bool {
        self.destroyed
    }
}

impl fmt::Display for TryCurrentError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.destroyed {
            f.write_str("the gort runtime context of this thread is being destroyed")
        } else {
            f.write_str("no gort runtime is current on this thread")
        }
    }
}

impl std::error::Error for TryCurrentError {}

impl crate::Runtime {
    /// A handle to this runtime, to clone and hand to other threads.
    ///
    /// # Examples
    ///
    /// ```
    /// let rt = gort::Runtime::new().unwrap();
    /// let handle = rt.handle().clone();
    /// std::thread::spawn(move || {
    ///     let h = handle.spawn(async { "from a std thread" });
    ///     assert_eq!(handle.block_on(h).unwrap(), "from a std thread");
    /// })
    /// .join()
    /// .unwrap();
    /// ```
    pub fn handle(&self) -> &Handle {
        &self.handle
    }

    /// Enters this runtime's context on the current thread until the guard drops, so that
    /// [`spawn`](crate::spawn), `gort::time` and `gort::net` find it there (Tokio's
    /// `Runtime::enter`; the same as [`Handle::enter`] on [`handle`](Self::handle)).
    ///
    /// # Examples
    ///
    /// ```
    /// let rt = gort::Runtime::new().unwrap();
    /// let h = {
    ///     let _guard = rt.enter();
    ///     gort::spawn(async { "spawned outside block_on" })
    /// };
    /// assert_eq!(rt.block_on(h).unwrap(), "spawned outside block_on");
    /// ```
    pub fn enter(&self) -> EnterGuard<'_> {
        self.handle.enter()
    }

    /// Runs a blocking closure on this runtime's blocking pool (see
    /// [`spawn_blocking`](crate::spawn_blocking)).
    ///
    /// # Examples
    ///
    /// ```
    /// let rt = gort::Runtime::new().unwrap();
    /// let h = rt.spawn_blocking(|| 3);
    /// assert_eq!(rt.block_on(h).unwrap(), 3);
    /// ```
    pub fn spawn_blocking<F, R>(&self, f: F) -> JoinHandle<R>
    where
        F: FnOnce() -> R + Send + 'static,
        R: Send + 'static,
    {
        self.handle.spawn_blocking(f)
    }
}

/// As `Handle`'s: dropping a runtime while a panic unwinds shuts it down as usual, and no
/// user code runs under its locks (Tokio's `Runtime` is unwind-safe for the same reason).
impl std::panic::UnwindSafe for crate::Runtime {}
impl std::panic::RefUnwindSafe for crate::Runtime {}

/// The panic of a `block_on` where the thread may not park, naming the case: code a
/// shutdown runs (its thread is in the runtime but runs no task, so "a thread that runs
/// tasks" would mislead), or a task or another `block_on`.
#[cold]
#[track_caller]
fn refuse_block_on() -> ! {
    // Without a P: an M finishing a task's poll while the shutdown begins keeps the
    // task's message.
    let shutting_down = context::with_current(|s| s.is_some_and(|s| s.is_shutdown()));
    if shutting_down && context::current_p().is_null() {
        panic!(
            "gort: block_on called in code that a runtime's shutdown runs (the Drop of a task's \
             future or of a timer's payload): no thread is left to run the future; finish \
             that work before dropping the runtime"
        );
    }
    panic!(
        "gort: block_on called on a thread that runs tasks (or inside another block_on); \
         use .await there instead, or call it from a blocking closure or block_in_place"
    );
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicBool, Ordering::SeqCst};

    /// A P gives back its finished tasks' registry slots when it goes idle, not only when a
    /// batch of 64 fills: the cells (each holding a handle to the runtime) are freed then.
    #[test]
    fn an_idle_p_gives_back_its_finished_tasks_slots() {
        let rt = crate::Builder::new().procs(2).build().unwrap();
        rt.block_on(rt.spawn(async {
            for _ in 0..10 {
                drop(crate::spawn(async {}));
            }
        }))
        .unwrap();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while rt.handle.shared.registry.len() > 0 {
            assert!(
                std::time::Instant::now() < deadline,
                "{} finished tasks still in the registry with every P idle",
                rt.handle.shared.registry.len()
            );
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
    }

    /// Guards `enter` on a worker: a guard of the own runtime must leave the P alone when
    /// it drops. Here the task gives its P away inside the guard (`block_in_place`, while a
    /// spinning task keeps that P busy on another M, so none is idle to take back); the
    /// guard's drop must not hand this thread the P another M now runs.
    #[test]
    fn an_own_runtime_guard_does_not_restore_a_p_given_away_under_it() {
        let rt = crate::Builder::new().procs(1).build().unwrap();
        let release = Arc::new(AtomicBool::new(false));
        let spin = release.clone();
        let p_after_drop = rt.block_on(rt.spawn(async move {
            let spinner = crate::spawn(async move {
                while !spin.load(SeqCst) {
                    std::hint::spin_loop();
                }
            });
            let handle = Handle::current();
            let guard = handle.enter();
            crate::block_in_place(|| std::thread::sleep(std::time::Duration::from_millis(20)));
            let p_after_block = context::current_p();
            drop(guard);
            let p_after_drop = context::current_p();
            release.store(true, SeqCst);
            drop(spinner);
            (p_after_block.is_null(), p_after_drop == p_after_block)
        }));
        let (lost_p, unchanged) = p_after_drop.unwrap();
        assert!(
            lost_p,
            "the P was not given away: the test did not set up its case"
        );
        assert!(unchanged, "the guard's drop changed the thread's P");
    }
}
