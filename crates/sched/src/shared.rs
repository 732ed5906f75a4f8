//! The state all of a runtime's threads share (Go's `sched` and `allp`), and the paths by which
//! work enters it: spawn, wake, timer wake-ups.

use crate::blocking::Blocking;
use crate::context;
use crate::idle::{Idle, MHandle};
use crate::p::{PStatus, P};
use crate::park::{self, Poll, Quiet, Sched};
use crate::paused::Advances;
use crate::poller::Poller;
use crate::runq::{Global, Lane};
use crate::task::{drop_panic_payload, Registry, Schedule, Task};
use crate::threads::ThreadConfig;
use crate::worker;
use gort_timer::{Checked, Nanos, RuntimeClock, Timers};
use parking_lot::{Condvar, Mutex};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering::*};
use std::sync::{Arc, OnceLock, Weak};
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
    pub(crate) idle: Idle<P>,
    pub(crate) poller: Poller,
    pub(crate) registry: Registry,
    pub(crate) blocking: Arc<Blocking>,
    pub(crate) shutdown: AtomicBool,
    /// M threads: handles to join, and how many are alive (for a timed shutdown).
    pub(crate) threads: Mutex<Vec<JoinHandle<()>>>,
    pub(crate) live_ms: Mutex<usize>,
    pub(crate) ms_exited: Condvar,
    pub(crate) panics: AtomicU64,
    /// Panics caught in user code run outside a task poll (`Metrics::user_panics`).
    pub(crate) user_panics: AtomicU64,
    /// sysmon's looks (each wake-up, and the first look): `Metrics::sysmon_wakeups`, here
    /// so that a `Handle` reads them too.
    pub(crate) sysmon_looks: AtomicU64,
    /// The Ms sysmon woke for a stuck P's ring (sysmon.rs, "Rings"; for tests).
    pub(crate) sysmon_ring_wakes: AtomicU64,
    /// Tasks sysmon took from a stuck `runnext` and handed to an idle P (each may wake a
    /// parked M: test `a_batch_of_readied_tasks_wakes_one_parked_m`).
    pub(crate) sysmon_runnext_handoffs: AtomicU64,
    next_m: AtomicUsize,
    /// Round-robin cursor for timers created on threads that hold no P.
    home_cursor: AtomicUsize,
    /// How Ms are started (names, stack size, hooks: `Builder`).
    m_threads: ThreadConfig,
    /// The runtime's clock: real time unless a test paused it (`paused.rs`).
    pub(crate) clock: RuntimeClock,
    /// The tasks in `gort::time::advance` (`paused.rs`).
    pub(crate) advances: Advances,
    /// This runtime, weakly: what its Ps' heaps name as their owner (`hosts.rs`).
    pub(crate) me: Weak<Shared>,
}

impl Shared {
    pub(crate) fn new(
        procs: usize,
        blocking: Arc<Blocking>,
        m_threads: ThreadConfig,
    ) -> std::io::Result<Arc<Shared>> {
        let poller = Poller::new()?;
        let shared = Arc::new_cyclic(|me| Shared {
            me: me.clone(),
            allp: (0..MAX_PROCS).map(|_| OnceLock::new()).collect(),
            nallp: AtomicUsize::new(0),
            nprocs: AtomicUsize::new(procs),
            global: Global::default(),
            idle: Idle::new(),
            poller,
            registry: Registry::new(),
            blocking,
            shutdown: AtomicBool::new(false),
            threads: Mutex::new(Vec::new()),
            live_ms: Mutex::new(0),
            ms_exited: Condvar::new(),
            panics: AtomicU64::new(0),
            user_panics: AtomicU64::new(0),
            sysmon_looks: AtomicU64::new(0),
            sysmon_ring_wakes: AtomicU64::new(0),
            sysmon_runnext_handoffs: AtomicU64::new(0),
            next_m: AtomicUsize::new(0),
            home_cursor: AtomicUsize::new(0),
            m_threads,
            clock: RuntimeClock::new(),
            advances: Advances::default(),
        });
        for id in 0..procs {
            let p = shared.make_p(id);
            shared.idle.pidleput(p);
        }
        Ok(shared)
    }

    /// Creates P `id` if it never existed; returns it.
    pub(crate) fn make_p(&self, id: usize) -> Arc<P> {
        let p = self.allp[id]
            .get_or_init(|| Arc::new(P::new(id, crate::hosts::owner_host(&self.me))))
            .clone();
        self.nallp.fetch_max(id + 1, AcqRel);
        p
    }

    /// Go's `checkTimers` on one heap, counting the timers that ran for the poller's
    /// coalescing. `local`: the caller holds the P that owns `timers`.
    ///
    /// A payload (a waker, a callback, the `Drop` of either) that panics ends the batch: the
    /// panic is counted (`Metrics::user_panics`) and the rest of the due timers run in the
    /// caller's next round, which `next` (the heap's `wake_time`, already due) asks for. The
    /// payload runs with the heap unlocked and the timer out of every transient status, so
    /// the heap is whole when the panic reaches here.
    pub(crate) fn run_timers(&self, timers: &Timers, now: Nanos, local: bool) -> Checked {
        self.run_timers_at_most(timers, now, local, usize::MAX)
    }

    /// [`Shared::run_timers`] that runs at most `max` timers (`Timers::check_at_most`).
    pub(crate) fn run_timers_at_most(
        &self,
        timers: &Timers,
        now: Nanos,
        local: bool,
        max: usize,
    ) -> Checked {
        // Every M with timers passes here in each round, with the clock already read.
        crate::arena::tick(now);
        let c = self
            .catch_user(|| timers.check_at_most(now, local, max))
            .unwrap_or_else(|| Checked {
                next: timers.wake_time(),
                ran: 1,
            });
        if c.ran > 0 {
            self.poller.note_fired(c.ran);
        }
        c
    }

    /// [`Shared::run_timers`] for a helper that does not wait for the heap's lock
    /// (`Timers::try_check`); counted for the poller the same way, panics caught the same way.
    /// At most `max` timers run, as [`Shared::run_timers_at_most`].
    pub(crate) fn try_run_timers(&self, timers: &Timers, now: Nanos, max: usize) {
        match self.catch_user(|| timers.try_check_at_most(now, max)) {
            Some(Some(c)) if c.ran > 0 => self.poller.note_fired(c.ran),
            Some(_) => {}
            None => self.poller.note_fired(1),
        }
    }

    /// [`Shared::run_timers`] for sysmon, the backstop of a P stuck in one task: it waits
    /// for the heap's lock once, then gives way to whoever takes it between two timers
    /// (`Timers::check_giving_way`; the rest wait for that holder or sysmon's next look).
    pub(crate) fn run_timers_giving_way(&self, timers: &Timers, now: Nanos) -> Checked {
        crate::arena::tick(now);
        let c = self
            .catch_user(|| timers.check_giving_way(now))
            .unwrap_or_else(|| Checked {
                next: timers.wake_time(),
                ran: 1,
            });
        if c.ran > 0 {
            self.poller.note_fired(c.ran);
        }
        c
    }

    /// Runs `f`, user code the runtime calls outside a task poll (a waker, the `Drop` of a
    /// future, payload or callback): a panic in it must not unwind into an M, a blocking
    /// thread or shutdown. `None` if it panicked, counted in `Metrics::user_panics`.
    pub(crate) fn catch_user<R>(&self, f: impl FnOnce() -> R) -> Option<R> {
        match catch_unwind(AssertUnwindSafe(f)) {
            Ok(r) => Some(r),
            Err(payload) => {
                self.user_panics.fetch_add(1, Relaxed);
                drop_panic_payload(payload);
                None
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

    /// Go's `wakep` (`park::wakep`): start a spinning M if there is an idle P and nobody is
    /// spinning.
    #[inline]
    pub(crate) fn wakep(self: &Arc<Self>) {
        park::wakep(self);
    }

    /// Go's `startm` (`park::startm`): run `p` (or an idle P) on an idle M, or on a new one.
    pub(crate) fn startm(self: &Arc<Self>, p: Option<Arc<P>>, spinning: bool) {
        park::startm(self, p, spinning);
    }

    fn spawn_m(self: &Arc<Self>, p: Arc<P>, spinning: bool) {
        let n = self.next_m.fetch_add(1, Relaxed);
        let shared = self.clone();
        *self.live_ms.lock() += 1;
        let handle = Arc::new(MHandle::default());
        let kept = p.clone();
        let spawned = self.m_threads.spawn(
            || format!("gort-m{n}"),
            Arc::downgrade(self),
            move || worker::m_main(shared, handle, p, spinning),
        );
        match spawned {
            Ok(h) => {
                let mut threads = self.threads.lock();
                // Forget threads that already ended (an M exits only at shutdown, but keep the
                // list bounded anyway).
                threads.retain(|t| !t.is_finished());
                threads.push(h);
            }
            Err(e) => {
                // The M never ran: uncount it, or shutdown would wait for it for ever, and
                // give its P back (and its spinning count, as `startm` does at shutdown), or
                // the P's tasks and timers would wait for ever.
                *self.live_ms.lock() -= 1;
                self.ms_exited.notify_all();
                self.idle.pidleput(kept);
                if spinning {
                    self.idle.dec_spinning();
                }
                panic!("gort: cannot start a worker thread: {e}")
            }
        }
    }

    /// Go's `handoffp`: the holder of `p` is about to block (block_in_place); find `p` a new M
    /// if it has anything to do, else idle it.
    pub(crate) fn handoffp(self: &Arc<Self>, p: Arc<P>) {
        // SAFETY: the caller held `p` until this call and passes its ownership here, from a
        // task's poll (no `with_local` borrow is live).
        unsafe { self.flush_releases(&p) };
        let has_local = p.has_runnext() || p.has_queued();
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
            self.wake_netpoller(when);
        }
    }

    /// Go's `wakeNetPoller(when)` (`park::wake_netpoller`): make sure some M will wake up by
    /// `when`.
    pub(crate) fn wake_netpoller(self: &Arc<Self>, when: Nanos) {
        park::wake_netpoller(self, when, false);
    }

    /// [`Shared::wake_netpoller`] for a timer whose firing wakes only the task running on
    /// this thread (a `Sleep` armed in its poll): an M that holds a P may owe the `wakep`
    /// instead (`park::wake_netpoller`).
    pub(crate) fn wake_netpoller_own(self: &Arc<Self>, when: Nanos) {
        park::wake_netpoller(self, when, true);
    }

    /// Queues a runnable task: on this thread's P when it holds one of this runtime (in
    /// `runnext` when `next`), else on the global queue; then `wakep` if the task is stealable.
    /// `lane`: what overflows to the global queue is new work (a spawn) or started work.
    pub(crate) fn push_task(self: &Arc<Self>, task: Task, next: bool, lane: Lane) {
        self.push_task_from(self.held_p(), task, next, lane);
    }

    /// [`Shared::push_task`] by a caller that has looked up `p`, this thread's P of this
    /// runtime or null ([`Shared::held_p`]): a spawn needs it for the registry too.
    #[inline]
    pub(crate) fn push_task_from(
        self: &Arc<Self>,
        p: *const P,
        task: Task,
        next: bool,
        lane: Lane,
    ) {
        let stealable = if !p.is_null() {
            // SAFETY: this thread holds `p` (context invariant) and no `with_local` borrow is
            // live across a task poll, which is where we are called from.
            let stealable = unsafe { (*p).push_local(task, next, &self.global, lane) };
            // A batch of readied sockets wakes one M at its end (`Shared::wake_batch`).
            stealable && !context::defer_wake(self)
        } else {
            self.global.push_woken(task, lane);
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

    /// The P this thread holds if it is one of this runtime's (a task of this runtime may be
    /// polled on another's P), else null.
    #[inline]
    pub(crate) fn held_p(self: &Arc<Self>) -> *const P {
        let p = context::current_p();
        if !p.is_null() && context::with_current(|c| c.is_some_and(|c| Arc::ptr_eq(c, self))) {
            p
        } else {
            std::ptr::null()
        }
    }

    /// Takes the finished tasks at `keys` out of the registry; their last references, if
    /// these are, are dropped with user panics caught (the output's `Drop` is user code).
    fn remove_released(&self, keys: &mut [usize]) {
        self.registry.remove_batch(keys, |t| {
            self.catch_user(|| drop(t));
        });
    }

    /// Takes the finished tasks `p` still holds out of the registry: called by its holder
    /// before the P goes idle, blocks or retires, so that their cells do not wait for the
    /// P's next holder.
    ///
    /// # Safety
    ///
    /// The caller holds `p` and no `with_local` borrow of it is live.
    pub(crate) unsafe fn flush_releases(&self, p: &P) {
        // SAFETY: forwarded contract.
        let (mut keys, n) = unsafe { p.take_releases() };
        if n > 0 {
            self.remove_released(&mut keys[..n]);
        }
    }

    /// The timers a new timer armed on a thread without a P (block_on, the blocking pool,
    /// sysmon) goes to: a live P's, picked round-robin. A thread holding a P uses its own
    /// (`timer_api::modtimer` checks that first).
    pub(crate) fn timer_home_without_p(&self) -> &Timers {
        let n = self.nprocs().max(1);
        let id = self.home_cursor.fetch_add(1, Relaxed) % n;
        match self.p(id) {
            Some(p) if p.status() != PStatus::Dead => &p.timers,
            _ => &self.p(0).expect("gort: P 0 always exists").timers,
        }
    }
}

/// The scheduler as the park/unpark hand-off sees it (`park.rs`).
impl Sched for Arc<Shared> {
    type P = P;
    type Poller = Poller;

    fn idle(&self) -> &Idle<P> {
        &self.idle
    }

    fn poller(&self) -> &Poller {
        &self.poller
    }

    fn is_shutdown(&self) -> bool {
        Shared::is_shutdown(self)
    }

    fn now(&self) -> Nanos {
        self.clock.now()
    }

    fn clock_paused(&self) -> bool {
        self.clock.is_paused()
    }

    fn advance_paused_clock(&self) -> Quiet {
        Shared::advance_paused_clock(self)
    }

    fn wake_now(&self, readied: &mut Vec<std::task::Waker>) {
        self.wake_each(readied.drain(..));
    }

    fn awaits_quiescence(&self) -> bool {
        self.clock.is_paused() && self.advances.has_waiters()
    }

    /// An M that holds a P of this runtime owes the `wakep` (`worker.rs` pays it before its
    /// next task, or drops it when it goes idle); any other thread (`block_on`, a blocking
    /// thread, sysmon, a `block_in_place` that handed its P off) wakes at once. Not under a
    /// paused clock, whose poller waits for quiescence rather than a deadline.
    fn owe_timer_wakep(&self) -> bool {
        if self.held_p().is_null() || self.clock.is_paused() {
            return false;
        }
        context::owe_timer_wake();
        true
    }

    fn net_waiting(&self) -> bool {
        Shared::net_waiting(self)
    }

    fn global_has_work(&self) -> bool {
        !self.global.is_empty()
    }

    /// Go re-checks every P's run queue; gort also re-checks the global queue, which has a
    /// lock of its own (park.rs, "The no-lost-wake-up argument").
    fn work_queued(&self) -> bool {
        !self.global.is_empty() || self.all_ps().any(|p| p.has_queued())
    }

    /// Timers already due belong to a P the idle M could not steal from (the spinning limit):
    /// they run here, P-less, rather than the M looping back until their owner gets to them
    /// (Go's `findrunnable` loops: design/ARCHITECTURE.md, "Why these rules"). The tasks they
    /// wake go to the global queue, with a `wakep`. Includes timers added while the M searched.
    fn run_idle_timers(&self, mut poll_until: Nanos, now: Nanos) -> (Nanos, Nanos) {
        let mut latest = 0;
        for p in self.all_ps() {
            let mut w = p.timers.wake_time();
            if w != 0 && w <= now {
                let _hold = self.hold_paused_clock();
                w = self.run_timers(&p.timers, now, false).next;
            }
            poll_until = gort_timer::min_nonzero(poll_until, w);
            latest = gort_timer::min_nonzero(latest, p.timers.wake_bound());
        }
        (poll_until, latest)
    }

    fn timers_due(&self, now: Nanos) -> bool {
        self.all_ps()
            .any(|p| matches!(p.timers.wake_time(), w if w != 0 && w <= now))
    }

    fn start_m(&self, p: Arc<P>, spinning: bool) {
        self.spawn_m(p, spinning);
    }
}

/// The runtime's poller behind the hand-off's seam.
impl Poll for Poller {
    fn poll(&self, until: Nanos, latest: Nanos, readied: &mut Vec<std::task::Waker>) {
        Poller::poll(self, until, latest, readied);
    }

    fn published(&self, until: Nanos, latest: Nanos) -> Nanos {
        Poller::published(self, until, latest)
    }

    fn wake(&self) {
        self.break_poll();
    }
}

impl crate::p::Thieves for Arc<Shared> {
    fn any_idle(&self) -> bool {
        self.idle.npidle() > 0
    }

    fn wake_one(&self) {
        self.wakep();
    }

    fn procs(&self) -> usize {
        self.nprocs()
    }
}

impl Schedule for Arc<Shared> {
    fn schedule(&self, task: Task) {
        let p = self.held_p();
        let shared = RuntimeRef::outside_cell(self, p);
        if shared.is_shutdown() {
            // Nothing will run it; the teardown drops queued tasks.
            shared.global.push(task, Lane::Ready);
            return;
        }
        shared.push_task_from(p, task, true, Lane::Ready);
    }

    fn yield_task(&self, task: Task) {
        let p = self.held_p();
        let shared = RuntimeRef::outside_cell(self, p);
        shared.push_task_from(p, task, false, Lane::Ready);
        if !p.is_null() {
            // SAFETY: this thread holds `p` (context invariant), and a yield is queued after
            // the task's poll, outside every `with_local` borrow.
            unsafe { (*p).note_yield(&shared.global) };
        }
    }

    fn release(&self, slot: usize) {
        let p = self.held_p();
        if p.is_null() {
            self.registry.remove(slot);
            return;
        }
        // SAFETY: this thread holds `p` (context invariant), and a task finishes inside its
        // run, outside every `with_local` borrow (as `push_task`).
        if let Some(mut keys) = unsafe { (*p).defer_release(slot) } {
            self.remove_released(&mut keys[..]);
        }
    }

    fn on_panic(&self) {
        self.panics.fetch_add(1, Relaxed);
    }
}

/// A task's runtime reached through an `Arc` that does not live in the task's cell. The
/// handle in the cell may be freed once the task is queued (`Schedule`'s rule) while the
/// caller still needs the runtime (`wakep` after the push). On a thread of this runtime
/// (`p` held, or the context's runtime) the context's `Arc` keeps the runtime alive for the
/// call, so a copy of the handle's pointer, not counted, will do; another thread (a waker
/// called outside the runtime) counts a clone of its own.
struct RuntimeRef {
    arc: std::mem::ManuallyDrop<Arc<Shared>>,
    counted: bool,
}

impl RuntimeRef {
    /// `p`: `handle.held_p()`.
    #[inline]
    fn outside_cell(handle: &Arc<Shared>, p: *const P) -> RuntimeRef {
        let ours =
            !p.is_null() || context::with_current(|c| c.is_some_and(|c| Arc::ptr_eq(c, handle)));
        let arc = if ours {
            // SAFETY: a bitwise copy of the handle, never dropped (`counted` is false): this
            // thread's context holds another `Arc` of the same runtime until the call ends.
            unsafe { std::ptr::read(handle) }
        } else {
            Arc::clone(handle)
        };
        RuntimeRef {
            arc: std::mem::ManuallyDrop::new(arc),
            counted: !ours,
        }
    }
}

impl std::ops::Deref for RuntimeRef {
    type Target = Arc<Shared>;
    fn deref(&self) -> &Arc<Shared> {
        &self.arc
    }
}

impl Drop for RuntimeRef {
    fn drop(&mut self) {
        if self.counted {
            // SAFETY: `counted` marks a clone this value owns; dropped once, here.
            unsafe { std::mem::ManuallyDrop::drop(&mut self.arc) }
        }
    }
}

/// An M's place in `Shared::live_ms` (counted by `spawn_m`), given back when the M's thread
/// ends, also by unwinding.
pub(crate) struct LiveM<'a>(pub(crate) &'a Shared);

impl Drop for LiveM<'_> {
    fn drop(&mut self) {
        let mut live = self.0.live_ms.lock();
        *live -= 1;
        self.0.ms_exited.notify_all();
    }
}
