//! The poller: Go's netpoll. One `mio::Poll` that exactly one idle M at a time blocks in,
//! with a timeout equal to the earliest timer of all Ps; `break_poll` (Go's `netpollBreak`)
//! interrupts it through a `mio::Waker`.
//!
//! Precision: epoll's own timeout counts whole milliseconds (and mio rounds up), which would
//! make every timer up to 1 ms late (go#44343, tokio#5021). On Linux the poller therefore
//! sleeps with `epoll_pwait2`, whose timeout is a `timespec`, or on a `timerfd` registered in
//! the same `mio::Poll` and armed to the nanosecond (muduo's way, and smol-rs/polling's) for
//! sleeps longer than 2 ms and where `epoll_pwait2` is missing (`poller_sys.rs`). Elsewhere
//! it falls back to the millisecond timeout, rounded up.
//!
//! Early wake-up: from the timer's expiry to a thread running the timer takes tens of
//! microseconds (the wake-up of a sleeping thread; more under virtualisation), which alone
//! would put an idle runtime's timers ~40-60 µs late. For a sparse deadline (the previous
//! wake-up at least `SPARSE` ago) the poller sets its timer a *lead* before the deadline,
//! and when the thread runs before the deadline it spins the rest (a break ends the spin at
//! once). The lead follows the measured wake-up delay (`lead.rs`: its lower quartile, at most
//! `MAX_LEAD`), so most wake-ups spin not at all or a few microseconds. Dense streams never
//! spin.
//!
//! Coalescing: every poller wake-up costs a timer arming and two context switches (tens of
//! microseconds of CPU under virtualisation), which is most of the CPU a dense stream of
//! deadlines costs (100k sleeps spread over a second are 10 µs apart). So the poller never
//! sleeps to a deadline sooner than a *gap* after the deadline it last slept to. The gap
//! adapts to the stream: each timer wake-up that ran two or more timers doubles it (up to
//! `MAX_GAP`), each that ran at most one halves it (down to `MIN_GAP`). Beyond `MIN_GAP`
//! the deferral is bounded by the earliest timer's *slack* (`Timer::set_slack`; gort::time
//! gives 1/16 of the duration asked for), so only timers long enough not to care are
//! batched. A dense stream of long sleeps is thus served at most ~1k wake-ups a second
//! (Tokio's 1 ms wheel tick, Go 1.19's millisecond `epoll_wait`), while a lone fast ticker
//! (one timer per wake-up) and short timers that tasks wait on in a loop keep their
//! precision. The gap counts from the previous *target*, not from when the thread woke, so a
//! ticker whose period equals the gap does not drift by the wake-up delay.
//!
//! Sockets: the same `mio::Poll` carries every socket `gort-net` registers (netpoll.rs);
//! their events wake tasks after the poller's lock is released.

use crate::lead::Lead;
use crate::netpoll::{dispatch, Net};
use gort_loom::atomic::{AtomicBool, AtomicU64, Ordering::*};
use gort_timer::{nanotime, Nanos};
use mio::{Poll, Registry, Token, Waker};
use parking_lot::Mutex;
use std::io;

#[path = "poller_gap.rs"]
mod gap;
use gap::Gap;

#[cfg(target_os = "linux")]
#[path = "poller_sys.rs"]
mod sys;
#[cfg(target_os = "linux")]
pub(crate) use sys::timerfd_only;

const WAKER: Token = Token(0);
#[cfg(target_os = "linux")]
const TIMER: Token = Token(1);
/// Events taken per `epoll_wait` (Go's netpoll takes 128).
const EVENTS: usize = 128;

/// How one poll waits.
#[derive(Clone, Copy)]
enum Wait {
    /// Until an event.
    Forever,
    /// Not at all: takes the events already there.
    Now,
    /// Until an event or this instant.
    Until(Nanos),
}

/// One event of a poll, decoded as `dispatch` needs it.
pub(crate) struct Readiness {
    pub(crate) token: Token,
    pub(crate) readable: bool,
    pub(crate) writable: bool,
    /// The peer closed or reset its side, or the socket failed.
    pub(crate) hung_up: bool,
    /// Urgent data is pending (`EPOLLPRI`: TCP's `MSG_OOB`, a Unix stream's).
    pub(crate) urgent: bool,
}

/// What only the M holding the poller role touches.
struct Inner {
    /// The poll and the means to sleep in it.
    #[cfg(target_os = "linux")]
    sleep: sys::Sleep,
    #[cfg(not(target_os = "linux"))]
    poll: Poll,
    #[cfg(not(target_os = "linux"))]
    events: mio::Events,
    gap: Gap,
    lead: Lead,
}

pub(crate) struct Poller {
    /// Locked only by the M that won the poller role (`Idle::lastpoll`), so never contended.
    inner: Mutex<Inner>,
    /// A handle to register sockets with the poll while an M blocks in it.
    registry: Registry,
    /// The registered sockets and the count of tasks waiting on them.
    pub(crate) net: Net,
    /// Timers run anywhere in the runtime (the batch size of a wake-up, for coalescing).
    fired: AtomicU64,
    /// Why blocking polls returned (`Runtime::metrics`).
    wakeups: Wakeups,
    waker: Waker,
    /// Go's `netpollWakeSig`: at most one outstanding wake-up write.
    wake_sig: AtomicBool,
}

impl Poller {
    pub(crate) fn new() -> io::Result<Poller> {
        #[cfg(target_os = "linux")]
        let pwait2 = !sys::TIMERFD_ONLY.load(Relaxed);
        #[cfg(not(target_os = "linux"))]
        let pwait2 = false;
        Poller::build(pwait2)
    }

    /// A poller that sleeps with `epoll_pwait2` if `pwait2` and the kernel has it (Linux),
    /// else on its timerfd.
    fn build(pwait2: bool) -> io::Result<Poller> {
        let poll = Poll::new()?;
        let waker = Waker::new(poll.registry(), WAKER)?;
        Ok(Poller {
            registry: poll.registry().try_clone()?,
            net: Net::new(),
            inner: Mutex::new(Inner {
                #[cfg(target_os = "linux")]
                sleep: sys::Sleep::new(poll, EVENTS, pwait2)?,
                #[cfg(not(target_os = "linux"))]
                poll: {
                    let _ = pwait2;
                    poll
                },
                #[cfg(not(target_os = "linux"))]
                events: mio::Events::with_capacity(EVENTS),
                gap: Gap::new(),
                lead: Lead::new(),
            }),
            fired: AtomicU64::new(0),
            wakeups: Wakeups::default(),
            waker,
            wake_sig: AtomicBool::new(false),
        })
    }

    /// Counts timers that ran (any M, any P): how big the last wake-up's batch was.
    pub(crate) fn note_fired(&self, n: usize) {
        self.fired.fetch_add(n as u64, Relaxed);
    }

    /// What the poller M publishes as `Idle::poll_until` before a [`Poller::poll`] for
    /// `until` (> 0) and `latest` (park.rs): the instant the poll sleeps to, coalescing
    /// included, or the last target when only the minimum gap set that instant
    /// (`Gap::breakable`). Judges the last timer wake-up first, as the poll does (it judges
    /// once).
    pub(crate) fn published(&self, until: Nanos, latest: Nanos) -> Nanos {
        let mut guard = self.inner.lock();
        let g = &mut guard.gap;
        g.judge(self.fired.load(Relaxed));
        g.breakable(g.target(until, latest).0)
    }

    /// Blocks until `until` (0 = no deadline; coalescing may defer it, but not past
    /// `latest`, see `Gap::target`) or a `break_poll`. Returns early on spurious wake-ups;
    /// the caller re-checks everything anyway. The wakers of the tasks it readied are left in
    /// `ready`, for the caller to wake once it holds a P (park.rs, `poll`).
    pub(crate) fn poll(&self, until: Nanos, latest: Nanos, ready: &mut Vec<std::task::Waker>) {
        let mut guard = self.inner.lock();
        let inner = &mut *guard;
        inner.gap.judge(self.fired.load(Relaxed));
        let (mut target, mut early) = (0, 0);
        if until != 0 {
            let (until, sparse) = inner.gap.target(until, latest);
            target = until;
            early = if sparse { inner.lead.get() } else { 0 };
        }
        let wait = self.wait_for(target, early);
        let seen = self.wait_and_take(inner, wait, ready);
        if seen.timer && !seen.io {
            self.net.note_quiet_timer_wake_up();
        }
        if early > 0 && seen.timer {
            // Tasks a break or a socket readied run first; the caller then polls again.
            let spin = !seen.brk && !seen.io;
            self.finish_early_wake_up(&mut inner.lead, target, early, spin);
        }
        // Only a wake-up that reached its deadline counts for coalescing: a spurious early
        // wake-up or a break is followed by a poll for the same deadline.
        let now = nanotime();
        if target != 0 && now >= target {
            inner.gap.woke(target, self.fired.load(Relaxed));
        }
        self.net.note_polled(now);
        self.wakeups.note(seen, target != 0 && now >= target);
    }

    /// How to wait for `target` (0 = no deadline) with the timer armed `early` before it.
    /// Within `early` of the deadline already, spin to it and take a look at the events (a
    /// break that ended the spin is consumed there).
    fn wait_for(&self, target: Nanos, early: i64) -> Wait {
        if target == 0 {
            return Wait::Forever;
        }
        if early > 0 && target - nanotime() <= early {
            self.spin_until(target);
            return Wait::Now;
        }
        Wait::Until(target - early)
    }

    /// Waits as `wait` says and handles the events (poller lock held): the poller's own, and
    /// the sockets', whose released wakers go to `ready`. Returns which kinds it saw.
    #[cfg(target_os = "linux")]
    fn wait_and_take(
        &self,
        inner: &mut Inner,
        wait: Wait,
        ready: &mut Vec<std::task::Waker>,
    ) -> Seen {
        let (events, timed_out) = inner.sleep.wait(wait);
        let mut seen = self.take_events(events, ready);
        if seen.timer {
            inner.sleep.timer_expired();
        }
        seen.timer |= timed_out;
        seen
    }

    /// As on Linux, with epoll's millisecond timeout rounded up (waking early would spin,
    /// waking late by < 1 ms is the platform's limit) and no timer of its own.
    #[cfg(not(target_os = "linux"))]
    fn wait_and_take(
        &self,
        inner: &mut Inner,
        wait: Wait,
        ready: &mut Vec<std::task::Waker>,
    ) -> Seen {
        use std::time::Duration;
        let timeout = match wait {
            Wait::Forever => None,
            Wait::Now => Some(Duration::ZERO),
            Wait::Until(until) => {
                let delay = (until - nanotime()).max(0) as u64;
                Some(Duration::from_nanos(delay.div_ceil(1_000_000) * 1_000_000))
            }
        };
        if let Err(e) = inner.poll.poll(&mut inner.events, timeout) {
            if e.kind() != io::ErrorKind::Interrupted {
                panic!("gort: the poller failed: {e}");
            }
        }
        let events = inner.events.iter().map(|ev| {
            let hung_up = ev.is_error() || ev.is_read_closed() || ev.is_write_closed();
            Readiness {
                token: ev.token(),
                readable: ev.is_readable() || hung_up,
                writable: ev.is_writable() || hung_up,
                hung_up,
                urgent: ev.is_priority(),
            }
        });
        self.take_events(events, ready)
    }

    /// After the timer armed `early` before `target` expired: teaches `lead` how late the
    /// thread runs after an expiry, and if it came before the deadline and `spin`, spins to
    /// it. An expiry from an older arming (the thread runs before this arming's instant)
    /// teaches nothing and is not spun away: the caller polls again.
    fn finish_early_wake_up(&self, lead: &mut Lead, target: Nanos, early: i64, spin: bool) {
        let woke = nanotime();
        if woke >= target - early {
            lead.learn(target, woke);
            if spin {
                self.spin_until(target);
            }
        }
    }

    /// Spins until `until` or a `break_poll`, whichever comes first.
    fn spin_until(&self, until: Nanos) {
        while nanotime() < until && !self.wake_sig.load(Acquire) {
            std::hint::spin_loop();
        }
    }

    /// Blocking polls returned so far, by cause (see [`WakeupCounts`]).
    pub(crate) fn wakeups(&self) -> WakeupCounts {
        self.wakeups.snapshot()
    }

    /// Go's `netpoll(0)`: takes the events already there without blocking (nothing when
    /// another M holds the poller); the wakers of the tasks of the ready sockets are left in
    /// `ready`, for the caller to wake ([`Shared::poll_net_now`](crate::shared::Shared)).
    pub(crate) fn take_ready_now(&self, ready: &mut Vec<std::task::Waker>) {
        if let Some(mut guard) = self.inner.try_lock() {
            self.wait_and_take(&mut guard, Wait::Now, ready);
            self.net.note_polled(nanotime());
        }
    }

    /// A handle to register sockets with the poll.
    pub(crate) fn registry(&self) -> &Registry {
        &self.registry
    }

    /// Handles one poll's events (poller lock held): the poller's own, and the sockets',
    /// whose released wakers go to `ready`. Returns which kinds of event it saw.
    fn take_events(
        &self,
        events: impl Iterator<Item = Readiness>,
        ready: &mut Vec<std::task::Waker>,
    ) -> Seen {
        let mut sources = None;
        let mut seen = Seen::default();
        for ev in events {
            match ev.token {
                // Go's netpoll: a wake-up read resets netpollWakeSig so the next break writes.
                WAKER => {
                    seen.brk = true;
                    self.wake_sig.store(false, Release);
                }
                // The expiry count is never read: the registration is edge-triggered and
                // every expiry wakes the timerfd's waiters, so the next one is reported all
                // the same (a read would cost a syscall per wake-up).
                #[cfg(target_os = "linux")]
                TIMER => seen.timer = true,
                _ => {
                    seen.io = true;
                    let sources = sources.get_or_insert_with(|| self.net.sources.lock());
                    dispatch(sources, &ev, ready);
                }
            }
        }
        if seen.io {
            self.net.note_socket_events();
        }
        seen
    }

    /// Go's `netpollBreak`: interrupts a blocked `poll`. Cheap when a break is already pending.
    pub(crate) fn break_poll(&self) {
        // AcqRel pairs with the Release store in `poll` that re-opens the signal.
        if self
            .wake_sig
            .compare_exchange(false, true, AcqRel, Relaxed)
            .is_ok()
        {
            self.waker
                .wake()
                .unwrap_or_else(|e| panic!("gort: cannot wake the poller: {e}"));
        }
    }
}

/// The kinds of event one poll returned.
#[derive(Clone, Copy, Default)]
struct Seen {
    /// A socket's readiness.
    io: bool,
    /// A `break_poll`.
    brk: bool,
    /// The expiry of the poller's timer.
    timer: bool,
}

/// Counters of the poller's blocking polls. Only the M that holds the poller's lock writes
/// them (a relaxed load and store each: one writer), once per wake-up, which already cost a
/// syscall and two context switches; readers sum nothing, they load.
#[derive(Default)]
struct Wakeups {
    total: AtomicU64,
    timer: AtomicU64,
    io: AtomicU64,
    brk: AtomicU64,
}

/// Blocking polls of the poller, by cause. One wake-up can have several causes (a deadline
/// reached while a socket became ready), or none (an early wake-up for a sparse deadline
/// that a socket or a break cut short, the expiry of an earlier arming, or a signal), so the
/// causes need not add up to `total`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct WakeupCounts {
    pub(crate) total: u64,
    pub(crate) timer: u64,
    pub(crate) io: u64,
    pub(crate) brk: u64,
}

impl Wakeups {
    /// Counts one return from a blocking poll (poller lock held): `seen` its events,
    /// `deadline` whether the deadline it slept to was reached.
    fn note(&self, seen: Seen, deadline: bool) {
        let bump = |c: &AtomicU64| c.store(c.load(Relaxed) + 1, Relaxed);
        bump(&self.total);
        if deadline {
            bump(&self.timer);
        }
        if seen.io {
            bump(&self.io);
        }
        if seen.brk {
            bump(&self.brk);
        }
    }

    fn snapshot(&self) -> WakeupCounts {
        WakeupCounts {
            total: self.total.load(Relaxed),
            timer: self.timer.load(Relaxed),
            io: self.io.load(Relaxed),
            brk: self.brk.load(Relaxed),
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    /// Wakes the tasks a poll readied, with no poller lock held (a waker is user code).
    fn wake_all(ready: Vec<std::task::Waker>) {
        for w in ready {
            w.wake();
        }
    }
    use crate::lead::MAX_LEAD;
    use std::time::Duration;

    impl Poller {
        /// A blocking poll that wakes what it readied at once.
        fn poll_and_wake(&self, until: Nanos, latest: Nanos) {
            let mut ready = Vec::new();
            self.poll(until, latest, &mut ready);
            wake_all(ready);
        }
    }

    const MS: i64 = 1_000_000;

    /// The poller's two ways to sleep: `epoll_pwait2` (where the kernel has it) and the
    /// timerfd alone.
    fn both_pollers() -> [Poller; 2] {
        let timerfd = Poller::build(false).expect("a poller");
        #[cfg(target_os = "linux")]
        assert!(!timerfd.inner.lock().sleep.uses_pwait2());
        [Poller::build(true).expect("a poller"), timerfd]
    }

    /// Polls until `until` (with `slack`) has passed; returns when the last poll returned.
    fn reach(p: &Poller, until: Nanos, slack: Nanos) -> Nanos {
        let mut polls = 0;
        while nanotime() < until {
            p.poll_and_wake(until, until + slack);
            polls += 1;
            assert!(
                polls < 1000,
                "the poller keeps returning before its deadline"
            );
        }
        nanotime()
    }

    #[test]
    fn polls_reach_their_deadline_on_either_sleep() {
        // Sparse (early wake-up) with and without slack, dense, within epoll_pwait2's range
        // and beyond it (the timerfd even when epoll_pwait2 works).
        let cases = [
            (2 * MS, 0),
            (2 * MS, MS),
            (300_000, 0),
            (5 * MS, 0),
            (30 * MS, 0),
        ];
        for p in both_pollers() {
            let stop = AtomicBool::new(false);
            std::thread::scope(|s| {
                // A missed deadline would block the poll for good: a break every second
                // ends it, far too late for the bound below.
                s.spawn(|| {
                    while !stop.load(Relaxed) {
                        std::thread::sleep(Duration::from_secs(1));
                        p.break_poll();
                    }
                });
                // Stops the breaks when the checks end, failed or not.
                let _stop = StopOnDrop(&stop);
                for (delay, slack) in cases.iter().cycle().take(4 * cases.len()) {
                    let until = nanotime() + delay;
                    let back = reach(&p, until, *slack);
                    assert!(
                        back - until < 300 * MS,
                        "a poll for {delay} ns returned {} ms late",
                        (back - until) / MS
                    );
                }
            });
            let lead = p.inner.lock().lead.get();
            assert!((0..=MAX_LEAD).contains(&lead), "lead {lead}");
        }
    }

    struct StopOnDrop<'a>(&'a AtomicBool);

    impl Drop for StopOnDrop<'_> {
        fn drop(&mut self) {
            self.0.store(true, Relaxed);
        }
    }

    #[test]
    fn a_break_ends_a_poll_at_once_on_either_sleep() {
        for p in both_pollers() {
            let until = nanotime() + 10_000 * MS;
            std::thread::scope(|s| {
                s.spawn(|| {
                    std::thread::sleep(Duration::from_millis(20));
                    p.break_poll();
                });
                p.poll_and_wake(until, until);
            });
            assert!(
                nanotime() < until - 5_000 * MS,
                "the break did not end the poll"
            );
        }
    }
}
