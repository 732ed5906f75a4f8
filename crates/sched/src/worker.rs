//! M: a worker thread. Its loop is Go's `schedule` + `findrunnable` + `stealWork` +
//! `stopm`: run timers, then local work, then global work, then steal (with other Ps'
//! timers), then give the P up and either block in the poller until the earliest timer or
//! park.

use crate::context;
use crate::idle::{MHandle, Woken, PARK_BACKSTOP};
use crate::p::{P, P_DEAD, P_RUNNING};
use crate::runq::{Lane, Take};
use crate::shared::{DeferredHost, Shared};
use crate::task::Task;
use gort_timer::{nanotime, Nanos};
use std::sync::atomic::Ordering::*;
use std::sync::Arc;

/// Rounds of stealing before an M gives up (Go's `stealTries`); timers of other Ps are
/// checked in the last round only, as Go does, so that a spinning M first looks for tasks.
const STEAL_TRIES: usize = 4;

/// How often an M whose P has timers looks at one other P for due timers its holder is not
/// getting to (`watch_peer`), in ns of the clock it reads anyway. The look loads the other
/// P's `timer0_when`, a line its holder writes whenever its earliest timer changes: a cache
/// miss that cost T6 5 % of its CPU when it came every 4th round.
const WATCH_EVERY: Nanos = 25_000;
/// How long a P's holder must have begun no scheduling round, with a timer due, before
/// another M runs that timer (ns). Shorter would take timers from holders that are merely
/// in a task of a few microseconds, and contend on their heap (T3 lost 30 % to that).
const STALL: Nanos = 100_000;

/// An M's own state. The runtime's `Shared` is passed to every method rather than kept as
/// a field: cloning its `Arc` in the scheduling loop made the reference count's cache line,
/// shared by every M, the hottest spot of the yield benchmark (R2).
struct M {
    handle: Arc<MHandle>,
    p: Option<Arc<P>>,
    spinning: bool,
    rng: u64,
    watch: Watch,
}

/// What `watch_peer` remembers between looks.
#[derive(Default)]
struct Watch {
    /// The P to look at next.
    next: usize,
    /// Per P id: its round count when this M first saw it with a timer due, and when.
    seen: Vec<(u32, Nanos)>,
    /// When `watch_peer` last looked.
    last_look: Nanos,
}

/// Entry point of every M thread.
pub(crate) fn m_main(shared: Arc<Shared>, handle: Arc<MHandle>, p: Arc<P>, spinning: bool) {
    let _ctx = context::enter(shared.clone());
    let rng = (Arc::as_ptr(&handle) as u64) ^ nanotime() as u64 | 1;
    let mut m = M {
        handle,
        p: None,
        spinning,
        rng,
        watch: Watch::default(),
    };
    m.acquire(p);
    m.schedule(&shared);
    m.drop_p_on_exit(&shared);
    drop(m);
    let mut live = shared.live_ms.lock();
    *live -= 1;
    shared.ms_exited.notify_all();
}

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
                task.run();
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
    /// task, a message arrived), that M spins, finds nothing and parks again, a futex round
    /// trip per event that was most of gort's CPU time in T3/T4. Work that arrives later
    /// wakes an M itself (`push_task`), so only work already queued needs this wake-up.
    fn reset_spinning(&mut self, shared: &Arc<Shared>) {
        self.spinning = false;
        if shared.idle.dec_spinning() == 0 && self.more_work_queued(shared) {
            shared.wakep();
        }
    }

    /// Whether enough stealable work is waiting for a second M to be worth its wake-up: the
    /// global queue has work, or this P's queue holds more than the one task this M would take
    /// next anyway (a futex wake-up and the context switches cost more than running one
    /// small task here).
    fn more_work_queued(&self, shared: &Shared) -> bool {
        !shared.global.is_empty() || self.p.as_ref().is_some_and(|p| p.stealer.len() > 1)
    }

    /// Go's `findrunnable`. Returns `None` when the M lost its P (it parked and will retry)
    /// or the runtime shuts down.
    fn find_runnable(&mut self, shared: &Arc<Shared>) -> Option<Task> {
        loop {
            let p = self.held_p(shared)?;
            if shared.is_shutdown() || p.id >= shared.nprocs() {
                return None;
            }
            // checkTimers(pp, 0): run this P's due timers before picking a task, so that the
            // tasks they wake are found just below. As in Go, the clock is read only when the
            // P has timers (a clock read costs more than a yield's whole scheduling round).
            let mut now = 0;
            let mut poll_until = 0;
            let due = p.timers.wake_time();
            if due != 0 {
                now = nanotime();
                if self.spinning && due <= now {
                    // Due timers are work found: stop counting as a spinner before running
                    // them. A spinner that stays counted through a long batch keeps
                    // `push_task` from waking a helper and, if the OS preempts it, keeps the
                    // other Ms from stealing the tasks it queued (the spinning limit below).
                    self.reset_spinning(shared);
                }
                poll_until = shared.run_timers(&p.timers, now, true).next;
            }
            p.note_round();
            if due == 0 {
                self.help_peer(shared, p, &mut now);
            } else if now - self.watch.last_look >= WATCH_EVERY {
                self.watch.last_look = now;
                self.watch_peer(shared, p, now);
            }

            // SAFETY: this M holds `p`.
            if let Some(t) = unsafe { p.next_local(&shared.global) } {
                return Some(t);
            }
            // Go's globrunqget(pp, 0): a share of the global queue, at most half a ring. Only
            // started work here: new work waits until no P has any to steal (runq.rs, "Two
            // lanes").
            if let Some(t) = self.refill(shared, p, Take::Only(Lane::Ready)) {
                return Some(t);
            }

            // Go's netpoll(0) before stealing: ready sockets' tasks come to this P.
            if shared.poll_net_nonblocking() {
                continue;
            }

            // Limit spinning Ms to half the busy Ps (Go): spinning costs CPU that busy Ps
            // could use, and one spinner finds new work as well as many.
            let busy = shared.nprocs().saturating_sub(shared.idle.npidle());
            if self.spinning || 2 * shared.idle.nmspinning() < busy {
                if !self.spinning {
                    self.spinning = true;
                    shared.idle.inc_spinning();
                }
                if now == 0 {
                    now = nanotime();
                }
                let (task, next, ran) = self.steal_work(shared, p, now);
                if task.is_some() {
                    return task;
                }
                poll_until = min_nonzero(poll_until, next);
                if ran {
                    // Stolen timers may have readied tasks (onto our runnext): look again.
                    continue;
                }
            }
            if let Some(t) = self.refill(shared, p, Take::First(Lane::Ready)) {
                return Some(t);
            }

            // Nothing to do: give the P up unless the global queue refilled meanwhile.
            let p = self.take_p().expect("gort: M lost its P");
            if let Err(p) = shared.idle.release_p(p, || !shared.global.is_empty()) {
                self.acquire(p);
                continue;
            }
            // The delicate dance (Go): drop nmspinning *then* re-check every source. Unlike Go,
            // non-spinning Ms re-check too: the global queue is pushed to without the scheduler
            // lock, so the check in `release_p` is not atomic with a push (found by the
            // `loom_park` model; see idle.rs).
            let was_spinning = std::mem::take(&mut self.spinning);
            if was_spinning {
                shared.idle.dec_spinning();
            } else {
                shared.idle.idle_fence();
            }
            // Work that appeared is work to steal, so the M comes back as a spinner whatever
            // it was: a non-spinner would find the spinning limit closed while the spinner
            // that holds it is the M the OS preempted with that work queued, and would loop
            // here until that M ran again (T8, a scheduler tick of 4 ms).
            if self.work_appeared(shared) && self.reacquire(shared, true) {
                continue;
            }
            // The earliest timer over every P, including ones added while we searched. A
            // timer that is already due belongs to a P we could not steal from (the spinning
            // limit): run it here rather than loop back to the top until its owner gets to it
            // (Go's findrunnable spins in that case; it cost gort 4.5M empty rounds per 100k
            // sleeps). We hold no P, so the tasks it wakes go to the global queue, with a wakep.
            // Also the latest instant each heap's earliest timer tolerates (its slack), for
            // the poller's coalescing.
            now = nanotime();
            let mut latest = 0;
            for p2 in shared.all_ps() {
                let mut w = p2.timers.wake_time();
                if w != 0 && w <= now {
                    w = shared.run_timers(&p2.timers, now, false).next;
                }
                poll_until = min_nonzero(poll_until, w);
                latest = min_nonzero(latest, p2.timers.wake_bound());
            }

            // Tasks waiting on sockets make the poller block even with no timer (Go).
            let net = shared.net_waiting();
            if (poll_until != 0 || net) && shared.idle.lastpoll.swap(0, SeqCst) != 0 {
                // Shutdown breaks the poller once. An M that passed the shutdown check above
                // before it was set, and took the poller role after the previous poller used
                // up that break, would sleep to its earliest timer (an hour, say).
                if shared.is_shutdown() {
                    shared.idle.lastpoll.store(nanotime(), SeqCst);
                    return None;
                }
                // We are the poller: sleep until the earliest timer or a break.
                shared.idle.poll_until.store(poll_until, SeqCst);
                if poll_until > now || poll_until == 0 {
                    shared.poller.poll(poll_until, latest.max(poll_until));
                }
                shared.idle.poll_until.store(0, SeqCst);
                shared.idle.lastpoll.store(nanotime(), SeqCst);
                if self.reacquire(shared, was_spinning) {
                    continue;
                }
            } else if poll_until != 0 {
                // Another M polls: make sure it does not oversleep our earliest timer.
                let theirs = shared.idle.poll_until.load(SeqCst);
                if theirs == 0 || theirs > poll_until {
                    shared.poller.break_poll();
                }
            }
            if !self.stopm(shared) {
                return None;
            }
        }
    }

    /// The next P other than `p`, in turn, if it is running and has timers: the P, its id and
    /// its `wake_time`. An idle P's timers are the poller's.
    #[inline]
    fn next_peer_with_timers<'a>(
        &mut self,
        shared: &'a Shared,
        p: &P,
    ) -> Option<(&'a P, usize, Nanos)> {
        let n = shared.nallp();
        if n <= 1 {
            return None;
        }
        // `next <= n` (`nallp` never shrinks), so wrapping needs no division (a `div` in
        // every scheduling round was ~1 % of R3's samples).
        let w = &mut self.watch;
        let wrap = |id: usize| if id >= n { 0 } else { id };
        let mut id = wrap(w.next);
        if id == p.id {
            id = wrap(id + 1);
        }
        w.next = id + 1;
        let q = shared.p(id)?;
        let due = q.timers.wake_time();
        if due == 0 || q.status() != P_RUNNING {
            return None;
        }
        Some((q, id, due))
    }

    /// A P with no timers of its own looks at one other P (in turn) in every round and runs
    /// that P's due timers, unless someone holds that heap's lock (then they are being run).
    /// A timer then waits for the first of the two Ps to end its current task, not for its
    /// own P's (T5_busy: a tick due while every P runs a 50 µs slice waited half a slice on
    /// average; Go 1.19 waits the same). The tasks they wake come to this P. A P that has timers never does this:
    /// there, every M runs due timers all the time, and Ms reaching into each other's heaps
    /// contended (T3_1M and T4 lost 14 % of their CPU when every P helped in every round,
    /// sixth session). The cost is one load when the other P has no timers, and a clock read
    /// when it has (what a P with a timer of its own pays in every round, here and in Go).
    #[inline]
    fn help_peer(&mut self, shared: &Shared, p: &P, now: &mut Nanos) {
        let Some((q, _, due)) = self.next_peer_with_timers(shared, p) else {
            return;
        };
        if *now == 0 {
            *now = nanotime();
        }
        if due <= *now {
            shared.try_run_timers(&q.timers, *now);
        }
    }

    /// Every `WATCH_EVERY` (25 µs), a P that has timers looks at one other P (in turn): if it is
    /// running, has timers due, and its holder has begun no scheduling round for `STALL`
    /// (stuck in one long task, in a long timer batch, or preempted by the OS), this M runs
    /// those timers, unless someone holds that heap's lock (then they are being run); the
    /// tasks they wake come to this P. Go leaves a busy P's timers to its holder (and to
    /// preemption after 10 ms); Tokio's one timer wheel is driven by whichever worker gets
    /// there. The look is one load when the other P has no timers due (the clock was read
    /// for this P's own timers); the round counter (on the holder's line) is read only when
    /// it has.
    #[cold]
    fn watch_peer(&mut self, shared: &Shared, p: &P, now: Nanos) {
        let Some((q, id, due)) = self.next_peer_with_timers(shared, p) else {
            return;
        };
        if due > now {
            return;
        }
        let w = &mut self.watch;
        if w.seen.len() <= id {
            w.seen.resize(id + 1, (0, 0));
        }
        // When this M first saw the holder's current round count with a timer due.
        let rounds = q.rounds();
        let seen = &mut w.seen[id];
        if seen.0 != rounds || seen.1 == 0 {
            *seen = (rounds, now);
            return;
        }
        if now - seen.1 >= STALL {
            shared.try_run_timers(&q.timers, now);
        }
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

    /// Takes an idle P back after new work or a poller wake-up. `spin`: the M spins (again),
    /// as a signal for `reset_spinning` to wake another M (Go) and to pass the spinning
    /// limit. Returns false when no P was idle.
    fn reacquire(&mut self, shared: &Shared, spin: bool) -> bool {
        let Some(p) = shared.idle.pidleget() else {
            return false;
        };
        self.acquire(p);
        if spin {
            self.spinning = true;
            shared.idle.inc_spinning();
        }
        true
    }

    /// After dropping out of spinning: has any queue got work (Go re-checks every P's run
    /// queue; we also re-check the global queue, which has its own lock here, see idle.rs).
    fn work_appeared(&self, shared: &Shared) -> bool {
        !shared.global.is_empty() || shared.all_ps().any(|p| p.has_queued())
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
                        // SAFETY: this M holds `p`.
                        if let Some(t) = unsafe { p.next_local(&shared.global) } {
                            return (Some(t), next, ran);
                        }
                    }
                }
                if p2.has_queued() {
                    // SAFETY: this M holds `p`; stealing into its own queue.
                    let t = unsafe { p.with_local(|l| p2.stealer.steal_into(&mut l.queue)) };
                    if t.is_some() {
                        return (t, next, ran);
                    }
                }
            }
        }
        (None, next, ran)
    }

    /// Go's `stopm`: park until handed a P. Returns false on shutdown.
    fn stopm(&mut self, shared: &Arc<Shared>) -> bool {
        debug_assert!(self.p.is_none() && !self.spinning);
        loop {
            if shared.is_shutdown() {
                return false;
            }
            shared.idle.mput(&self.handle);
            // Shutdown may have drained the idle list just before our mput.
            if shared.is_shutdown() {
                shared.idle.mremove(&self.handle);
                return false;
            }
            let mut timeout = Some(PARK_BACKSTOP);
            loop {
                match self.handle.wait(timeout) {
                    Woken::P(p, spinning) => {
                        self.acquire(p);
                        self.spinning = spinning;
                        return true;
                    }
                    Woken::Shutdown => return false,
                    Woken::Timeout => {
                        if !shared.idle.mremove(&self.handle) {
                            // Popped by a `startm` already: its hand-off is on the way.
                            timeout = None;
                            continue;
                        }
                        break;
                    }
                }
            }
            // Backstop: look around once on our own.
            if self.work_appeared(shared) || self.timers_due(shared) {
                if let Some(p) = shared.idle.pidleget() {
                    self.acquire(p);
                    return true;
                }
            }
        }
    }

    fn timers_due(&self, shared: &Shared) -> bool {
        let now = nanotime();
        shared
            .all_ps()
            .any(|p| matches!(p.timers.wake_time(), w if w != 0 && w <= now))
    }

    /// Our P was removed by `set_procs` (Go's `procresize` -> `destroy`): move its tasks to the
    /// global queue and its timers to a live P, then mark it dead.
    fn retire_p(&mut self, shared: &Arc<Shared>) {
        let p = self.take_p().expect("gort: retire without a P");
        let host = DeferredHost::default();
        let retired = shared.idle.locked(|l| {
            let n = shared.nprocs();
            if p.id < n {
                // set_procs grew again before we got here: keep running it.
                return Err(p);
            }
            // SAFETY: we held `p` and give it up here, under the scheduler lock.
            unsafe { p.drain_local(|t| shared.global.push(t, Lane::Ready)) };
            let dst = shared.p(p.id % n).expect("gort: live P missing");
            p.timers.move_to(&dst.timers, &host);
            p.set_status(P_DEAD);
            let _ = l;
            Ok(())
        });
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

/// `a` or `b`, whichever is earlier, treating 0 as "none".
pub(crate) fn min_nonzero(a: Nanos, b: Nanos) -> Nanos {
    match (a, b) {
        (0, x) | (x, 0) => x,
        (a, b) => a.min(b),
    }
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
