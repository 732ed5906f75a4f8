//! The core shared by every channel timer ([`Timer`](crate::Timer), [`after`](crate::after),
//! [`Ticker`](crate::Ticker), [`tick`](crate::tick)): when the runtime timer is in a heap,
//! who may put a value in the channel, and what `stop`/`reset` return. Generic over the
//! channel ([`Sink`]) and the runtime timer ([`Heap`]), so that `tests/loom_arming.rs` can
//! model it without a scheduler.
//!
//! # The contract (Go 1.23: go#37196, go#69312, go#80760)
//!
//! `stop()` and `reset()` return true exactly when no value of the current arming has been
//! received or can still be received; after either returns, no value of an earlier arming is
//! ever received. A value is the instant the timer was due.
//!
//! # In a heap only while a receiver waits (Go 1.23's `blockTimerChan`)
//!
//! The runtime timer is in a heap only while the arming is `Armed` and at least one receive
//! operation is parked on the channel ([`block`](Arming::block) /
//! [`unblock`](Arming::unblock)), so an unread timer or ticker costs nothing. The arming
//! keeps the next deadline `when` itself. A receive that arrives first calls
//! [`maybe_run`](Arming::maybe_run) (Go's `maybeRunChan`): if the timer is not in a heap and
//! `when` has passed, it sends the value due at `when` at once, as the heap would have. A
//! ticker then moves `when` to the first tick of its phase after now: after a pause, a
//! receiver gets the oldest unreceived tick's instant, and the ticks in between are dropped
//! (as Go 1.23 does, and as a full channel would drop them).
//!
//! # Ordering
//!
//! One small lock orders every actor: the fire callback, `maybe_run`, `block`/`unblock`,
//! `stop` and `reset`. The wake-ups of the channel operations made under it are done after
//! it is released ([`Sink::Wakes`]): a receiver's waker may stop or reset this very timer.
//!
//! | state  | meaning                                            | `stop`/`reset` returns         |
//! |--------|----------------------------------------------------|--------------------------------|
//! | Idle   | stopped (or never armed)                           | false (a stale value is drained) |
//! | Armed  | armed; for a one-shot, nothing sent yet (due or not) | true                         |
//! | Sent   | one-shot fired; the value sits in the channel or was received | true iff it was still buffered (drained) |
//!
//! Both stop the runtime timer (if it is in a heap), drain the channel and leave `Idle`
//! (`reset` then arms again), all under the lock, so nothing sent before they return can be
//! received after.
//!
//! The subtle part is a fire that is already *in flight*: gort-timer marks a one-shot timer
//! done (and a periodic one re-armed) *before* it calls the callback without any lock, so
//! `stop`/`reset`/`unblock` can run between the two, and the callback then arrives late. A
//! late fire of an earlier arming must be dropped, and must not be mistaken for a fire of the
//! *next* arming. No generation number is needed for that: every arming records its first
//! deadline `start` (the initial floor for accepting fires), read from the clock *after* the
//! old runtime timer was stopped. A fire is only ever run once its deadline `when <= now` was
//! observed, before the `del` that took the timer out of its heap (by this stop, or by an
//! earlier `unblock` or fire under the same lock) saw the run, so every late fire has
//! `when <=` the clock reading that computed the new `start`: `when < start`, and it is
//! dropped. Across threads that needs a reading that trails none taken before it, and an
//! extrapolated one may trail another thread's by up to `gort_timer::CLOCK_TRAIL` (4 µs);
//! so a reset whose first deadline falls within that of its reading reads the clock again,
//! exactly (`now_exact`), and starts from that. Only a zero-duration reset can tie, and then
//! both values are the same instant and only the first of them is sent (a one-shot leaves
//! `Armed` on its first send), so nothing observable changes. A late fire of the *current*
//! arming (after `unblock` took the timer out of its heap) is a value that `maybe_run` would
//! have sent anyway: it is accepted.
//!
//! A ticker has one more race of the same kind: gort-timer re-arms a periodic timer *before*
//! running its callback, so another thread may run the next tick while the previous one is
//! still on its way, and the older tick can arrive second. Each accepted fire therefore raises
//! the floor just past its deadline: ticks are delivered in increasing order or dropped. The
//! channel keeps that order too: a tick handed to a receive that is cut off after a newer
//! one was sent is dropped, not put back (gort-chan's `Core::try_send_overtaking`).

use gort_loom::{RawLock, UnsafeCell};
use gort_timer::{Nanos, CLOCK_TRAIL, NEVER};

use crate::Instant;

/// The channel end a timer sends on. Not a user API.
#[doc(hidden)]
pub trait Sink: Send + Sync {
    /// What the channel operations below leave undone until the arming's lock is released:
    /// the wake-ups of the receivers they complete, done when it is dropped (a receiver's
    /// waker is user code, and may stop or reset this very timer, which takes that lock).
    type Wakes: Default;
    /// What the sink sends on, handed to each call by the caller's [`Heap`] (gort::time: the
    /// channel, which the timer is one allocation with, so the sink keeps no pointer to it).
    type Chan: ?Sized;
    /// Sends without blocking; false if the value was dropped (channel full or closed).
    fn try_send(&self, chan: &Self::Chan, value: Instant, wakes: &mut Self::Wakes) -> bool;
    /// Removes every buffered value; returns how many there were. `maybe_buffered` is false
    /// when nothing was sent since the last call (receivers only take values out, so the
    /// channel holds none of ours): a sink may then skip the channel and return 0.
    fn take_buffered(
        &self,
        chan: &Self::Chan,
        maybe_buffered: bool,
        wakes: &mut Self::Wakes,
    ) -> usize;
}

/// The runtime timer under a channel timer, as the arming drives it. Not a user API.
#[doc(hidden)]
pub trait Heap {
    /// What the arming keeps of the runtime timer, under its lock (gort::time: the timer
    /// itself, which exists only while it may be in a heap).
    type Rt;
    /// The channel the arming's [`Sink`] sends on.
    type Chan: ?Sized;
    /// The channel.
    fn chan(&self) -> &Self::Chan;
    /// The clock (`nanotime`).
    fn now(&self) -> Nanos;
    /// The clock read exactly ([`gort_timer::nanotime_exact`]): at least every reading
    /// taken before it on any thread, where [`now`](Heap::now) may trail one by up to
    /// [`gort_timer::CLOCK_TRAIL`].
    fn now_exact(&self) -> Nanos;
    /// Puts the runtime timer `rt` in a heap: due at `when`, then every `period` if > 0; its
    /// fire must call [`Arming::fire`]. The coalescing slack is the heap's to choose (gort's:
    /// from the period, or from the time left).
    fn add(&self, rt: &mut Self::Rt, when: Nanos, period: Nanos);
    /// Stops the runtime timer `rt` and drops its payload. A fire already in flight may
    /// still call [`Arming::fire`] afterwards.
    fn del(&self, rt: &mut Self::Rt);
}

/// The arming state; see the module docs.
#[doc(hidden)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum State {
    /// Stopped or never armed.
    Idle,
    /// Armed and (one-shot) not yet sent.
    Armed,
    /// One-shot: the value was sent.
    Sent,
}

/// What an arming keeps of its period: nothing for a one-shot timer ([`OneShot`]: a
/// `Timer`'s core a word smaller, design/TIMERS.md "Memory"), the period and the floor for a
/// ticker ([`Periodic`]). Not a user API (public for the loom model).
#[doc(hidden)]
pub trait Ticks: Default + Send + Sync + 'static {
    /// 0 for a one-shot timer.
    fn period(&self) -> Nanos;
    /// Records the period of a new arming ([`OneShot`]: must be 0).
    fn set_period(&mut self, period: Nanos);
    /// The floor (the module docs): the earliest deadline a fire may have to be accepted,
    /// given the arming's next deadline `when`.
    fn floor(&self, when: Nanos) -> Nanos;
    /// Records a new floor.
    fn set_floor(&mut self, floor: Nanos);
}

/// A one-shot timer's period: none, and no floor of its own. While a one-shot arming is
/// `Armed` its floor is its first deadline, which is its `when` (nothing moves `when` before
/// the one send that leaves `Armed`), and the floor is read only then.
#[doc(hidden)]
#[derive(Clone, Copy, Debug, Default)]
pub struct OneShot;

impl Ticks for OneShot {
    #[inline]
    fn period(&self) -> Nanos {
        0
    }
    /// (Its callers, `Timer`'s and `after`'s, pass 0: checked in debug builds only, as it was
    /// 2 instructions of the 170 of a `Timer::reset`.)
    #[inline]
    fn set_period(&mut self, period: Nanos) {
        debug_assert_eq!(period, 0, "gort::time: a one-shot arming given a period");
    }
    #[inline]
    fn floor(&self, when: Nanos) -> Nanos {
        when
    }
    #[inline]
    fn set_floor(&mut self, _floor: Nanos) {}
}

/// A ticker's period and floor.
#[doc(hidden)]
#[derive(Clone, Copy, Debug, Default)]
pub struct Periodic {
    floor: Nanos,
    period: Nanos,
}

impl Ticks for Periodic {
    #[inline]
    fn period(&self) -> Nanos {
        self.period
    }
    #[inline]
    fn set_period(&mut self, period: Nanos) {
        self.period = period;
    }
    #[inline]
    fn floor(&self, _when: Nanos) -> Nanos {
        self.floor
    }
    #[inline]
    fn set_floor(&mut self, floor: Nanos) {
        self.floor = floor;
    }
}

/// The small part of the state, beside the lock in its word: a `Mutex` of the whole state put
/// it after the lock, aligned, and lost 7 bytes to padding; this way the arming is a word
/// smaller and a channel `Timer` fits a glibc chunk 16 bytes smaller (design/TIMERS.md,
/// "Memory"). Byte-aligned, so that with the lock's byte it takes one word.
#[derive(Debug)]
struct Small {
    state: State,
    /// The runtime timer was put in a heap and not stopped since.
    heaped: bool,
    /// A value was sent since the last drain (it may sit in the channel or in a receiver's
    /// hands); a drain with nothing sent since the last one costs no channel operation.
    sent: bool,
    /// Parked receive operations (Go's `t.blocked`), a `u32` in bytes ([`Small::blocked`]).
    blocked: [u8; 4],
}

impl Small {
    fn blocked(&self) -> u32 {
        u32::from_ne_bytes(self.blocked)
    }

    fn set_blocked(&mut self, n: u32) {
        self.blocked = n.to_ne_bytes();
    }
}

/// The rest of the state.
#[derive(Debug)]
struct Big<S, R, P> {
    /// The next deadline of the current arming that nothing was sent for (`NEVER`: none).
    when: Nanos,
    /// The period (0 for a one-shot timer) and the floor: the earliest deadline a fire may
    /// have to be accepted, the first deadline of the current arming, then just past the
    /// last accepted tick. Fires due earlier are late leftovers of an earlier arming, or (a
    /// ticker) an older tick overtaken by a newer one.
    ticks: P,
    /// The channel end, under the lock so that [`Arming::detach`] can let it go.
    sink: S,
    /// The runtime timer's part kept here ([`Heap::Rt`]).
    rt: R,
}

/// The state, reached with the lock held ([`Arming::locked`]).
struct Locked<'a, S, R, P> {
    s: &'a mut Small,
    b: &'a mut Big<S, R, P>,
}

/// The arming core of a channel timer. Not a user API (public for the loom model).
#[doc(hidden)]
pub struct Arming<S, R = (), P = Periodic> {
    /// Guards `small` and `big`: they are reached only in [`Arming::locked`].
    lock: RawLock,
    small: UnsafeCell<Small>,
    big: UnsafeCell<Big<S, R, P>>,
}

// SAFETY: `small` and `big` are reached only with `lock` held (`locked`), so the arming moves
// and shares them as a `Mutex` of them would: `Send` and `Sync` when they are `Send`.
unsafe impl<S: Send, R: Send, P: Send> Send for Arming<S, R, P> {}
// SAFETY: as for `Send`.
unsafe impl<S: Send, R: Send, P: Send> Sync for Arming<S, R, P> {}

impl<S, R, P> std::fmt::Debug for Arming<S, R, P> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Arming").finish_non_exhaustive()
    }
}

impl<S: Sink, R, P: Ticks> Arming<S, R, P> {
    /// An idle core sending on `sink`, keeping `rt` of its runtime timer.
    pub fn new(sink: S, rt: R) -> Self {
        Arming {
            lock: RawLock::new(),
            small: UnsafeCell::new(Small {
                state: State::Idle,
                heaped: false,
                sent: false,
                blocked: [0; 4],
            }),
            big: UnsafeCell::new(Big {
                when: NEVER,
                ticks: P::default(),
                sink,
                rt,
            }),
        }
    }

    /// Runs `f` on the state with the lock held.
    #[inline]
    fn locked<T>(&self, f: impl FnOnce(&mut Locked<'_, S, R, P>) -> T) -> T {
        self.lock.with(|| {
            self.small.with_mut(|s| {
                self.big.with_mut(|b| {
                    // SAFETY: the lock is held, and the cells are reached only here: these
                    // are the only references to them until `f` returns.
                    let mut g = unsafe {
                        Locked {
                            s: &mut *s,
                            b: &mut *b,
                        }
                    };
                    f(&mut g)
                })
            })
        })
    }

    /// Stops the timer for good (nobody can receive any more): as [`stop`](Arming::stop),
    /// then hands the channel end out, replaced by `empty`, for the caller to drop after the
    /// lock is released (a timer's sending end may own its channel, which owns the timer).
    pub fn detach(&self, heap: &impl Heap<Rt = R, Chan = S::Chan>, empty: S) -> S {
        let mut wakes = S::Wakes::default();
        let sink = self.locked(|g| {
            self.stop_locked(g, heap, &mut wakes);
            std::mem::replace(&mut g.b.sink, empty)
        });
        drop(wakes); // after the lock
        sink
    }

    /// A snapshot of the state.
    pub fn state(&self) -> State {
        self.locked(|g| g.s.state)
    }

    /// Whether the runtime timer is in a heap (as far as the arming knows).
    pub fn is_heaped(&self) -> bool {
        self.locked(|g| g.s.heaped)
    }

    /// The next deadline nothing was sent for (`NEVER`: none).
    pub fn when(&self) -> Nanos {
        self.locked(|g| g.b.when)
    }

    /// The fire callback: a deadline `when` came due in a heap. Sends `when` unless this fire
    /// is a late leftover of an earlier arming or the timer is stopped; a one-shot then leaves
    /// `Armed` (and its heap). A periodic timer stays `Armed`, and a full channel drops its
    /// tick (a slow receiver gets no backlog); a tick older than one already accepted is
    /// dropped too (see the module docs). Returns whether a value was sent. Never blocks.
    pub fn fire(&self, when: Nanos, heap: &impl Heap<Rt = R, Chan = S::Chan>) -> bool {
        let mut wakes = S::Wakes::default();
        let sent = self.locked(|g| {
            let sent = self.deliver(g, heap, when, heap.now(), &mut wakes);
            sync_heap(g, heap);
            sent
        });
        drop(wakes); // after the lock
        sent
    }

    /// A receive is about to look at the channel (Go's `maybeRunChan`): if the runtime timer
    /// is not in a heap and the next deadline has passed, sends its value now.
    pub fn maybe_run(&self, heap: &impl Heap<Rt = R, Chan = S::Chan>) {
        let mut wakes = S::Wakes::default();
        self.locked(|g| {
            if g.s.heaped || g.s.state != State::Armed || g.b.when == NEVER {
                return;
            }
            let now = heap.now();
            if g.b.when <= now {
                let when = g.b.when;
                self.deliver(g, heap, when, now, &mut wakes);
            }
        });
        drop(wakes); // after the lock
    }

    /// A receive operation parked (Go's `blockTimerChan`): the timer must be in a heap.
    pub fn block(&self, heap: &impl Heap<Rt = R, Chan = S::Chan>) {
        self.locked(|g| {
            let blocked = g.s.blocked().checked_add(1);
            g.s.set_blocked(blocked.expect("gort::time: 2^32 receives parked on one timer"));
            sync_heap(g, heap);
        });
    }

    /// A parked receive operation ended (Go's `unblockTimerChan`): the last one takes the
    /// timer out of its heap; its next deadline stays recorded for `maybe_run`.
    pub fn unblock(&self, heap: &impl Heap<Rt = R, Chan = S::Chan>) {
        self.locked(|g| {
            let blocked = g.s.blocked();
            assert!(blocked > 0, "gort::time: unblock without block");
            g.s.set_blocked(blocked - 1);
            sync_heap(g, heap);
        });
    }

    /// Stops the timer. Returns true if no value of this arming was or can be received.
    pub fn stop(&self, heap: &impl Heap<Rt = R, Chan = S::Chan>) -> bool {
        let mut wakes = S::Wakes::default();
        let was = self.locked(|g| self.stop_locked(g, heap, &mut wakes));
        drop(wakes); // after the lock
        was
    }

    /// Stops as [`stop`](Arming::stop) does, then arms again: the first deadline is
    /// `start(now)`, with `now` read after the old runtime timer was stopped (see the module
    /// docs), then every `period` if > 0. Returns what `stop` would have.
    pub fn reset(
        &self,
        heap: &impl Heap<Rt = R, Chan = S::Chan>,
        mut start: impl FnMut(Nanos) -> Nanos,
        period: Nanos,
    ) -> bool {
        let mut wakes = S::Wakes::default();
        let was = self.locked(|g| {
            let was = self.stop_locked(g, heap, &mut wakes);
            let now = heap.now();
            let mut first = start(now);
            if first < now.saturating_add(CLOCK_TRAIL) {
                // A late fire may be due up to the clock's trail past `now` (module docs).
                first = start(heap.now_exact());
            }
            let start = first;
            g.b.ticks.set_period(period);
            g.b.ticks.set_floor(start);
            g.b.when = start;
            g.s.state = State::Armed;
            sync_heap(g, heap);
            was
        });
        drop(wakes); // after the lock
        was
    }

    /// Sends the value due at `when` if it belongs to the current arming and is newer than
    /// every value sent before, and moves the arming past it.
    fn deliver(
        &self,
        g: &mut Locked<'_, S, R, P>,
        heap: &impl Heap<Rt = R, Chan = S::Chan>,
        when: Nanos,
        now: Nanos,
        wakes: &mut S::Wakes,
    ) -> bool {
        if g.s.state != State::Armed || when < g.b.ticks.floor(g.b.when) {
            return false;
        }
        g.b.ticks.set_floor(when.saturating_add(1));
        let sent =
            g.b.sink
                .try_send(heap.chan(), Instant::from_nanos(when), wakes);
        g.s.sent |= sent;
        let period = g.b.ticks.period();
        if period > 0 {
            g.b.when = next_tick(when, period, now);
        } else {
            // A failed one-shot send means every receiver is gone: nobody can observe it.
            g.s.state = if sent { State::Sent } else { State::Idle };
            g.b.when = NEVER;
        }
        sent
    }

    fn stop_locked(
        &self,
        g: &mut Locked<'_, S, R, P>,
        heap: &impl Heap<Rt = R, Chan = S::Chan>,
        wakes: &mut S::Wakes,
    ) -> bool {
        // Only if `heaped`: every path that clears it (this one, `sync_heap`) calls `del`,
        // which drops the payload and waits out a run in progress, and only `add` sets it. So
        // a timer not `heaped` holds no payload of ours, and a fire still in flight was seen
        // by that earlier `del`, under this lock, before the clock reading of a new arming.
        if g.s.heaped {
            heap.del(&mut g.b.rt);
            g.s.heaped = false;
        }
        // A periodic timer may hold an unreceived tick even while Armed; drain it too.
        let maybe_buffered = std::mem::take(&mut g.s.sent);
        let drained = g.b.sink.take_buffered(heap.chan(), maybe_buffered, wakes);
        let was = match g.s.state {
            State::Armed => true,
            State::Sent => drained > 0,
            State::Idle => false,
        };
        g.s.state = State::Idle;
        g.b.when = NEVER;
        was
    }
}

/// Puts the runtime timer in a heap exactly while it is armed with a deadline and a receiver
/// waits; takes it out otherwise.
#[inline]
fn sync_heap<S, R, P: Ticks>(g: &mut Locked<'_, S, R, P>, heap: &impl Heap<Rt = R>) {
    let wanted = g.s.state == State::Armed && g.s.blocked() > 0 && g.b.when != NEVER;
    if wanted && !g.s.heaped {
        g.s.heaped = true;
        heap.add(&mut g.b.rt, g.b.when, g.b.ticks.period());
    } else if !wanted && g.s.heaped {
        g.s.heaped = false;
        heap.del(&mut g.b.rt);
    }
}

/// A ticker's next deadline after sending the tick due at `when`: the first point of its
/// phase strictly after `now` (missed ticks are dropped, never burst), saturating at `NEVER`.
fn next_tick(when: Nanos, period: Nanos, now: Nanos) -> Nanos {
    let k = 1 + now.saturating_sub(when).max(0) / period;
    period
        .checked_mul(k)
        .and_then(|d| when.checked_add(d))
        .unwrap_or(NEVER)
}
