//! # gort
//!
//! Green tasks on a Go-style G/M/P work-stealing scheduler, with Go's per-P timer heaps, Go's
//! `time` package (with Go 1.23's guarantees), and Go-like channels with `select!`.
//!
//! ```
//! use std::time::Duration;
//!
//! let rt = gort::Runtime::new().unwrap();
//! rt.block_on(async {
//!     let (tx, rx) = gort::chan::bounded(1);
//!     gort::spawn(async move {
//!         gort::time::sleep(Duration::from_millis(5)).await;
//!         tx.send("done").await.unwrap();
//!     });
//!     let timeout = gort::time::after(Duration::from_secs(5));
//!     gort::select! {
//!         v = rx.recv() => assert_eq!(v, Some("done")),
//!         _ = timeout.recv() => panic!("timed out"),
//!     }
//! });
//! ```
//!
//! The crates behind it: `gort-sched` (tasks, Ps, Ms, poller), `gort-timer` (per-P timer
//! heaps and their state machine), `gort-time` (this crate's [`time`] module), `gort-chan`
//! ([`chan`] and [`select!`]), `gort-net` ([`net`]: TCP, UDP and Unix sockets on the netpoller, and
//! [`signal`]),
//! `gort-context` ([`context`]), `gort-sync` ([`sync`]). `design/ARCHITECTURE.md`,
//! `design/TIMERS.md`, `design/NETPOLL.md` and `design/CHANNELS.md` explain them.

#![warn(missing_docs)]

pub use gort_sched::{
    block_in_place, spawn, spawn_blocking, yield_now, Builder, JoinError, JoinHandle, Metrics,
    Runtime, MAX_PROCS,
};

/// A handle to a runtime, to spawn on it and block on it from any thread (also at
/// [`runtime::Handle`]).
///
/// ```
/// let rt = gort::Runtime::new().unwrap();
/// let handle: gort::Handle = rt.handle().clone();
/// let n = std::thread::spawn(move || handle.block_on(handle.spawn(async { 40 + 2 })))
///     .join()
///     .unwrap();
/// assert_eq!(n.unwrap(), 42);
/// ```
pub use gort_sched::Handle;

/// A set of tasks awaited in the order they finish (also at [`task::JoinSet`]).
///
/// ```
/// let rt = gort::Runtime::new().unwrap();
/// rt.block_on(async {
///     let mut set = gort::JoinSet::new();
///     for i in 1..=3u32 {
///         set.spawn(async move { i });
///     }
///     let mut total = 0;
///     while let Some(res) = set.join_next().await {
///         total += res.unwrap();
///     }
///     assert_eq!(total, 6);
/// });
/// ```
pub use gort_sched::JoinSet;

/// The runtime and its handles: [`Runtime`], [`Builder`],
/// [`Handle`] (from any thread: `spawn`, `spawn_blocking`, `block_on`,
/// `enter`, `metrics`), [`Metrics`].
///
/// ```
/// use gort::runtime::{Builder, Handle};
///
/// let rt = Builder::new().procs(2).thread_name("app").build().unwrap();
/// assert!(Handle::try_current().is_err());
/// let _guard = rt.handle().enter();
/// let h = Handle::current().spawn(async { std::thread::current().name().map(String::from) });
/// assert_eq!(rt.block_on(h).unwrap().as_deref(), Some("app"));
/// ```
pub mod runtime {
    pub use gort_sched::runtime::{
        Builder, EnterGuard, Handle, Metrics, ProcMetrics, Runtime, TryCurrentError,
    };
}

/// Tasks: [`JoinSet`], [`AbortHandle`](task::AbortHandle), task
/// [`Id`](task::Id)s ([`id`](task::id()) inside a task, [`JoinHandle::id`] outside), the
/// spawn functions again, and the cooperative budget (Tokio's): each task poll may do 128
/// ready channel, socket or join operations before they return `Pending` and the task yields;
/// [`unconstrained`](task::unconstrained) lifts it, [`consume_budget`](task::consume_budget)
/// spends it by hand, [`has_budget_remaining`](task::has_budget_remaining) reads it.
///
/// ```
/// let rt = gort::Runtime::new().unwrap();
/// rt.block_on(async {
///     let mut set = gort::task::JoinSet::new();
///     let stuck: gort::task::AbortHandle = set.spawn(async {
///         std::future::pending::<()>().await;
///         None
///     });
///     let quick = set.spawn(async { Some(gort::task::id()) });
///     stuck.abort();
///     let mut cancelled = 0;
///     while let Some(res) = set.join_next().await {
///         match res {
///             Ok(id) => assert_eq!(id, Some(quick.id())),
///             Err(e) => {
///                 assert!(e.is_cancelled());
///                 cancelled += 1;
///             }
///         }
///     }
///     assert_eq!(cancelled, 1);
///     assert_eq!(gort::task::try_id(), None); // block_on's own future is not a task
/// });
/// ```
pub mod task {
    pub use gort_sched::task::{id, try_id, AbortHandle, Id, JoinError, JoinHandle, JoinSet};
    pub use gort_sched::{block_in_place, spawn, spawn_blocking, yield_now};
    pub use gort_sched::{consume_budget, has_budget_remaining, unconstrained, Unconstrained};
}

pub use gort_macros::{main, test};

/// Go-like MPMC channels: bounded (0 = rendezvous) and unbounded, with `select!`.
pub mod chan {
    pub use gort_chan::*;
}

/// Go's `time` package: sleeps, timers, tickers, `after`, `after_func`, timeouts, intervals;
/// and [`time::rate`], Go's `x/time/rate` token-bucket limiter.
pub mod time {
    pub use gort_time::*;
}

/// Go's `net` package: TCP, UDP and Unix sockets on the netpoller, with Go's deadlines on the per-P timers.
pub mod net {
    pub use gort_net::*;
}

pub use gort_chan::select;

/// Go's `os/signal`: [`notify`](signal::notify) delivers the signals it lists to a channel
/// (Go's `signal.Notify`; dropping the receiver is `signal.Stop`), and
/// [`ctrl_c`](signal::ctrl_c) waits for a Ctrl-C. Signals reach tasks through the
/// netpoller (a self-pipe per `notify`), never through a thread of their own.
///
/// A server that stops on `SIGTERM` or Ctrl-C, and reloads on `SIGHUP`:
///
/// ```
/// use gort::signal::{self, Signal};
///
/// gort::Runtime::new().unwrap().block_on(async {
///     let signals =
///         signal::notify(&[Signal::INTERRUPT, Signal::TERMINATE, Signal::HANGUP]).unwrap();
///     let (reload, stop) = (Signal::HANGUP.as_raw(), Signal::TERMINATE.as_raw());
///     // Here the signals come from the program itself.
///     // SAFETY: kill sends signals to this process, which handles them now.
///     unsafe { libc::kill(libc::getpid(), reload) };
///     let mut reloads = 0;
///     while let Some(sig) = signals.recv().await {
///         match sig {
///             Signal::HANGUP => {
///                 reloads += 1; // reload the configuration
///                 // SAFETY: as above.
///                 unsafe { libc::kill(libc::getpid(), stop) };
///             }
///             _ => break, // SIGINT or SIGTERM: shut down gracefully
///         }
///     }
///     assert_eq!(reloads, 1);
/// });
/// ```
pub mod signal {
    pub use gort_net::signal::*;
}

/// Go's `context`: cancellation and deadlines flowing from parents to children.
pub mod context {
    pub use gort_context::*;
}

/// Go's `sync` primitives for tasks: [`WaitGroup`](sync::WaitGroup),
/// [`ErrGroup`](sync::ErrGroup) (Go's `errgroup`: the first error cancels the group's context),
/// and [`singleflight::Group`](sync::singleflight::Group) (Go's `singleflight`: concurrent
/// calls for one key share one run of the work, which no caller's drop cancels).
pub mod sync {
    pub use gort_sync::*;
}

/// What the code `#[gort::test]` expands to uses; not an API.
#[doc(hidden)]
pub mod __macro_support {
    /// Wraps a test's output to ask whether it failed without consuming it: a `Result` that
    /// is `Err` did ([`FailedResult`]); any other output is judged by its `Termination`
    /// later, by the test harness ([`NotAResult`], reached through one more autoref).
    pub struct TestOutput<'a, T>(pub &'a T);

    /// `Err` is a failed test.
    pub trait FailedResult {
        /// Whether the test failed.
        fn gort_failed(&self) -> bool;
    }

    impl<T, E> FailedResult for TestOutput<'_, Result<T, E>> {
        fn gort_failed(&self) -> bool {
            self.0.is_err()
        }
    }

    /// Any other output: not known to have failed here.
    pub trait NotAResult {
        /// Whether the test failed.
        fn gort_failed(&self) -> bool;
    }

    impl<T> NotAResult for &TestOutput<'_, T> {
        fn gort_failed(&self) -> bool {
            false
        }
    }
}
