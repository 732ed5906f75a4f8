//! The machinery under every channel timer: an [`Arming`] over a capacity-1 channel plus the
//! runtime timer that fires it. [`Timer`](crate::Timer), [`after`](crate::after),
//! [`Ticker`](crate::Ticker) and [`tick`](crate::tick) are thin handles on it.
//!
//! Go 1.23's lazy heap: the runtime timer is in a heap only while a receive waits on the
//! channel (the channel's hooks, [`Fused`], tell the arming); see [`crate::arming`].
//!
//! Ownership: the core and its channel are one allocation (the channel its first field,
//! [`gort_chan::Fused`], as Go's `hchan` carries its `timer`), so `after(d)` keeps working
//! when only its receiver is held; the core sends on that channel (it keeps no sender of its
//! own). While in a heap, the runtime timer's payload is an `Arc<ChanTimer>` (heap → timer →
//! core). When the last receiver goes, the hook stops the timer (which drops the payload) and
//! closes the channel; the receiver's own reference was the last: the allocation is freed, so
//! an unreferenced timer costs nothing (go#61542, go#60144).
//!
//! The runtime timer exists only while it may be in a heap: `add` allocates it, and a `del`
//! that finds it in no heap (it ran, or was never added) frees it. A timer nobody waits on,
//! the common case of a timer held and reset (a deadline), is then the channel and the core
//! alone, 120 bytes (design/TIMERS.md, "Memory"). A stopped timer still in a heap (`Deleted`, removed
//! lazily by its heap) is kept, so that the next `add` revives it in place.

use std::fmt;
use std::sync::Arc;

use gort_chan::{Chan, Fused, FusedReceiver, Receiver, TimerWakes};
use gort_loom::Arc as SyncArc;
use gort_sched::timer_api::in_runtime;
use gort_timer::{
    deadline_after, del, nanotime, nanotime_exact, Fire, Nanos, Status, Timer as RtTimer, NEVER,
};

use crate::arming::{Arming, Heap, Sink, Ticks};
use crate::runtime_timer::{arm, outside, slack};
use crate::Instant;

/// The timer's end of its channel: the only sender there is, so a drain can skip the
/// channel's lock when nothing was sent since the last one (a `reset` of a timer whose value
/// was received, or that never fired, the common case, then costs no channel operation).
/// Nothing of its own: it sends on the channel the timer is one allocation with, which the
/// arming's [`Heap`] hands it (a `TimerSender` here, a reference to its own allocation, took
/// a word). When the last receiver goes, the timer closes the channel.
#[derive(Default)]
pub(crate) struct TimerSink;

impl Sink for TimerSink {
    type Wakes = TimerWakes;
    type Chan = Chan<Instant>;
    fn try_send(&self, chan: &Chan<Instant>, value: Instant, wakes: &mut TimerWakes) -> bool {
        chan.try_send_later(value, wakes).is_ok()
    }
    fn take_buffered(
        &self,
        chan: &Chan<Instant>,
        maybe_buffered: bool,
        wakes: &mut TimerWakes,
    ) -> usize {
        if maybe_buffered {
            chan.take_buffered_later(wakes)
        } else {
            0
        }
    }
}

/// What a channel timer is, for panic messages; passed by the callers, not kept in the core.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Kind {
    Timer,
    After,
    Ticker,
    Tick,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::Timer => "gort::time::Timer",
            Kind::After => "gort::time::after",
            Kind::Ticker => "gort::time::Ticker",
            Kind::Tick => "gort::time::tick",
        }
    }
}

/// `P`: [`OneShot`](crate::arming::OneShot) for a `Timer` and `after` (a word smaller),
/// [`Periodic`](crate::arming::Periodic) for a `Ticker` and `tick`.
///
/// The channel first, in one allocation with the arming ([`Fused`]): one chunk and one pair
/// of counts a timer, not two (design/TIMERS.md, "Memory").
#[repr(C)]
pub(crate) struct ChanTimer<P> {
    chan: Chan<Instant>,
    /// The arming, with the sending end and the runtime timer (while it may be in a heap)
    /// under its lock.
    arming: Arming<TimerSink, Option<SyncArc<RtTimer>>, P>,
}

impl<P: Ticks> Fire for ChanTimer<P> {
    fn fire(self: Arc<Self>, when: Nanos) {
        self.arming.fire(when, &Held(&self));
    }

    /// The runtime shut down with this timer in a heap, so a receive waits on it: it will
    /// never fire. Its sending end goes, as when the last receiver goes, and the channel
    /// closes: the receive (a blocking closure's, which shutdown waits for) ends with `None`
    /// instead of waiting for ever.
    fn shutdown(self: Arc<Self>) {
        self.arming.detach(&*self, TimerSink);
        self.chan.close_sending(); // outside the arming's lock: it wakes the receivers
    }
}

/// The runtime timer as the arming drives it, from a path that holds a reference to the core
/// (its `Arc`, or the handle's receiver): the only paths on which the arming puts the timer
/// in a heap (`block`, `reset`, `fire`), since the heap's payload is a reference of its own.
/// Holding it there, not in a weak self-pointer, keeps the core a word smaller.
struct Held<'a, H>(&'a H);

/// A reference to a core, from which the heap's payload (a counted reference) is made only
/// when the timer enters a heap: a `reset` with no receive waiting, T2_chan's, does not build
/// the `Arc` it would not use (2 instructions of a reset's 167).
trait Payload {
    fn payload(&self) -> Arc<dyn Fire>;
    /// The timer's channel.
    fn chan(&self) -> &Chan<Instant>;
}

impl<P: Ticks> Payload for Arc<ChanTimer<P>> {
    fn payload(&self) -> Arc<dyn Fire> {
        self.clone()
    }
    fn chan(&self) -> &Chan<Instant> {
        &self.chan
    }
}

impl<P: Ticks> Payload for FusedReceiver<Instant, ChanTimer<P>> {
    fn payload(&self) -> Arc<dyn Fire> {
        self.arc()
    }
    fn chan(&self) -> &Chan<Instant> {
        &self.fused().chan
    }
}

impl<H: Payload> Heap for Held<'_, H> {
    type Rt = Option<SyncArc<RtTimer>>;
    type Chan = Chan<Instant>;

    fn chan(&self) -> &Chan<Instant> {
        self.0.chan()
    }

    fn now(&self) -> Nanos {
        nanotime()
    }

    fn now_exact(&self) -> Nanos {
        nanotime_exact()
    }

    /// Allocates the runtime timer if it has none, installs the payload and arms it. The
    /// coalescing slack is 1/16 of the period, or of the time left for a one-shot (as
    /// [`Sleep`](crate::Sleep) takes it when it registers).
    ///
    /// # Panics
    ///
    /// Outside a gort runtime (a receiver waiting on a thread of no runtime).
    fn add(&self, rt: &mut Self::Rt, when: Nanos, period: Nanos) {
        let timer = rt.get_or_insert_with(RtTimer::new);
        timer.set_fire(self.0.payload());
        // A receive waiting outside a runtime: named by what the timer does (the kind is not
        // kept, to keep the core small).
        let (what, span) = if period > 0 {
            (Kind::Ticker, period)
        } else {
            (Kind::Timer, when.saturating_sub(nanotime()).max(0))
        };
        arm(timer, when, period, slack(span), what.name());
    }

    fn del(&self, rt: &mut Self::Rt) {
        del_runtime_timer(rt);
    }
}

/// The runtime timer as the arming's other paths drive it (`maybe_run`, `stop`, `detach`):
/// none of them puts it in a heap (`maybe_run` sends a due value and never syncs the heap;
/// `stop` and `detach` only take the timer out).
impl<P: Ticks> Heap for ChanTimer<P> {
    type Rt = Option<SyncArc<RtTimer>>;
    type Chan = Chan<Instant>;

    fn chan(&self) -> &Chan<Instant> {
        &self.chan
    }

    fn now(&self) -> Nanos {
        nanotime()
    }

    fn now_exact(&self) -> Nanos {
        nanotime_exact()
    }

    fn add(&self, _rt: &mut Self::Rt, _when: Nanos, _period: Nanos) {
        unreachable!("gort::time: a channel timer is put in a heap only by block, reset or fire")
    }

    fn del(&self, rt: &mut Self::Rt) {
        del_runtime_timer(rt);
    }
}

/// Stops the runtime timer and drops its payload (breaking the payload → core cycle even when
/// the timer already ran); frees the timer unless a heap still holds it.
fn del_runtime_timer(rt: &mut Option<SyncArc<RtTimer>>) {
    if let Some(timer) = rt {
        del(timer);
        timer.clear_target();
        // After `del`, only a stopped timer awaiting its heap's lazy removal is in a heap
        // (`Deleted`; `Removing` is that removal under way). Anything else (ran, removed) is
        // in none and is dropped here; a fire already claimed holds its own reference.
        if !matches!(timer.status(), Status::Deleted | Status::Removing) {
            *rt = None;
        }
    }
}

/// Go 1.23's timer-channel hooks: a receiver that arrives late gets a due value at once, and
/// the runtime timer is in a heap only while a receiver waits.
// SAFETY: `#[repr(C)]`, with the channel `bounded_fused` made first (`Handle::start`).
unsafe impl<P: Ticks> Fused<Instant> for ChanTimer<P> {
    fn chan(&self) -> &Chan<Instant> {
        &self.chan
    }
    fn before_recv(&self) {
        self.arming.maybe_run(self);
    }
    fn parked(this: &Arc<Self>) {
        this.arming.block(&Held(this));
    }
    fn unparked(this: &Arc<Self>) {
        this.arming.unblock(&Held(this));
    }
    /// The last receiver is gone: nobody can receive a value, so the timer stops (and leaves
    /// its heap, which drops the payload → core reference) and closes its channel.
    fn last_receiver_dropped(&self) {
        self.arming.detach(self, TimerSink);
        self.chan.close_sending(); // outside the arming's lock
    }
}

/// A channel timer's handle (what [`Timer`](crate::Timer) and [`Ticker`](crate::Ticker)
/// hold): the receiver alone, which reaches the core in its own allocation (the core's
/// address is the channel's).
pub(crate) struct Handle<P> {
    rx: FusedReceiver<Instant, ChanTimer<P>>,
}

impl<P: Ticks> Handle<P> {
    /// A core and its receiver, armed to fire after `d` (then every `period` if > 0).
    ///
    /// # Panics
    ///
    /// Outside a gort runtime, unless `d` is so long that nothing needs registering.
    #[track_caller]
    pub(crate) fn start(d: std::time::Duration, period: Nanos, kind: Kind) -> Handle<P> {
        let rx = gort_chan::bounded_fused(1, |chan| ChanTimer::<P> {
            chan,
            arming: Arming::new(TimerSink, None),
        });
        let handle = Handle { rx };
        handle.reset(d, period, kind);
        handle
    }

    /// The channel the values arrive on.
    #[inline]
    pub(crate) fn rx(&self) -> &Receiver<Instant> {
        self.rx.rx()
    }

    /// The channel as a `Stream` (for the `Stream` impls).
    pub(crate) fn stream(&mut self) -> &mut FusedReceiver<Instant, ChanTimer<P>> {
        &mut self.rx
    }

    /// The receiver alone (`after`, `tick`: the channel keeps the core).
    pub(crate) fn into_rx(self) -> Receiver<Instant> {
        self.rx.into_rx()
    }

    /// Go 1.23's `Stop`: see [`Arming::stop`].
    pub(crate) fn stop(&self) -> bool {
        let core = self.rx.fused();
        core.arming.stop(core)
    }

    /// Go 1.23's `Reset`: see [`Arming::reset`]. The first value is due `d` from now, then
    /// every `period` if > 0. The runtime timer enters a heap only when a receiver waits.
    ///
    /// # Panics
    ///
    /// Outside a gort runtime (naming `kind`), unless `d` is so long that nothing needs
    /// registering (the timer could never be served).
    #[track_caller]
    pub(crate) fn reset(&self, d: std::time::Duration, period: Nanos, kind: Kind) -> bool {
        if deadline_after(0, d) != NEVER && !in_runtime() {
            outside(kind.name());
        }
        self.rx
            .fused()
            .arming
            .reset(&Held(&self.rx), |now| deadline_after(now, d), period)
    }
}

impl<P: Ticks> fmt::Debug for Handle<P> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.rx.fused().fmt(f)
    }
}

impl<P: Ticks> fmt::Debug for ChanTimer<P> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ChanTimer")
            .field("state", &self.arming.state())
            .field("when", &Instant::from_nanos(self.arming.when()))
            .field("heaped", &self.arming.is_heaped())
            .finish()
    }
}
