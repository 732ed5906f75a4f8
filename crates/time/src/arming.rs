//! The core shared by every channel timer ([`Timer`](crate::Timer), [`after`](crate::after),
//! [`Ticker`](crate::Ticker), [`tick`](crate::tick)): who may put a value in the channel, and
//! what `stop`/`reset` return. Generic over the channel ([`Sink`]) and over how the underlying
//! runtime timer is stopped and armed (closures), so that `tests/loom_arming.rs` can model it
//! without a scheduler.
//!
//! # The contract (Go 1.23: go#37196, go#69312, go#80760)
//!
//! `stop()` and `reset()` return true exactly when no value of the current arming has been
//! received or can still be received; after either returns, no value of an earlier arming is
//! ever received.
//!
//! # How
//!
//! One small lock orders the three actors: the fire callback, `stop` and `reset`.
//!
//! | state  | meaning                                            | `stop`/`reset` returns         |
//! |--------|----------------------------------------------------|--------------------------------|
//! | Idle   | stopped (or never armed)                           | false (a stale value is drained) |
//! | Armed  | armed; for a one-shot, nothing sent yet            | true                           |
//! | Sent   | one-shot fired; the value sits in the channel or was received | true iff it was still buffered (drained) |
//!
//! Both always stop the runtime timer, drain the channel and leave `Idle` (`reset` then arms
//! again), all under the lock, so nothing sent before they return can be received after.
//!
//! The subtle part is a fire that is already *in flight*: gort-timer marks a one-shot timer
//! done (and a periodic one re-armed) *before* it calls the callback without any lock, so
//! `stop`/`reset` can run between the two, and the callback then arrives late. A late fire
//! must be dropped, and must not be mistaken for a fire of the *next* arming. No generation
//! number is needed for that: every arming records its first deadline `start` (the initial
//! floor for accepting fires), read from the
//! clock *after* the old runtime timer was stopped. A fire is only ever run once its deadline
//! `when <= now` was observed, before the stop saw the run, so every late fire has `when <=`
//! the clock reading that computed the new `start`: `when < start`, and it is dropped. Only a
//! zero-duration reset in the same nanosecond can tie, and then both values are the same
//! instant and only the first of them is sent (a one-shot leaves `Armed` on its first send),
//! so nothing observable changes.
//!
//! A ticker has one more race of the same kind: gort-timer re-arms a periodic timer *before*
//! running its callback, so another thread may run the next tick while the previous one is
//! still on its way, and the older tick can arrive second. Each accepted fire therefore raises
//! the floor just past its deadline: ticks are delivered in increasing order or dropped.

use gort_loom::Mutex;
use gort_timer::Nanos;

use crate::Instant;

/// The channel end a timer sends on. Not a user API.
#[doc(hidden)]
pub trait Sink: Send + Sync {
    /// Sends without blocking; false if the value was dropped (channel full or closed).
    fn try_send(&self, value: Instant) -> bool;
    /// Removes every buffered value; returns how many there were.
    fn take_buffered(&self) -> usize;
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

#[derive(Debug)]
struct Inner {
    state: State,
    /// The earliest deadline a fire may have to be accepted: the first deadline of the
    /// current arming, then just past the last accepted tick. Fires due earlier are late
    /// leftovers of an earlier arming, or (a ticker) an older tick overtaken by a newer one.
    floor: Nanos,
}

/// The arming core of a channel timer. Not a user API (public for the loom model).
#[doc(hidden)]
#[derive(Debug)]
pub struct Arming<S> {
    inner: Mutex<Inner>,
    sink: S,
}

impl<S: Sink> Arming<S> {
    /// An idle core sending on `sink`.
    pub fn new(sink: S) -> Self {
        Arming {
            inner: Mutex::new(Inner {
                state: State::Idle,
                floor: 0,
            }),
            sink,
        }
    }

    /// The channel end.
    pub fn sink(&self) -> &S {
        &self.sink
    }

    /// A snapshot of the state.
    pub fn state(&self) -> State {
        self.inner.lock().state
    }

    /// The fire callback: a deadline `when` came due. Sends `when` unless this fire is a late
    /// leftover of an earlier arming or the timer is stopped; a one-shot then leaves `Armed`.
    /// A periodic timer stays `Armed`, and a full channel drops its tick (a slow receiver gets
    /// no backlog); a tick older than one already accepted is dropped too (see the module
    /// docs). Returns whether a value was sent. Never blocks.
    pub fn fire(&self, when: Nanos, periodic: bool) -> bool {
        let mut g = self.inner.lock();
        if g.state != State::Armed || when < g.floor {
            return false;
        }
        g.floor = when.saturating_add(1);
        let sent = self.sink.try_send(Instant::from_nanos(when));
        if !periodic {
            // A failed one-shot send means every receiver is gone: nobody can observe it.
            g.state = if sent { State::Sent } else { State::Idle };
        }
        sent
    }

    /// Stops: `del` stops the runtime timer (its result does not matter: a fire it could not
    /// stop is dropped here). Returns true if no value of this arming was or can be received.
    pub fn stop(&self, del: impl FnOnce()) -> bool {
        let mut g = self.inner.lock();
        Self::stop_locked(&mut g, &self.sink, del)
    }

    /// Stops as [`stop`](Arming::stop) does, then `arm()` arms the runtime timer again and
    /// returns the new first deadline. `arm` must read the clock itself, so that its reading
    /// follows `del` (see the module docs). Returns what `stop` would have.
    pub fn reset(&self, del: impl FnOnce(), arm: impl FnOnce() -> Nanos) -> bool {
        let mut g = self.inner.lock();
        let was = Self::stop_locked(&mut g, &self.sink, del);
        g.floor = arm();
        g.state = State::Armed;
        was
    }

    fn stop_locked(g: &mut Inner, sink: &S, del: impl FnOnce()) -> bool {
        del();
        // A periodic timer may hold an unreceived tick even while Armed; drain it too.
        let drained = sink.take_buffered();
        let was = match g.state {
            State::Armed => true,
            State::Sent => drained > 0,
            State::Idle => false,
        };
        g.state = State::Idle;
        was
    }
}
