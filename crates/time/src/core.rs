//! The machinery under every channel timer: an [`Arming`] over a capacity-1 channel plus the
//! runtime timer that fires it. [`Timer`](crate::Timer), [`after`](crate::after),
//! [`Ticker`](crate::Ticker) and [`tick`](crate::tick) are thin handles on it.
//!
//! Ownership: while armed, the runtime timer's payload is an `Arc<Core>` (heap → timer →
//! core), so `after(d)` keeps working when only its receiver is held. The receiver's drop
//! hook also owns an `Arc<Core>`; when the last receiver goes, the hook stops the timer,
//! which drops the payload, and the core is freed: an unreferenced timer costs nothing
//! (go#61542, go#60144).

use std::fmt;

use gort_chan::{Receiver, Sender};
use gort_loom::Arc as SyncArc;
use gort_timer::{deadline_after, del, nanotime, Fire, Nanos, Timer as RtTimer, NEVER};

use crate::arming::{Arming, Sink};
use crate::rt::{arm, nanos, slack};
use crate::Instant;

impl Sink for Sender<Instant> {
    fn try_send(&self, value: Instant) -> bool {
        Sender::try_send(self, value).is_ok()
    }
    fn take_buffered(&self) -> usize {
        Sender::take_buffered(self)
    }
}

pub(crate) struct Core {
    arming: Arming<Sender<Instant>>,
    timer: SyncArc<RtTimer>,
    periodic: bool,
    /// For panic messages: "gort::time::Timer" or "gort::time::Ticker".
    what: &'static str,
}

impl Fire for Core {
    fn fire(self: std::sync::Arc<Self>, when: Nanos) {
        self.arming.fire(when, self.periodic);
    }
}

impl Core {
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
    ) -> (std::sync::Arc<Core>, Receiver<Instant>) {
        let (tx, rx) = gort_chan::bounded(1);
        let core = std::sync::Arc::new(Core {
            arming: Arming::new(tx),
            timer: RtTimer::new(),
            periodic: period > 0,
            what,
        });
        let hook = core.clone();
        rx.set_drop_hook(Box::new(move || {
            hook.stop();
        }));
        core.reset(d, period);
        (core, rx)
    }

    /// Go 1.23's `Stop`: see [`Arming::stop`].
    pub(crate) fn stop(&self) -> bool {
        self.arming.stop(|| self.disarm())
    }

    /// Go 1.23's `Reset`: see [`Arming::reset`]. The first value is due `d` from now, then
    /// every `period` if > 0.
    #[track_caller]
    pub(crate) fn reset(
        self: &std::sync::Arc<Self>,
        d: std::time::Duration,
        period: Nanos,
    ) -> bool {
        self.arming.reset(
            || self.disarm(),
            || {
                // Read after `disarm` (the arming's ordering argument depends on it).
                let start = deadline_after(nanotime(), d);
                if start != NEVER {
                    self.timer.set_fire(self.clone());
                    arm(&self.timer, start, period, slack(nanos(d)), self.what);
                }
                start
            },
        )
    }

    /// Stops the runtime timer and drops its payload (breaking the payload → core cycle even
    /// when the timer already ran).
    fn disarm(&self) {
        del(&self.timer);
        self.timer.clear_target();
    }
}

impl fmt::Debug for Core {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Core")
            .field("state", &self.arming.state())
            .field("when", &Instant::from_nanos(self.timer.when()))
            .field("periodic", &self.periodic)
            .finish()
    }
}
