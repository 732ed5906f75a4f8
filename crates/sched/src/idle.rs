//! Idle Ps and Ms and the spinning count: Go's `pidleput`/`pidleget`, `mput`/`mget`, the
//! `wakep` gate and `sched.lastpoll`/`pollUntil` (proc.go, "Worker thread
//! parking/unparking"). The protocol built on them is `park.rs`, with the argument that no
//! wake-up is lost.
//!
//! Every lock, condition variable and atomic here comes from `gort_loom`, and the P type is a
//! parameter ([`IdleP`]), so the loom models (`tests/loom_park.rs`) compile this file as it is.
//!
//! Lock order: `Idle::lock`, then an `MHandle` slot or P timer locks (`set_procs` and a
//! retiring P move timers under it: `Timers::move_to`, with a `DeferredHost`); never the other
//! way.

use gort_loom::atomic::{fence, AtomicBool, AtomicI64, AtomicUsize, Ordering::*};
use gort_loom::{Condvar, Mutex};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

/// What the idle lists need of a P: its id, and its status word, which they keep true (idle
/// while listed, running once taken out).
pub(crate) trait IdleP {
    /// The P's id (Go's `p.id`).
    fn id(&self) -> usize;
    /// Marks the P idle (Go's `_Pidle`) or running (`_Prunning`).
    fn set_idle(&self, idle: bool);
}

/// How long a parked (non-poller) M sleeps before it re-checks for work on its own: a backstop
/// only; every submission wakes an M explicitly (see the module docs).
pub(crate) const PARK_BACKSTOP: Duration = Duration::from_millis(50);

/// An M's hand-off slot: Go's `m.nextp` + `m.park` note.
pub(crate) struct MHandle<P> {
    slot: Mutex<Handoff<P>>,
    cv: Condvar,
}

struct Handoff<P> {
    nextp: Option<Arc<P>>,
    spinning: bool,
    shutdown: bool,
}

impl<P> Default for MHandle<P> {
    fn default() -> Self {
        MHandle {
            slot: Mutex::new(Handoff {
                nextp: None,
                spinning: false,
                shutdown: false,
            }),
            cv: Condvar::new(),
        }
    }
}

/// What a parked M was woken with.
pub(crate) enum Woken<P> {
    /// A P to run, and whether the M starts out spinning.
    P(Arc<P>, bool),
    /// The backstop timeout passed with no hand-off.
    Timeout,
    /// The runtime is shutting down.
    Shutdown,
}

impl<P> MHandle<P> {
    /// Go's `notewakeup(&mp.park)` after setting `mp.nextp`.
    pub(crate) fn hand(&self, p: Arc<P>, spinning: bool) {
        let mut s = self.slot.lock();
        debug_assert!(s.nextp.is_none(), "gort: an M was handed two Ps");
        s.nextp = Some(p);
        s.spinning = spinning;
        self.cv.notify_one();
    }

    pub(crate) fn shutdown(&self) {
        self.slot.lock().shutdown = true;
        self.cv.notify_one();
    }

    /// Sleeps until handed a P, shut down, or `timeout` (None = no timeout).
    pub(crate) fn wait(&self, timeout: Option<Duration>) -> Woken<P> {
        let mut s = self.slot.lock();
        loop {
            if let Some(p) = s.nextp.take() {
                return Woken::P(p, s.spinning);
            }
            if s.shutdown {
                return Woken::Shutdown;
            }
            match timeout {
                Some(t) => {
                    let timed_out;
                    (s, timed_out) = self.cv.wait_timeout(s, t);
                    if timed_out && s.nextp.is_none() {
                        return if s.shutdown {
                            Woken::Shutdown
                        } else {
                            Woken::Timeout
                        };
                    }
                }
                None => s = self.cv.wait(s),
            }
        }
    }
}

/// What `startm_pick` chose: a P, and the idle M to hand it to (`None`: start a new M).
pub(crate) type Picked<P> = (Arc<P>, Option<Arc<MHandle<P>>>);

struct Lists<P> {
    pidle: Vec<Arc<P>>,
    midle: Vec<Arc<MHandle<P>>>,
    /// Parked Ms handed a P by `startm` (`Metrics::ms_woken`).
    ms_woken: u64,
}

/// Go's `sched` fields for idle Ps/Ms, spinning and polling.
pub(crate) struct Idle<P> {
    lock: Mutex<Lists<P>>,
    /// Number of Ps in `pidle` (readable without the lock).
    npidle: AtomicUsize,
    /// Number of Ms looking for work without having found any.
    nmspinning: AtomicUsize,
    /// Go's `sched.lastpoll`: 0 while an M is blocked in the poller; else when it last polled.
    /// `swap(0)` is how an M claims the poller role.
    pub(crate) lastpoll: AtomicI64,
    /// Go's `sched.pollUntil`: the instant the blocked poller sleeps to, coalescing included
    /// (0 = no deadline; park.rs).
    pub(crate) poll_until: AtomicI64,
    /// Set by a `wakep` that left the spinner it counted to the M blocked in the poller
    /// (`park::wakep`); taken by that M when its poll ends, or back by the `wakep`.
    pub(crate) poller_spinner: AtomicBool,
    /// Go's `sched.sysmonwait`: whether sysmon is parked, believing every P idle.
    sysmon_parked: AtomicBool,
    /// What an M that takes a P while sysmon is parked calls (`sysmon.rs`, "Parking").
    sysmon_alert: OnceLock<Box<dyn Fn() + Send + Sync>>,
}

impl<P: IdleP> Idle<P> {
    pub(crate) fn new() -> Self {
        Idle {
            lock: Mutex::new(Lists {
                pidle: Vec::new(),
                midle: Vec::new(),
                ms_woken: 0,
            }),
            npidle: AtomicUsize::new(0),
            nmspinning: AtomicUsize::new(0),
            lastpoll: AtomicI64::new(1),
            poll_until: AtomicI64::new(0),
            poller_spinner: AtomicBool::new(false),
            sysmon_parked: AtomicBool::new(false),
            sysmon_alert: OnceLock::new(),
        }
    }

    /// Installs what [`Idle::alert_sysmon`] calls while sysmon is parked (once, at start).
    pub(crate) fn set_sysmon_alert(&self, alert: Box<dyn Fn() + Send + Sync>) {
        assert!(
            self.sysmon_alert.set(alert).is_ok(),
            "gort: sysmon's alert set twice"
        );
    }

    /// sysmon parks (`true`, before its last look at `npidle` and the socket waiters) or
    /// resumes. Store, fence; the taker's side ([`Idle::alert_sysmon`]) is update `npidle`,
    /// fence, load: by the two `SeqCst` fences (as in park.rs's handshake) either sysmon's
    /// look sees the P taken, or the taker sees sysmon parked and alerts it
    /// (`tests/loom_park.rs`, `sysmon_parking_vs_a_p_take`).
    pub(crate) fn set_sysmon_parked(&self, parked: bool) {
        self.sysmon_parked.store(parked, SeqCst);
        fence(SeqCst);
    }

    /// Go's `if sched.sysmonwait != 0 { notewakeup(&sched.sysmonnote) }` on the paths that
    /// take a P: a fence and one load while sysmon runs; the alert only while it is parked.
    /// Also called by whoever gives sysmon a duty without taking a P (a socket waiter added
    /// off every P), after publishing it.
    #[inline]
    pub(crate) fn alert_sysmon(&self) {
        fence(SeqCst);
        if self.sysmon_parked.load(SeqCst) {
            if let Some(alert) = self.sysmon_alert.get() {
                alert();
            }
        }
    }

    pub(crate) fn npidle(&self) -> usize {
        self.npidle.load(SeqCst)
    }

    pub(crate) fn nmspinning(&self) -> usize {
        self.nmspinning.load(SeqCst)
    }

    /// Go's `pidleput`. The caller gives up `p`; its local queue must be empty.
    pub(crate) fn pidleput(&self, p: Arc<P>) {
        let mut l = self.lock.lock();
        Self::pidleput_locked(&mut l, &self.npidle, p);
    }

    fn pidleput_locked(l: &mut Lists<P>, npidle: &AtomicUsize, p: Arc<P>) {
        p.set_idle(true);
        l.pidle.push(p);
        npidle.fetch_add(1, SeqCst);
    }

    /// Go's `pidleget`.
    pub(crate) fn pidleget(&self) -> Option<Arc<P>> {
        let p = Self::pidleget_locked(&mut self.lock.lock(), &self.npidle)?;
        self.alert_sysmon();
        Some(p)
    }

    fn pidleget_locked(l: &mut Lists<P>, npidle: &AtomicUsize) -> Option<Arc<P>> {
        let p = l.pidle.pop()?;
        npidle.fetch_sub(1, SeqCst);
        p.set_idle(false);
        Some(p)
    }

    /// The idle-P step of `findrunnable`: give `p` up unless the global queue has work
    /// (checked under the lock, like Go's `sched.runqsize` check). Returns `p` back on refusal.
    pub(crate) fn release_p(
        &self,
        p: Arc<P>,
        global_has_work: impl Fn() -> bool,
    ) -> Result<(), Arc<P>> {
        let mut l = self.lock.lock();
        if global_has_work() {
            return Err(p);
        }
        Self::pidleput_locked(&mut l, &self.npidle, p);
        Ok(())
    }

    /// Go's `mput`: the M will park on `m`.
    pub(crate) fn mput(&self, m: &Arc<MHandle<P>>) {
        self.lock.lock().midle.push(m.clone());
    }

    /// Takes `m` back out of the idle list after a backstop timeout. Returns false when
    /// somebody already popped it (a hand-off is on its way and must be waited for).
    pub(crate) fn mremove(&self, m: &Arc<MHandle<P>>) -> bool {
        let mut l = self.lock.lock();
        match l.midle.iter().position(|x| Arc::ptr_eq(x, m)) {
            Some(i) => {
                l.midle.swap_remove(i);
                true
            }
            None => false,
        }
    }

    /// Every idle M (runtime shutdown).
    pub(crate) fn take_all_ms(&self) -> Vec<Arc<MHandle<P>>> {
        std::mem::take(&mut self.lock.lock().midle)
    }

    /// Removes idle Ps whose id is `>= n` (set_procs shrink); runs `retire` on each under the
    /// lock, which gives the caller the exclusive right to their local queues.
    pub(crate) fn retire_idle(&self, n: usize, mut retire: impl FnMut(&Arc<P>)) {
        let mut l = self.lock.lock();
        let mut i = 0;
        while i < l.pidle.len() {
            if l.pidle[i].id() >= n {
                let p = l.pidle.swap_remove(i);
                self.npidle.fetch_sub(1, SeqCst);
                retire(&p);
            } else {
                i += 1;
            }
        }
    }

    /// Runs `f` under the scheduler lock (set_procs and P retirement serialise on it).
    pub(crate) fn locked<R>(&self, f: impl FnOnce(&mut IdleLocked<'_, P>) -> R) -> R {
        let mut l = self.lock.lock();
        f(&mut IdleLocked {
            lists: &mut l,
            npidle: &self.npidle,
        })
    }

    /// The start of Go's `startm`: with the lock, pick a P (the given one or an idle one) and
    /// an idle M. `Ok((p, Some(m)))`: hand `p` to `m`; `Ok((p, None))`: start a new M;
    /// `Err(())`: no idle P (a spinning caller's nmspinning increment is undone here).
    pub(crate) fn startm_pick(&self, p: Option<Arc<P>>, spinning: bool) -> Result<Picked<P>, ()> {
        let mut l = self.lock.lock();
        let p = match p {
            Some(p) => p,
            None => match Self::pidleget_locked(&mut l, &self.npidle) {
                Some(p) => {
                    let m = l.midle.pop();
                    l.ms_woken += u64::from(m.is_some());
                    drop(l);
                    self.alert_sysmon();
                    return Ok((p, m));
                }
                None => {
                    drop(l);
                    if spinning {
                        self.nmspinning.fetch_sub(1, SeqCst);
                    }
                    return Err(());
                }
            },
        };
        let m = l.midle.pop();
        l.ms_woken += u64::from(m.is_some());
        Ok((p, m))
    }

    /// Parked Ms handed a P so far (each a futex wake-up and a context switch).
    pub(crate) fn ms_woken(&self) -> u64 {
        self.lock.lock().ms_woken
    }

    /// Go's `wakep` gate: true when the caller must start a spinning M (it has counted it).
    pub(crate) fn wakep_gate(&self) -> bool {
        // Order the caller's publication of new work before these loads (park.rs).
        fence(SeqCst);
        if self.npidle.load(SeqCst) == 0 {
            return false;
        }
        // Be conservative about spinning threads: one is enough to find the new work.
        self.nmspinning.load(SeqCst) == 0
            && self
                .nmspinning
                .compare_exchange(0, 1, SeqCst, SeqCst)
                .is_ok()
    }

    /// Claims the single "first spinner" slot regardless of idle Ps (Go's `handoffp` check).
    pub(crate) fn wakep_gate_force(&self) -> bool {
        self.nmspinning
            .compare_exchange(0, 1, SeqCst, SeqCst)
            .is_ok()
    }

    /// The idle M's half of the handshake for an M that was not spinning.
    pub(crate) fn idle_fence(&self) {
        fence(SeqCst);
    }

    /// An M starts spinning (it counted itself).
    pub(crate) fn inc_spinning(&self) {
        self.nmspinning.fetch_add(1, SeqCst);
    }

    /// An M stops spinning. Returns the number of spinners left.
    pub(crate) fn dec_spinning(&self) -> usize {
        let prev = self.nmspinning.fetch_sub(1, SeqCst);
        assert!(prev > 0, "gort: negative spinning M count");
        // The idle M's half of park.rs's handshake: re-checks come after this.
        fence(SeqCst);
        prev - 1
    }
}

/// The scheduler lock held: what `set_procs` may do with it.
pub(crate) struct IdleLocked<'a, P> {
    lists: &'a mut Lists<P>,
    npidle: &'a AtomicUsize,
}

impl<P: IdleP> IdleLocked<'_, P> {
    pub(crate) fn pidleput(&mut self, p: Arc<P>) {
        Idle::pidleput_locked(self.lists, self.npidle, p);
    }
}

impl<P> Idle<P> {
    /// The idle lists' lengths and the flags a hang report shows (`Handle::debug_state`):
    /// (idle Ps listed, idle Ms listed, sysmon parked).
    pub(crate) fn debug_counts(&self) -> (usize, usize, bool) {
        let l = self.lock.lock();
        (
            l.pidle.len(),
            l.midle.len(),
            self.sysmon_parked.load(SeqCst),
        )
    }
}
