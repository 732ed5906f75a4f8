//! The poller's sleep on Linux: `epoll_pwait2` with a nanosecond timeout, or a `timerfd`.
//!
//! `epoll_wait`'s timeout counts whole milliseconds (go#44343, tokio#5021). Two ways to sleep
//! to the nanosecond:
//!
//! - `epoll_pwait2` (Linux 5.11) takes a `timespec`: one system call per sleep. The kernel
//!   adds a slack to its timeout, the larger of the thread's timer slack (50 µs by default,
//!   set to 1 ns here on the first such sleep of each thread) and 0.1 % of the timeout
//!   (`select_estimate_accuracy`), so it serves timeouts of at most `PWAIT2_MAX` only, whose
//!   slack stays within a few microseconds (a frequent wake-up, where the second system call
//!   of the timerfd costs the most).
//! - A non-blocking `timerfd` registered in the same epoll set, armed to the instant (no
//!   slack), and `epoll_wait` without a timeout: two system calls per sleep (the timerfd is
//!   re-armed only when the deadline changed). Longer sleeps use it, and every sleep when
//!   `epoll_pwait2` is missing (`ENOSYS`, or refused by a seccomp filter) or
//!   [`timerfd_only`] asked for it.
//!
//! The events are read into a buffer of our own (mio's `Events` cannot be filled by another
//! call) and decoded as mio decodes them; mio's tokens are the epoll data word.

use super::{Readiness, Wait, TIMER};
use gort_timer::{nanotime, Nanos};
use mio::{Interest, Poll, Token};
use std::cell::Cell;
use std::io;
use std::os::fd::{AsRawFd, RawFd};
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};

/// The longest timeout given to `epoll_pwait2` (ns): its 0.1 % slack is then at most 2 µs.
const PWAIT2_MAX: Nanos = 2_000_000;

/// Set by [`timerfd_only`]: pollers created from now on sleep on the timerfd alone.
pub(super) static TIMERFD_ONLY: AtomicBool = AtomicBool::new(false);

/// Makes the pollers of runtimes built from now on sleep on the timerfd alone, as on a kernel
/// without `epoll_pwait2` (`false` restores the default). For tests of that path.
pub(crate) fn timerfd_only(on: bool) {
    TIMERFD_ONLY.store(on, Relaxed);
}

/// The poller M's means of sleeping; only the M holding the poller's lock touches it.
pub(super) struct Sleep {
    /// Owns the epoll descriptor `epfd`.
    _poll: Poll,
    epfd: RawFd,
    timer: timerfd::TimerFd,
    /// The deadline the timerfd is armed to (0 = disarmed or expired). Re-arming costs a
    /// syscall that is slow under virtualisation (a timer reprogramming exit), so an
    /// unchanged deadline is not re-armed.
    armed: Nanos,
    /// Whether `epoll_pwait2` works here (and was not turned off).
    pwait2: bool,
    events: Vec<libc::epoll_event>,
}

impl Sleep {
    /// Registers a timerfd in `poll` and, if `pwait2` asks for it, finds out whether
    /// `epoll_pwait2` works.
    pub(super) fn new(poll: Poll, capacity: usize, pwait2: bool) -> io::Result<Sleep> {
        let timer = timerfd::TimerFd::new()?;
        poll.registry().register(
            &mut mio::unix::SourceFd(&timer.raw()),
            TIMER,
            Interest::READABLE,
        )?;
        let mut sleep = Sleep {
            epfd: poll.as_raw_fd(),
            _poll: poll,
            timer,
            armed: 0,
            pwait2: false,
            events: vec![libc::epoll_event { events: 0, u64: 0 }; capacity],
        };
        // Nothing can be pending yet (the timerfd is disarmed), so the probe takes no event.
        sleep.pwait2 = pwait2 && sleep.pwait2_call(Some(0)).is_ok();
        Ok(sleep)
    }

    /// Waits as `wait` says; returns the events and whether the sleep ended by its own
    /// timeout (the poller's timer expired; a timerfd expiry comes as a `TIMER` event).
    pub(super) fn wait(&mut self, wait: Wait) -> (impl Iterator<Item = Readiness> + '_, bool) {
        let timeout = match wait {
            Wait::Forever => None,
            Wait::Now => Some(0),
            Wait::Until(until) => self.timeout_to(until),
        };
        // Only a timeout between zero and forever needs epoll_pwait2.
        let result = match timeout {
            Some(t) if t > 0 => self.pwait2_call(Some(t)),
            _ => self.epoll_wait_call(timeout.map_or(-1, |_| 0)),
        };
        let n = match result {
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => 0,
            Err(e) => panic!("gort: the poller failed: {e}"),
        };
        let timed_out = n == 0 && timeout.is_some_and(|t| t > 0);
        let events = self.events[..n].iter().map(decode);
        (events, timed_out)
    }

    /// The timeout for a sleep until `until` (`Some(0)`: due already), after arming the
    /// timerfd when `epoll_pwait2` is not to serve it (`None`: no timeout).
    fn timeout_to(&mut self, until: Nanos) -> Option<Nanos> {
        let delay = until - nanotime();
        if delay <= 0 {
            return Some(0);
        }
        if self.pwait2 && delay <= PWAIT2_MAX {
            set_timer_slack_once();
            return Some(delay);
        }
        // An earlier arming that is still pending wakes us at the latest by `until` when it
        // is the same deadline; a later one would oversleep, an earlier one wakes us early
        // (harmless: the caller re-checks and re-polls).
        if self.armed != until {
            self.timer.set(delay);
            self.armed = until;
        }
        None
    }

    /// Whether the timed sleeps use `epoll_pwait2`.
    #[cfg(test)]
    pub(super) fn uses_pwait2(&self) -> bool {
        self.pwait2
    }

    /// The timerfd's expiry was seen: it is disarmed.
    pub(super) fn timer_expired(&mut self) {
        self.armed = 0;
    }

    fn pwait2_call(&mut self, timeout: Option<Nanos>) -> io::Result<usize> {
        let spec = timeout.map(|t| libc::timespec {
            tv_sec: (t / 1_000_000_000) as libc::time_t,
            tv_nsec: (t % 1_000_000_000) as _,
        });
        let spec_ptr = spec.as_ref().map_or(std::ptr::null(), |s| s as *const _);
        // SAFETY: the buffer holds `len` events and outlives the call; a null sigmask leaves
        // the thread's mask alone (the size argument is then ignored); `spec_ptr` is null or
        // points to `spec`, alive until the call returns.
        let rc = unsafe {
            libc::syscall(
                libc::SYS_epoll_pwait2,
                self.epfd,
                self.events.as_mut_ptr(),
                self.events.len() as libc::c_int,
                spec_ptr,
                std::ptr::null::<libc::sigset_t>(),
                std::mem::size_of::<libc::sigset_t>(),
            )
        };
        if rc < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(rc as usize)
    }

    fn epoll_wait_call(&mut self, timeout_ms: libc::c_int) -> io::Result<usize> {
        // SAFETY: the buffer holds `len` events and outlives the call.
        let rc = unsafe {
            libc::epoll_wait(
                self.epfd,
                self.events.as_mut_ptr(),
                self.events.len() as libc::c_int,
                timeout_ms,
            )
        };
        if rc < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(rc as usize)
    }
}

/// One epoll event as mio reads it (`mio::sys::unix::selector::epoll::event`): readable on
/// `EPOLLIN`/`EPOLLPRI`; hung up on an error, on `EPOLLHUP`, on `EPOLLRDHUP` with
/// `EPOLLIN`, or on a lone `EPOLLERR` (a pipe whose reader left).
fn decode(ev: &libc::epoll_event) -> Readiness {
    let bits = ev.events as libc::c_int;
    let has = |flag: libc::c_int| bits & flag != 0;
    let read_closed = has(libc::EPOLLHUP) || (has(libc::EPOLLIN) && has(libc::EPOLLRDHUP));
    let hung_up = has(libc::EPOLLERR) || read_closed;
    Readiness {
        token: Token(ev.u64 as usize),
        readable: has(libc::EPOLLIN) || has(libc::EPOLLPRI) || hung_up,
        writable: has(libc::EPOLLOUT) || hung_up,
        hung_up,
        urgent: has(libc::EPOLLPRI),
    }
}

thread_local! {
    static SLACK_SET: Cell<bool> = const { Cell::new(false) };
}

/// Sets this thread's timer slack to 1 ns, once: `epoll_pwait2`'s timeout would otherwise
/// expire up to 50 µs late (the default slack). Only the sleeps of the Ms are affected.
fn set_timer_slack_once() {
    SLACK_SET.with(|set| {
        if !set.replace(true) {
            // SAFETY: plain prctl on the calling thread; a failure only leaves the slack.
            unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong) };
        }
    });
}

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
