//! `Runtime` and `Builder`: creating, driving, resizing and tearing down a scheduler.

use crate::blocking::Blocking;
use crate::context;
pub use crate::handle::{EnterGuard, Handle, TryCurrentError};
use crate::hosts::DeferredHost;
pub use crate::metrics::ProcMetrics;
use crate::p::PStatus;
use crate::runq::Lane;
use crate::shared::{Shared, MAX_PROCS};
use crate::sysmon::Sysmon;
use crate::task::{Cell, JoinHandle, RawTask, Task};
use crate::threads::{join_until, ThreadConfig};
use std::cell::RefCell;
use std::future::Future;
use std::io;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::Ordering::*;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How often shutdown breaks the poller again while it waits for the Ms to exit.
const SHUTDOWN_REBREAK: Duration = Duration::from_millis(10);

/// Configures a [`Runtime`].
///
/// # Examples
///
/// ```
/// let rt = gort::Builder::new().procs(2).build().unwrap();
/// assert_eq!(rt.procs(), 2);
/// ```
#[derive(Debug, Default, Clone)]
pub struct Builder {
    procs: Option<usize>,
    drop_timeout: Option<Duration>,
    /// Thread options (their setters are in `builder.rs`).
    pub(crate) threads: ThreadConfig,
    /// Start with a paused clock ([`Builder::start_paused`], in `builder.rs`).
    pub(crate) start_paused: bool,
}

/// The one rule for a number of Ps, shared by [`Builder::procs`] and [`Runtime::set_procs`]:
/// `1..=MAX_PROCS`, or a panic naming the caller and the valid range.
#[track_caller]
fn check_procs(n: usize, caller: &str) {
    assert!(
        (1..=MAX_PROCS).contains(&n),
        "gort: {caller}({n}): the number of Ps must be in 1..={MAX_PROCS} (MAX_PROCS)"
    );
}

impl Builder {
    /// A builder with the defaults. The number of Ps, unless [`procs`](Builder::procs) sets
    /// it, is read when the runtime is built: the `GORT_MAXPROCS` environment variable (Go's
    /// `GOMAXPROCS`) if it is set and not empty, else as many Ps as CPUs this process may use
    /// (honouring a cgroup CPU quota, as Go 1.25 does). A `GORT_MAXPROCS` that is not an
    /// integer in `1..=MAX_PROCS` makes [`build`](Builder::build) fail with
    /// `io::ErrorKind::InvalidInput` (where Go ignores it), so that a typo is not a silent
    /// run on every CPU.
    ///
    /// # Examples
    ///
    /// ```
    /// // GORT_MAXPROCS=2 ./server runs this on 2 Ps; without it, one P per CPU.
    /// let rt = gort::Builder::new().build().unwrap();
    /// match std::env::var("GORT_MAXPROCS") {
    ///     Ok(n) if !n.trim().is_empty() => assert_eq!(rt.procs(), n.trim().parse().unwrap()),
    ///     _ => assert!(rt.procs() >= 1),
    /// }
    /// ```
    pub fn new() -> Builder {
        Builder::default()
    }

    /// Sets the number of Ps (Go's `GOMAXPROCS`): how many tasks run in parallel. It wins
    /// over the `GORT_MAXPROCS` environment variable, which the runtime then does not read
    /// (as Go's `runtime.GOMAXPROCS(n)` wins over `GOMAXPROCS`).
    ///
    /// # Panics
    ///
    /// If `n` is 0 or above [`MAX_PROCS`] (the same rule as [`Runtime::set_procs`]).
    #[track_caller]
    pub fn procs(&mut self, n: usize) -> &mut Builder {
        check_procs(n, "Builder::procs");
        self.procs = Some(n);
        self
    }

    /// Bounds how long dropping the runtime waits for threads still busy: a task poll that
    /// does not return (a task in `block_in_place`, say) or a running blocking closure. After
    /// `timeout` the drop goes on as [`Runtime::shutdown_timeout`] does and abandons those
    /// threads. Without it (the default) dropping waits as long as they run.
    /// `#[gort::main]` sets one second, so that a program ends when its `main` returns, as
    /// a Go program does, whatever its threads are blocked in.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// let rt = gort::Builder::new()
    ///     .drop_timeout(Duration::from_millis(100))
    ///     .build()
    ///     .unwrap();
    /// rt.block_on(async {
    ///     // Blocks for ever: the drop below abandons the thread after 100 ms.
    ///     gort::spawn_blocking(|| loop {
    ///         std::thread::park();
    ///     });
    /// });
    /// drop(rt);
    /// ```
    pub fn drop_timeout(&mut self, timeout: Duration) -> &mut Builder {
        self.drop_timeout = Some(timeout);
        self
    }

    /// Creates the runtime. Worker threads start on demand, when there is work.
    ///
    /// # Errors
    ///
    /// If the poller cannot be created, or, when [`procs`](Builder::procs) was not set, if
    /// `GORT_MAXPROCS` is set to something other than an integer in `1..=MAX_PROCS` or
    /// empty (`io::ErrorKind::InvalidInput`, naming the variable and its value).
    pub fn build(&self) -> io::Result<Runtime> {
        let procs = match self.procs {
            Some(n) => n,
            None => crate::procs::procs_from_env_or_default()?,
        };
        let blocking = Blocking::new(self.threads.clone());
        let shared = Shared::new(procs.min(MAX_PROCS), blocking.clone(), self.threads.clone())?;
        blocking.set_runtime(&shared);
        crate::debug_state::note_built(&shared);
        if self.start_paused {
            shared.clock.pause();
        }
        let sysmon = Sysmon::start(shared.clone());
        Ok(Runtime {
            handle: Handle::new(shared.clone()),
            shared,
            sysmon: Some(sysmon),
            resize: parking_lot::Mutex::new(()),
            drop_timeout: self.drop_timeout,
        })
    }
}

/// A gort runtime: Ps, worker threads (Ms), the poller, the per-P timers, the blocking pool.
///
/// Dropping it (or [`shutdown_timeout`](Runtime::shutdown_timeout)) stops every thread and
/// drops every task and its future. Dropped on one of its own threads (the last
/// `Arc<Runtime>` dropped in one of its tasks, say), it cannot wait for that thread: the
/// shutdown then runs on a thread of its own, and the drop returns at once.
///
/// # Examples
///
/// ```
/// let rt = gort::Runtime::new().unwrap();
/// let h = rt.spawn(async { 1 + 1 });
/// assert_eq!(rt.block_on(h).unwrap(), 2);
/// ```
pub struct Runtime {
    shared: Arc<Shared>,
    /// The same runtime, for `Runtime::handle` (in `handle.rs`).
    pub(crate) handle: Handle,
    sysmon: Option<(Arc<Sysmon>, std::thread::JoinHandle<()>)>,
    resize: parking_lot::Mutex<()>,
    /// [`Builder::drop_timeout`].
    drop_timeout: Option<Duration>,
}

impl std::fmt::Debug for Runtime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Runtime")
            .field("procs", &self.procs())
            .finish_non_exhaustive()
    }
}

/// Counters describing a runtime, for monitoring and for the stress suite's invariants.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Metrics {
    /// Current number of Ps.
    pub procs: usize,
    /// Tasks ever spawned (not counting `spawn_blocking`).
    pub tasks_spawned: u64,
    /// Tasks spawned and not yet completed.
    pub tasks_alive: u64,
    /// Task polls (and blocking closures, and `after_func` callbacks) that panicked.
    pub task_panics: u64,
    /// Panics caught in user code the runtime ran outside a task poll: wakers it woke (a
    /// timer's, a `JoinHandle`'s) and the `Drop` of futures, timer payloads and callbacks it
    /// dropped. Each is caught where it happens; the thread that ran it goes on. Payloads
    /// dropped as one batch (a heap drained at shutdown, the dead timers one heap operation
    /// let go of) are each dropped even past a panic, and the batch counts once however many
    /// of them panicked.
    pub user_panics: u64,
    /// Armed timers in all heaps.
    pub timers_pending: u64,
    /// Stopped timers still in a heap, waiting for lazy removal.
    pub timers_deleted: u64,
    /// Timer callbacks run.
    pub timers_fired: u64,
    /// Successful stops.
    pub timers_stopped: u64,
    /// Re-arms (reset/modify).
    pub timers_modified: u64,
    /// Timers moved between Ps by `set_procs`.
    pub timers_moved: u64,
    /// Timer callbacks run, by lateness (the time from the timer's deadline to the run):
    /// bucket 0 is under 1 µs, bucket `b` is `[2^(b-1), 2^b)` µs, the last (15) is 16.4 ms
    /// and more. The sum over the Ps' [`ProcMetrics::timer_lateness`].
    pub timer_lateness: [u64; gort_timer::LATENESS_BUCKETS],
    /// Tasks stolen from one P's queue by another P's M (the sum of
    /// [`ProcMetrics::tasks_stolen`]).
    pub tasks_stolen: u64,
    /// Returns of the poller from a blocking poll (the wake-ups of the M that sleeps in it).
    pub poller_wakeups: u64,
    /// Poller wake-ups that reached the timer deadline the poller slept to.
    pub poller_wakeups_timer: u64,
    /// Poller wake-ups with socket events (`gort::net`).
    pub poller_wakeups_io: u64,
    /// Poller wake-ups by a break: new work, or a timer armed earlier than the poller's
    /// deadline. One wake-up may have several causes, or none (a wake-up before a sparse
    /// deadline that the poller did not spin away, or a signal), so the three causes need not
    /// add up to `poller_wakeups`.
    pub poller_wakeups_break: u64,
    /// The monitor thread's looks (its wake-ups): every 0.5-10 ms while some P runs, none
    /// while every P stays idle (it parks then, as Go's sysmon does).
    pub sysmon_wakeups: u64,
    /// Parked Ms woken and handed a P to run work (Go's `startm` of an idle M), each a futex
    /// wake-up and a context switch. An idle server pays none per request: the M that polls
    /// runs what its poll readied (design/NETPOLL.md, "How readiness reaches tasks").
    pub ms_woken: u64,
}

impl Runtime {
    /// A runtime with the default configuration (see [`Builder::new`]): `GORT_MAXPROCS` Ps
    /// if that environment variable is set, else one per CPU this process may use.
    ///
    /// # Errors
    ///
    /// As [`Builder::build`]'s: a bad `GORT_MAXPROCS` is `io::ErrorKind::InvalidInput`.
    pub fn new() -> io::Result<Runtime> {
        Builder::new().build()
    }

    /// Runs `future` to completion on the current thread, which parks between polls; tasks it
    /// spawns run on the runtime's Ms. A panic in `future` reaches the caller.
    ///
    /// # Panics
    ///
    /// When called from a task's poll or inside another `block_on`: blocking there would
    /// stall the scheduler. Use `.await` instead. A blocking closure may call it, and so may
    /// [`block_in_place`](crate::block_in_place)'s closure (see [`Handle::block_on`]).
    ///
    /// # Examples
    ///
    /// ```
    /// let rt = gort::Runtime::new().unwrap();
    /// assert_eq!(rt.block_on(async { gort::spawn(async { 42 }).await.unwrap() }), 42);
    /// ```
    #[track_caller]
    pub fn block_on<F: Future>(&self, future: F) -> F::Output {
        self.handle.block_on(future)
    }

    /// Spawns a task on this runtime (from any thread).
    pub fn spawn<F>(&self, future: F) -> JoinHandle<F::Output>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        spawn_on(&self.shared, future)
    }

    /// The current number of Ps.
    pub fn procs(&self) -> usize {
        self.shared.nprocs()
    }

    /// Changes the number of Ps while running (Go's `GOMAXPROCS(n)` / `procresize`). Removed
    /// Ps retire at their next scheduling point: their queued tasks go to the global queue
    /// and their timers move to the remaining Ps (Go's `moveTimers`).
    ///
    /// # Panics
    ///
    /// If `n` is 0 or above [`MAX_PROCS`], as [`Builder::procs`] does (Go's `GOMAXPROCS(0)`
    /// only queries; here [`procs`](Runtime::procs) does that, and a silent clamp would hide
    /// a computed 0).
    #[track_caller]
    pub fn set_procs(&self, n: usize) {
        check_procs(n, "Runtime::set_procs");
        let shared = &self.shared;
        let _serial = self.resize.lock();
        shared.idle.locked(|l| {
            shared.nprocs.store(n, SeqCst);
            for id in 0..n {
                let p = shared.make_p(id);
                if p.status() == PStatus::Dead {
                    l.pidleput(p);
                }
            }
        });
        let host = DeferredHost::default();
        // Payloads the moves let go of: dropped after the scheduler lock (they are user code,
        // and may wake a task, which takes that lock).
        let mut released = Vec::new();
        shared.idle.retire_idle(n, |p| {
            // SAFETY: `retire_idle` runs this under the scheduler lock on an idle P, which no
            // M holds.
            unsafe { p.drain_local(|t| shared.global.push(t, Lane::Ready)) };
            let dst = shared.p(p.id % n).expect("gort: live P missing");
            released.push(p.timers.move_to(&dst.timers, &host));
            p.set_status(PStatus::Dead);
        });
        drop(released);
        host.flush(shared);
        shared.wakep();
    }

    /// A snapshot of the runtime's counters. Cheap to leave on: each counter is written by
    /// one thread on a line it writes anyway (a P's holder, the heap lock's holder, the
    /// poller's M); this call reads them.
    ///
    /// # Examples
    ///
    /// ```
    /// let rt = gort::Runtime::new().unwrap();
    /// rt.block_on(gort::time::sleep(std::time::Duration::from_millis(2)));
    /// let m = rt.metrics();
    /// assert!(m.timers_fired >= 1);
    /// assert_eq!(m.timer_lateness.iter().sum::<u64>(), m.timers_fired);
    /// assert!(m.poller_wakeups >= m.poller_wakeups_timer);
    /// ```
    pub fn metrics(&self) -> Metrics {
        self.handle.metrics()
    }

    /// Shuts down, waiting at most `timeout` for worker threads busy in a task poll and for
    /// running blocking closures; threads still busy after that are left to finish on their
    /// own. Every task's future that can be reached is dropped.
    pub fn shutdown_timeout(mut self, timeout: Duration) {
        self.shutdown(Instant::now().checked_add(timeout));
    }

    fn shutdown(&mut self, deadline: Option<Instant>) {
        let Some((sysmon, sysmon_thread)) = self.sysmon.take() else {
            return;
        };
        let shared = &self.shared;
        wake_every_m(shared);
        sysmon.stop();
        join_until(sysmon_thread, deadline);
        let all_exited = wait_for_ms(shared, deadline);
        drop_every_task_and_timer(shared, all_exited);
        // Before the wait for the blocking pool: a closure blocked on a socket must fail.
        shared.shut_down_sources();
        // Step 4, the blocking pool; then step 3 again, for what its closures spawned or armed
        // after the first pass (their timers' payloads would otherwise live as long as the
        // heaps, for ever if a payload holds a task of this runtime).
        shared.blocking.shutdown(deadline);
        drop_every_task_and_timer(shared, all_exited);
    }
}

/// Shutdown step 1: refuse new work and wake every M: parked ones through their slots, the
/// poller through a break.
fn wake_every_m(shared: &Shared) {
    shared.shutdown.store(true, SeqCst);
    for m in shared.idle.take_all_ms() {
        m.shutdown();
    }
    shared.poller.break_poll();
}

/// Shutdown step 2: wait for the Ms to leave their loops (each finishes the poll it is in),
/// until `deadline`; returns whether they all did. Breaks the poller again now and then: the
/// first break wakes whichever M polls at that instant, and the poller claim re-checks for
/// shutdown before it blocks, but a repeat costs nothing and does not lean on that ordering
/// argument alone.
fn wait_for_ms(shared: &Arc<Shared>, deadline: Option<Instant>) -> bool {
    let all_exited = {
        let mut live = shared.live_ms.lock();
        while *live > 0 {
            let rebreak = Instant::now() + SHUTDOWN_REBREAK;
            let until = deadline.map_or(rebreak, |d| d.min(rebreak));
            if shared.ms_exited.wait_until(&mut live, until).timed_out() {
                if deadline.is_some_and(|d| Instant::now() >= d) {
                    break;
                }
                shared.poller.break_poll();
                // An M still busy may wait on what an idle task holds (a task in
                // `block_in_place` on a channel whose sender a sleeping task owns): drop
                // those now, as Tokio's shutdown does first, not after the wait.
                parking_lot::MutexGuard::unlocked(&mut live, || drop_idle_tasks(shared));
            }
        }
        *live == 0
    };
    // An M uncounts itself before it drops its references to the runtime (which keep the
    // poller's descriptors open) and runs its stop hook: once every M is uncounted, wait for
    // their threads to end too, so that the drop returns with them gone.
    for t in std::mem::take(&mut *shared.threads.lock()) {
        if all_exited {
            join_until(t, deadline);
        } else if t.is_finished() {
            let _ = t.join();
        }
    }
    all_exited
}

/// Shutdown step 2's help for a stuck M: drops the future of every task that is idle (in no
/// queue and no poll, so no M can take it), in the runtime's context, each drop caught. The
/// queued and running ones wait for step 3.
fn drop_idle_tasks(shared: &Arc<Shared>) {
    let _ctx = context::enter(shared.clone());
    for t in shared.registry.snapshot() {
        shared.catch_user(|| t.shutdown_if_idle());
    }
}

/// Shutdown step 3: drop every task and timer. Dropping a future may wake or spawn others, so
/// repeat until nothing is left, in the runtime's context so such drops can still `spawn`.
/// `all_exited`: no M is left, so every P's local queue may be drained. Every drop is user
/// code: a panic in one is caught and counted, and the rest still go.
fn drop_every_task_and_timer(shared: &Arc<Shared>, all_exited: bool) {
    let _ctx = context::enter(shared.clone());
    loop {
        let mut found = false;
        while let Some(t) = shared.global.pop() {
            shared.catch_user(|| drop(t));
            found = true;
        }
        for p in shared.all_ps() {
            if all_exited || p.status() != PStatus::Running {
                // SAFETY: no M holds `p` any more (they all exited, or it is not running).
                unsafe { p.drain_local(|t| shared.catch_user(|| drop(t)).unwrap_or(())) };
            }
        }
        for t in shared.registry.drain() {
            shared.catch_user(|| t.shutdown());
            found = true;
        }
        for p in shared.all_ps() {
            // A panic in a payload's drop is resumed once the drain dropped the rest of its
            // payloads; drain again for timers armed meanwhile.
            while shared.catch_user(|| p.timers.drain_waking()).is_none() {}
        }
        if !found {
            break;
        }
    }
}

impl Drop for Runtime {
    fn drop(&mut self) {
        if self.sysmon.is_none() {
            return;
        }
        // This thread is one of this runtime's own (an M, a blocking thread) when its context
        // is this runtime: one that shutdown waits for.
        match context::try_current() {
            Ok(current)
                if !current
                    .as_ref()
                    .is_some_and(|c| Arc::ptr_eq(c, &self.shared)) =>
            {
                let deadline = self
                    .drop_timeout
                    .and_then(|d| Instant::now().checked_add(d));
                self.shutdown(deadline)
            }
            // Waiting here would wait for this very thread: shut down on another one, which
            // waits until this thread's poll or closure returns.
            Ok(_) => drop(self.shut_down_elsewhere()),
            // This thread's context is gone: a thread-local's destructor drops the runtime as
            // the thread exits. Shutdown needs the context (it enters the runtime's to drop
            // tasks): it runs on a thread of its own, which this one waits for, as a drop
            // elsewhere would (Tokio's `runtime_in_thread_local`; aborted the process before).
            Err(_) => {
                if let Some(t) = self.shut_down_elsewhere() {
                    let _ = t.join();
                }
            }
        }
    }
}

impl Runtime {
    /// Moves the shutdown to a new thread (the runtime's state goes with it, leaving `self`
    /// shut); returns that thread, or `None` if none could be spawned: then it refuses work,
    /// stops the threads and drops what can be reached now, waiting for nothing.
    fn shut_down_elsewhere(&mut self) -> Option<std::thread::JoinHandle<()>> {
        let rest = Runtime {
            shared: self.shared.clone(),
            handle: self.handle.clone(),
            sysmon: self.sysmon.take(),
            resize: parking_lot::Mutex::new(()),
            drop_timeout: self.drop_timeout,
        };
        // Shared with the thread so that a failed spawn, which drops the closure, does not
        // drop the runtime (that would land here again).
        let rest = Arc::new(parking_lot::Mutex::new(Some(rest)));
        let theirs = rest.clone();
        let spawned = std::thread::Builder::new()
            .name("gort-shutdown".into())
            .spawn(move || drop(theirs.lock().take()));
        match spawned {
            Ok(t) => Some(t),
            Err(_) => {
                if let Some(mut rt) = rest.lock().take() {
                    rt.shutdown(Some(Instant::now()));
                }
                None
            }
        }
    }
}

/// Spawns on `shared` (the runtime's or the current context's).
pub(crate) fn spawn_on<F>(shared: &Arc<Shared>, future: F) -> JoinHandle<F::Output>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    let raw = Cell::spawn(future, shared.clone());
    let p = shared.held_p();
    // SAFETY: a P this thread holds stays allocated (`allp` keeps every P).
    let home = (!p.is_null()).then(|| unsafe { (*p).id });
    Cell::<F, Arc<Shared>>::set_slot(&raw, shared.registry.insert(raw.clone(), home));
    if shared.is_shutdown() {
        shut_down_late(raw.clone());
    } else {
        // Go's newproc: the new task goes to runnext. What it pushes out of a full ring is
        // new work, behind started work in the global queue (runq.rs, "Two lanes").
        shared.push_task_from(p, Task::Raw(raw.clone()), true, Lane::Fresh);
    }
    // SAFETY: the cell's future is an `F`.
    unsafe { JoinHandle::new(raw) }
}

thread_local! {
    /// Tasks spawned on a shut-down runtime by the `Drop` of a future that
    /// [`shut_down_late`] is dropping on this thread, for it to shut down next (`None`: no
    /// such call on this thread).
    static LATE_SPAWNS: RefCell<Option<Vec<RawTask>>> = const { RefCell::new(None) };
}

/// Shuts down a task spawned on a runtime that is shut down: its future is dropped at once and
/// its `JoinHandle` sees a cancellation. A `Drop` of that future may spawn again (a clean-up
/// task, whose own future's drop spawns the next): the outermost call drops such a chain in a
/// loop, since a recursion per link overflowed the stack at ten thousand links.
fn shut_down_late(task: RawTask) {
    let mut task = Some(task);
    let outermost = LATE_SPAWNS.try_with(|late| {
        let mut late = late.borrow_mut();
        match late.as_mut() {
            Some(queued) => queued.extend(task.take()),
            None => *late = Some(Vec::new()),
        }
    });
    let Some(task) = task else { return };
    if outermost.is_err() {
        // This thread's locals are being destroyed: no queue, drop it here.
        return task.shutdown();
    }
    let rest = LateRest;
    task.shutdown();
    while let Some(task) = pop_late() {
        task.shutdown();
    }
    drop(rest);
}

fn pop_late() -> Option<RawTask> {
    LATE_SPAWNS
        .try_with(|late| late.borrow_mut().as_mut()?.pop())
        .ok()
        .flatten()
}

/// Ends [`shut_down_late`]'s loop: should a drop in it panic, the tasks still queued are shut
/// down too (each caught: the first panic is the one unwinding), then the queue is removed.
struct LateRest;

impl Drop for LateRest {
    fn drop(&mut self) {
        while let Some(task) = pop_late() {
            if let Err(again) = catch_unwind(AssertUnwindSafe(|| task.shutdown())) {
                std::mem::forget(again);
            }
        }
        let _ = LATE_SPAWNS.try_with(|late| *late.borrow_mut() = None);
    }
}
