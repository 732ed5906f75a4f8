//! The timer layer's hosts: how a timer armed earlier than its heap's wake-up reaches the
//! scheduler (Go's `wakeNetPoller`), from a thread of the runtime, for a task's own sleep,
//! or under the scheduler lock; and the runtime as the owner of its Ps' heaps, which a
//! timer left pending there and moved earlier from another runtime wakes.
//!
//! Every host's [`Host::key`] is the address of the runtime it wakes, so that the timer layer
//! can tell a caller of another runtime from the heap's own ([`gort_timer::OwnerHost`]).

use crate::context;
use crate::shared::Shared;
use gort_timer::{Host, Nanos, OwnerHost};
use std::sync::atomic::Ordering::Relaxed;
use std::sync::{Arc, Weak};

/// The key of `shared` for [`Host::key`]: its address.
fn key_of(shared: &Shared) -> usize {
    shared as *const Shared as usize
}

/// What the Ps' heaps of the runtime `me` name as their owner.
pub(crate) fn owner_host(me: &Weak<Shared>) -> OwnerHost {
    let host: Weak<dyn Host + Send + Sync> = me.clone();
    OwnerHost::new(Weak::as_ptr(me) as usize, host)
}

/// The runtime as its heaps' owner: reached only through a weak handle, by a thread of
/// another runtime (or none) that moved one of its timers earlier.
impl Host for Shared {
    fn wake_netpoller(&self, when: Nanos) {
        if let Some(me) = self.me.upgrade() {
            me.wake_netpoller(when);
        }
    }

    fn key(&self) -> usize {
        key_of(self)
    }
}

/// The timer layer's view of the scheduler (Go's `wakeNetPoller`).
pub(crate) struct TimerHost<'a>(pub(crate) &'a Arc<Shared>);

impl Host for TimerHost<'_> {
    fn wake_netpoller(&self, when: Nanos) {
        self.0.wake_netpoller(when);
    }

    fn key(&self) -> usize {
        key_of(self.0)
    }
}

/// The key of the current thread's runtime, 0 on a thread of none.
fn current_key() -> usize {
    context::with_current(|s| s.map_or(0, |s| key_of(s)))
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

    fn key(&self) -> usize {
        current_key()
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

    fn key(&self) -> usize {
        current_key()
    }
}

/// A `Host` for code that runs under the scheduler lock, where waking an M would deadlock:
/// it remembers the earliest wake-up asked for, and `flush` performs it after the unlock.
/// Used only to move timers between heaps of one runtime (`Timers::move_to`), which never
/// leaves a timer pending in a heap of another, so its key (the default 0) is never compared.
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
