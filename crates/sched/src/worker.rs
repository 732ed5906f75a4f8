//! M: a worker thread. Its loop is Go's `schedule` + `findrunnable` + `stealWork` +
//! `stopm`: run timers, then local work, then global work, then steal (with other Ps'
//! timers), then give the P up and either block in the poller until the earliest timer or
//! park.

use crate::context;
use crate::hosts::DeferredHost;
use crate::idle::MHandle;
use crate::p::{PStatus, Thieves, P};
use crate::park::{self, Back, Polled};
use crate::peers::Watch;
use crate::runq::{Lane, Take};
use crate::shared::{LiveM, Shared};
use crate::task::Task;
use gort_timer::{min_nonzero, nanotime, Nanos};
use std::sync::Arc;
use std::task::Waker;

/// Rounds of stealing before an M gives up (Go's `stealTries`); timers of other Ps are
/// checked in the last round only, as Go does, so that a spinning M first looks for tasks.
const STEAL_TRIES: usize = 4;

/// How long a thief waits before it takes a running P's `runnext` (Go's `usleep(3)` in
/// `runqgrab`): a task that readies another and then blocks at once lets its own P run it,
/// rather than have it move between Ps. Go's `ready` takes ~50 ns, so 3 µs is ample.
const RUNNEXT_PAUSE: std::time::Duration = std::time::Duration::from_micros(3);

/// An M's own state. The runtime's `Shared` is passed to every method rather than kept as
/// a field: cloning its `Arc` in the scheduling loop would bounce the reference count's cache
/// line, shared by every M, on every round.
struct M {
    handle: Arc<MHandle<P>>,
    p: Option<Arc<P>>,
    spinning: bool,
    rng: u64,
    watch: Watch,
    /// The wakers of the tasks this M's last blocking poll readied (its capacity is kept).
    readied: Vec<Waker>,
    /// Scheduling rounds left until the busy M's next look at the sockets
    /// (`M::busy_net_look`).
    rounds_to_net_look: u32,
}

/// Every this many scheduling rounds at the most a busy M takes a non-blocking look at the
/// sockets when tasks wait on them and no M is blocked in the poller (Tokio's
/// `event_interval`, 61; Go looks only when an M runs out of work, and in sysmon after 10 ms);
/// less often while its ring holds more tasks than that (`M::busy_net_look`).
const NET_POLL_INTERVAL: u32 = 61;

/// What one scheduling round has learned about time.
#[derive(Default)]
struct Round {
    /// Whether this P had timers at the start of the round.
    own_timers: bool,
    /// The clock, read once per round and only when needed (0 = not read yet).
    now: Nanos,
    /// The earliest deadline seen on any heap this round (0 = none): the poller's deadline.
    poll_until: Nanos,
}

/// The outcome of the stealing phase.
enum Stolen {
    Task(Task),
    /// Other Ps' timers ran and may have readied tasks onto this P: start the round again.
    TimersRan,
    Nothing,
}

/// Entry point of every M thread.
pub(crate) fn m_main(shared: Arc<Shared>, handle: Arc<MHandle<P>>, p: Arc<P>, spinning: bool) {
    let _ctx = context::enter(shared.clone());
    let rng = (Arc::as_ptr(&handle) as u64) ^ nanotime() as u64 | 1;
    let mut m = M {
        handle,
        p: None,
        spinning,
        rng,
        watch: Watch::default(),
        readied: Vec::new(),
        rounds_to_net_look: NET_POLL_INTERVAL,
    };
    // Counted in `live_ms` since `spawn_m`; uncounted however this thread ends, so that
    // shutdown never waits for an M that is gone.
    let _live = LiveM(&shared);
    m.acquire(p);
    // User code is caught where the runtime calls it; a panic that reaches the loop anyway
    // is counted (`Metrics::user_panics`) and the loop resumes: an M never dies of one.
    while shared.catch_user(|| m.schedule(&shared)).is_none() {
        m.sync_p_after_run(&shared);
    }
    m.drop_p_on_exit(&shared);
    drop(m);
}

/// A task returned with another runtime entered on this worker: puts the worker back, then
/// says so with a panic, which the M loop catches (counted in `Metrics::user_panics`).
#[cold]
#[inline(never)]
fn left_entered(shared: &Arc<Shared>) -> ! {
    context::restore_worker(shared);
    panic!("{LEFT_ENTERED}");
}

/// The message of a worker or blocking thread put back into its own runtime.
pub(crate) const LEFT_ENTERED: &str = "gort: a task or blocking closure returned with another \
    runtime entered on its thread (a `Handle::enter` guard leaked with `mem::forget`, or \
    guards dropped out of order); the thread was put back into its own runtime";

impl M {
    fn acquire(&mut self, p: Arc<P>) {
        context::set_current_p(Arc::as_ptr(&p));
        self.p = Some(p);
    }

    /// The P this M holds, borrowed for as long as the runtime lives (Ps are never freed
    /// before it), so that the loops can call `&mut self` methods without cloning the `Arc`.
    fn held_p<'a>(&self, _runtime: &'a Shared) -> Option<&'a P> {
        let p = Arc::as_ptr(self.p.as_ref()?);
        // SAFETY: `allp` in `Shared` keeps every P alive for the runtime's whole life, and the
        // caller's `&'a Shared` proves the runtime outlives `'a`.
        Some(unsafe { &*p })
    }

    fn take_p(&mut self) -> Option<Arc<P>> {
        context::set_current_p(std::ptr::null());
        self.p.take()
    }

    fn drop_p_on_exit(&mut self, shared: &Arc<Shared>) {
        if let Some(p) = self.take_p() {
            // SAFETY: this M held `p` until now, between tasks.
            unsafe { shared.flush_releases(&p) };
            shared.idle.pidleput(p);
        }
    }

    fn next_rand(&mut self) -> u64 {
        // xorshift64: a few cycles, enough to spread victims.
        let mut x = self.rng;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.rng = x;
        x
    }

    /// Go's `schedule`: the M's whole life.
    fn schedule(&mut self, shared: &Arc<Shared>) {
        loop {
            if shared.is_shutdown() {
                return;
            }
            let Some(id) = self.p.as_ref().map(|p| p.id) else {
                if !self.stopm(shared) {
                    return;
                }
                continue;
            };
            if id >= shared.nprocs() {
                self.retire_p(shared);
                continue;
            }
            if let Some(task) = self.find_runnable(shared) {
                if self.spinning {
                    self.reset_spinning(shared);
                }
                if context::take_timer_wake() {
                    // A timer this M armed while nobody polled: the task may run long.
                    shared.wakep();
                }
                {
                    let _running = context::RunningTask::enter();
                    task.run();
                }
                if !context::is_current(shared) {
                    left_entered(shared);
                }
                self.sync_p_after_run(shared);
            }
        }
    }

    /// A task's poll may have called `block_in_place`, which hands our P away and may pick up
    /// another: the context says which P this thread holds now.
    fn sync_p_after_run(&mut self, shared: &Arc<Shared>) {
        let now = context::current_p();
        let held = self.p.as_ref().map_or(std::ptr::null(), Arc::as_ptr);
        if now != held {
            self.p = if now.is_null() {
                None
            } else {
                // SAFETY: a non-null context P is a live P of this runtime.
                let id = unsafe { (*now).id };
                shared.p(id).cloned()
            };
        }
    }

    /// Go's `resetspinning`: we found work; if we were the last spinner and more work is
    /// waiting where another M could take it, wake another so that a burst is spread.
    ///
    /// Go wakes one unconditionally; when the task found was the only one (a timer woke one
    /// task, a message arrived), that M spins, finds nothing and parks again: a futex round
    /// trip per event. Work that arrives after this check wakes an M itself (`push_task`);
    /// work that arrived while this M was spinning did not (`wakep` leaves new work to the
    /// spinner), so this check must see all of it, in any P's ring.
    fn reset_spinning(&mut self, shared: &Arc<Shared>) {
        self.spinning = false;
        if shared.idle.dec_spinning() == 0 && more_work_queued(shared) {
            shared.wakep();
        }
    }

    /// Go's `findrunnable`: the phases below, in Go's order, until one yields a task. Returns
    /// `None` when the runtime shuts down or the M holds no P (it parked and will retry).
    fn find_runnable(&mut self, shared: &Arc<Shared>) -> Option<Task> {
        loop {
            let p = self.held_p(shared)?;
            if shared.is_shutdown() || p.id >= shared.nprocs() {
                return None;
            }
            let mut round = self.run_own_timers(shared, p);
            self.watch
                .look_at_a_peer(shared, p, round.own_timers, &mut round.now);
            self.busy_net_look(shared, p);
            if let Some(t) = self.local_work(shared, p) {
                return Some(t);
            }
            if let Some(t) = self.global_work(shared, p) {
                return Some(t);
            }
            if shared.look_before_stealing() {
                continue;
            }
            match self.steal(shared, p, &mut round) {
                Stolen::Task(t) => return Some(t),
                Stolen::TimersRan => continue,
                Stolen::Nothing => {}
            }
            if let Some(t) = self.new_work(shared, p) {
                return Some(t);
            }
            if self.go_idle(shared, round.poll_until) {
                continue;
            }
            if !self.stopm(shared) {
                return None;
            }
        }
    }

    /// A busy M's look at the sockets: the tasks whose sockets became ready while every M was
    /// busy are queued here. The next look comes `NET_POLL_INTERVAL` rounds later, or once
    /// the tasks queued now (those it readied included) have had their turn if they are more:
    /// a look before that runs no readied task sooner (all but the one `runnext` takes queue
    /// behind the same backlog), but splits each socket's data into more, smaller reads
    /// (design/PERFORMANCE-LOG.md, "A busy M's look at the sockets waits for its backlog").
    fn busy_net_look(&mut self, shared: &Arc<Shared>, p: &P) {
        self.rounds_to_net_look -= 1;
        if self.rounds_to_net_look > 0 {
            return;
        }
        shared.poll_net_nonblocking();
        let queued = u32::try_from(p.stealer.len()).unwrap_or(u32::MAX);
        self.rounds_to_net_look = queued.max(NET_POLL_INTERVAL);
    }

    /// Phase 1, Go's `checkTimers(pp, 0)`: runs this P's due timers before any task is picked,
    /// so that the tasks they wake are found by the next phase. The clock is read only when the
    /// P has timers, as in Go: a clock read costs more than a yield's whole scheduling round.
    ///
    /// A spinner that finds timers due stops counting as a spinner before running them: they
    /// are work found, and a spinner counted through a long batch keeps `push_task` from waking
    /// a helper and, if the OS preempts it, keeps other Ms from stealing the tasks it queued
    /// (the spinning limit of [`M::steal`]). Then the M looks at one other P's timers
    /// ([`Watch::look_at_a_peer`]). At most the ring's room of timers run ([`P::timer_room`]).
    fn run_own_timers(&mut self, shared: &Arc<Shared>, p: &P) -> Round {
        let mut round = Round::default();
        let due = p.timers.wake_time();
        if due != 0 {
            round.own_timers = true;
            round.now = nanotime();
            p.note_timer_round(round.now);
            if self.spinning && due <= round.now {
                self.reset_spinning(shared);
            }
            round.poll_until = shared
                .run_timers_at_most(&p.timers, round.now, true, p.timer_room())
                .next;
        }
        round
    }

    /// Phase 2, the local queue: `runnext`, the P's ring, and every 61st tick the global queue
    /// first so that it cannot starve (`P::next_local`).
    fn local_work(&self, shared: &Arc<Shared>, p: &P) -> Option<Task> {
        // SAFETY: this M holds `p`.
        unsafe { p.next_local(&shared.global, shared) }
    }

    /// Phase 3, Go's `globrunqget(pp, 0)`: a share of the global queue's started work, at most
    /// half a ring. New work waits until no P has any to steal (runq.rs, "Two lanes").
    fn global_work(&self, shared: &Shared, p: &P) -> Option<Task> {
        self.refill(shared, p, Take::Only(Lane::Ready))
    }

    /// Phase 4, Go's `stealWork`, for at most half the busy Ps' worth of spinning Ms (Go's
    /// limit): spinning costs CPU that busy Ps could use, and one spinner finds new work as
    /// well as many. Folds the earliest timer seen into `round.poll_until`.
    fn steal(&mut self, shared: &Shared, p: &P, round: &mut Round) -> Stolen {
        let busy = shared.nprocs().saturating_sub(shared.idle.npidle());
        if !self.spinning && 2 * shared.idle.nmspinning() >= busy {
            return Stolen::Nothing;
        }
        if !self.spinning {
            self.spinning = true;
            shared.idle.inc_spinning();
        }
        if round.now == 0 {
            round.now = nanotime();
        }
        let (task, next, ran) = self.steal_work(shared, p, round.now);
        if let Some(t) = task {
            return Stolen::Task(t);
        }
        round.poll_until = min_nonzero(round.poll_until, next);
        if ran {
            // Stolen timers may have readied tasks (onto our runnext): look again.
            return Stolen::TimersRan;
        }
        Stolen::Nothing
    }

    /// Phase 4, continued: the global queue again, both lanes, started work first: new work
    /// (a spawn that overflowed) is taken only here, once nothing was left to steal.
    fn new_work(&self, shared: &Shared, p: &P) -> Option<Task> {
        self.refill(shared, p, Take::First(Lane::Ready))
    }

    /// Phases 5 and 6 (`park::release_and_recheck`, `park::poll`): gives the P up, re-checks
    /// every queue, then polls until the earliest timer if nobody else does. Returns false
    /// when the M should park (phase 7); true when it holds a P again, or on shutdown (the
    /// loop's first check then ends it).
    fn go_idle(&mut self, shared: &Arc<Shared>, poll_until: Nanos) -> bool {
        let p = self.take_p().expect("gort: M lost its P");
        // SAFETY: this M held `p` until now, between tasks.
        unsafe { shared.flush_releases(&p) };
        let spinning = std::mem::take(&mut self.spinning);
        let was_spinning = match park::release_and_recheck(shared, p, spinning) {
            Ok(was_spinning) => was_spinning,
            Err(back) => return self.take_back(back),
        };
        // The poll phase looks at every heap: it covers a timer this M owed a `wakep` for.
        context::take_timer_wake();
        let polled = park::poll(shared, poll_until, was_spinning, &mut self.readied);
        let holds_p = match polled {
            Polled::Holds(back) => self.take_back(back),
            Polled::Shutdown => true,
            Polled::Park => false,
        };
        self.wake_readied(shared);
        holds_p
    }

    /// Go's `findrunnable` after a blocking `netpoll`: the M that polled took a P back and
    /// runs the tasks its poll readied itself. Woken on its P, a task fills the empty
    /// `runnext`, which this M runs next, and wakes nobody; each further one pushes the one
    /// before to the ring, which wakes a spinning M to steal it (`Shared::push_task`). An idle
    /// server thus wakes no other M per request, where queuing them globally with a `wakep`
    /// woke a parked M for a task this M then raced it to. With no P back (all busy, or
    /// shutdown), they go to the global queue with a `wakep`, as a P-less wake does.
    fn wake_readied(&mut self, shared: &Arc<Shared>) {
        let readied = &mut self.readied;
        shared.wake_batch(|| shared.wake_each(readied.drain(..)));
    }

    /// The M holds a P again (and spins or not) after the hand-off.
    fn take_back(&mut self, (p, spinning): Back<P>) -> bool {
        self.acquire(p);
        self.spinning = spinning;
        true
    }

    /// Go's `globrunqget(pp, 0)`: a fair share of the global queue's lanes (as `take` says),
    /// at most half a ring.
    fn refill(&self, shared: &Shared, p: &P, take: Take) -> Option<Task> {
        // SAFETY: this M holds `p`.
        unsafe {
            p.with_local(|l| {
                let n = shared.global.len() / shared.nprocs().max(1) + 1;
                l.queue.refill(&shared.global, n, take)
            })
        }
    }

    /// Go's `stealWork`: several rounds over the other Ps in random order; the last round
    /// also runs their due timers. Returns a task, the earliest timer seen, and whether any
    /// timer ran.
    fn steal_work(
        &mut self,
        shared: &Shared,
        p: &P,
        mut now: Nanos,
    ) -> (Option<Task>, Nanos, bool) {
        let n = shared.nallp();
        let mut next = 0;
        let mut ran = false;
        if n <= 1 {
            return (None, 0, false);
        }
        for round in 0..STEAL_TRIES {
            let last = round == STEAL_TRIES - 1;
            let start = self.next_rand() as usize % n;
            let stride = coprime_stride(n, self.next_rand() as usize);
            for i in 0..n {
                let id = (start + i * stride) % n;
                if id == p.id {
                    continue;
                }
                let Some(p2) = shared.p(id) else { continue };
                if last {
                    let c = shared.run_timers(&p2.timers, now, false);
                    next = min_nonzero(next, c.next);
                    if c.ran > 0 {
                        ran = true;
                        now = nanotime();
                        // A task this leaves stealable is woken for by `reset_spinning`
                        // (this M spins), which sees it in the ring.
                        let spinning = SpinningThief(shared);
                        // SAFETY: this M holds `p`.
                        if let Some(t) = unsafe { p.next_local(&shared.global, &spinning) } {
                            return (Some(t), next, ran);
                        }
                    }
                }
                if p2.has_queued() {
                    // SAFETY: this M holds `p`; stealing into its own queue.
                    let (t, moved) = unsafe {
                        p.with_local(|l| {
                            let before = p.stealer.len();
                            let t = p2.stealer.steal_into(&mut l.queue);
                            (t, p.stealer.len().saturating_sub(before))
                        })
                    };
                    if t.is_some() {
                        p.note_stolen(1 + moved);
                        return (t, next, ran);
                    }
                }
                // Go's `stealRunNextG`: in the last round, a P with nothing else to steal.
                if last && !p2.has_queued() && p2.has_runnext() {
                    if let Some(t) = steal_runnext(p2) {
                        p.note_stolen(1);
                        return (Some(t), next, ran);
                    }
                }
            }
        }
        (None, next, ran)
    }

    /// Phase 7, Go's `stopm` (`park::stopm`): park until handed a P. Returns false on
    /// shutdown.
    fn stopm(&mut self, shared: &Arc<Shared>) -> bool {
        debug_assert!(self.p.is_none() && !self.spinning);
        match park::stopm(shared, &self.handle) {
            Some(back) => self.take_back(back),
            None => false,
        }
    }

    /// Our P was removed by `set_procs` (Go's `procresize` -> `destroy`): move its tasks to the
    /// global queue and its timers to a live P, then mark it dead.
    fn retire_p(&mut self, shared: &Arc<Shared>) {
        let p = self.take_p().expect("gort: retire without a P");
        // SAFETY: this M held `p` until now, between tasks.
        unsafe { shared.flush_releases(&p) };
        let host = DeferredHost::default();
        // Payloads the move lets go of: dropped after the scheduler lock (user code).
        let mut released = None;
        let retired = shared.idle.locked(|l| {
            let n = shared.nprocs();
            if p.id < n {
                // set_procs grew again before we got here: keep running it.
                return Err(p);
            }
            // SAFETY: we held `p` and give it up here, under the scheduler lock.
            unsafe { p.drain_local(|t| shared.global.push(t, Lane::Ready)) };
            let dst = shared.p(p.id % n).expect("gort: live P missing");
            released = Some(p.timers.move_to(&dst.timers, &host));
            p.set_status(PStatus::Dead);
            let _ = l;
            Ok(())
        });
        drop(released);
        host.flush(shared);
        match retired {
            Err(p) => self.acquire(p),
            Ok(()) => {
                if self.spinning {
                    self.spinning = false;
                    shared.idle.dec_spinning();
                }
                shared.wakep();
            }
        }
    }
}

/// Takes `victim`'s `runnext` task, after [`RUNNEXT_PAUSE`] if a holder may be about to run
/// it: only the fill seen before the pause, so that a holder that ran it and queued another
/// keeps the new one. Out of line: the steal loop's common path keeps none of this.
#[cold]
#[inline(never)]
fn steal_runnext(victim: &P) -> Option<Task> {
    let seen = victim.runnext_seen()?;
    if victim.status() == PStatus::Running {
        let until = std::time::Instant::now() + RUNNEXT_PAUSE;
        while std::time::Instant::now() < until {
            std::hint::spin_loop();
        }
    }
    victim.steal_runnext(seen)
}

/// A stride coprime with `n`, so that `start + i * stride` visits every index once (Go's
/// `randomOrder`): different Ms walk the Ps in different orders and do not convoy.
fn coprime_stride(n: usize, seed: usize) -> usize {
    let mut s = seed % n;
    for _ in 0..n {
        if s != 0 && gcd(s, n) == 1 {
            return s;
        }
        s = (s + 1) % n;
    }
    1
}

fn gcd(mut a: usize, mut b: usize) -> usize {
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
}

/// [`Thieves`] for a spinning M: it wakes nobody itself, since `reset_spinning` does once it
/// runs what it found, seeing a task moved to its ring.
struct SpinningThief<'a>(&'a Shared);

impl Thieves for SpinningThief<'_> {
    fn any_idle(&self) -> bool {
        self.0.idle.npidle() > 0
    }

    fn wake_one(&self) {}

    fn procs(&self) -> usize {
        self.0.nprocs()
    }
}

/// Whether work is waiting where another M could take it: the global queue, or any P's ring
/// (the task the caller runs is already out of its own). No P may idle while a runnable task
/// waits: the task that P's holder runs may not yield for a long time (work conservation;
/// tests `two_tasks_spawned_together_both_start` and Go's TestGoroutineParallelism2). Only
/// the last spinner to find work asks, so the O(P) look is off every task's path. A wake-up
/// lost anyway costs about one sysmon tick, not the computation (sysmon.rs, "Rings").
fn more_work_queued(shared: &Shared) -> bool {
    !shared.global.is_empty() || shared.all_ps().any(|p| !p.stealer.is_empty())
}
