//! Per-P snapshots for `Runtime::proc_metrics`: what each P holds right now (its run queue,
//! its timer heap's counters) and the global queue's depth. Read-only: gathering them adds
//! nothing to the scheduling paths.

use crate::p::PStatus;
use crate::Runtime;

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
}

impl Runtime {
    /// A snapshot of every P in service (see [`ProcMetrics`]).
    ///
    /// # Examples
    ///
    /// ```
    /// let rt = gort::Builder::new().procs(2).build().unwrap();
    /// let ps = rt.proc_metrics();
    /// assert_eq!(ps.len(), 2);
    /// assert_eq!(ps[1].id, 1);
    /// ```
    pub fn proc_metrics(&self) -> Vec<ProcMetrics> {
        let s = &self.handle.shared;
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
                }
            })
            .collect()
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
        self.handle.shared.global.len()
    }
}
