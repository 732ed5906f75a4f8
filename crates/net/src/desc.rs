//! The poll descriptor: Go's `pollDesc`, one per socket, shared by the tasks that use the
//! socket, the poller M that delivers its readiness and the timers of its deadlines.
//!
//! Each direction (read, write) is a [`Half`]:
//!
//! - `ready` (Go's `pdReady` in `rg`/`wg`): set by the poller on an edge, cleared by the
//!   task (a swap, which reads the poller's store when it came first) just before it tries
//!   the syscall. Edge-triggered readiness is never lost: an edge
//!   that came before the clear is data the syscall finds; one after it sets the flag again.
//! - `waiters` (Go's goroutine pointer in `rg`/`wg`): the wakers of the tasks blocked in this
//!   direction. The poller records the edge under the lock (`edge`, besides the atomic
//!   `ready`) and releases the waiters there; a task registers under the lock unless `edge`
//!   is set (then it retries); so either the poller finds the waker or the task finds the
//!   edge: the lock orders the two, with no reliance on the atomic's ordering.
//! - `expired` (Go's `rd < 0`): the deadline has passed; every operation fails with
//!   `TimedOut` at once, before any syscall, until the deadline is moved or cleared.
//! - `armed` (what Go's `rseq`/`wseq` are for): the deadline the direction's timer is armed
//!   for, 0 when none is. A timer fire names the deadline it was armed for; one that does not
//!   match `armed` is stale (the deadline moved earlier or was cleared since) and does
//!   nothing. `deadline` is the deadline in effect: a move later only records it, and the
//!   fire at `armed` re-arms the timer for it instead of expiring.
//! - `closed` (Go's `closing`): the socket is gone; operations fail, waiters are released.
//!
//! Wakers are moved in and out under the lock and woken, cloned and dropped outside it (the
//! callers get them in a list): no user code runs under the lock. The count of blocked
//! directions runtime-wide (Go's `netpollWaiters`) is kept under the lock too, so it never
//! goes below zero.

use gort_loom::atomic::{AtomicBool, Ordering::SeqCst};
use gort_loom::Mutex;
use std::task::Waker;

/// A deadline or a clock reading, in the runtime clock's nanoseconds (0 = none).
pub type Nanos = i64;

/// The runtime-wide count of blocked directions (Go's `netpollWaiters`).
pub trait Count: Send + Sync + 'static {
    /// A direction's empty waiter list got a task.
    fn add(&self);
    /// A direction's waiter list was emptied.
    fn remove(&self);
}

/// Why an operation cannot go on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fail {
    /// The deadline has passed.
    TimedOut,
    /// The socket was closed.
    Closed,
}

/// What a task that got `WouldBlock` should do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wait {
    /// Readiness came meanwhile: try the syscall again.
    Retry,
    /// Its waker is registered: return `Pending`.
    Pending,
    /// Give up.
    Fail(Fail),
}

/// How a deadline change affects the direction's timer (the caller arms it, under the lock).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Arm {
    /// Stop the timer.
    Stop,
    /// Arm (or re-arm) the timer for this deadline.
    At(Nanos),
}

#[derive(Debug, Default)]
struct State {
    waiters: Vec<Waker>,
    armed: Nanos,
    /// The deadline in effect (0 = none); later than `armed` when it was moved later since
    /// the timer was armed (the fire then moves the timer instead of expiring).
    deadline: Nanos,
    /// An edge came since a task last registered: the lock-protected twin of `ready`, which
    /// the waiter handshake relies on (the atomic is the lock-free fast path).
    edge: bool,
}

/// One direction of a poll descriptor.
#[derive(Debug)]
pub struct Half {
    ready: AtomicBool,
    expired: AtomicBool,
    closed: AtomicBool,
    state: Mutex<State>,
}

impl Default for Half {
    fn default() -> Half {
        Half {
            ready: AtomicBool::new(false),
            expired: AtomicBool::new(false),
            closed: AtomicBool::new(false),
            state: Mutex::new(State::default()),
        }
    }
}

impl Half {
    /// Go's `prepareRead`/`prepareWrite`: fails at once on a passed deadline or a closed
    /// socket (nothing is consumed or sent), else clears `ready` for the syscall to follow.
    pub fn prepare(&self) -> Result<(), Fail> {
        if self.closed.load(SeqCst) {
            return Err(Fail::Closed);
        }
        if self.expired.load(SeqCst) {
            return Err(Fail::TimedOut);
        }
        // A swap, not a store: if the poller's `ready` came first, reading it (acquire)
        // makes the data behind that edge visible to the syscall that follows.
        self.ready.swap(false, SeqCst);
        Ok(())
    }

    /// Go's `netpollblock` after a syscall said `WouldBlock`: registers `waker` unless
    /// readiness, the deadline or a close came meanwhile.
    pub fn wait(&self, waker: &Waker, count: &dyn Count) -> Wait {
        if self.ready.load(SeqCst) {
            return Wait::Retry;
        }
        let mine = waker.clone(); // user code: outside the lock
        let mut st = self.state.lock();
        let outcome = if self.closed.load(SeqCst) {
            Wait::Fail(Fail::Closed)
        } else if self.expired.load(SeqCst) {
            Wait::Fail(Fail::TimedOut)
        } else if std::mem::take(&mut st.edge) {
            Wait::Retry
        } else {
            Wait::Pending
        };
        let mut unused = Some(mine);
        if outcome == Wait::Pending && !st.waiters.iter().any(|w| w.will_wake(waker)) {
            if st.waiters.is_empty() {
                count.add();
            }
            st.waiters.extend(unused.take());
        }
        drop(st);
        drop(unused); // user code: outside the lock
        outcome
    }

    /// Go's `netpollready` for this direction: sets `ready` and releases the waiters into
    /// `out`.
    pub fn set_ready(&self, out: &mut Vec<Waker>, count: &dyn Count) {
        // Under the lock: a task registering under it either comes after (and sees `edge`)
        // or before (and its waker is released here).
        let mut st = self.state.lock();
        st.edge = true;
        self.ready.store(true, SeqCst);
        release(&mut st, out, count);
    }

    /// Go's `netpolldeadlineimpl` for a timer armed for `when`: unless stale, marks the
    /// deadline passed and releases the waiters into `out`; or, when the deadline was moved
    /// later meanwhile, re-arms the timer for it (`arm`, under the lock). Returns whether it
    /// expired.
    pub fn expire(
        &self,
        when: Nanos,
        out: &mut Vec<Waker>,
        count: &dyn Count,
        arm: impl FnOnce(Arm),
    ) -> bool {
        let mut st = self.state.lock();
        if st.armed == 0 || st.armed != when {
            return false;
        }
        if st.deadline > when {
            arm(Arm::At(st.deadline));
            st.armed = st.deadline;
            return false;
        }
        st.armed = 0;
        self.expired.store(true, SeqCst);
        release(&mut st, out, count);
        true
    }

    /// Go's `poll_runtime_pollSetDeadline` for this direction: `deadline` 0 clears it, one at
    /// or before `now` expires it at once (releasing the waiters into `out`), a later one is
    /// armed. `arm` changes the timer under the descriptor's lock, so that armings of
    /// concurrent calls happen in the order their deadlines were recorded; it is called only
    /// when the timer must change: a deadline moved later while the timer is armed for an
    /// earlier one is only recorded, and the timer's fire moves it (one re-arm per fire, not
    /// per move: a server that pushes its idle deadline before every read pays a lock).
    pub fn set_deadline(
        &self,
        deadline: Nanos,
        now: Nanos,
        out: &mut Vec<Waker>,
        count: &dyn Count,
        arm: impl FnOnce(Arm),
    ) {
        let mut st = self.state.lock();
        if self.closed.load(SeqCst) {
            return;
        }
        st.deadline = deadline;
        if deadline > now {
            self.expired.store(false, SeqCst);
            if st.armed == 0 || deadline < st.armed {
                arm(Arm::At(deadline));
                st.armed = deadline;
            }
            return;
        }
        if st.armed != 0 {
            arm(Arm::Stop);
            st.armed = 0;
        }
        if deadline == 0 {
            self.expired.store(false, SeqCst);
        } else {
            self.expired.store(true, SeqCst);
            release(&mut st, out, count);
        }
    }

    /// Go's `poll_runtime_pollUnblock`: the socket is closing; operations fail from now on,
    /// the waiters are released into `out` and a timer fire still in flight is stale (the
    /// caller stops the timer).
    pub fn close(&self, out: &mut Vec<Waker>, count: &dyn Count) {
        self.closed.store(true, SeqCst);
        let mut st = self.state.lock();
        st.armed = 0;
        st.deadline = 0;
        release(&mut st, out, count);
    }

    /// Whether the deadline has passed (for tests and `Debug`).
    pub fn is_expired(&self) -> bool {
        self.expired.load(SeqCst)
    }
}

/// Moves every waiter of `st` into `out`, keeping the waiter count.
fn release(st: &mut State, out: &mut Vec<Waker>, count: &dyn Count) {
    if !st.waiters.is_empty() {
        count.remove();
        out.append(&mut st.waiters);
    }
}

/// A socket's poll descriptor: its read and write directions.
#[derive(Debug, Default)]
pub struct PollDesc {
    /// The read direction (reads, receives, accepts).
    pub read: Half,
    /// The write direction (writes, sends, connects).
    pub write: Half,
}

impl PollDesc {
    /// The poller saw the socket readable and/or writable.
    pub fn ready(&self, readable: bool, writable: bool, out: &mut Vec<Waker>, count: &dyn Count) {
        if readable {
            self.read.set_ready(out, count);
        }
        if writable {
            self.write.set_ready(out, count);
        }
    }
}
