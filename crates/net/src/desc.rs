//! The poll descriptor: Go's `pollDesc`, one per socket, shared by the tasks that use the
//! socket, the poller M that delivers its readiness and the timers of its deadlines.
//!
//! Each direction (read, write) is a [`Half`]:
//!
//! - `ready` (what Go's `pdReady` in `rg`/`wg` is for): the count of readiness edges (bits 1
//!   and up, bumped by the poller) and the `WAITING` bit (bit 0: set while a task waits,
//!   and kept after a release until the next edge), one atomic word. The task reads the count just before it tries the syscall
//!   ([`Half::prepare`] returns it as an [`Edges`] ticket) and, when the syscall would block,
//!   registers only if no edge came since ([`Half::wait`]): an edge before the read is data
//!   the syscall finds; one after it makes the task retry. An edge the syscall already
//!   consumed never causes a retry, so a read that would block costs one syscall per
//!   readiness edge, not two.
//! - `waiters` (Go's goroutine pointer in `rg`/`wg`): the wakers of the tasks blocked in this
//!   direction, under the lock. A task sets `WAITING` and reads the count in one
//!   read-modify-write under the lock; the poller adds its edge and reads `WAITING` in one
//!   read-modify-write, and takes the lock only when the bit is set. Both act on the one
//!   word, so one comes first: either the poller sees the bit (and finds the waker under the
//!   lock) or the task sees the edge (and retries). An edge with nobody waiting (the write
//!   direction gets one on most ACKs) costs one atomic add, no lock. A release leaves the
//!   bit set (the task it wakes mostly blocks again, and then needs only a load); the next
//!   edge that finds no waiter clears it. An operation future owns its slot in the list
//!   ([`Reg`]) and gives it back when dropped ([`Half::cancel`]), unless a release (counted
//!   in `releases`) took it already.
//! - `deadline` (Go's `rd`/`wd`): the deadline in effect, 0 for none, and like Go's negative
//!   once it has passed (`-deadline`): every operation then fails with `TimedOut` at once,
//!   before any syscall, until the deadline is moved or cleared. While it is positive the
//!   timer is armed for it or for an earlier instant.
//! - `armed` (what Go's `rseq`/`wseq` are for): the deadline the direction's timer is armed
//!   for, 0 when none is. A timer fire names the deadline it was armed for; one that does not
//!   match `armed` is stale (the deadline moved earlier or was cleared since) and does
//!   nothing. A move later only records the new deadline (one compare-and-swap, no lock), and
//!   the fire at `armed` re-arms the timer for it instead of expiring.
//! - `closed` (Go's `closing`): the socket is gone; operations fail, waiters are released.
//!
//! Wakers are moved in and out under the lock and woken, cloned and dropped outside it (the
//! callers get them in a list): no user code runs under the lock. The count of blocked
//! directions runtime-wide (Go's `netpollWaiters`) is kept under the lock too, so it never
//! goes below zero.

use crate::wakers::{Waiting, MAX_UNOWNED};
use gort_loom::atomic::{AtomicBool, AtomicI64, AtomicUsize, Ordering::*};
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

/// The count of readiness edges a task saw just before its syscall ([`Half::prepare`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Edges(usize);

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
    /// Readiness came since the ticket was taken: try the syscall again.
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
    waiters: Waiting,
    armed: Nanos,
}

/// An operation future's registration in a direction's waiter list: its slot, valid until
/// the list's next release (`gen`, the release count when it registered). The future gives
/// it back when dropped ([`Half::cancel`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reg {
    gen: usize,
    slot: usize,
}

/// `Half::ready`'s bit 0: set whenever the waiter list is not empty, and possibly while it is
/// empty after a release; set and cleared only under the lock.
const WAITING: usize = 1;
/// One readiness edge in `Half::ready` (the count lives above `WAITING`).
const EDGE: usize = 2;

/// One direction of a poll descriptor.
#[derive(Debug)]
pub struct Half {
    /// Readiness edges so far times [`EDGE`] (wrapping), plus [`WAITING`] (set at least
    /// while `state` holds a waiter). The poller adds edges without the lock; the bit changes
    /// only under it.
    ready: AtomicUsize,
    /// The edge count (as [`Half::prepare`] returns it) before the last transfer that left the
    /// kernel's buffer empty (full, for a write): a stream read or write shorter than asked.
    /// While no edge came since, the next transfer waits without trying its syscall
    /// ([`Half::drained_at`]). [`WAITING`] (odd, so never a count) when there is none.
    drained: AtomicUsize,
    /// The peer hung up or the socket failed (a final state, set before the edge that
    /// reports it): no transfer skips its syscall any more, as a drained buffer no longer
    /// means it would block (it returns the end of stream or the error at once).
    hung_up: AtomicBool,
    /// The poller saw urgent data (TCP's `MSG_OOB`, a Unix stream's): a read stops short at
    /// the urgent mark while bytes wait behind it, so a short read no longer means the
    /// queue is empty, and no transfer skips its syscall any more. Set for good (before the
    /// edge that reports it, as `hung_up`): a socket that gets urgent data (telnet's Synch,
    /// FTP's abort) pays an `EAGAIN` per wait from then on, as Go's every socket does.
    urgent: AtomicBool,
    closed: AtomicBool,
    /// The deadline in effect: 0 = none; `d > 0` pending, with the timer armed for `d` or
    /// earlier (`State::armed`); `-d` passed. Written under the lock, except a move later of a
    /// pending deadline: a compare-and-swap from `d > 0` to a later one, which needs no timer
    /// change (the fire re-arms) and fails if the fire expired `d` meanwhile (it swaps `d` for
    /// `-d`).
    deadline: AtomicI64,
    /// How many times the waiter list was released (a non-empty one): a [`Reg`] from before
    /// the last release names a slot that is no longer its own. Written under the lock.
    releases: AtomicUsize,
    state: Mutex<State>,
}

impl Default for Half {
    fn default() -> Half {
        Half {
            ready: AtomicUsize::new(0),
            drained: AtomicUsize::new(WAITING),
            hung_up: AtomicBool::new(false),
            urgent: AtomicBool::new(false),
            closed: AtomicBool::new(false),
            deadline: AtomicI64::new(0),
            releases: AtomicUsize::new(0),
            state: Mutex::new(State::default()),
        }
    }
}

impl Half {
    /// Go's `prepareRead`/`prepareWrite`: fails at once on a passed deadline or a closed
    /// socket (nothing is consumed or sent), else returns the edges seen so far, the ticket
    /// that [`Half::wait`] compares, for the syscall to follow.
    pub fn prepare(&self) -> Result<Edges, Fail> {
        if self.closed.load(SeqCst) {
            return Err(Fail::Closed);
        }
        if self.is_expired() {
            return Err(Fail::TimedOut);
        }
        // Acquire: reading the poller's release of an edge orders the syscall after the
        // readiness that edge counted.
        Ok(Edges(self.ready.load(Acquire) & !WAITING))
    }

    /// Whether a transfer made after the edges `seen` left the buffer drained (tokio's rule;
    /// Go tries the syscall and pays an `EAGAIN`): a stream read shorter than asked found
    /// the receive queue empty, a short write the send buffer full, and any change since
    /// comes with an edge after `seen`. So the caller can [`wait`](Half::wait) on `seen` at
    /// once, as after a `WouldBlock`. A hint: however stale, it only names a count at which
    /// the buffer was drained after the count was reached. Never after a hang-up: an end of
    /// stream that came before the short read sends no edge after it (tokio keeps its
    /// closed states out of the readiness a short read clears, for the same reason). Nor
    /// once urgent data came ([`Half::set_urgent`]): a read stops short at its mark.
    pub fn drained_at(&self, seen: Edges) -> bool {
        // The hang-up and the urgent mark are stored before their edge's release: if `seen`
        // (acquired by `prepare`) counts that edge, these loads see them; if not, the edge
        // makes `wait` retry.
        self.drained.load(Relaxed) == seen.0
            && !self.hung_up.load(Relaxed)
            && !self.urgent.load(Relaxed)
    }

    /// The poller saw urgent data on the socket; call before [`Half::set_ready`] for the
    /// same event. From then on a short transfer never makes the next one skip its syscall
    /// ([`Half::drained_at`]): a read stops at the urgent mark, shorter than asked, while
    /// the bytes behind the mark are queued already and bring no edge.
    pub fn set_urgent(&self) {
        self.urgent.store(true, Relaxed);
    }

    /// The poller saw the peer hang up or the socket fail; call before [`Half::set_ready`]
    /// for the same event.
    pub fn set_hung_up(&self) {
        self.hung_up.store(true, Relaxed);
    }

    /// Whether the poller saw a hang-up or an error (see [`Half::set_hung_up`]). Stored
    /// before its edge's release: a caller whose ticket (from [`Half::prepare`]) counts that
    /// edge sees it; one whose ticket does not gets the edge as readiness and tries again.
    pub fn is_hung_up(&self) -> bool {
        self.hung_up.load(Relaxed)
    }

    /// Records that a transfer made after the edges `seen` left the buffer drained.
    pub fn note_drained(&self, seen: Edges) {
        self.drained.store(seen.0, Relaxed);
    }

    /// Go's `netpollblock` after a syscall said `WouldBlock`: registers `waker` unless
    /// readiness (an edge after `seen`, the ticket of [`Half::prepare`]), the deadline or a
    /// close came meanwhile. For a poll with no future to give its slot back (the I/O trait
    /// impls): one slot per task, kept until the next release; past 256 such
    /// slots, one is emptied and its task woken (a spurious wake-up if it still waits).
    pub fn wait(&self, seen: Edges, waker: &Waker, count: &dyn Count) -> Wait {
        self.wait_owned(seen, waker, count, None)
    }

    /// [`Half::wait`] for an operation future that owns its registration (`reg`: none before
    /// its first, then the one this call made or kept): it registers in a slot of its own, or
    /// refreshes that slot when it is still its own, and gives it back when dropped
    /// ([`Half::cancel`]).
    pub fn wait_as(
        &self,
        seen: Edges,
        waker: &Waker,
        count: &dyn Count,
        reg: &mut Option<Reg>,
    ) -> Wait {
        self.wait_owned(seen, waker, count, Some(reg))
    }

    fn wait_owned(
        &self,
        seen: Edges,
        waker: &Waker,
        count: &dyn Count,
        reg: Option<&mut Option<Reg>>,
    ) -> Wait {
        if self.ready.load(Acquire) & !WAITING != seen.0 {
            return Wait::Retry;
        }
        let mut mine = Some(waker.clone()); // user code: outside the lock
        let mut replaced = None;
        let mut evicted = None;
        let mut st = self.state.lock();
        let outcome = if self.closed.load(SeqCst) {
            Wait::Fail(Fail::Closed)
        } else if self.is_expired() {
            Wait::Fail(Fail::TimedOut)
        } else {
            self.announce(&st, seen)
        };
        if outcome == Wait::Pending {
            let gen = self.releases.load(Relaxed);
            match reg {
                Some(Some(r)) if r.gen == gen => {
                    replaced = st.waiters.refresh(r.slot, waker, &mut mine);
                }
                Some(reg) => {
                    if st.waiters.is_empty() {
                        count.add();
                    }
                    if let Some(w) = mine.take() {
                        *reg = Some(Reg {
                            gen,
                            slot: st.waiters.push(w, true),
                        });
                    }
                }
                None if !st.waiters.holds_unowned(waker) => {
                    if st.waiters.is_empty() {
                        count.add();
                    }
                    if st.waiters.unowned() >= MAX_UNOWNED {
                        evicted = st.waiters.evict_unowned();
                    }
                    if let Some(w) = mine.take() {
                        st.waiters.push(w, false);
                    }
                }
                None => {}
            }
        }
        drop(st);
        drop((mine, replaced)); // user code: outside the lock
        if let Some(w) = evicted {
            w.wake();
        }
        outcome
    }

    /// An operation future that registered as `reg` is dropped (given up, or done): empties
    /// its slot unless a release took it already, so that its waker (and the task it keeps)
    /// does not wait for the next release. Returns the waker, for the caller to drop outside
    /// the lock. Tokio's readiness future unlinks its waiter the same way.
    pub fn cancel(&self, reg: Reg, count: &dyn Count) -> Option<Waker> {
        // A release counted since makes the slot another's: no lock needed to see that (the
        // count only grows; a stale read is checked again under the lock).
        if self.releases.load(Relaxed) != reg.gen {
            return None;
        }
        let mut st = self.state.lock();
        if self.releases.load(Relaxed) != reg.gen {
            return None;
        }
        let waker = st.waiters.take(reg.slot);
        if waker.is_some() && st.waiters.is_empty() {
            // `WAITING` stays set, as after a release: the next edge clears it.
            count.remove();
        }
        waker
    }

    /// The task's half of the handshake with [`Half::set_ready`], under the lock: sets
    /// `WAITING` and reads the edge count in one read-modify-write, so the poller's add
    /// comes either before it (`Retry`: the edge is seen) or after it (the poller sees the
    /// bit and takes the lock, where it finds the waker that the caller adds before
    /// unlocking). On `Retry` the bit is taken back unless other waiters hold it.
    ///
    /// When the bit is set already (left by the last release, or other waiters), a load
    /// does: the bit changes only under the lock, so every add after the value read sees it
    /// and locks after this task; every add that saw it clear came before the RMW that set
    /// it, so the value read counts that edge.
    fn announce(&self, st: &State, seen: Edges) -> Wait {
        let current = self.ready.load(Relaxed);
        if current & WAITING != 0 {
            return if current & !WAITING == seen.0 {
                Wait::Pending
            } else {
                Wait::Retry
            };
        }
        // Relaxed: the handshake rests on the order of the read-modify-writes of this one
        // word, not on what they publish. On `Retry`, `prepare`'s acquire load reads this
        // value or a later one (coherence), so the retried syscall sees the new edge's
        // readiness; on `Pending` nothing is read. (A separate load and store here, in place
        // of the one RMW, loses wake-ups: loom_desc.rs `readiness_is_never_lost`.)
        let now = self.ready.fetch_or(WAITING, Relaxed);
        if now & !WAITING == seen.0 {
            return Wait::Pending;
        }
        if st.waiters.is_empty() {
            self.ready.fetch_and(!WAITING, Relaxed);
        }
        Wait::Retry
    }

    /// Go's `netpollready` for this direction: counts the edge and releases the waiters into
    /// `out`.
    pub fn set_ready(&self, out: &mut Vec<Waker>, count: &dyn Count) {
        // Release: a task whose `prepare` (acquire) reads this edge then sees the readiness
        // (the kernel's state) the poller saw before counting it. The add and the read of
        // `WAITING` are one read-modify-write, ordered with the task's in `announce` on this
        // one word: without the bit, no task is registered, and none can register without
        // seeing this edge.
        if self.ready.fetch_add(EDGE, Release) & WAITING == 0 {
            return;
        }
        let mut st = self.state.lock();
        if st.waiters.is_empty() {
            // Left set by the last release: nobody blocked again, so later edges can skip
            // the lock. A read-modify-write, not a store: another M's edge may be adding.
            self.ready.fetch_and(!WAITING, Relaxed);
        }
        release(self, &mut st, out, count);
    }

    /// Go's `netpolldeadlineimpl` for a timer armed for `when`: unless stale, marks the
    /// deadline passed and releases the waiters into `out`; or, when the deadline was moved
    /// later meanwhile, re-arms the timer for it (`arm`, under the lock). Returns whether it
    /// expired.
    pub fn expire(
        &self,
        when: Nanos,
        out: &mut impl Extend<Waker>,
        count: &dyn Count,
        arm: impl FnOnce(Arm),
    ) -> bool {
        let mut st = self.state.lock();
        if st.armed == 0 || st.armed != when {
            return false;
        }
        // Armed, so the deadline is pending and no earlier than `when`; only a lock-free move
        // later can change it under the lock.
        let mut deadline = self.deadline.load(SeqCst);
        loop {
            debug_assert!(
                deadline >= when,
                "gort: a pending deadline before its timer"
            );
            if deadline > when {
                arm(Arm::At(deadline));
                st.armed = deadline;
                return false;
            }
            match self
                .deadline
                .compare_exchange(deadline, -deadline, SeqCst, SeqCst)
            {
                Ok(_) => break,
                Err(moved) => deadline = moved,
            }
        }
        st.armed = 0;
        release(self, &mut st, out, count);
        true
    }

    /// Go's `poll_runtime_pollSetDeadline` for this direction: `deadline` 0 clears it, one at
    /// or before `now` expires it at once (releasing the waiters into `out`), a later one is
    /// armed. `arm` changes the timer under the descriptor's lock, so that armings of
    /// concurrent calls happen in the order their deadlines were recorded; it is called only
    /// when the timer must change. A pending deadline moved later (or set again) while the
    /// timer is armed for it or earlier takes no lock: one compare-and-swap records it, and
    /// the timer's fire moves the timer (one re-arm per fire, not per move: a server that
    /// pushes its idle deadline before every read pays an atomic per read).
    pub fn set_deadline(
        &self,
        deadline: Nanos,
        now: Nanos,
        out: &mut impl Extend<Waker>,
        count: &dyn Count,
        arm: impl FnOnce(Arm),
    ) {
        if self.moved_later(deadline, now) {
            return;
        }
        let mut st = self.state.lock();
        if self.closed.load(SeqCst) {
            return;
        }
        if deadline > now {
            if st.armed == 0 || deadline < st.armed {
                arm(Arm::At(deadline));
                st.armed = deadline;
            }
            // Published after the arming: a pending deadline always has its timer.
            self.deadline.store(deadline, SeqCst);
            return;
        }
        if st.armed != 0 {
            arm(Arm::Stop);
            st.armed = 0;
        }
        self.deadline.store(-deadline, SeqCst);
        if deadline != 0 {
            release(self, &mut st, out, count);
        }
    }

    /// Go's `poll_runtime_pollUnblock`: the socket is closing; operations fail from now on,
    /// the waiters are released into `out` and a timer fire still in flight is stale (the
    /// caller stops the timer).
    pub fn close(&self, out: &mut impl Extend<Waker>, count: &dyn Count) {
        self.closed.store(true, SeqCst);
        let mut st = self.state.lock();
        st.armed = 0;
        self.deadline.store(0, SeqCst);
        release(self, &mut st, out, count);
    }

    /// The lock-free part of [`Half::set_deadline`] (which calls it first): records
    /// `deadline` and returns true if it moves the pending deadline later or sets it again,
    /// or clears a clear one. The locked path would then change no timer: a pending deadline
    /// has its timer armed for it or earlier, and that fire re-arms for the new one instead
    /// of expiring (it reads the deadline under the lock, and its own compare-and-swap to
    /// `-d` makes this one fail, so a move never lands on an expired deadline). Go's servers
    /// push their idle deadline later before every read and clear it after every request
    /// (`SetReadDeadline(time.Time{})`), mostly when it is clear already.
    #[inline]
    pub fn moved_later(&self, deadline: Nanos, now: Nanos) -> bool {
        let current = self.deadline.load(SeqCst);
        if deadline == 0 {
            return current == 0;
        }
        current > 0
            && deadline > now
            && deadline >= current
            && (deadline == current
                || self
                    .deadline
                    .compare_exchange(current, deadline, SeqCst, SeqCst)
                    .is_ok())
    }

    /// The deadline in effect: 0 for none, `d > 0` pending, `-d` passed (for an operation
    /// that waits by pauses instead of readiness: `Io::pause`).
    pub fn deadline(&self) -> Nanos {
        self.deadline.load(SeqCst)
    }

    /// Whether the deadline has passed (for tests and `Debug`).
    pub fn is_expired(&self) -> bool {
        self.deadline.load(SeqCst) < 0
    }
}

/// Moves every waiter of `st` into `out`, keeping the waiter count. `WAITING` stays set: a
/// task that blocks again (the common case) registers with a plain load, and the next edge
/// that finds the list empty clears it ([`Half::set_ready`]).
fn release(half: &Half, st: &mut State, out: &mut impl Extend<Waker>, count: &dyn Count) {
    if !st.waiters.is_empty() {
        count.remove();
        st.waiters.move_into(out);
        // Under the lock: every owned slot of the list is void from here on.
        half.releases.fetch_add(1, Relaxed);
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
