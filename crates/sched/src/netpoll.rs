//! The network half of the poller (Go's `netpoll.go`): sockets registered with the one
//! `mio::Poll` that idle Ms block in, and the tasks their readiness wakes.
//!
//! The scheduler knows nothing of sockets: `gort-net` registers a source together with a
//! [`Ready`] handler (its poll descriptor) and gets a [`Registration`] back. An event's token
//! finds the handler in a slab owned by the poller: the low 32 bits are the slot (offset past
//! the poller's own tokens), the high 32 bits the slot's generation, so that an event fetched
//! by one M just before another M emptied the slot (and the slot was reused), or one from the
//! registration of a closed socket whose fd the program duplicated, is recognised as stale and
//! dropped. Handlers run under the slab lock and only move wakers
//! out; the wakers run after every poller lock is released (Go's `netpoll` returns a list of
//! goroutines that `findrunnable` then queues).
//!
//! Who polls (Go's rules): the idle M that takes the poller role blocks in `epoll_wait` while
//! any task waits on a socket, even with no timer pending; an M about to steal polls without
//! blocking when tasks wait and nobody is blocked in the poller, unless the last blocking
//! poll ended for a timer and no poll has seen a socket's event since
//! ([`Shared::look_before_stealing`]); a busy M looks every 61 rounds
//! ([`Shared::poll_net_nonblocking`]); sysmon does when nobody has polled for 10 ms.

use crate::context;
use crate::poller::Readiness;
use crate::shared::Shared;
use gort_loom::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering::*};
use gort_timer::Nanos;
use mio::event::Source;
use mio::{Interest, Token};
use parking_lot::Mutex;
use std::io;
use std::sync::Arc;
use std::task::Waker;

/// Tokens below this are the poller's own (its waker and its timerfd).
const FIRST_SOURCE: usize = 2;
/// How long sysmon lets the sockets go unpolled while tasks wait on them (Go's 10 ms).
const SYSMON_POLL_AFTER: Nanos = 10_000_000;

/// What a registered source does with its readiness: Go's `netpollready` on one `pollDesc`.
///
/// Called by whichever M polled, under the poller's locks: it must only record readiness and
/// move the wakers it releases into `wakers` (never wake, clone or drop one), which the
/// poller wakes once its locks are released.
pub trait Ready: Send + Sync + 'static {
    /// The source became readable and/or writable, or `hung_up`: the peer closed or reset
    /// its side, or the socket failed, a final state that every later syscall finds at once
    /// (reported as both readable and writable, so that the blocked operation retries and
    /// sees the end of stream or the error).
    fn ready(&self, readable: bool, writable: bool, hung_up: bool, wakers: &mut Vec<Waker>);

    /// The source has urgent data pending (`EPOLLPRI`: TCP's `MSG_OOB`, or a Unix stream's):
    /// a stream read stops at its mark, shorter than asked while more bytes wait behind it.
    /// Called before [`Ready::ready`] for the same event, under the same locks. Does nothing
    /// by default.
    fn urgent(&self) {}

    /// The runtime shut down: no readiness will reach the source any more. Its waiters (a
    /// blocking closure's `block_on`, which shutdown waits for) must be released into
    /// `wakers` to fail, as Go's `poll_runtime_pollUnblock` releases them. Called without the
    /// slab lock. Does nothing by default.
    fn shutdown(&self, wakers: &mut Vec<Waker>) {
        let _ = wakers;
    }
}

/// The registered sources, by slot: the handler and the slot's generation.
#[derive(Default)]
pub(crate) struct Sources {
    slots: Vec<(u32, Option<Arc<dyn Ready>>)>,
    free: Vec<usize>,
}

impl Sources {
    fn insert(&mut self, handler: Arc<dyn Ready>) -> Token {
        let slot = match self.free.pop() {
            Some(i) => {
                let s = &mut self.slots[i];
                s.0 = s.0.wrapping_add(1);
                s.1 = Some(handler);
                i
            }
            None => {
                self.slots.push((0, Some(handler)));
                self.slots.len() - 1
            }
        };
        Token(((self.slots[slot].0 as usize) << 32) | (slot + FIRST_SOURCE))
    }

    fn remove(&mut self, token: Token) -> Option<Arc<dyn Ready>> {
        let slot = (token.0 & 0xffff_ffff) - FIRST_SOURCE;
        let handler = self.slots[slot].1.take();
        self.free.push(slot);
        handler
    }

    /// The handler an event's token names, unless its slot was emptied since.
    /// Every registered handler, for shutdown to tell.
    fn handlers(&self) -> Vec<Arc<dyn Ready>> {
        self.slots.iter().filter_map(|s| s.1.clone()).collect()
    }

    pub(crate) fn get(&self, token: Token) -> Option<&dyn Ready> {
        let slot = (token.0 & 0xffff_ffff).checked_sub(FIRST_SOURCE)?;
        let (generation, handler) = self.slots.get(slot)?;
        if (token.0 >> 32) as u32 != *generation {
            return None;
        }
        handler.as_deref()
    }
}

/// The low half of `Net::waiters`: every waiter.
const ALL_WAITERS: u64 = (1 << 32) - 1;

/// The network state of one runtime's poller.
pub(crate) struct Net {
    pub(crate) sources: Mutex<Sources>,
    /// Go's `netpollWaiters`: descriptors with a task waiting (an upper bound: a waiter whose
    /// future was dropped counts until the next readiness, deadline or close), in the low 32
    /// bits; in the high 32 bits, how many of them wait for something outside the program's
    /// time (a signal's pipe), which must not hold a paused clock. One word, so that one load
    /// sees both counts of the same instant.
    waiters: AtomicU64,
    /// When the sockets were last polled (any M, blocking or not), for sysmon.
    polled_at: AtomicI64,
    /// The last blocking poll ended for a timer with no socket's event, and no poll has
    /// delivered one since: looks before stealing are skipped ([`Shared::look_before_stealing`]).
    looks_idle: AtomicBool,
}

impl Net {
    pub(crate) fn new() -> Net {
        Net {
            sources: Mutex::new(Sources::default()),
            waiters: AtomicU64::new(0),
            polled_at: AtomicI64::new(0),
            looks_idle: AtomicBool::new(false),
        }
    }

    /// A blocking poll ended for a timer and saw no socket's event: the sockets are quiet,
    /// and looks before stealing wait for a poll that sees one.
    pub(crate) fn note_quiet_timer_wake_up(&self) {
        if !self.looks_idle.load(Relaxed) {
            self.looks_idle.store(true, Relaxed);
        }
    }

    /// A poll delivered some socket's event: looks before stealing may find work again.
    pub(crate) fn note_socket_events(&self) {
        // A load first: every poll with events passes here, and the line is shared.
        if self.looks_idle.load(Relaxed) {
            self.looks_idle.store(false, Relaxed);
        }
    }

    pub(crate) fn note_polled(&self, now: Nanos) {
        self.polled_at.store(now, Relaxed);
    }
}

/// Delivers the readiness of one event to its source's handler (slab lock held by the caller).
pub(crate) fn dispatch(sources: &Sources, ev: &Readiness, wakers: &mut Vec<Waker>) {
    if let Some(h) = sources.get(ev.token) {
        if ev.urgent {
            h.urgent();
        }
        h.ready(ev.readable, ev.writable, ev.hung_up, wakers);
    }
}

impl Shared {
    /// Whether some task waits on a socket (Go's `netpollWaiters > 0`).
    pub(crate) fn net_waiting(&self) -> bool {
        self.poller.net.waiters.load(SeqCst) & ALL_WAITERS > 0
    }

    /// Whether some task waits on a socket whose peer may live in real time, which holds a
    /// paused clock (`paused.rs`); a signal subscription's pipe does not.
    pub(crate) fn net_holds_clock(&self) -> bool {
        let w = self.poller.net.waiters.load(SeqCst);
        w & ALL_WAITERS > w >> 32
    }

    /// Go's `netpoll(0)` in `findrunnable` before stealing ([`Shared::poll_net_nonblocking`]),
    /// skipped while the sockets are quiet: the last blocking poll ended for a timer with no
    /// socket's event, and no poll has delivered one since (`Net::looks_idle`). Such a look
    /// only spares the M a steal and its idle path, whose blocking poll finds the same
    /// events; with none coming it is a system call for nothing, and N5 (9,000 sockets
    /// waiting for their deadlines, none readable, the poller woken by timers alone) made
    /// ~3,800 of them a run, 4 per timer round, where Tokio, which has no such look, makes
    /// none (design/PERFORMANCE-LOG.md, "N5: looks before stealing while the sockets are
    /// quiet"). Skipping after any empty look instead cost the shapes whose sockets are busy
    /// (N3: +18 % CPU, 4x the `futex` calls): there a look that finds nothing is soon
    /// followed by one that finds something, and the M it spares parks and is woken again.
    pub(crate) fn look_before_stealing(self: &Arc<Self>) -> bool {
        // Waiters first: without them (no sockets) this is the one load it was.
        self.net_waiting() && !self.poller.net.looks_idle.load(Relaxed) && self.look()
    }

    /// A non-blocking look at the sockets when tasks wait on them and no M is blocked in the
    /// poller (a busy M's every 61 rounds; before stealing, [`Shared::look_before_stealing`]):
    /// wakes the tasks whose sockets are ready (onto this M's P, as one batch:
    /// [`Shared::wake_batch`]). Returns whether it woke any.
    pub(crate) fn poll_net_nonblocking(self: &Arc<Self>) -> bool {
        self.net_waiting() && self.look()
    }

    /// The look of [`Shared::poll_net_nonblocking`] once tasks are known to wait on sockets:
    /// none while an M is blocked in the poller (Go's `sched.lastpoll != 0`).
    fn look(self: &Arc<Self>) -> bool {
        if self.idle.lastpoll.load(SeqCst) == 0 {
            return false;
        }
        self.wake_batch(|| self.poll_net_now() > 0)
    }

    /// Go's `netpoll(0)`: takes the events already there without blocking (nothing when
    /// another M holds the poller) and wakes the tasks of the ready sockets
    /// ([`Shared::wake_each`]). Returns how many it woke.
    pub(crate) fn poll_net_now(&self) -> usize {
        let mut ready = Vec::new();
        self.poller.take_ready_now(&mut ready);
        let n = ready.len();
        self.wake_each(ready);
        n
    }

    /// Wakes the tasks a poll readied, each under [`Shared::catch_user`]: a waker is user
    /// code (a foreign executor's), and one that panics must not cost the others their
    /// wake-up (they would wait for an event that already came, maybe for ever).
    pub(crate) fn wake_each(&self, wakers: impl IntoIterator<Item = Waker>) {
        for w in wakers {
            self.catch_user(|| w.wake());
        }
    }

    /// Runs `f`, which wakes the tasks of a batch of ready sockets, on this M: the pushes
    /// onto its P that leave a task stealable wake no M each; one `wakep` follows the batch
    /// if any did (Tokio's driver defers its notification to the end of its poll the same
    /// way; Go's `injectglist` queues the whole list, then starts Ms). Waking one per push
    /// handed the idle P, mid-batch, to a parked M that stole the one task queued so far,
    /// ran it, found nothing and parked again, once per readied task (design/ARCHITECTURE.md,
    /// "Spinning and waking"). The wake-up comes before this M runs any task, so no P idles
    /// while a stealable task waits; it also comes if a waker panics.
    pub(crate) fn wake_batch<R>(self: &Arc<Self>, f: impl FnOnce() -> R) -> R {
        struct Batch<'a> {
            shared: &'a Arc<Shared>,
            prev: (*const Shared, bool),
        }
        impl Drop for Batch<'_> {
            fn drop(&mut self) {
                if context::end_wake_batch(self.prev) {
                    self.shared.wakep();
                }
            }
        }
        let _batch = Batch {
            shared: self,
            prev: context::begin_wake_batch(self),
        };
        f()
    }

    /// Shutdown: tells every registered source ([`Ready::shutdown`]) and wakes the waiters it
    /// releases, which then fail. A registration made after this sees the runtime shut down
    /// and fails ([`net_api::register`]).
    pub(crate) fn shut_down_sources(&self) {
        let handlers = self.poller.net.sources.lock().handlers();
        let mut wakers = Vec::new();
        for h in &handlers {
            self.catch_user(|| h.shutdown(&mut wakers));
        }
        for w in wakers {
            self.catch_user(|| w.wake());
        }
        drop(handlers); // may drop the last wakers: user code, caught by the caller's drain
    }

    /// sysmon's share (Go's sysmon `netpoll(0)`): the same look when tasks wait on sockets,
    /// nobody is blocked in the poller and nobody has polled for 10 ms.
    pub(crate) fn sysmon_poll_net(self: &Arc<Self>, now: Nanos) {
        let polled = self.poller.net.polled_at.load(Relaxed);
        if now.saturating_sub(polled) >= SYSMON_POLL_AFTER
            && self.net_waiting()
            && self.idle.lastpoll.load(SeqCst) != 0
        {
            let _hold = self.hold_paused_clock();
            self.poll_net_now();
        }
    }
}

/// What `gort-net` needs from the scheduler. Not a user API.
#[doc(hidden)]
pub mod net_api {
    pub use super::Ready;
    use super::*;

    /// A source registered with a runtime's poller; [`Registration::close`] undoes it.
    pub struct Registration {
        shared: Arc<Shared>,
        token: Token,
    }

    impl std::fmt::Debug for Registration {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.debug_struct("Registration")
                .field("token", &self.token.0)
                .finish()
        }
    }

    /// The current runtime, or the error gort-net reports outside one.
    fn current() -> io::Result<Arc<Shared>> {
        crate::context::current()
            .ok_or_else(|| io::Error::other("gort::net must be used inside a gort runtime"))
    }

    /// The current runtime's count of tasks waiting on sockets (Go's `netpollWaiters`), which
    /// a poll descriptor keeps up to date.
    ///
    /// # Errors
    ///
    /// Outside a gort runtime.
    pub fn waiters() -> io::Result<Waiters> {
        current().map(|shared| Waiters { shared, unit: 1 })
    }

    /// As [`waiters`], for a descriptor whose task waits for something outside the program's
    /// time (a signal's self-pipe): its waiters make the Ms watch the poller like any other,
    /// but do not hold a paused clock, since no task of the program will ever write to it.
    ///
    /// # Errors
    ///
    /// Outside a gort runtime.
    pub fn background_waiters() -> io::Result<Waiters> {
        current().map(|shared| Waiters {
            shared,
            unit: 1 | 1 << 32,
        })
    }

    /// A runtime's count of tasks waiting on sockets; see [`waiters`].
    #[derive(Clone)]
    pub struct Waiters {
        shared: Arc<Shared>,
        /// What one waiter adds: 1 to the count of all waiters, and for a background one
        /// also 1 to the high half (`Net::waiters`).
        unit: u64,
    }

    impl Waiters {
        /// A descriptor's empty waiter list got a task. The M running that task goes idle
        /// through `find_runnable`, which then blocks in the poller (or polls before
        /// stealing), as Go's `netpollblock` relies on.
        pub fn add(&self) {
            self.shared.poller.net.waiters.fetch_add(self.unit, SeqCst);
            // A waiter added off every P (block_on) while sysmon is parked: its socket may
            // need sysmon's look (sysmon.rs, "Parking").
            self.shared.idle.alert_sysmon();
        }

        /// A descriptor's waiter list was emptied.
        pub fn remove(&self) {
            self.shared.poller.net.waiters.fetch_sub(self.unit, SeqCst);
        }

        /// Arms (or moves) a socket's deadline timer `t` at `when` on the heaps of the
        /// socket's own runtime, whichever thread asks; `None` off every runtime. On a thread
        /// of that runtime it is [`timer_api::modtimer_cell`](crate::timer_api::modtimer_cell)
        /// (the caller's P). From a task of another runtime it goes to one of the socket's
        /// runtime's heaps and wakes that runtime's poller: a timer left pending there and
        /// moved earlier from elsewhere woke only the caller's runtime, and the deadline fired
        /// at its old instant (`crates/net/tests/abuse_fds.rs`).
        pub fn modtimer_cell(&self, t: &gort_timer::CellTimer, when: Nanos) -> Option<bool> {
            let here = context::with_current(|s| s.map(|s| Arc::ptr_eq(s, &self.shared)))?;
            if here {
                return crate::timer_api::modtimer_cell(t, when, 0);
            }
            let home = self.shared.timer_home_without_p();
            let host = crate::hosts::TimerHost(&self.shared);
            Some(gort_timer::modify_cell(t, when, 0, home, &host))
        }
    }

    /// Registers `source` edge-triggered for reading and writing with the current runtime's
    /// poller; its readiness goes to `handler`.
    ///
    /// # Errors
    ///
    /// Outside a gort runtime, in one that is shut down (no M would ever poll the source:
    /// checked after the insertion, which either precedes shutdown's look at the sources or
    /// sees its flag), or when the OS refuses the registration.
    pub fn register(source: &mut impl Source, handler: Arc<dyn Ready>) -> io::Result<Registration> {
        let shared = current()?;
        let token = shared.poller.net.sources.lock().insert(handler);
        // `PRIORITY` (`EPOLLPRI`) reports urgent data (`Ready::urgent`); no other socket
        // kind gort registers raises it.
        #[cfg(any(target_os = "linux", target_os = "android"))]
        let interest = Interest::READABLE | Interest::WRITABLE | Interest::PRIORITY;
        #[cfg(not(any(target_os = "linux", target_os = "android")))]
        let interest = Interest::READABLE | Interest::WRITABLE;
        let registered = if shared.is_shutdown() {
            Err(io::Error::other("gort::net: the runtime is shut down"))
        } else {
            shared.poller.registry().register(source, token, interest)
        };
        if let Err(e) = registered {
            let handler = shared.poller.net.sources.lock().remove(token);
            drop(handler); // outside the slab lock
            return Err(e);
        }
        Ok(Registration { shared, token })
    }

    impl Registration {
        /// Forgets the handler of a source that is about to be closed, leaving its removal
        /// from the epoll set to the kernel: closing the last descriptor of an open file
        /// removes it from every epoll set, so an explicit `EPOLL_CTL_DEL` is a syscall spent
        /// on nothing. If the program holds a duplicate of the descriptor, the registration
        /// lives on with it; its events then find the slot's generation changed and reach
        /// nobody. No event reaches the handler once this returns.
        pub fn close(self) {
            let handler = self.shared.poller.net.sources.lock().remove(self.token);
            drop(handler); // outside the slab lock: it may drop the last wakers
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests;
