//! The timer layer's hosts: how a timer armed earlier than its heap's wake-up reaches the
//! scheduler (Go's `wakeNetPoller`), from a thread of the runtime, for a task's own sleep,
//! or under the scheduler lock.

use crate::context;
use crate::shared::Shared;
use gort_timer::{Host, Nanos};
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;

/// The timer layer's view of the scheduler (Go's `wakeNetPoller`).
pub(crate) struct TimerHost<'a>(pub(crate) &'a Arc<Shared>);

impl Host for TimerHost<'_> {
    fn wake_netpoller(&self, when: Nanos) {
        self.0.wake_netpoller(when);
    }
}

/// The `Host` of the current thread's runtime, looked up only when a wake-up is asked for
/// (most re-arms move a timer later and ask for none).
pub(crate) struct CurrentHost;

impl Host for CurrentHost {
    fn wake_netpoller(&self, when: Nanos) {
        context::with_current(|s| {
            if let Some(s) = s {
                s.wake_netpoller(when);
            }
        });
    }
}

/// [`CurrentHost`] for a timer whose firing wakes only the task running on this thread
/// ([`Shared::wake_netpoller_own`]).
pub(crate) struct CurrentOwnHost;

impl Host for CurrentOwnHost {
    fn wake_netpoller(&self, when: Nanos) {
        context::with_current(|s| {
            if let Some(s) = s {
                s.wake_netpoller_own(when);
            }
        });
    }
}

/// A `Host` for code that runs under the scheduler lock, where waking an M would deadlock:
/// it remembers the earliest wake-up asked for, and `flush` performs it after the unlock.
#[derive(Default)]
pub(crate) struct DeferredHost(std::sync::atomic::AtomicI64);

impl Host for DeferredHost {
    fn wake_netpoller(&self, when: Nanos) {
        let _ = self.0.fetch_update(Relaxed, Relaxed, |cur| {
            Some(gort_timer::min_nonzero(cur, when))
        });
    }
}

impl DeferredHost {
    pub(crate) fn flush(&self, shared: &Arc<Shared>) {
        let when = self.0.load(Relaxed);
        if when != 0 {
            shared.wake_netpoller(when);
        }
    }
}
