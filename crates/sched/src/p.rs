//! P: a processor, the right to run tasks. Go's `p`: a local run queue, the `runnext` slot,
//! and the P's timers.
//!
//! Who touches what:
//! - `hot.local` (queue owner side, tick counters): only the M that holds the P. A P
//!   changes hands only through the scheduler lock (`idle.rs`: pidle list) or an M's hand-off
//!   slot, both mutexes, which order the old holder's accesses before the new holder's.
//! - `runnext`: filled by the holder (or under the scheduler lock), emptied by the holder,
//!   thieves and sysmon, by CAS (Go's stealable `runnext`, runnext.rs).
//! - `stealer`: anyone (the ring's stealing half, runq.rs).
//! - `timers`: under its own lock, by anyone (Go's `timersLock`).

use crate::metrics::BusyClock;
use crate::runnext::{Fill, Pushed, RunNext};
use crate::runq::{self, Global, Lane, Stealer};
use crate::slice::{Seen, Slices};
use crate::task::Task;
use crate::task::{Releases, RELEASE_BATCH};
use crossbeam_utils::CachePadded;
use gort_loom::atomic::{AtomicI64, AtomicU64, AtomicU8, Ordering::*};
use gort_timer::{Nanos, OwnerHost, Timers};
use std::cell::UnsafeCell;

/// A P's status (Go's `_Pidle`, `_Prunning`, `_Pdead`), kept in an atomic byte.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub(crate) enum PStatus {
    /// In the idle list, held by no M.
    Idle = 0,
    /// Held by an M.
    Running = 1,
    /// Removed by `set_procs`; its tasks and timers moved to others.
    Dead = 2,
}

mod pick;

pub(crate) use pick::{Local, Thieves};

pub(crate) struct P {
    pub(crate) id: usize,
    status: AtomicU8,
    /// Written on every scheduling round by the owner: padded to a cache line of its own so
    /// that other Ms reading `status`, `stealer` and `timers` (stealing, the poller's look
    /// at every P's timers) do not bounce it.
    hot: CachePadded<Hot>,
    /// Go's `p.runnext`: the task the holder runs next, which thieves may take (runnext.rs).
    /// On a line of its own: thieves and sysmon read it, and the holder writes it only when
    /// a task is readied or run from it.
    runnext: CachePadded<RunNext<Task>>,
    pub(crate) stealer: Stealer<Task>,
    pub(crate) timers: Timers,
}

/// The holder's line.
struct Hot {
    /// Tasks the holder's M stole from other Ps (`Runtime::proc_metrics`). Written only by
    /// the holder (a relaxed load and store, no read-modify-write), on its own line: the
    /// count costs nothing to the Ms that steal from or look at this P.
    stolen: AtomicU64,
    /// When the holder last began a scheduling round with timers in the heap (the clock read
    /// for them), written only by the holder. sysmon and `watch_peer` take this P's due timers
    /// only if it began no round since the earliest came due: the holder is stuck in a task
    /// (design/TIMERS.md, "Bounded rounds").
    timer_round_at: AtomicI64,
    /// The time Ms have held this P (`Runtime::proc_metrics`), written at its status changes.
    busy: BusyClock,
    /// The slices the holder began and sysmon's verdict on the current one (slice.rs).
    slices: Slices,
    /// How many keys `Local::releases` holds, for `Runtime::metrics` (`tasks_alive`); written
    /// only by the holder.
    releases_pending: AtomicU64,
    local: UnsafeCell<Local>,
}

// SAFETY: `local` is touched only by the M that holds the P (see the module docs: P hand-offs
// go through a mutex, which orders accesses); everything else is `Sync` on its own.
unsafe impl Sync for P {}
// SAFETY: as above; the ring's owner handle inside is `Send`.
unsafe impl Send for P {}

impl crate::idle::IdleP for P {
    fn id(&self) -> usize {
        self.id
    }

    fn set_idle(&self, idle: bool) {
        self.set_status(if idle {
            PStatus::Idle
        } else {
            PStatus::Running
        });
    }
}

impl P {
    /// P `id` of the runtime `owner` names (its timers' heap wakes that runtime).
    pub(crate) fn new(id: usize, owner: OwnerHost) -> P {
        let (queue, stealer) = runq::local();
        P {
            id,
            // Not in service until it is put in the idle list.
            status: AtomicU8::new(PStatus::Dead as u8),
            hot: CachePadded::new(Hot {
                stolen: AtomicU64::new(0),
                timer_round_at: AtomicI64::new(0),
                busy: BusyClock::new(),
                slices: Slices::new(),
                releases_pending: AtomicU64::new(0),
                local: UnsafeCell::new(Local {
                    queue,
                    runnext_lane: Lane::Ready,
                    tick: 0,
                    runnext_streak: 0,
                    runnext_chained: false,
                    serve_global: false,
                    seen_woken: 0,
                    releases: Releases::default(),
                }),
            }),
            runnext: CachePadded::new(RunNext::new()),
            stealer,
            timers: Timers::with_owner(id, owner),
        }
    }

    pub(crate) fn status(&self) -> PStatus {
        match self.status.load(Acquire) {
            0 => PStatus::Idle,
            1 => PStatus::Running,
            _ => PStatus::Dead,
        }
    }

    /// Counts `n` tasks stolen by the holder's M. Only the holder calls it (a plain relaxed
    /// load and store: there is one writer).
    pub(crate) fn note_stolen(&self, n: usize) {
        let stolen = &self.hot.stolen;
        stolen.store(stolen.load(Relaxed) + n as u64, Relaxed);
    }

    /// Notes that the holder began a round at `now` with timers in the heap. Only the holder
    /// calls it (one writer, as `note_stolen`).
    pub(crate) fn note_timer_round(&self, now: Nanos) {
        self.hot.timer_round_at.store(now, Relaxed);
    }

    /// Whether the holder began no round since `due` (a racy read): a timer due then and still
    /// in the heap waits for a holder stuck in a task, not for a round that left it behind.
    pub(crate) fn no_round_since(&self, due: Nanos) -> bool {
        self.hot.timer_round_at.load(Relaxed) < due
    }

    /// How many timers a round of this P's holder may run on one heap (its own or a peer's):
    /// the free half of the ring (at least one). The tasks a round's timers wake go to
    /// `runnext` and the ring; what the ring cannot hold overflows to the global queue, which
    /// a busy P serves once per 61 rounds, behind the tasks newer timers keep queuing: a P
    /// back from a long task with 100k timers due would park most of their tasks there for up
    /// to a second. Left in the heap, they keep their deadline order and the next rounds run
    /// them (design/TIMERS.md, "Bounded rounds").
    pub(crate) fn timer_room(&self) -> usize {
        (runq::LOCAL_CAP / 2)
            .saturating_sub(self.stealer.len())
            .max(1)
    }

    /// Notes that the task at registry `key` finished on this P. Returns a full batch of such
    /// keys for the caller to take out of the registry (`Registry::remove_batch`).
    ///
    /// # Safety
    ///
    /// As [`P::with_local`].
    pub(crate) unsafe fn defer_release(&self, key: usize) -> Option<[usize; RELEASE_BATCH]> {
        // SAFETY: forwarded contract.
        let (batch, held) = unsafe {
            self.with_local(|l| {
                let batch = l.releases.push(key);
                (batch, l.releases.len())
            })
        };
        self.hot.releases_pending.store(held as u64, Relaxed);
        batch
    }

    /// Takes every key [`P::defer_release`] holds: the caller takes them out of the registry.
    ///
    /// # Safety
    ///
    /// As [`P::with_local`].
    pub(crate) unsafe fn take_releases(&self) -> ([usize; RELEASE_BATCH], usize) {
        // SAFETY: forwarded contract.
        let taken = unsafe { self.with_local(|l| l.releases.take()) };
        self.hot.releases_pending.store(0, Relaxed);
        taken
    }

    /// Finished tasks this P has not yet taken out of the registry (a racy read for metrics).
    pub(crate) fn releases_pending(&self) -> usize {
        self.hot.releases_pending.load(Relaxed) as usize
    }

    /// Tasks stolen by the Ms that held this P (a racy read for metrics).
    pub(crate) fn stolen(&self) -> u64 {
        self.hot.stolen.load(Relaxed)
    }

    /// The time Ms have held this P (a racy read for metrics).
    pub(crate) fn busy(&self) -> std::time::Duration {
        self.hot.busy.read()
    }

    /// Changes the status, under the scheduler lock (the P changes hands there), and with it
    /// the busy clock: held while `Running`.
    pub(crate) fn set_status(&self, s: PStatus) {
        self.hot.busy.set_held(s == PStatus::Running);
        self.status.store(s as u8, Release);
    }

    /// Access to the owner-only state.
    ///
    /// # Safety
    ///
    /// - The calling thread holds this P (it took it from the idle list or an M hand-off and
    ///   has not given it away), or the P is idle/dead and the caller holds the scheduler lock.
    /// - `f` must not re-enter `with_local` on the same P (no nested `&mut`).
    #[inline]
    pub(crate) unsafe fn with_local<R>(&self, f: impl FnOnce(&mut Local) -> R) -> R {
        // SAFETY: exclusive by the caller's contract.
        f(unsafe { &mut *self.hot.local.get() })
    }

    /// Go's `runqget`, preceded by the global-queue fairness check of `schedule`.
    ///
    /// A pick other than `runnext` (the fairness check, a served global queue, a spent slice
    /// or the count bound) would leave `runnext`'s task behind for as long as the picked one runs, and no
    /// other M takes from `runnext` (Go's thieves do: `runqgrab`'s `stealRunNextG`): a task
    /// that spins would keep it from starting while another P idles. When a thief may need
    /// it (a P idles, or nothing else is left in the ring) it moves to the ring's tail
    /// instead, and `thieves` wakes one, as a push would (work conservation; test
    /// `a_task_passed_over_in_runnext_is_stolen`).
    ///
    /// # Safety
    ///
    /// As [`P::with_local`].
    pub(crate) unsafe fn next_local(
        &self,
        global: &Global<Task>,
        thieves: &dyn Thieves,
    ) -> Option<Task> {
        // SAFETY: forwarded contract.
        unsafe { self.with_local(|l| l.next(&self.runnext, &self.hot.slices, global, thieves)) }
    }

    /// sysmon's look at this P's slices (slice.rs): marks the holder's current slice spent if
    /// it is the one `seen` at least a slice ago. Returns `None` if the P is not running, else
    /// whether its holder began no slice since the previous look.
    pub(crate) fn look_at_slice(&self, seen: &mut Seen, now: std::time::Instant) -> Option<bool> {
        if self.status() == PStatus::Running {
            Some(seen.look(&self.hot.slices, now))
        } else {
            seen.forget();
            None
        }
    }

    /// A task of this P yielded: if a task was readied into the global queue since this P
    /// last looked (woken off every P, by sysmon or on a thread without a P), the next pick
    /// takes the global queue's oldest started task first.
    ///
    /// Go's `Gosched` puts the yielding goroutine on the global queue, behind such work; gort
    /// keeps the yielder in the local ring (no lock per yield) and serves the global queue
    /// first instead. Either way a woken task waits at most one slice of the tasks that yield,
    /// not the 61 slices of the fairness check (T10 in benches/SHAPES.md). Only a wake counts,
    /// not the overflow of rings full of yielding tasks, which also lands in the `Ready` lane:
    /// serving that on every yield took the global lock per yield and cost R2 three times its
    /// time (design/PERFORMANCE-LOG.md). One relaxed load per yield.
    ///
    /// # Safety
    ///
    /// As [`P::with_local`].
    pub(crate) unsafe fn note_yield(&self, global: &Global<Task>) {
        let woken = global.woken();
        // SAFETY: forwarded contract.
        unsafe {
            self.with_local(|l| {
                if l.seen_woken != woken {
                    l.seen_woken = woken;
                    l.serve_global = true;
                }
            })
        };
    }

    /// Go's `runqput(pp, g, next)`: `next` puts the task in `runnext`, kicking the old one to the
    /// tail of the queue; a full queue sends half of itself to `global`'s `lane`.
    ///
    /// Returns whether the push made work stealable (the queue grew): only then is another M
    /// worth waking; a task alone in `runnext` is run next by this P's own M.
    ///
    /// # Safety
    ///
    /// As [`P::with_local`].
    #[inline]
    pub(crate) unsafe fn push_local(
        &self,
        task: Task,
        next: bool,
        global: &Global<Task>,
        lane: Lane,
    ) -> bool {
        if next {
            // SAFETY: forwarded contract.
            return unsafe { self.push_runnext(task, global, lane) };
        }
        // SAFETY: forwarded contract.
        unsafe { self.with_local(|l| l.queue.push(task, global, lane)) };
        true
    }

    /// [`P::push_local`] into `runnext`.
    ///
    /// # Safety
    ///
    /// As [`P::with_local`].
    #[inline]
    unsafe fn push_runnext(&self, task: Task, global: &Global<Task>, lane: Lane) -> bool {
        // A chain's next link if a task readies it (a TLS load; the round's pushes are not).
        let chained = crate::context::running_task();
        // SAFETY: the holder's push (forwarded contract).
        match unsafe { self.runnext.push(task) } {
            Pushed::Filled => {
                // SAFETY: forwarded contract.
                unsafe {
                    self.with_local(|l| {
                        l.runnext_lane = lane;
                        l.runnext_chained = chained;
                    })
                };
                false
            }
            // A kicked-out task keeps its own lane: a woken task that a spawn replaces is
            // still started work if its ring overflows.
            Pushed::Kicked(old) => {
                // SAFETY: forwarded contract.
                unsafe {
                    self.with_local(|l| {
                        let old_lane = std::mem::replace(&mut l.runnext_lane, lane);
                        l.runnext_chained = chained;
                        l.queue.push(old, global, old_lane);
                    })
                };
                true
            }
            // A thief is taking the old task: this one goes to the ring.
            // SAFETY: forwarded contract.
            Pushed::Busy(task) => unsafe { self.push_local(task, false, global, lane) },
        }
    }

    /// Whether this P has runnable tasks (a racy hint for anyone; exact for the holder).
    pub(crate) fn has_queued(&self) -> bool {
        !self.stealer.is_empty()
    }

    /// Moves every queued task out (the P is being retired or the runtime shut down).
    ///
    /// # Safety
    ///
    /// As [`P::with_local`].
    pub(crate) unsafe fn drain_local(&self, mut sink: impl FnMut(Task)) {
        // SAFETY: forwarded contract.
        unsafe {
            self.with_local(|l| {
                // SAFETY: the holder's take (or the scheduler lock's, for an idle P).
                if let Some(t) = self.runnext.pop() {
                    sink(t);
                }
                while let Some(t) = l.queue.pop() {
                    sink(t);
                }
            })
        }
    }

    /// Whether the `runnext` slot is occupied (a racy hint for anyone; exact for the holder
    /// but for a thief taking its task meanwhile).
    pub(crate) fn has_runnext(&self) -> bool {
        self.runnext.is_full()
    }

    /// The fill of `runnext` now, if it holds a task, for a thief to take later with
    /// [`P::steal_runnext`].
    pub(crate) fn runnext_seen(&self) -> Option<Fill> {
        self.runnext.seen()
    }

    /// A thief's take of `runnext`'s task (Go's `runqgrab` with `stealRunNextG`): only the
    /// fill `seen`, if it is still there, so that a holder that ran it and queued another
    /// keeps the new one.
    pub(crate) fn steal_runnext(&self, seen: Fill) -> Option<Task> {
        self.runnext.steal(seen)
    }
}
