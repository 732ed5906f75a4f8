//! A registered socket: the mio source, its poll descriptor, its registration with the
//! runtime's poller and its deadline timers. Every socket type of this crate is one of these.

use crate::desc::{Arm, Count, Edges, Fail, Half, Nanos, PollDesc, Reg, Wait};
use crate::wakers::Wakers;
use gort_sched::net_api::{self, Ready, Registration, Waiters};
use gort_time::Instant;
use gort_timer::{nanotime, CellFire, CellRef, CellTimer};
use mio::event::Source;
use std::io;
use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};
use std::sync::{Arc, OnceLock, Weak};
use std::task::{Context, Poll, Waker};
use std::time::Duration;

/// A direction of a socket.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Dir {
    Read,
    Write,
}

impl Count for Waiters {
    fn add(&self) {
        Waiters::add(self)
    }
    fn remove(&self) {
        Waiters::remove(self)
    }
}

/// The descriptor as the poller and the deadline timers see it.
struct Desc {
    pd: PollDesc,
    waiters: Waiters,
    /// Each direction's deadline timer, made on first use: most sockets never get one. Go's
    /// `pollDesc` holds its `rt` and `wt` in place; here each is one allocation with its
    /// callback (a [`CellTimer`]), armed again with no allocation.
    timers: [OnceLock<CellTimer>; 2],
}

impl Desc {
    fn half(&self, dir: Dir) -> &Half {
        match dir {
            Dir::Read => &self.pd.read,
            Dir::Write => &self.pd.write,
        }
    }
}

impl Ready for Desc {
    fn ready(&self, readable: bool, writable: bool, hung_up: bool, wakers: &mut Vec<Waker>) {
        if hung_up {
            self.pd.read.set_hung_up();
            self.pd.write.set_hung_up();
        }
        self.pd.ready(readable, writable, wakers, &self.waiters);
    }

    /// Urgent data: a read may now stop short at its mark with bytes left behind it, so no
    /// read skips its syscall after a short one any more ([`Half::set_urgent`]).
    fn urgent(&self) {
        self.pd.read.set_urgent();
    }

    /// The runtime shut down: both halves close (Go's `pollUnblock`), so a blocked operation
    /// (a blocking closure's, which shutdown waits for) fails instead of waiting for ever.
    fn shutdown(&self, wakers: &mut Vec<Waker>) {
        self.pd.read.close(wakers, &self.waiters);
        self.pd.write.close(wakers, &self.waiters);
    }
}

/// A deadline timer's callback: Go's `netReadDeadline`/`netWriteDeadline`. It holds the
/// descriptor weakly: the descriptor owns the timer.
struct Expire {
    desc: Weak<Desc>,
    dir: Dir,
}

impl CellFire for Expire {
    fn fire(cell: CellRef<Self>, when: Nanos) {
        let Expire { desc, dir } = cell.payload();
        let Some(desc) = desc.upgrade() else {
            return;
        };
        let mut out = Wakers::default();
        let dir = *dir;
        desc.half(dir).expire(when, &mut out, &desc.waiters, |a| {
            // The deadline moved later since the arming: follow it (the thread running
            // timers is in the runtime, so this cannot fail).
            let _ = arm(&desc, dir, a, nanotime());
        });
        drop(desc);
        wake_all(out);
    }
}

/// A socket registered with the current runtime's poller.
pub(crate) struct Io<S: Source> {
    source: S,
    desc: Arc<Desc>,
    registration: Option<Registration>,
}

impl<S: Source> Io<S> {
    /// Registers `source` (already non-blocking) with the current runtime's poller.
    pub(crate) fn new(source: S) -> io::Result<Io<S>> {
        Io::with_waiters(source, net_api::waiters()?)
    }

    /// As [`Io::new`], for a descriptor whose task waits for something outside the program's
    /// time (a signal's self-pipe): it does not hold a paused clock.
    pub(crate) fn new_background(source: S) -> io::Result<Io<S>> {
        Io::with_waiters(source, net_api::background_waiters()?)
    }

    fn with_waiters(mut source: S, waiters: Waiters) -> io::Result<Io<S>> {
        let desc = Arc::new(Desc {
            pd: PollDesc::default(),
            waiters,
            timers: [OnceLock::new(), OnceLock::new()],
        });
        let registration = net_api::register(&mut source, desc.clone())?;
        Ok(Io {
            source,
            desc,
            registration: Some(registration),
        })
    }

    /// The socket.
    pub(crate) fn source(&self) -> &S {
        &self.source
    }

    /// Whether the poller saw `dir` hang up or fail ([`Half::is_hung_up`]), for an operation
    /// whose syscall says `WouldBlock` for good once that happened.
    pub(crate) fn is_hung_up(&self, dir: Dir) -> bool {
        self.desc.half(dir).is_hung_up()
    }

    /// Runs the non-blocking `op` until it does not say `WouldBlock`, waiting for the
    /// socket's readiness in `dir` between tries (Go's `fd.Read` loop with `pd.waitRead`).
    /// Cancel-safe: an operation that returned `WouldBlock` consumed nothing, and a dropped
    /// future takes its waker back out of the descriptor ([`Half::cancel`]).
    pub(crate) fn op<'a, R, F>(
        &'a self,
        dir: Dir,
        mut op: F,
    ) -> Op<'a, S, impl FnMut(&S, Edges) -> io::Result<R> + 'a>
    where
        F: FnMut(&S) -> io::Result<R> + 'a,
    {
        Op::new(self, dir, move |s: &S, _: Edges| op(s))
    }

    /// A stream socket's read or write of up to `len` bytes, as [`Io::op`]; one shorter than
    /// asked leaves the direction drained (the receive queue empty, the send buffer full), so
    /// the next waits for an edge without trying the syscall ([`Half::drained_at`]): a
    /// request/response connection makes one `EAGAIN` fewer per request. A zero-length read
    /// returns 0 at once, as Go's `Read` and std's contract: the kernel would make it wait
    /// for data (a stream `recv` of 0 bytes says `EAGAIN` until some is queued).
    /// `short_empties`: whether a short transfer does mean that (false for a Unix stream's
    /// reads: [`StreamSource::SHORT_READ_EMPTIES`](crate::stream::StreamSource)).
    pub(crate) fn transfer<'a, F>(
        &'a self,
        dir: Dir,
        len: usize,
        short_empties: bool,
        mut op: F,
    ) -> Op<'a, S, impl FnMut(&S, Edges) -> io::Result<usize> + 'a>
    where
        F: FnMut(&S) -> io::Result<usize> + 'a,
    {
        let half = self.desc.half(dir);
        Op::new(self, dir, move |s: &S, seen: Edges| {
            if len == 0 && dir == Dir::Read {
                return Ok(0);
            }
            transfer_once(half, len, short_empties, seen, || op(s))
        })
    }

    #[cfg(any(feature = "tokio-io", feature = "futures-io"))]
    pub(crate) fn poll_transfer(
        &self,
        dir: Dir,
        cx: &mut Context<'_>,
        len: usize,
        short_empties: bool,
        op: &mut impl FnMut(&S) -> io::Result<usize>,
    ) -> Poll<io::Result<usize>> {
        if len == 0 && dir == Dir::Read {
            return Poll::Ready(Ok(0));
        }
        let half = self.desc.half(dir);
        self.poll_op_after(
            dir,
            cx,
            &mut |s, seen| transfer_once(half, len, short_empties, seen, || op(s)),
            None,
        )
    }

    /// The loop of [`Io::poll_op`], whose `op` also gets the edges seen before it, under the
    /// cooperative budget: an operation that completes (data, an error, a deadline passed)
    /// costs a unit, and on a spent budget the task yields before the syscall, so a read loop
    /// on a socket whose peer keeps writing still lets its P's other tasks and a `timeout`
    /// around it run (gort-coop). `reg` is the registration of an operation future that
    /// gives its slot back when dropped ([`Op`]), `None` for a poll without one.
    #[inline]
    fn poll_op_after<R>(
        &self,
        dir: Dir,
        cx: &mut Context<'_>,
        op: &mut impl FnMut(&S, Edges) -> io::Result<R>,
        reg: Option<&mut Option<Reg>>,
    ) -> Poll<io::Result<R>> {
        gort_coop::poll_budgeted(cx, |cx| self.poll_op_unbudgeted(dir, cx, op, reg))
    }

    fn poll_op_unbudgeted<R>(
        &self,
        dir: Dir,
        cx: &mut Context<'_>,
        op: &mut impl FnMut(&S, Edges) -> io::Result<R>,
        mut reg: Option<&mut Option<Reg>>,
    ) -> Poll<io::Result<R>> {
        let half = self.desc.half(dir);
        loop {
            let seen = half.prepare().map_err(error)?;
            match op(&self.source, seen) {
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                res => return Poll::Ready(res),
            }
            let waiters = &self.desc.waiters;
            let wait = match reg.as_deref_mut() {
                Some(reg) => half.wait_as(seen, cx.waker(), waiters, reg),
                None => half.wait(seen, cx.waker(), waiters),
            };
            match wait {
                Wait::Retry => continue,
                Wait::Pending => return Poll::Pending,
                Wait::Fail(f) => return Poll::Ready(Err(error(f))),
            }
        }
    }

    /// One try of `op` without waiting: fails at once on a passed deadline in `dir` or a
    /// closed socket, else returns what `op` did (`WouldBlock` included), for an operation
    /// that waits by [`Io::pause`] instead of readiness.
    pub(crate) fn try_once<R>(
        &self,
        dir: Dir,
        op: &mut impl FnMut(&S) -> io::Result<R>,
    ) -> io::Result<R> {
        loop {
            self.desc.half(dir).prepare().map_err(error)?;
            match op(&self.source) {
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                res => return res,
            }
        }
    }

    /// Sleeps for `pause`, or until `dir`'s deadline if that comes first, and fails with
    /// `TimedOut` once that deadline has passed: the wait of an operation the kernel sends
    /// no readiness for ([`Backoff`]). A deadline set or moved meanwhile is seen at the end
    /// of the pause.
    pub(crate) async fn pause(&self, dir: Dir, pause: Duration) -> io::Result<()> {
        let deadline = self.desc.half(dir).deadline();
        let now = nanotime();
        if deadline < 0 || (deadline > 0 && deadline <= now) {
            return Err(error(Fail::TimedOut));
        }
        let pause = pause.as_nanos().min(i64::MAX as u128) as Nanos;
        let until = match deadline {
            0 => now.saturating_add(pause),
            d => d.min(now.saturating_add(pause)),
        };
        gort_time::sleep(Duration::from_nanos((until - now) as u64)).await;
        Ok(())
    }

    /// Go's `SetReadDeadline`/`SetWriteDeadline` for `dir`: `None` (or `Instant::NEVER`)
    /// clears it; a passed one makes pending and later operations fail at once; a later one
    /// arms the direction's timer (a re-arm when it was armed: no allocation).
    pub(crate) fn set_deadline(&self, dir: Dir, deadline: Option<Instant>) -> io::Result<()> {
        let deadline = match deadline {
            Some(d) if !d.is_never() => d.as_nanos().max(1),
            _ => 0,
        };
        // Clearing needs no clock (and an unchanged clear then costs a load).
        let now = if deadline == 0 { 0 } else { nanotime() };
        let half = self.desc.half(dir);
        // Go's idle-timeout idiom (a deadline pushed later before every read) ends here: one
        // compare-and-swap, no lock, no timer operation.
        if half.moved_later(deadline, now) {
            return Ok(());
        }
        self.change_deadline(dir, deadline, now)
    }

    /// The locked part of [`Io::set_deadline`]: the deadline changes the timer or expires.
    #[inline(never)]
    fn change_deadline(&self, dir: Dir, deadline: Nanos, now: Nanos) -> io::Result<()> {
        // A deadline still to come may need the timer armed, which only a thread of a runtime
        // can do: refuse it before the descriptor records it. Recorded without its timer, it
        // would never fire, nor would any later deadline (a move later relies on that timer).
        if deadline > now && !gort_sched::timer_api::in_runtime() {
            return Err(outside_runtime());
        }
        let mut out = Wakers::default();
        let mut res = Ok(());
        let half = self.desc.half(dir);
        half.set_deadline(deadline, now, &mut out, &self.desc.waiters, |a| {
            res = arm(&self.desc, dir, a, now);
        });
        wake_all(out);
        res
    }
}

/// One try of a stream transfer of `len` bytes ([`Io::transfer`]): skipped (`WouldBlock`)
/// while the direction is drained at `seen`; one shorter than asked marks it drained when
/// `short_empties` (a transfer that never marks is never skipped).
fn transfer_once(
    half: &Half,
    len: usize,
    short_empties: bool,
    seen: Edges,
    op: impl FnOnce() -> io::Result<usize>,
) -> io::Result<usize> {
    if len > 0 && half.drained_at(seen) {
        return Err(io::ErrorKind::WouldBlock.into());
    }
    let n = op()?;
    if short_empties && n > 0 && n < len {
        half.note_drained(seen);
    }
    Ok(n)
}

/// The future of an operation that waits for readiness ([`Io::op`], [`Io::transfer`]). It
/// owns its registration in the descriptor and gives it back when dropped, given up or done
/// ([`Half::cancel`]): a dropped future's waker left in the list until the next release kept
/// its task's memory that long, without bound on an idle socket (100,000 reads given up
/// under a `timeout` held 421 MiB; `tests/abuse_fds.rs`). A future whose registration a
/// release took already (the usual end: readiness woke it) gives back nothing and takes no
/// lock.
pub(crate) struct Op<'a, S: Source, F> {
    io: &'a Io<S>,
    dir: Dir,
    op: F,
    reg: Option<Reg>,
}

impl<'a, S: Source, F> Op<'a, S, F> {
    fn new(io: &'a Io<S>, dir: Dir, op: F) -> Op<'a, S, F> {
        Op {
            io,
            dir,
            op,
            reg: None,
        }
    }
}

impl<S: Source, R, F: FnMut(&S, Edges) -> io::Result<R> + Unpin> std::future::Future
    for Op<'_, S, F>
{
    type Output = io::Result<R>;

    fn poll(self: std::pin::Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<R>> {
        let this = self.get_mut();
        this.io
            .poll_op_after(this.dir, cx, &mut this.op, Some(&mut this.reg))
    }
}

impl<S: Source, F> Drop for Op<'_, S, F> {
    fn drop(&mut self) {
        if let Some(reg) = self.reg.take() {
            let desc = &self.io.desc;
            // The waker is dropped here, after the descriptor's lock.
            drop(desc.half(self.dir).cancel(reg, &desc.waiters));
        }
    }
}

/// The pauses between the tries of an operation that the kernel sends no readiness for: a
/// Unix connect into a full accept queue (`EAGAIN`, and no edge when room appears), a Unix
/// datagram send into a full queue (no edge when room appears, and a spurious write edge for
/// every failed try, as the kernel frees the datagram it had charged to the sender: waiting
/// for edges would spin). 1 ms, doubling up to 64 ms.
#[derive(Debug)]
pub(crate) struct Backoff(Duration);

impl Backoff {
    const FIRST: Duration = Duration::from_millis(1);
    const MAX: Duration = Duration::from_millis(64);

    pub(crate) fn new() -> Backoff {
        Backoff(Backoff::FIRST)
    }

    /// The next pause.
    pub(crate) fn next(&mut self) -> Duration {
        let pause = self.0;
        self.0 = (pause * 2).min(Backoff::MAX);
        pause
    }
}

/// Starts, moves or stops `dir`'s deadline timer (under the descriptor's lock).
fn arm(desc: &Arc<Desc>, dir: Dir, arm: Arm, now: Nanos) -> io::Result<()> {
    let slot = &desc.timers[dir as usize];
    match arm {
        Arm::Stop => {
            if let Some(t) = slot.get() {
                t.stop();
            }
            Ok(())
        }
        Arm::At(when) => {
            let t = slot.get_or_init(|| {
                CellTimer::new(Expire {
                    desc: Arc::downgrade(desc),
                    dir,
                })
            });
            // Deadlines tolerate what sleeps do: 1/16 of their distance (design/TIMERS.md).
            t.set_slack((when - now) / 16);
            // On the socket's own runtime's heaps, whose poller a move earlier must wake.
            match desc.waiters.modtimer_cell(t, when) {
                Some(_) => Ok(()),
                None => Err(outside_runtime()),
            }
        }
    }
}

/// Wakes the tasks an operation released, each even past a waker that panics (a waker is
/// user code: a foreign executor's): every one is woken under its own `catch_unwind`, then the
/// first panic is resumed (to the deadline's setter, or the timer's run, which catches it),
/// unless the thread is unwinding already (a socket dropped by a panic), where a second panic
/// would abort. Letting the panic escape the loop dropped the rest of the list unwoken, and
/// the tasks behind the panicking waker waited for ever.
fn wake_all(wakers: Wakers) {
    let mut first_panic = None;
    for waker in wakers {
        if let Err(panic) = catch_unwind(AssertUnwindSafe(|| waker.wake())) {
            match first_panic {
                None => first_panic = Some(panic),
                // Dropping a second payload could panic again.
                Some(_) => std::mem::forget(panic),
            }
        }
    }
    match first_panic {
        Some(panic) if !std::thread::panicking() => resume_unwind(panic),
        Some(panic) => std::mem::forget(panic),
        None => {}
    }
}

/// The error of a deadline set on a thread of no gort runtime.
fn outside_runtime() -> io::Error {
    io::Error::other("gort::net deadlines still to come must be set inside a gort runtime")
}

/// The error of a failed operation: Go's `ErrDeadlineExceeded` and `ErrNetClosing`.
fn error(f: Fail) -> io::Error {
    match f {
        Fail::TimedOut => io::ErrorKind::TimedOut.into(),
        Fail::Closed => io::Error::new(
            io::ErrorKind::NotConnected,
            "use of closed network connection",
        ),
    }
}

impl<S: Source> Drop for Io<S> {
    /// Forgets the socket's registration, releases anything still waiting on it and stops
    /// its timers; the source's own drop then closes the fd, which takes it out of the
    /// poller's epoll set (`Registration::close`).
    fn drop(&mut self) {
        if let Some(r) = self.registration.take() {
            r.close();
        }
        let mut out = Wakers::default();
        for (dir, slot) in [Dir::Read, Dir::Write].into_iter().zip(&self.desc.timers) {
            self.desc.half(dir).close(&mut out, &self.desc.waiters);
            if let Some(t) = slot.get() {
                t.stop();
            }
        }
        wake_all(out);
    }
}

impl<S: Source + std::fmt::Debug> std::fmt::Debug for Io<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Io")
            .field("source", &self.source)
            .field("read_timed_out", &self.desc.pd.read.is_expired())
            .field("write_timed_out", &self.desc.pd.write.is_expired())
            .finish()
    }
}

/// Go's `SetDeadline`, `SetReadDeadline` and `SetWriteDeadline` for a socket type with an
/// `io: Io<_>` field (the datagram sockets; the streams get theirs from `stream_methods!`).
macro_rules! deadline_methods {
    () => {
        /// Sets both deadlines (Go's `SetDeadline`).
        ///
        /// # Errors
        ///
        /// On a thread of no gort runtime, for a deadline still to come (its timer needs one:
        /// enter the runtime with `Handle::enter`); the deadline is then left as it was.
        /// Clearing it or setting a passed one works from any thread.
        pub fn set_deadline(&self, deadline: Option<Instant>) -> io::Result<()> {
            self.set_read_deadline(deadline)?;
            self.set_write_deadline(deadline)
        }

        /// Sets the read deadline (Go's `SetReadDeadline`); it applies to a receive already
        /// blocked too. `None` clears it.
        ///
        /// # Errors
        ///
        /// On a thread of no gort runtime, for a deadline still to come (its timer needs one:
        /// enter the runtime with `Handle::enter`); the deadline is then left as it was.
        /// Clearing it or setting a passed one works from any thread.
        pub fn set_read_deadline(&self, deadline: Option<Instant>) -> io::Result<()> {
            self.io.set_deadline(Dir::Read, deadline)
        }

        /// Sets the write deadline (Go's `SetWriteDeadline`). `None` clears it.
        ///
        /// # Errors
        ///
        /// On a thread of no gort runtime, for a deadline still to come (its timer needs one:
        /// enter the runtime with `Handle::enter`); the deadline is then left as it was.
        /// Clearing it or setting a passed one works from any thread.
        pub fn set_write_deadline(&self, deadline: Option<Instant>) -> io::Result<()> {
            self.io.set_deadline(Dir::Write, deadline)
        }
    };
}
