//! The runtime's counters (`Metrics`) and per-P snapshots (`proc_metrics`: what each P holds
//! right now, its run queue, its timer heap's counters, its busy time) and the global queue's
//! depth, read through a `Handle` (so from inside the runtime too) or the `Runtime`. Gathering them only
//! reads; the one counter written for them, the busy time, is written when a P changes hands
//! (`BusyClock`), never per task.

use crate::p::PStatus;
use crate::{Handle, Metrics, Runtime};
use gort_loom::atomic::{AtomicU64, Ordering::*};
use gort_timer::nanotime;
use std::time::Duration;

/// What one P holds, from [`Runtime::proc_metrics`]. Queue depths are racy hints (the P's
/// holder changes them while they are read); the timer counters are exact at the instant
/// of the read.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ProcMetrics {
    /// The P's id (`0..procs`).
    pub id: usize,
    /// Whether an M holds the P now (else it is idle).
    pub running: bool,
    /// Tasks in its local run queue (not counting its `runnext` slot).
    pub local_queue: usize,
    /// Armed timers in its heap.
    pub timers_pending: u64,
    /// Stopped timers still in its heap, waiting for lazy removal.
    pub timers_deleted: u64,
    /// Timer callbacks run from its heap.
    pub timers_fired: u64,
    /// Timers of its heap stopped.
    pub timers_stopped: u64,
    /// Re-arms applied in its heap.
    pub timers_modified: u64,
    /// Timer callbacks run from its heap, by lateness (deadline to run): bucket 0 is under
    /// 1 µs, bucket `b` is `[2^(b-1), 2^b)` µs, the last is 16.4 ms and more. Counted under
    /// the heap's lock, which the run holds anyway.
    pub timer_lateness: [u64; gort_timer::LATENESS_BUCKETS],
    /// Tasks the Ms holding this P stole from other Ps' queues (the task run at once and
    /// the ones moved into its queue). Written by the holder only, on the P's own line.
    pub tasks_stolen: u64,
    /// The time Ms have held this P since it was created (Tokio's
    /// `worker_total_busy_duration`): running tasks and timers, and looking for work before
    /// giving the P up. It stops while the P is idle (no M holds it); a P held now counts up
    /// to the instant of the read.
    pub busy: Duration,
}

/// A P's busy time: the sum of the periods it was held by an M, measured at the hand-offs
/// only (idle to held and back), so that it costs two clock reads per idle period and nothing
/// per task.
///
/// Writers are serialised by the scheduler lock, under which every P status change happens
/// (`P::set_status`), so a plain load and store suffices; readers may race with a writer and
/// retry (see [`BusyClock::read`]).
pub(crate) struct BusyClock {
    /// `nanotime` when the current held period began; 0 while the P is not held.
    since: AtomicU64,
    /// Nanoseconds of the held periods that have ended.
    ended: AtomicU64,
}

impl BusyClock {
    pub(crate) fn new() -> BusyClock {
        BusyClock {
            since: AtomicU64::new(0),
            ended: AtomicU64::new(0),
        }
    }

    /// The P becomes held (`held`) or idle or dead (`!held`). A call that changes nothing
    /// reads no clock. Call under the scheduler lock.
    pub(crate) fn set_held(&self, held: bool) {
        let since = self.since.load(Relaxed);
        if held == (since != 0) {
            return;
        }
        // 0 means "not held": a reading of 0 (the clock's first nanosecond) counts as 1.
        let now = (nanotime() as u64).max(1);
        if held {
            self.since.store(now, Release);
        } else {
            let ended = self.ended.load(Relaxed) + now.saturating_sub(since);
            // `ended` before `since`: a reader that sees the period closed sees it counted.
            self.ended.store(ended, Release);
            self.since.store(0, Release);
        }
    }

    /// The busy time so far, the current held period included. A reader that races with a
    /// hand-off sees `since` change across its read of `ended` and reads again.
    pub(crate) fn read(&self) -> Duration {
        loop {
            let since = self.since.load(Acquire);
            let ended = self.ended.load(Acquire);
            if self.since.load(Acquire) != since {
                continue;
            }
            let current = match since {
                0 => 0,
                since => (nanotime() as u64).saturating_sub(since),
            };
            return Duration::from_nanos(ended + current);
        }
    }
}

impl Handle {
    /// A snapshot of the runtime's counters, as [`Runtime::metrics`]: from inside the runtime
    /// too (tokio's `Handle::metrics`; Go's `runtime.NumGoroutine` and `runtime/metrics`), e.g.
    /// for a server's debug endpoint, which runs in a task and cannot borrow the `Runtime`.
    ///
    /// # Examples
    ///
    /// ```
    /// let rt = gort::Runtime::new().unwrap();
    /// let alive = rt.block_on(async {
    ///     let sleeper = gort::spawn(gort::time::sleep(std::time::Duration::from_secs(60)));
    ///     // A handler in a task reads the counters of the runtime it runs on.
    ///     let seen = gort::spawn(async { gort::runtime::Handle::current().metrics() });
    ///     let m = seen.await.unwrap();
    ///     sleeper.abort();
    ///     m.tasks_alive
    /// });
    /// assert!(alive >= 2); // the sleeper, and the reader itself
    /// ```
    pub fn metrics(&self) -> Metrics {
        let s = &self.shared;
        // Alive: spawned, not taken out of the registry, and not finished on a P that has yet
        // to take it out. Each count is read shard by shard or P by P while tasks come and
        // go, so the order makes the sum never fall below the tasks alive at the middle read:
        // the monotonic `removed` before it (lower), `spawned` after it (higher), and a P
        // zeroes its pending count before it takes that batch out, so a task is never both
        // in a `removed` read first and in a pending count read after.
        let removed = s.registry.removed();
        let releasing = s.all_ps().map(|p| p.releases_pending() as u64).sum::<u64>();
        let spawned = s.registry.spawned();
        let mut m = Metrics {
            procs: s.nprocs(),
            tasks_spawned: spawned,
            tasks_alive: spawned.saturating_sub(removed + releasing),
            task_panics: s.panics.load(Relaxed) + s.blocking.panics(),
            user_panics: s.user_panics.load(Relaxed),
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
            m.tasks_stolen += p.stolen();
            for (sum, n) in m.timer_lateness.iter_mut().zip(t.lateness) {
                *sum += n;
            }
        }
        let w = s.poller.wakeups();
        m.poller_wakeups = w.total;
        m.poller_wakeups_timer = w.timer;
        m.poller_wakeups_io = w.io;
        m.poller_wakeups_break = w.brk;
        m.sysmon_wakeups = s.sysmon_looks.load(Relaxed);
        m.ms_woken = s.idle.ms_woken();
        m
    }

    /// A snapshot of every P in service, as [`Runtime::proc_metrics`].
    ///
    /// # Examples
    ///
    /// ```
    /// let rt = gort::Builder::new().procs(2).build().unwrap();
    /// let ps = rt.block_on(async { gort::runtime::Handle::current().proc_metrics() });
    /// assert_eq!(ps.len(), 2);
    /// ```
    pub fn proc_metrics(&self) -> Vec<ProcMetrics> {
        let s = &self.shared;
        (0..s.nprocs())
            .filter_map(|id| s.p(id))
            .map(|p| {
                let t = p.timers.stats();
                ProcMetrics {
                    id: p.id,
                    running: p.status() == PStatus::Running,
                    local_queue: p.stealer.len(),
                    timers_pending: t.pending,
                    timers_deleted: t.deleted,
                    timers_fired: t.fired,
                    timers_stopped: t.stopped,
                    timers_modified: t.modified,
                    timer_lateness: t.lateness,
                    tasks_stolen: p.stolen(),
                    busy: p.busy(),
                }
            })
            .collect()
    }

    /// The global run queue's depth, as [`Runtime::global_queue_depth`].
    ///
    /// # Examples
    ///
    /// ```
    /// let rt = gort::Runtime::new().unwrap();
    /// assert_eq!(rt.handle().global_queue_depth(), 0);
    /// ```
    pub fn global_queue_depth(&self) -> usize {
        self.shared.global.len()
    }
}

impl Runtime {
    /// A snapshot of every P in service (see [`ProcMetrics`]).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::{Duration, Instant};
    ///
    /// let rt = gort::Builder::new().procs(2).build().unwrap();
    /// // One task keeps its P busy for 50 ms.
    /// rt.block_on(rt.spawn(async {
    ///     let start = Instant::now();
    ///     while start.elapsed() < Duration::from_millis(50) {}
    /// }))
    /// .unwrap();
    /// let ps = rt.proc_metrics();
    /// assert_eq!(ps.len(), 2);
    /// assert_eq!(ps[1].id, 1);
    /// let busiest = ps.iter().map(|p| p.busy).max().unwrap();
    /// assert!(busiest >= Duration::from_millis(50));
    /// ```
    pub fn proc_metrics(&self) -> Vec<ProcMetrics> {
        self.handle.proc_metrics()
    }

    /// Tasks in the global run queue now (a racy hint): spawned from outside the runtime's
    /// workers, or pushed out of a full local queue.
    ///
    /// # Examples
    ///
    /// ```
    /// let rt = gort::Runtime::new().unwrap();
    /// assert_eq!(rt.global_queue_depth(), 0);
    /// ```
    pub fn global_queue_depth(&self) -> usize {
        self.handle.global_queue_depth()
    }
}
