//! The poller: Go's netpoll. One `mio::Poll` that exactly one idle M at a time blocks in,
//! with a timeout equal to the earliest timer of all Ps; `break_poll` (Go's `netpollBreak`)
//! interrupts it through a `mio::Waker`.
//!
//! Precision: epoll's own timeout counts whole milliseconds (and mio rounds up), which would
//! make every timer up to 1 ms late (go#44343, tokio#5021). On Linux the poller therefore
//! sleeps on a `timerfd` registered in the same `mio::Poll` and armed to the nanosecond
//! (muduo's way, and smol-rs/polling's): epoll wakes when it expires. Elsewhere it falls back
//! to the millisecond timeout, rounded up.
//!
//! Early wake-up: from the timerfd's expiry to a thread running the timer takes tens of
//! microseconds (the wake-up of a sleeping thread; more under virtualisation), which alone
//! would put an idle runtime's timers ~40-60 µs late. For a sparse deadline (the previous
//! wake-up at least `SPARSE` ago) the poller arms the timerfd a *lead* before the deadline,
//! and when the thread runs before the deadline it spins the rest (a break ends the spin at
//! once). The lead follows the measured wake-up delay (`lead.rs`: its lower quartile, at most
//! `MAX_LEAD`), so most wake-ups spin not at all or a few microseconds. Dense streams never
//! spin.
//!
//! Coalescing: every poller wake-up costs a timer re-arm and two context switches (tens of
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
use mio::{Events, Poll, Registry, Token, Waker};
use parking_lot::Mutex;
use std::io;
use std::time::Duration;

#[path = "poller_gap.rs"]
mod gap;
use gap::Gap;

const WAKER: Token = Token(0);
#[cfg(target_os = "linux")]
const TIMER: Token = Token(1);
/// Events taken per `epoll_wait` (Go's netpoll takes 128).
const EVENTS: usize = 128;

pub(crate) struct Poller {
    /// Locked only by the M that won the poller role (`Idle::lastpoll`), so never contended.
    inner: Mutex<(Poll, Events, Gap, Lead)>,
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
    /// The deadline the timerfd is armed to (0 = disarmed or expired); only the poller M
    /// touches it. Re-arming costs a syscall that is slow under virtualisation (a timer
    /// reprogramming exit), so an unchanged deadline is not re-armed.
    #[cfg(target_os = "linux")]
    armed: std::sync::atomic::AtomicI64,
    #[cfg(target_os = "linux")]
    timer: timerfd::TimerFd,
}

impl Poller {
    pub(crate) fn new() -> io::Result<Poller> {
        let poll = Poll::new()?;
        let waker = Waker::new(poll.registry(), WAKER)?;
        #[cfg(target_os = "linux")]
        let timer = {
            let t = timerfd::TimerFd::new()?;
            poll.registry().register(
                &mut mio::unix::SourceFd(&t.raw()),
                TIMER,
                mio::Interest::READABLE,
            )?;
            t
        };
        Ok(Poller {
            registry: poll.registry().try_clone()?,
            net: Net::new(),
            inner: Mutex::new((poll, Events::with_capacity(EVENTS), Gap::new(), Lead::new())),
            fired: AtomicU64::new(0),
            wakeups: Wakeups::default(),
            waker,
            wake_sig: AtomicBool::new(false),
            #[cfg(target_os = "linux")]
            armed: std::sync::atomic::AtomicI64::new(0),
            #[cfg(target_os = "linux")]
            timer,
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
        let g = &mut guard.2;
        g.judge(self.fired.load(Relaxed));
        g.breakable(g.target(until, latest).0)
    }

    /// Blocks until `until` (0 = no deadline; coalescing may defer it, but not past
    /// `latest`, see `Gap::target`) or a `break_poll`. Returns early on spurious wake-ups;
    /// the caller re-checks everything anyway. The wakers of the tasks it readied are left in
    /// `ready`, for the caller to wake once it holds a P (park.rs, `poll`).
    pub(crate) fn poll(&self, until: Nanos, latest: Nanos, ready: &mut Vec<std::task::Waker>) {
        let mut guard = self.inner.lock();
        let (poll, events, g, lead) = &mut *guard;
        g.judge(self.fired.load(Relaxed));
        let (mut target, mut early) = (0, 0);
        if until != 0 {
            let (until, sparse) = g.target(until, latest);
            target = until;
            early = if sparse { lead.get() } else { 0 };
        }
        let timeout = self.wait_for(target, early);
        if let Err(e) = poll.poll(events, timeout) {
            if e.kind() != io::ErrorKind::Interrupted {
                panic!("gort: the poller failed: {e}");
            }
        }
        let seen = self.take_events(events, ready);
        if early > 0 && seen.timer {
            // Tasks a break or a socket readied run first; the caller then polls again.
            self.finish_early_wake_up(lead, target, early, !seen.brk && !seen.io);
        }
        // Only a wake-up that reached its deadline counts for coalescing: a spurious early
        // wake-up or a break is followed by a poll for the same deadline.
        let now = nanotime();
        if target != 0 && now >= target {
            g.woke(target, self.fired.load(Relaxed));
        }
        self.net.note_polled(now);
        self.wakeups.note(seen, target != 0 && now >= target);
    }

    /// How to wait for `target` (0 = no deadline) with the timer armed `early` before it:
    /// the timeout for the poll, after arming the timer. Within `early` of the deadline
    /// already, spin to it and take a zero-timeout look at the events (a break that ended
    /// the spin is consumed there).
    fn wait_for(&self, target: Nanos, early: i64) -> Option<Duration> {
        if target == 0 {
            return None;
        }
        if early > 0 && target - nanotime() <= early {
            self.spin_until(target);
            return Some(Duration::ZERO);
        }
        self.arm(target - early)
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
    /// another M holds the poller) and wakes the tasks of the ready sockets. Returns how many
    /// it woke.
    pub(crate) fn poll_now(&self) -> usize {
        let mut ready = Vec::new();
        if let Some(mut guard) = self.inner.try_lock() {
            let (poll, events, ..) = &mut *guard;
            if let Err(e) = poll.poll(events, Some(Duration::ZERO)) {
                if e.kind() != io::ErrorKind::Interrupted {
                    panic!("gort: the poller failed: {e}");
                }
            }
            self.net.note_polled(nanotime());
            self.take_events(events, &mut ready);
        }
        let n = ready.len();
        wake_all(ready);
        n
    }

    /// A handle to register sockets with the poll.
    pub(crate) fn registry(&self) -> &Registry {
        &self.registry
    }

    /// Handles one poll's events (poller lock held): the poller's own, and the sockets',
    /// whose released wakers go to `ready`. Returns which kinds of event it saw.
    fn take_events(&self, events: &Events, ready: &mut Vec<std::task::Waker>) -> Seen {
        let mut sources = None;
        let mut seen = Seen::default();
        for ev in events.iter() {
            match ev.token() {
                // Go's netpoll: a wake-up read resets netpollWakeSig so the next break writes.
                WAKER => {
                    seen.brk = true;
                    self.wake_sig.store(false, Release);
                }
                #[cfg(target_os = "linux")]
                TIMER => {
                    // The expiry count is never read: the registration is edge-triggered
                    // and every expiry wakes the timerfd's waiters, so the next one is
                    // reported all the same (a read would cost a syscall per wake-up).
                    seen.timer = true;
                    self.armed.store(0, Relaxed);
                }
                _ => {
                    seen.io = true;
                    let sources = sources.get_or_insert_with(|| self.net.sources.lock());
                    dispatch(sources, ev, ready);
                }
            }
        }
        seen
    }

    #[cfg(target_os = "linux")]
    fn arm(&self, until: Nanos) -> Option<Duration> {
        if until == 0 {
            return None;
        }
        let delay = until - nanotime();
        if delay <= 0 {
            return Some(Duration::ZERO);
        }
        // An earlier arming that is still pending wakes us at the latest by `until` when it
        // is the same deadline; a later one would oversleep, an earlier one wakes us early
        // (harmless: the caller re-checks and re-polls).
        if self.armed.load(Relaxed) != until {
            self.timer.set(delay);
            self.armed.store(until, Relaxed);
        }
        None
    }

    #[cfg(not(target_os = "linux"))]
    fn arm(&self, until: Nanos) -> Option<Duration> {
        if until == 0 {
            return None;
        }
        // Round up: waking early would spin, waking late by < 1 ms is the platform's limit.
        let delay = (until - nanotime()).max(0) as u64;
        Some(Duration::from_nanos(delay.div_ceil(1_000_000) * 1_000_000))
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

/// Wakes the tasks a poll readied, with no poller lock held (a waker is user code).
fn wake_all(ready: Vec<std::task::Waker>) {
    for w in ready {
        w.wake();
    }
}

#[cfg(target_os = "linux")]
mod timerfd {
    //! A thin safe wrapper over Linux `timerfd` (non-blocking, monotonic, one-shot).

    use std::io;
    use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

    pub(super) struct TimerFd(OwnedFd);

    impl TimerFd {
        pub(super) fn new() -> io::Result<TimerFd> {
            // SAFETY: plain syscall; the result is checked before use.
            let fd = unsafe {
                libc::timerfd_create(
                    libc::CLOCK_MONOTONIC,
                    libc::TFD_NONBLOCK | libc::TFD_CLOEXEC,
                )
            };
            if fd < 0 {
                return Err(io::Error::last_os_error());
            }
            // SAFETY: `fd` is a fresh descriptor that nothing else owns.
            Ok(TimerFd(unsafe { OwnedFd::from_raw_fd(fd) }))
        }

        pub(super) fn raw(&self) -> RawFd {
            self.0.as_raw_fd()
        }

        /// Arms the timer `delay_ns` (> 0) from now, replacing any earlier setting.
        pub(super) fn set(&self, delay_ns: i64) {
            let spec = libc::itimerspec {
                it_interval: libc::timespec {
                    tv_sec: 0,
                    tv_nsec: 0,
                },
                it_value: libc::timespec {
                    tv_sec: (delay_ns / 1_000_000_000) as libc::time_t,
                    tv_nsec: (delay_ns % 1_000_000_000) as _,
                },
            };
            // SAFETY: valid fd and a properly initialised itimerspec; old value not requested.
            let rc = unsafe { libc::timerfd_settime(self.raw(), 0, &spec, std::ptr::null_mut()) };
            debug_assert_eq!(rc, 0, "gort: timerfd_settime failed");
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::lead::MAX_LEAD;

    impl Poller {
        /// A blocking poll that wakes what it readied at once.
        fn poll_and_wake(&self, until: Nanos, latest: Nanos) {
            let mut ready = Vec::new();
            self.poll(until, latest, &mut ready);
            wake_all(ready);
        }
    }

    const MS: i64 = 1_000_000;

    #[test]
    fn sparse_polls_reach_their_deadline_and_a_break_ends_one_at_once() {
        let p = Poller::new().expect("a poller");
        for _ in 0..20 {
            let until = nanotime() + 2 * MS;
            let mut polls = 0;
            while nanotime() < until {
                p.poll_and_wake(until, until);
                polls += 1;
                assert!(
                    polls < 1000,
                    "the poller keeps returning before its deadline"
                );
            }
            let lead = p.inner.lock().3.get();
            assert!((0..=MAX_LEAD).contains(&lead), "lead {lead}");
        }
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
