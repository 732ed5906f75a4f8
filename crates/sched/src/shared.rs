//! The state all of a runtime's threads share (Go's `sched` and `allp`), and the paths by which
//! work enters it: spawn, wake, timer wake-ups.

use crate::blocking::Blocking;
use crate::context;
use crate::idle::{Idle, MHandle};
use crate::p::{P, P_DEAD};
use crate::poller::Poller;
use crate::runq::{Global, Lane};
use crate::task::{Registry, Schedule, Task};
use crate::worker;
use gort_timer::{Checked, Host, Nanos, Timers};
use parking_lot::{Condvar, Mutex};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering::*};
use std::sync::{Arc, OnceLock};
use std::thread::JoinHandle;

/// The most Ps a runtime can have (Go's limit was 256 for years; `set_procs` clamps to it).
pub const MAX_PROCS: usize = 256;

pub(crate) struct Shared {
    /// Every P ever created, by id; never shrinks while the runtime lives (Go's `allp`).
    allp: Box<[OnceLock<Arc<P>>]>,
    /// How many leading entries of `allp` exist.
    nallp: AtomicUsize,
    /// Go's `gomaxprocs`: Ps with `id >= nprocs` retire.
    pub(crate) nprocs: AtomicUsize,
    /// Go's global run queue (`sched.runq`).
    pub(crate) global: Global<Task>,
    pub(crate) idle: Idle,
    pub(crate) poller: Poller,
    pub(crate) registry: Registry,
    pub(crate) blocking: Arc<Blocking>,
    pub(crate) shutdown: AtomicBool,
    /// M threads: handles to join, and how many are alive (for a timed shutdown).
    pub(crate) threads: Mutex<Vec<JoinHandle<()>>>,
    pub(crate) live_ms: Mutex<usize>,
    pub(crate) ms_exited: Condvar,
    pub(crate) panics: AtomicU64,
    next_m: AtomicUsize,
    /// Round-robin cursor for timers created on threads that hold no P.
    home_cursor: AtomicUsize,
}

impl Shared {
    pub(crate) fn new(procs: usize, blocking: Arc<Blocking>) -> std::io::Result<Arc<Shared>> {
        let shared = Arc::new(Shared {
            allp: (0..MAX_PROCS).map(|_| OnceLock::new()).collect(),
            nallp: AtomicUsize::new(0),
            nprocs: AtomicUsize::new(procs),
            global: Global::default(),
            idle: Idle::new(),
            poller: Poller::new()?,
            registry: Registry::new(),
            blocking,
            shutdown: AtomicBool::new(false),
            threads: Mutex::new(Vec::new()),
            live_ms: Mutex::new(0),
            ms_exited: Condvar::new(),
            panics: AtomicU64::new(0),
            next_m: AtomicUsize::new(0),
            home_cursor: AtomicUsize::new(0),
        });
        for id in 0..procs {
            let p = shared.make_p(id);
            shared.idle.pidleput(p);
        }
        Ok(shared)
    }

    /// Creates P `id` if it never existed; returns it.
    pub(crate) fn make_p(&self, id: usize) -> Arc<P> {
        let p = self.allp[id].get_or_init(|| Arc::new(P::new(id))).clone();
        self.nallp.fetch_max(id + 1, AcqRel);
        p
    }

    /// Go's `checkTimers` on one heap, counting the timers that ran for the poller's
    /// coalescing. `local`: the caller holds the P that owns `timers`.
    pub(crate) fn run_timers(&self, timers: &Timers, now: Nanos, local: bool) -> Checked {
        // Every M with timers passes here in each round, with the clock already read.
        crate::arena::tick(now);
        let c = timers.check(now, local);
        if c.ran > 0 {
            self.poller.note_fired(c.ran);
        }
        c
    }

    /// [`Shared::run_timers`] for a helper that does not wait for the heap's lock
    /// (`Timers::try_check`); counted for the poller the same way.
    pub(crate) fn try_run_timers(&self, timers: &Timers, now: Nanos) {
        if let Some(c) = timers.try_check(now) {
            if c.ran > 0 {
                self.poller.note_fired(c.ran);
            }
        }
    }

    /// Every P that exists, live or retired (retired ones may still hold late timers).
    pub(crate) fn all_ps(&self) -> impl Iterator<Item = &Arc<P>> + '_ {
        let n = self.nallp.load(Acquire);
        self.allp[..n].iter().filter_map(OnceLock::get)
    }

    pub(crate) fn p(&self, id: usize) -> Option<&Arc<P>> {
        self.allp.get(id).and_then(OnceLock::get)
    }

    pub(crate) fn nallp(&self) -> usize {
        self.nallp.load(Acquire)
    }

    pub(crate) fn nprocs(&self) -> usize {
        self.nprocs.load(Acquire)
    }

    pub(crate) fn is_shutdown(&self) -> bool {
        self.shutdown.load(Acquire)
    }

    /// Go's `wakep`: start a spinning M if there is an idle P and nobody is spinning.
    pub(crate) fn wakep(self: &Arc<Self>) {
        if self.idle.wakep_gate() {
            self.startm(None, true);
        }
    }

    /// Go's `startm`: run `p` (or an idle P) on an idle M, or on a new one.
    pub(crate) fn startm(self: &Arc<Self>, p: Option<Arc<P>>, spinning: bool) {
        if self.is_shutdown() {
            if let Some(p) = p {
                self.idle.pidleput(p);
            }
            if spinning {
                self.idle.dec_spinning();
            }
            return;
        }
        match self.idle.startm_pick(p, spinning) {
            Ok((p, Some(m))) => m.hand(p, spinning),
            Ok((p, None)) => self.spawn_m(p, spinning),
            Err(()) => {}
        }
    }

    fn spawn_m(self: &Arc<Self>, p: Arc<P>, spinning: bool) {
        let n = self.next_m.fetch_add(1, Relaxed);
        let shared = self.clone();
        *self.live_ms.lock() += 1;
        let handle = Arc::new(MHandle::default());
        let spawned = std::thread::Builder::new()
            .name(format!("gort-m{n}"))
            .spawn(move || worker::m_main(shared, handle, p, spinning));
        match spawned {
            Ok(h) => {
                let mut threads = self.threads.lock();
                // Forget threads that already ended (an M exits only at shutdown, but keep the
                // list bounded anyway).
                threads.retain(|t| !t.is_finished());
                threads.push(h);
            }
            Err(e) => panic!("gort: cannot start a worker thread: {e}"),
        }
    }

    /// Go's `handoffp`: the holder of `p` is about to block (block_in_place); find `p` a new M
    /// if it has anything to do, else idle it.
    pub(crate) fn handoffp(self: &Arc<Self>, p: Arc<P>) {
        // SAFETY: the caller held `p` until this call and passes its ownership here.
        let has_local = unsafe { p.has_runnext() } || p.has_queued();
        if has_local || !self.global.is_empty() {
            return self.startm(Some(p), false);
        }
        // No local work: start a spinning M only if nobody else is looking for work.
        if self.idle.nmspinning() + self.idle.npidle() == 0 && self.idle.wakep_gate_force() {
            return self.startm(Some(p), true);
        }
        let when = p.timers.wake_time();
        // If this is the last running P and nobody is polling, another M must poll (Go).
        if self.idle.npidle() + 1 >= self.nprocs() && self.idle.lastpoll.load(SeqCst) != 0 {
            return self.startm(Some(p), false);
        }
        self.idle.pidleput(p);
        if when != 0 {
            self.wake_netpoller_arc(when);
        }
    }

    /// Go's `wakeNetPoller(when)`: make sure some M will wake up by `when`.
    pub(crate) fn wake_netpoller_arc(self: &Arc<Self>, when: Nanos) {
        std::sync::atomic::fence(SeqCst);
        if self.idle.lastpoll.load(SeqCst) == 0 {
            // An M is blocked in the poller: break it if it sleeps past `when`.
            let until = self.idle.poll_until.load(SeqCst);
            if until == 0 || until > when {
                self.poller.break_poll();
            }
        } else {
            self.wakep();
        }
    }

    /// Queues a runnable task: on this thread's P when it holds one of this runtime (in
    /// `runnext` when `next`), else on the global queue; then `wakep` if the task is stealable.
    /// `lane`: what overflows to the global queue is new work (a spawn) or started work.
    pub(crate) fn push_task(self: &Arc<Self>, task: Task, next: bool, lane: Lane) {
        let p = context::current_p();
        let ours =
            !p.is_null() && context::with_current(|c| c.is_some_and(|c| Arc::ptr_eq(c, self)));
        let stealable = if ours {
            // SAFETY: this thread holds `p` (context invariant) and no `with_local` borrow is
            // live across a task poll, which is where we are called from.
            unsafe { (*p).push_local(task, next, &self.global, lane) }
        } else {
            self.global.push(task, lane);
            true
        };
        // Go wakes an M for every readied goroutine; like Tokio's LIFO slot, gort does not
        // when the task only filled an empty `runnext`: this M runs it next, and waking
        // another M for it costs a futex round trip for an M that would find nothing (it was
        // most of gort's CPU time in the sleep fan-out shape T3).
        if stealable {
            self.wakep();
        }
    }

    /// The timers a new timer armed on a thread without a P (block_on, the blocking pool,
    /// sysmon) goes to: a live P's, picked round-robin. A thread holding a P uses its own
    /// (`timer_api::with_home` checks that first).
    pub(crate) fn timer_home_without_p(&self) -> &Timers {
        let n = self.nprocs().max(1);
        let id = self.home_cursor.fetch_add(1, Relaxed) % n;
        match self.p(id) {
            Some(p) if p.status() != P_DEAD => &p.timers,
            _ => &self.p(0).expect("gort: P 0 always exists").timers,
        }
    }
}

impl Schedule for Arc<Shared> {
    fn schedule(&self, task: Task) {
        if self.is_shutdown() {
            // Nothing will run it; the teardown drops queued tasks.
            self.global.push(task, Lane::Ready);
            return;
        }
        self.push_task(task, true, Lane::Ready);
    }

    fn yield_task(&self, task: Task) {
        self.push_task(task, false, Lane::Ready);
    }

    fn release(&self, slot: usize) {
        self.registry.remove(slot);
    }

    fn on_panic(&self) {
        self.panics.fetch_add(1, Relaxed);
    }
}

/// The timer layer's view of the scheduler (Go's `wakeNetPoller`).
pub(crate) struct TimerHost<'a>(pub(crate) &'a Arc<Shared>);

impl Host for TimerHost<'_> {
    fn wake_netpoller(&self, when: Nanos) {
        self.0.wake_netpoller_arc(when);
    }
}

/// The `Host` of the current thread's runtime, looked up only when a wake-up is asked for
/// (most re-arms move a timer later and ask for none).
pub(crate) struct CurrentHost;

impl Host for CurrentHost {
    fn wake_netpoller(&self, when: Nanos) {
        context::with_current(|s| {
            if let Some(s) = s {
                s.wake_netpoller_arc(when);
            }
        });
    }
}

/// A `Host` for code that runs under the scheduler lock, where waking an M would deadlock:
/// it remembers the earliest wake-up asked for, and `flush` performs it after the unlock.
#[derive(Default)]
pub(crate) struct DeferredHost(std::sync::atomic::AtomicI64);

impl Host for DeferredHost {
    fn wake_netpoller(&self, when: Nanos) {
        let _ = self.0.fetch_update(Relaxed, Relaxed, |cur| {
            Some(crate::worker::min_nonzero(cur, when))
        });
    }
}

impl DeferredHost {
    pub(crate) fn flush(&self, shared: &Arc<Shared>) {
        let when = self.0.load(Relaxed);
        if when != 0 {
            shared.wake_netpoller_arc(when);
        }
    }
}
