//! The machinery under every channel timer: an [`Arming`] over a capacity-1 channel plus the
//! runtime timer that fires it. [`Timer`](crate::Timer), [`after`](crate::after),
//! [`Ticker`](crate::Ticker) and [`tick`](crate::tick) are thin handles on it.
//!
//! Go 1.23's lazy heap: the runtime timer is in a heap only while a receive waits on the
//! channel (the channel's [`RecvHook`] tells the arming); see [`crate::arming`].
//!
//! Ownership: while in a heap, the runtime timer's payload is an `Arc<ChanTimer>` (heap → timer →
//! core). The receiver's drop hook owns an `Arc<ChanTimer>` too, so `after(d)` keeps working when
//! only its receiver is held; the channel's receive hook holds the core weakly. When the last
//! receiver goes, the drop hook stops the timer, which drops the payload, and the core is
//! freed: an unreferenced timer costs nothing (go#61542, go#60144).

use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::{Arc, Weak};

use gort_chan::{Receiver, RecvHook, Sender};
use gort_loom::Arc as SyncArc;
use gort_sched::timer_api::in_runtime;
use gort_timer::{
    deadline_after, del, nanotime, nanotime_exact, Fire, Nanos, Timer as RtTimer, NEVER,
};

use crate::arming::{Arming, Heap, Sink};
use crate::runtime_timer::{arm, outside, slack};
use crate::Instant;

/// The timer's end of its channel: the only sender there is, so a drain can skip the
/// channel's lock when nothing was sent since the last one (a `reset` of a timer whose value
/// was received, or that never fired, the common case, then costs no channel operation).
pub(crate) struct TimerSink {
    tx: Sender<Instant>,
    /// A value was sent since the last drain (it may sit in the channel or in a receiver's
    /// hands). Read and written only under the arming's lock (`Sink`'s callers), so Relaxed.
    sent: AtomicBool,
}

impl Sink for TimerSink {
    fn try_send(&self, value: Instant) -> bool {
        let sent = self.tx.try_send(value).is_ok();
        if sent {
            self.sent.store(true, Relaxed);
        }
        sent
    }
    fn take_buffered(&self) -> usize {
        // Nothing sent since the last drain: receivers only take values out, so the channel
        // holds none of ours. A load and a store, not a `swap`: the arming's lock orders the
        // callers, and a swap would be a locked instruction on every reset.
        if !self.sent.load(Relaxed) {
            return 0;
        }
        self.sent.store(false, Relaxed);
        self.tx.take_buffered()
    }
}

pub(crate) struct ChanTimer {
    arming: Arming<TimerSink>,
    timer: SyncArc<RtTimer>,
    /// This core, for the runtime timer's payload while it is in a heap.
    me: Weak<ChanTimer>,
    /// For panic messages: "gort::time::Timer" or "gort::time::Ticker".
    what: &'static str,
}

impl Fire for ChanTimer {
    fn fire(self: Arc<Self>, when: Nanos) {
        self.arming.fire(when, &*self);
    }
}

/// The runtime timer as the arming drives it: in a heap only while a receiver waits.
impl Heap for ChanTimer {
    fn now(&self) -> Nanos {
        nanotime()
    }

    fn now_exact(&self) -> Nanos {
        nanotime_exact()
    }

    /// # Panics
    ///
    /// Outside a gort runtime (a receiver waiting on a thread of no runtime).
    fn add(&self, when: Nanos, period: Nanos, slack: Nanos) {
        if let Some(me) = self.me.upgrade() {
            self.timer.set_fire(me);
            arm(&self.timer, when, period, slack, self.what);
        }
    }

    /// Stops the runtime timer and drops its payload (breaking the payload → core cycle even
    /// when the timer already ran).
    fn del(&self) {
        del(&self.timer);
        self.timer.clear_target();
    }
}

/// Go 1.23's timer-channel hooks: a receiver that arrives late gets a due value at once, and
/// the runtime timer is in a heap only while a receiver waits.
impl RecvHook for ChanTimer {
    fn before_recv(&self) {
        self.arming.maybe_run(self);
    }
    fn parked(&self) {
        self.arming.block(self);
    }
    fn unparked(&self) {
        self.arming.unblock(self);
    }
}

impl ChanTimer {
    /// A core and its receiver, armed to fire after `d` (then every `period` if > 0).
    ///
    /// # Panics
    ///
    /// Outside a gort runtime, unless `d` is so long that nothing needs registering.
    #[track_caller]
    pub(crate) fn start(
        d: std::time::Duration,
        period: Nanos,
        what: &'static str,
    ) -> (Arc<ChanTimer>, Receiver<Instant>) {
        let mut rx = None;
        let core = Arc::new_cyclic(|me: &Weak<ChanTimer>| {
            let hook: Weak<dyn RecvHook> = me.clone();
            let (tx, r) = gort_chan::bounded_with_hook(1, hook);
            rx = Some(r);
            ChanTimer {
                arming: Arming::new(TimerSink {
                    tx,
                    sent: AtomicBool::new(false),
                }),
                timer: RtTimer::new(),
                me: me.clone(),
                what,
            }
        });
        let rx = rx.expect("bounded_with_hook returns a receiver");
        let hook = core.clone();
        rx.set_drop_hook(Box::new(move || {
            hook.stop();
        }));
        core.reset(d, period);
        (core, rx)
    }

    /// Go 1.23's `Stop`: see [`Arming::stop`].
    pub(crate) fn stop(&self) -> bool {
        self.arming.stop(self)
    }

    /// Go 1.23's `Reset`: see [`Arming::reset`]. The first value is due `d` from now, then
    /// every `period` if > 0. The runtime timer enters a heap only when a receiver waits.
    ///
    /// # Panics
    ///
    /// Outside a gort runtime, unless `d` is so long that nothing needs registering (the
    /// timer could never be served).
    #[track_caller]
    pub(crate) fn reset(&self, d: std::time::Duration, period: Nanos) -> bool {
        if deadline_after(0, d) != NEVER && !in_runtime() {
            outside(self.what);
        }
        let slack = slack(crate::runtime_timer::nanos(d));
        self.arming
            .reset(self, |now| deadline_after(now, d), period, slack)
    }
}

impl fmt::Debug for ChanTimer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ChanTimer")
            .field("state", &self.arming.state())
            .field("when", &Instant::from_nanos(self.timer.when()))
            .field("heaped", &self.arming.is_heaped())
            .finish()
    }
}
