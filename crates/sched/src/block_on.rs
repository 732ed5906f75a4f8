//! `block_on`'s loop: polls a future on the calling thread and parks it between polls.
//!
//! For a paused clock the future counts as a task (`paused.rs`): it holds the clock while it
//! runs and from the moment it is woken until it runs again, so the clock never jumps past an
//! instant the future was woken for before it has looked at it.
//!
//! Inside `block_in_place` or a blocking-pool closure the thread already holds the clock (it
//! runs user code without a P); that hold is lent out for the loop's life
//! (`lend_thread_hold`): parked here, the thread waits on the runtime and runs no user code,
//! and if it held the clock, the clock would never move while the future waits for a timer.
//! It is taken back before `run` returns or unwinds.

use crate::context;
use crate::shared::Shared;
use crossbeam_utils::sync::{Parker, Unparker};
use std::future::Future;
use std::pin::pin;
use std::sync::atomic::{AtomicU8, Ordering::AcqRel};
use std::sync::{Arc, Weak};
use std::task::{Context, Poll, Wake, Waker};

/// The waker's state: parked or running without a pending wake-up.
const IDLE: u8 = 0;
/// Woken: the waker took a clock hold that the loop adopts.
const NOTIFIED: u8 = 1;
/// `block_on` returned: wakes are ignored (and take no hold).
const DONE: u8 = 2;

/// Runs `future` to completion on this thread, for `shared`'s `block_on`; with
/// `lend_thread_hold`, the hold the thread took for its user code (`block_in_place`, a
/// blocking closure) is released meanwhile (module docs).
pub(crate) fn run<F: Future>(shared: &Arc<Shared>, future: F, lend_thread_hold: bool) -> F::Output {
    let parker = Parker::new();
    let signal = Arc::new(Signal {
        state: AtomicU8::new(IDLE),
        unparker: parker.unparker().clone(),
        shared: Arc::downgrade(shared),
    });
    let waker = Waker::from(signal.clone());
    let mut cx = Context::from_waker(&waker);
    let mut future = pin!(future);
    shared.clock.hold();
    if lend_thread_hold {
        // After the loop's own hold is taken: the clock never sees this thread idle while it
        // is about to poll.
        shared.release_clock_hold();
    }
    let mut held = Held {
        shared,
        signal: &signal,
        own: true,
        lent: lend_thread_hold,
    };
    loop {
        // A full cooperative budget per poll, as a task's, and the caller's back afterwards
        // (a `block_on` inside `block_in_place` runs within a task's poll).
        let polling = context::enter_block_on_poll(shared);
        let polled = gort_coop::with_budget(|| future.as_mut().poll(&mut cx));
        drop(polling);
        if let Poll::Ready(v) = polled {
            return v;
        }
        if signal.state.swap(IDLE, AcqRel) == NOTIFIED {
            // Woken during the poll: the waker's hold is one too many.
            shared.release_clock_hold();
            continue;
        }
        held.own = false;
        shared.release_clock_hold();
        while signal.state.swap(IDLE, AcqRel) != NOTIFIED {
            parker.park();
        }
        // The waker's hold is ours now.
        held.own = true;
    }
}

/// Gives back the holds `run` owns when it returns or unwinds, and stops the waker taking more.
struct Held<'a> {
    shared: &'a Arc<Shared>,
    signal: &'a Signal,
    own: bool,
    /// The thread's hold was lent out: take it back first.
    lent: bool,
}

impl Drop for Held<'_> {
    fn drop(&mut self) {
        if self.lent {
            self.shared.clock.hold();
        }
        if self.own {
            self.shared.release_clock_hold();
        }
        if self.signal.state.swap(DONE, AcqRel) == NOTIFIED {
            self.shared.release_clock_hold();
        }
    }
}

/// `block_on`'s waker.
struct Signal {
    state: AtomicU8,
    unparker: Unparker,
    shared: Weak<Shared>,
}

impl Signal {
    fn notify(&self) {
        let Some(shared) = self.shared.upgrade() else {
            return self.unparker.unpark();
        };
        // Hold first, so that the loop never adopts a hold that does not exist yet.
        shared.clock.hold();
        if self
            .state
            .compare_exchange(IDLE, NOTIFIED, AcqRel, std::sync::atomic::Ordering::Acquire)
            .is_err()
        {
            shared.release_clock_hold();
        }
        self.unparker.unpark();
    }
}

impl Wake for Signal {
    fn wake(self: Arc<Self>) {
        self.notify();
    }
    fn wake_by_ref(self: &Arc<Self>) {
        self.notify();
    }
}
