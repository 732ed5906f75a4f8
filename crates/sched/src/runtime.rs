//! `Runtime` and `Builder`: creating, driving, resizing and tearing down a scheduler.

use crate::blocking::Blocking;
use crate::context;
pub use crate::handle::{EnterGuard, Handle, TryCurrentError};
pub use crate::metrics::ProcMetrics;
use crate::p::{P_DEAD, P_RUNNING};
use crate::runq::Lane;
use crate::shared::{DeferredHost, Shared, MAX_PROCS};
use crate::sysmon::Sysmon;
use crate::task::{Cell, JoinHandle, Task};
use crate::threads::ThreadConfig;
use std::future::Future;
use std::io;
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
/// let rt = gort_sched::Builder::new().procs(2).build().unwrap();
/// assert_eq!(rt.procs(), 2);
/// ```
#[derive(Debug, Default, Clone)]
pub struct Builder {
    procs: Option<usize>,
    /// Thread options (their setters are in `builder.rs`).
    pub(crate) threads: ThreadConfig,
}

impl Builder {
    /// A builder with the defaults: as many Ps as CPUs this process may use (honouring a
    /// cgroup CPU quota, as Go 1.25's GOMAXPROCS does).
    pub fn new() -> Builder {
        Builder::default()
    }

    /// Sets the number of Ps (Go's `GOMAXPROCS`): how many tasks run in parallel.
    ///
    /// # Panics
    ///
    /// If `n` is 0 or above [`MAX_PROCS`].
    #[track_caller]
    pub fn procs(&mut self, n: usize) -> &mut Builder {
        assert!(
            (1..=MAX_PROCS).contains(&n),
            "gort: Builder::procs(n) needs 1 <= n <= {MAX_PROCS}, got {n}"
        );
        self.procs = Some(n);
        self
    }

    /// Creates the runtime. Worker threads start on demand, when there is work.
    pub fn build(&self) -> io::Result<Runtime> {
        let procs = self.procs.unwrap_or_else(crate::procs::default_procs);
        let blocking = Blocking::new(self.threads.clone());
        let shared = Shared::new(procs.min(MAX_PROCS), blocking.clone(), self.threads.clone())?;
        blocking.set_runtime(&shared);
        let sysmon = Sysmon::start(shared.clone());
        Ok(Runtime {
            handle: Handle::new(shared.clone()),
            shared,
            sysmon: Some(sysmon),
            resize: parking_lot::Mutex::new(()),
        })
    }
}

/// A gort runtime: Ps, worker threads (Ms), the poller, the per-P timers, the blocking pool.
///
/// Dropping it (or [`shutdown_timeout`](Runtime::shutdown_timeout)) stops every thread and
/// drops every task and its future.
///
/// # Examples
///
/// ```
/// let rt = gort_sched::Runtime::new().unwrap();
/// let h = rt.spawn(async { 1 + 1 });
/// assert_eq!(rt.block_on(h).unwrap(), 2);
/// ```
pub struct Runtime {
    shared: Arc<Shared>,
    /// The same runtime, for `Runtime::handle` (in `handle.rs`).
    pub(crate) handle: Handle,
    sysmon: Option<(Arc<Sysmon>, std::thread::JoinHandle<()>)>,
    resize: parking_lot::Mutex<()>,
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
    /// Task polls (and blocking closures) that panicked.
    pub task_panics: u64,
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
}

impl Runtime {
    /// A runtime with the default configuration (see [`Builder::new`]).
    pub fn new() -> io::Result<Runtime> {
        Builder::new().build()
    }

    /// Runs `future` to completion on the current thread, which parks between polls; tasks it
    /// spawns run on the runtime's Ms. A panic in `future` reaches the caller.
    ///
    /// # Panics
    ///
    /// When called from a thread that runs tasks (a worker) or inside another `block_on`:
    /// blocking there would stall the scheduler. Use `.await` instead. A blocking closure
    /// may call it.
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
    /// and their timers move to the remaining Ps (Go's `moveTimers`). `n` is clamped to
    /// `1..=MAX_PROCS`.
    pub fn set_procs(&self, n: usize) {
        let n = n.clamp(1, MAX_PROCS);
        let shared = &self.shared;
        let _serial = self.resize.lock();
        shared.idle.locked(|l| {
            shared.nprocs.store(n, SeqCst);
            for id in 0..n {
                let p = shared.make_p(id);
                if p.status() == P_DEAD {
                    l.pidleput(p);
                }
            }
        });
        let host = DeferredHost::default();
        shared.idle.retire_idle(n, |p| {
            // SAFETY: `retire_idle` runs this under the scheduler lock on an idle P, which no
            // M holds.
            unsafe { p.drain_local(|t| shared.global.push(t, Lane::Ready)) };
            let dst = shared.p(p.id % n).expect("gort: live P missing");
            p.timers.move_to(&dst.timers, &host);
            p.set_status(P_DEAD);
        });
        host.flush(shared);
        shared.wakep();
    }

    /// A snapshot of the runtime's counters.
    pub fn metrics(&self) -> Metrics {
        let s = &self.shared;
        let mut m = Metrics {
            procs: s.nprocs(),
            tasks_spawned: s.registry.spawned(),
            tasks_alive: s.registry.len() as u64,
            task_panics: s.panics.load(Relaxed) + s.blocking.panics(),
            ..Metrics::default()
        };
        for p in s.all_ps() {
            let t = p.timers.stats();
            m.timers_pending += t.pending;
            m.timers_deleted += t.deleted;
            m.timers_fired += t.fired;
            m.timers_stopped += t.stopped;
            m.timers_modified += t.modified;
            m.timers_moved += t.moved;
        }
        m
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
        // 1. Refuse new work and wake every M: parked ones through their slots, the poller
        //    through a break.
        shared.shutdown.store(true, SeqCst);
        for m in shared.idle.take_all_ms() {
            m.shutdown();
        }
        shared.poller.break_poll();
        sysmon.stop();
        let _ = sysmon_thread.join();
        // 2. Wait for the Ms to leave their loops (each finishes the poll it is in). Break
        //    the poller again now and then: the break above wakes whichever M polls at that
        //    instant, and `find_runnable` re-checks for shutdown before it blocks, but a
        //    repeat costs nothing and does not lean on that ordering argument alone.
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
                }
            }
            *live == 0
        };
        for t in std::mem::take(&mut *shared.threads.lock()) {
            if t.is_finished() {
                let _ = t.join();
            }
        }
        // 3. Drop every task and timer. Dropping a future may wake or spawn others, so repeat
        //    until nothing is left. Enter the context so such drops can still call `spawn`.
        let _ctx = context::enter(shared.clone());
        loop {
            let mut found = false;
            while let Some(t) = shared.global.pop() {
                drop(t);
                found = true;
            }
            for p in shared.all_ps() {
                if all_exited || p.status() != P_RUNNING {
                    // SAFETY: no M holds `p` any more (they all exited, or it is not running).
                    unsafe { p.drain_local(drop) };
                }
            }
            for t in shared.registry.drain() {
                t.shutdown();
                found = true;
            }
            for p in shared.all_ps() {
                p.timers.drain();
            }
            if !found {
                break;
            }
        }
        // 4. The blocking pool.
        shared.blocking.shutdown(deadline);
    }
}

impl Drop for Runtime {
    fn drop(&mut self) {
        self.shutdown(None);
    }
}

/// Spawns on `shared` (the runtime's or the current context's).
pub(crate) fn spawn_on<F>(shared: &Arc<Shared>, future: F) -> JoinHandle<F::Output>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    let raw = Cell::spawn(future, shared.clone());
    Cell::<F, Arc<Shared>>::set_slot(&raw, shared.registry.insert(raw.clone()));
    if shared.is_shutdown() {
        raw.clone().shutdown();
    } else {
        // Go's newproc: the new task goes to runnext. What it pushes out of a full ring is
        // new work, behind started work in the global queue (runq.rs, "Two lanes").
        shared.push_task(Task::Raw(raw.clone()), true, Lane::Fresh);
    }
    // SAFETY: the cell's future is an `F`.
    unsafe { JoinHandle::new(raw) }
}
