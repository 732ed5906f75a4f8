//! gort's scheduler: green tasks on Go's G/M/P model (Go's `runtime/proc.go`).
//!
//! - **G** = a task ([`spawn`]): a future in one heap cell with an atomic state word.
//! - **P** = a processor: the right to run tasks, with a local run queue, a `runnext` slot
//!   and its own timer heap (`gort-timer`). There are [`Runtime::procs`] of them.
//! - **M** = a worker thread. An M runs tasks only while it holds a P; idle Ms park, and
//!   exactly one of them at a time blocks in the poller (a `mio::Poll`) until the earliest
//!   timer of all Ps.
//!
//! `design/ARCHITECTURE.md` walks through the whole scheduler; each module's docs say which
//! Go function it ports and who may touch what.

#![warn(missing_docs)]

mod arena;
mod block_on;
mod blocking;
mod builder;
mod context;
mod debug_state;
mod handle;
mod hosts;
mod idle;
mod join_set_spawn;
mod lead;
mod metrics;
mod netpoll;
mod p;
mod park;
mod paused;
mod peers;
mod poller;
mod procs;
mod runnext;
mod runq;
pub mod runtime;
mod shared;
mod slice;
mod sysmon;
pub mod task;
mod threads;
mod worker;

pub use metrics::ProcMetrics;
pub use netpoll::net_api;
pub use paused::clock_api;
pub use procs::default_procs;
pub use runtime::Handle;
pub use runtime::{Builder, Metrics, Runtime};
pub use shared::MAX_PROCS;
pub use task::JoinSet;
pub use task::{AbortHandle, JoinError, JoinHandle};

// The cooperative budget (gort-coop), which the `gort` facade re-exports as
// `gort::task::{unconstrained, consume_budget}`.
pub use gort_coop::{consume_budget, has_budget_remaining, unconstrained, Unconstrained};

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

const OUTSIDE: &str = "must be called from the context of a gort runtime \
     (inside Runtime::block_on, a task, or a blocking closure)";

/// Spawns a task on the current runtime.
///
/// The task starts running at once on some P (the current one when called from a task, in
/// its `runnext` slot as Go's `go` statement does); the returned [`JoinHandle`] yields its
/// output.
///
/// A task runs until it awaits something not ready: gort cannot preempt it, where Go
/// preempts a goroutine that runs past 10 ms. A task that computes for long without an
/// `.await` holds its P all that time, and on a one-P runtime nothing else runs meanwhile,
/// not even the tasks its timers or sockets wake (a 5 ms sleep beside a 300 ms loop on one P
/// takes 300 ms). Go code that relies on preemption (a CPU-bound loop in a goroutine) needs
/// a [`yield_now`] every millisecond or so in the loop, or the work moved off the Ps with
/// [`spawn_blocking`] or [`block_in_place`]. A loop over gort's channels, sockets or join
/// handles that are always ready does yield: each poll of a task has a cooperative budget of
/// 128 ready operations, as under Tokio, after which they return `Pending` and the task goes
/// to the back of its P's queue ([`unconstrained`], [`consume_budget`]); a loop over
/// `tokio::sync`'s channels (whose budget only Tokio's runtime sets) needs a [`yield_now`]
/// or a [`consume_budget`]. Blocking calls hold the P the same way: `tokio::sync`'s `blocking_recv`, `blocking_send`
/// and `blocking_lock` panic in a task only under Tokio's runtime, and in a gort task they
/// block its thread and P (on one P, for good when the other side is a task); call them in
/// [`spawn_blocking`].
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
///     let h = gort::spawn(async { "hello" });
///     assert_eq!(h.await.unwrap(), "hello");
/// });
/// ```
#[track_caller]
pub fn spawn<F>(future: F) -> JoinHandle<F::Output>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    // Borrow the context's runtime: the task clones its `Arc` once; a second clone here
    // would bounce the shared reference count between Ms on every spawn.
    let spawned = context::with_current(|s| s.map(|s| runtime::spawn_on(s, future)));
    match spawned {
        Some(handle) => handle,
        None => panic!("gort::spawn {OUTSIDE}"),
    }
}

/// Runs a blocking closure on the runtime's blocking pool (threads started on demand, by
/// default at most 512, each exiting after 10 s idle: `Builder::max_blocking_threads`,
/// `Builder::thread_keep_alive`), so that it does not hold up tasks.
///
/// Under a paused clock (`gort::time::pause`) the closure holds the clock while it runs user
/// code: a real-time wait there (`std::thread::sleep`, a blocking read) is the program's
/// own time, and the clock does not jump past it (Tokio's `spawn_blocking` does the same
/// since 1.24). A [`Handle::block_on`] of the same runtime in the closure waits on the
/// runtime instead: it holds the clock only while its future runs, as a top-level
/// `block_on` does, so a sleep there ends by the clock's jump.
///
/// # Panics
///
/// Outside a gort runtime.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// let rt = gort::Builder::new().start_paused(true).build().unwrap();
/// let waited = rt.block_on(async {
///     let start = gort::time::Instant::now();
///     // Sync code bridging back to async code: the hour passes by the clock's jump.
///     gort::spawn_blocking(move || {
///         gort::Handle::current().block_on(gort::time::sleep(Duration::from_secs(3600)));
///         start.elapsed()
///     })
///     .await
///     .unwrap()
/// });
/// assert_eq!(waited, Duration::from_secs(3600));
/// ```
#[track_caller]
pub fn spawn_blocking<F, R>(f: F) -> JoinHandle<R>
where
    F: FnOnce() -> R + Send + 'static,
    R: Send + 'static,
{
    let Some(shared) = context::current() else {
        panic!("gort::spawn_blocking {OUTSIDE}");
    };
    handle::spawn_blocking_on(&shared, f)
}

/// Runs `f`, which may block, on the current thread after handing this thread's P to another
/// M (Go's `entersyscall`/`handoffp`), so that the P's other tasks and its timers keep
/// running meanwhile. Afterwards the thread takes any idle P back (Go's `exitsyscall`) and
/// the calling task goes on; if `f` panics, the thread does the same before the panic goes
/// on unwinding the task.
///
/// `f` runs without a cooperative budget (as in Tokio): the budget of the task around it
/// does not bind the gort channels, sockets or join handles that `f` waits on.
///
/// Outside a worker thread (in `block_on`, a blocking closure) it simply runs `f`; in
/// `block_on`'s own future, `f` may `block_on` as well (a nested `block_on` panics
/// otherwise). So it
/// does on a worker thread outside a task's poll: in a waker that the runtime wakes between
/// tasks (a timer firing, a socket becoming ready), `f` blocks that thread and its P, and the
/// P's other tasks wait for it, as they do for any waker that blocks.
///
/// `f` may call [`Handle::block_on`] (Tokio's bridge from sync code back to async): the
/// thread runs no tasks while it holds no P. Under a paused clock (`gort::time::pause`) `f`
/// holds the clock as a running task does, but that `block_on` waits on the runtime: it
/// holds the clock only while its future runs, as a top-level one does, so a sleep in it
/// ends by the clock's jump (the same in a [`spawn_blocking`] closure).
///
/// # Examples
///
/// ```
/// let rt = gort::Runtime::new().unwrap();
/// let out = rt.block_on(rt.spawn(async {
///     // Sync code in a task, which needs an async result.
///     gort::block_in_place(|| {
///         gort::Handle::current().block_on(async {
///             gort::time::sleep(std::time::Duration::from_millis(1)).await;
///             gort::spawn(async { 6 * 7 }).await.unwrap()
///         })
///     })
/// }));
/// assert_eq!(out.unwrap(), 42);
/// ```
pub fn block_in_place<F: FnOnce() -> R, R>(f: F) -> R {
    // `f` is blocking code, which the cooperative budget of the task (or `block_on` poll)
    // around it must not bind: a budget spent there would make a gort channel or socket in
    // a foreign executor's `block_on` inside `f` return `Pending` for ever (Tokio disables
    // its budget here too; its `coop_disabled_in_block_in_place`, tests/tokio_task_more.rs).
    gort_coop::with_unconstrained(|| place(f))
}

/// `block_in_place` within an unconstrained budget.
fn place<F: FnOnce() -> R, R>(f: F) -> R {
    let p = context::current_p();
    // Inside `block_on`'s poll (no P, and `block_on` may not park here): `f` may block, and
    // so may a `block_on` it calls, as in Tokio. The thread holds its runtime's paused clock
    // while the poll runs, which such a `block_on` of the same runtime lends out as it does
    // a worker's in `block_in_place` (Tokio's `can_enter_current_thread_rt_from_within_
    // block_in_place` panicked before).
    if p.is_null() && !context::may_block_on() {
        if let Some(shared) = context::current().filter(context::polls_block_on_of) {
            let _holding = context::enter_holding_clock(&shared);
            return f();
        }
    }
    // Only a task's run may give the P away: the M loop re-reads its P after the run. User
    // code the M calls between tasks (a waker a timer batch wakes) runs `f` with the P held:
    // handing it off there let two Ms run one P's queue and leaked the P taken back
    // (tests/abuse_place.rs).
    if p.is_null() || !context::running_task() {
        return f();
    }
    let Some(shared) = context::current() else {
        return f();
    };
    // SAFETY: a non-null context P is a live P of the current runtime.
    let id = unsafe { (*p).id };
    let p = shared.p(id).expect("gort: current P missing").clone();
    context::set_current_p(std::ptr::null());
    // The task runs on without a P: it holds a paused clock like a running task (paused.rs).
    shared.clock.hold();
    shared.handoffp(p);
    let _back = BackFromPlace {
        _holding: context::enter_holding_clock(&shared),
        shared,
    };
    f()
}

/// The end of `block_in_place` (Go's `exitsyscall`), also when `f` panics: gives the clock
/// hold back (a leaked one would stop a paused clock for good) and takes an idle P if any.
struct BackFromPlace {
    shared: std::sync::Arc<shared::Shared>,
    _holding: context::HoldingGuard,
}

impl Drop for BackFromPlace {
    fn drop(&mut self) {
        self.shared.release_clock_hold();
        if let Some(p) = self.shared.idle.pidleget() {
            context::set_current_p(std::sync::Arc::as_ptr(&p));
            // The M loop re-reads the context after this poll and takes ownership of `p`
            // from `allp`; the Arc we hold here is just a reference.
        }
    }
}

/// Yields to the scheduler: the current task goes to the back of its P's queue and runs again
/// after the others (Go's `runtime.Gosched`). Gort does not preempt tasks (see [`spawn`]),
/// so a long computation in a task yields now and then itself.
///
/// # Examples
///
/// ```
/// let rt = gort::Runtime::new().unwrap();
/// rt.block_on(async { gort::yield_now().await });
/// ```
///
/// A CPU-bound loop that leaves room for the runtime's other tasks, as Go's preemption
/// would:
///
/// ```
/// use std::time::{Duration, Instant};
///
/// let rt = gort::Builder::new().procs(1).build().unwrap();
/// rt.block_on(async {
///     let ticks = gort::spawn(async {
///         for _ in 0..3 {
///             gort::time::sleep(Duration::from_millis(5)).await;
///         }
///     });
///     let work = gort::spawn(async {
///         let start = Instant::now();
///         let mut slice = Instant::now();
///         while start.elapsed() < Duration::from_millis(50) {
///             std::hint::black_box(0u64); // a slice of the computation
///             if slice.elapsed() > Duration::from_millis(1) {
///                 gort::yield_now().await; // the sleeps above get their turn
///                 slice = Instant::now();
///             }
///         }
///     });
///     ticks.await.unwrap(); // done long before the 50 ms loop, on the one P
///     work.await.unwrap();
/// });
/// ```
pub async fn yield_now() {
    YieldNow(false).await
}

struct YieldNow(bool);

impl Future for YieldNow {
    type Output = ();
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if self.0 {
            return Poll::Ready(());
        }
        self.0 = true;
        cx.waker().wake_by_ref();
        Poll::Pending
    }
}

/// Switches of the poller for its tests. Not a user API.
#[doc(hidden)]
#[cfg(target_os = "linux")]
pub mod poller_api {
    /// Makes the pollers of runtimes built from now on sleep on their timerfd alone (armed
    /// before every timed sleep), as on a kernel without `epoll_pwait2`; `false` restores
    /// the default. Applies to the whole process.
    pub fn timerfd_only(on: bool) {
        crate::poller::timerfd_only(on);
    }
}

/// What the timer layer (`gort-time`) needs from the scheduler. Not a user API.
#[doc(hidden)]
pub mod timer_api {
    use gort_timer::{add_cell, modify, modify_cell, modify_fire, CellTimer, Fire, Timer};
    pub use gort_timer::{Host, Nanos, Timers};

    /// Go's `modtimer` from a user's call: arms (or re-arms) `t` at `when` with `period` on
    /// the heap of the P this thread holds (on a thread without one, a live P's picked
    /// round-robin), installing `fire` if given ([`gort_timer::modify_fire`]). Returns whether
    /// `t` was pending, or `None` outside a gort runtime, or on a thread without a P of a
    /// runtime that is shut down.
    ///
    /// The path is Go's: the caller's P, then the timer's status machine; the runtime handle is
    /// looked up only when the timer moved earlier and the poller must be told
    /// (`CurrentHost`).
    #[inline]
    pub fn modtimer(
        t: &gort_loom::Arc<Timer>,
        when: Nanos,
        period: Nanos,
        fire: Option<&std::sync::Arc<dyn Fire>>,
    ) -> Option<bool> {
        let host = &crate::hosts::CurrentHost;
        let armed = on_current_home(|home| match fire {
            Some(fire) => modify_fire(t, when, period, fire, home, host),
            None => modify(t, when, period, home, host),
        });
        armed.or_else(|| modtimer_without_p(t, when, period, fire))
    }

    /// [`modtimer`] for a one-shot timer without a callback of its own whose firing wakes
    /// only the task polling the caller (a `Sleep` armed in its own poll, its waker set first). On an
    /// M that holds a P, when no M polls, the M owes the `wakep` that tells some M the new
    /// deadline, and pays it only if it runs another task before it polls itself: firing the
    /// timer sooner would run nobody, the task it wakes being the one running (a sleep in a
    /// loop no longer wakes a second M per iteration; design/ARCHITECTURE.md, "Spinning and
    /// waking").
    #[inline]
    pub fn modtimer_own(t: &gort_loom::Arc<Timer>, when: Nanos) -> Option<bool> {
        let host = &crate::hosts::CurrentOwnHost;
        on_current_home(|home| modify(t, when, 0, home, host))
            .or_else(|| modtimer_without_p(t, when, 0, None))
    }

    /// [`modtimer`] for a timer that lives with its callback in one allocation
    /// ([`gort_timer::modify_cell`]).
    #[inline]
    pub fn modtimer_cell(t: &CellTimer, when: Nanos, period: Nanos) -> Option<bool> {
        let host = &crate::hosts::CurrentHost;
        on_current_home(|home| modify_cell(t, when, period, home, host))
            .or_else(|| modtimer_cell_without_p(t, when, period))
    }

    /// [`modtimer_cell`] for a cell that `t` alone references, typically one just made
    /// (Go's `addtimer` from `time.AfterFunc`): [`gort_timer::add_cell`], no status CAS and
    /// no payload lock; a cell referenced elsewhere is re-armed as by [`modtimer_cell`].
    #[inline]
    pub fn addtimer_cell(t: &mut CellTimer, when: Nanos, period: Nanos) -> Option<bool> {
        let host = &crate::hosts::CurrentHost;
        let p = crate::context::current_p();
        if p.is_null() {
            return modtimer_cell_without_p(t, when, period);
        }
        // SAFETY: as in `on_current_home`.
        let home = unsafe { &(*p).timers };
        Some(add_cell(t, when, period, home, host))
    }

    /// Runs `arm` on the heap of the P this thread holds; `None` on a thread without one.
    #[inline]
    fn on_current_home(arm: impl FnOnce(&Timers) -> bool) -> Option<bool> {
        let p = crate::context::current_p();
        if p.is_null() {
            return None;
        }
        // SAFETY: a P set in this thread's context lives as long as its runtime, which the
        // context keeps alive while the P is set; arming a timer cannot change the context.
        Some(arm(unsafe { &(*p).timers }))
    }

    /// [`modtimer`] on a thread without a P.
    #[cold]
    fn modtimer_without_p(
        t: &gort_loom::Arc<Timer>,
        when: Nanos,
        period: Nanos,
        fire: Option<&std::sync::Arc<dyn Fire>>,
    ) -> Option<bool> {
        on_home_without_p(fire.is_some(), |home, host| match fire {
            Some(fire) => modify_fire(t, when, period, fire, home, host),
            None => modify(t, when, period, home, host),
        })
    }

    /// [`modtimer_cell`] on a thread without a P.
    #[cold]
    fn modtimer_cell_without_p(t: &CellTimer, when: Nanos, period: Nanos) -> Option<bool> {
        on_home_without_p(true, |home, host| modify_cell(t, when, period, home, host))
    }

    /// Arms with `arm` on a heap of this thread's runtime, from a thread without a P
    /// (`block_on`, the blocking pool, sysmon): a live P's, picked round-robin.
    ///
    /// `None` too for a timer without a callback of its own (a sleep's, a channel timer's,
    /// which some thread waits on) once the runtime is shut down (Tokio's "being shutdown"
    /// panic): no M runs its heaps any more, so the timer would never fire and its waiter (a
    /// blocking closure that shutdown waits for, a `block_on` through a `Handle` that outlived
    /// its runtime) would hang. Checked after arming: a timer armed before shutdown's drain
    /// is woken by it (`Timers::drain_waking`); one armed after it sees the flag set before
    /// the drain. A callback armed with the call (`after_func`, a socket deadline) is
    /// accepted: nothing waits on it, and the drain after the blocking pool drops it.
    #[inline]
    fn on_home_without_p(
        callback: bool,
        arm: impl FnOnce(&Timers, &dyn Host) -> bool,
    ) -> Option<bool> {
        let shared = crate::context::current()?;
        let home = shared.timer_home_without_p();
        let pending = arm(home, &crate::hosts::TimerHost(&shared));
        (callback || !shared.is_shutdown()).then_some(pending)
    }

    pub use crate::task::Callback;

    /// Queues `c` to run as its own unit of work on this runtime (Go's `go f()` from a
    /// timer): on this thread's P if it holds one, else through the global queue, waking an
    /// M. Costs no allocation. Outside a gort runtime nothing is queued and `c` comes back.
    pub fn run_callback<C: Callback>(
        c: gort_timer::CellRef<C>,
    ) -> Result<(), gort_timer::CellRef<C>> {
        crate::context::with_current(|s| match s {
            Some(s) => {
                let task = crate::task::Task::Callback(crate::task::CallbackTask::new(c));
                crate::task::Schedule::schedule(s, task);
                Ok(())
            }
            None => Err(c),
        })
    }

    /// Whether this thread is inside a gort runtime.
    pub fn in_runtime() -> bool {
        crate::context::with_current(|s| s.is_some())
    }

    /// Whether this thread's runtime is shut down or shutting down (a `block_on` through a
    /// `Handle` that outlived it, a blocking closure that its shutdown waits for): a callback
    /// timer armed there may never run. Asked after arming, as [`modtimer`] asks for the
    /// timers it refuses: a timer armed before the flag was set is in a heap that shutdown's
    /// drain hands to its `Fire::shutdown`; one armed after it sees `true` here.
    pub fn runtime_shut_down() -> bool {
        crate::context::with_current(|s| s.is_some_and(|s| s.is_shutdown()))
    }
}
