//! A context's deadline timer. Go's `WithDeadline` arms a `time.AfterFunc` whose function
//! cancels the context, as a goroutine. Here the timer's callback cancels in the timer's own
//! run, where a channel timer sends and a socket deadline expires, instead of queueing a task:
//! gort cannot preempt, and a task that never yields (Go's busy worker, `for { select { case
//! <-ctx.Done(): return; default: work() } }`) holds its P, so on a one-P runtime a queued
//! cancel waited behind that worker for ever, while the timer itself did fire (sysmon runs a
//! stuck P's timers). A cancel runs no user code but wakers (a channel's close, which a timer's
//! run may wake as a channel timer's send does) and drops; the `after_func`s it starts are
//! spawned as tasks, never called there.
//!
//! A runtime that shuts down before the deadline lets the timer go unrun (its heaps are
//! drained, and [`Expire::shutdown`] is told): the deadline then goes to the
//! [orphanage](crate::orphanage), a thread that cancels the context when it comes (unless
//! the timer held the context's last reference and no `after_func` waits on it: nothing
//! can observe it any more, and it is dropped with the timer's callback); so does a
//! deadline armed on a runtime already shut down (through a `Handle` that outlived it), whose
//! heap no thread runs or drains any more, and one set on a thread of no runtime (Go code
//! makes its contexts anywhere, `main`'s first line included). Without
//! that, a context made on a runtime dropped before its deadline never ended: a task of
//! another runtime or a blocking closure parked on its `done()` waited for ever (and the
//! dropping runtime with it, waiting for the closure), and `err()` stayed `None`.

use std::sync::Arc;

use gort_sched::timer_api::modtimer;
use gort_time::Instant;
use gort_timer::{del, nanotime, Fire, Nanos, Timer};

use crate::ctx::Node;

/// The armed timer of a context's deadline, stopped by an earlier cancel.
pub(crate) struct DeadlineTimer {
    timer: gort_loom::Arc<Timer>,
}

/// The callback: cancels the context with
/// [`Error::DeadlineExceeded`](crate::Error::DeadlineExceeded) and its deadline's cause. It
/// holds the node as the function of Go's `AfterFunc` does, until the timer fires or is
/// stopped (either drops the callback).
struct Expire(Arc<Node>);

impl Fire for Expire {
    fn fire(self: Arc<Self>, _when: Nanos) {
        self.0.expire();
    }

    /// The runtime shuts down with the timer in a heap: it will never fire there.
    fn shutdown(self: Arc<Self>) {
        self.0.orphan();
    }
}

impl DeadlineTimer {
    /// Arms a timer that cancels `node` at `deadline` (a future one), on the caller's P;
    /// `None` outside a gort runtime (the caller hands the deadline to the orphanage).
    pub(crate) fn start(node: &Arc<Node>, deadline: Instant) -> Option<DeadlineTimer> {
        let when = deadline.as_nanos();
        let timer = Timer::new();
        // The tolerance of a sleep or an `after_func` that far ahead: 1/16 of the distance.
        timer.set_slack(when.saturating_sub(nanotime()).max(0) / 16);
        let fire: Arc<dyn Fire> = Arc::new(Expire(node.clone()));
        modtimer(&timer, when, 0, Some(&fire))?;
        Some(DeadlineTimer { timer })
    }

    /// Stops the timer (a no-op once it fired); its callback, and the node it holds, go.
    pub(crate) fn stop(&self) {
        del(&self.timer);
    }
}
