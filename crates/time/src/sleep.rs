//! [`Sleep`]: a future that completes at a deadline (Go's `time.Sleep`, tokio's `sleep`).

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use gort_loom::Arc;
use gort_timer::{del, nanotime, Nanos, Timer, NEVER};

use crate::runtime_timer::{arm_own, slack};
use crate::Instant;

const WHAT: &str = "gort::time::Sleep";

/// Waits until `duration` has elapsed: Go's `time.Sleep`, as a future.
///
/// A zero duration completes on the first poll without touching any timer heap, and
/// [`Duration::MAX`] (or anything past ~292 years) never completes and registers nothing,
/// also under a paused clock, which has no deadline to jump to (Tokio's paused clock jumps
/// to its far-future deadline and completes it).
///
/// A non-zero sleep always yields to the scheduler at least once, even when it is already
/// due by its first poll, as Go's `time.Sleep` always parks the goroutine: a loop such as
/// `while !done { sleep(tiny).await }` cannot starve the task that sets `done`.
///
/// # Panics
///
/// The returned future panics if it has to wait and is polled outside a gort runtime.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// let rt = gort::Runtime::new().unwrap();
/// rt.block_on(async {
///     let start = gort::time::Instant::now();
///     gort::time::sleep(Duration::from_millis(10)).await;
///     assert!(start.elapsed() >= Duration::from_millis(10));
/// });
/// ```
#[doc(alias = "Sleep")]
pub fn sleep(duration: Duration) -> Sleep {
    let mut s = sleep_until(Instant::now() + duration);
    s.yield_first = !duration.is_zero();
    s
}

/// Waits until `deadline`. A deadline that has passed completes on the first poll, with no
/// rounding to any tick (tokio#6866).
///
/// # Panics
///
/// The returned future panics if it has to wait and is polled outside a gort runtime.
///
/// # Examples
///
/// ```
/// use gort::time::Instant;
/// use std::time::Duration;
/// let rt = gort::Runtime::new().unwrap();
/// rt.block_on(async {
///     let deadline = Instant::now() + Duration::from_millis(5);
///     gort::time::sleep_until(deadline).await;
///     assert!(Instant::now() >= deadline);
/// });
/// ```
pub fn sleep_until(deadline: Instant) -> Sleep {
    Sleep {
        deadline: deadline.as_nanos(),
        timer: None,
        armed: false,
        yield_first: false,
        slack_unset: false,
    }
}

/// The future returned by [`sleep`] and [`sleep_until`].
///
/// It costs one runtime timer (which carries the task's waker: one that a finished sleep on
/// this thread gave back if there is one, else one allocation), and only once it actually has
/// to wait: a deadline that has passed completes at once. It is registered on the current
/// P's timer heap on the first poll that has to wait, and stopped (its waker dropped at once)
/// when the `Sleep` is dropped.
///
/// A [`sleep`] of a non-zero duration yields at least once (Go's `Sleep` always parks); a
/// [`sleep_until`] a deadline that has passed, or a zero sleep, completes on its first poll.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// let rt = gort::Runtime::new().unwrap();
/// rt.block_on(async {
///     let mut s = std::pin::pin!(gort::time::sleep(Duration::from_secs(3600)));
///     assert!(!s.is_elapsed());
///     s.as_mut().reset(gort::time::Instant::now());
///     s.await; // completes at once
/// });
/// ```
///
/// Like every future it does nothing until awaited, so a `sleep(d);` without `.await` (Go's
/// `time.Sleep(d)` habit) is an `unused_must_use` warning:
///
/// ```compile_fail
/// #![deny(unused_must_use)]
/// async fn pause() {
///     gort::time::sleep(std::time::Duration::from_millis(10)); // forgot .await
/// }
/// ```
#[must_use = "futures do nothing unless you `.await` or poll them"]
pub struct Sleep {
    deadline: Nanos,
    /// Created by the first poll that has to wait, then reused across resets.
    timer: Option<Arc<Timer>>,
    /// Whether `timer` was armed (by `modify`) and not stopped since.
    armed: bool,
    /// A non-zero `sleep` that is due by its first poll still yields once.
    yield_first: bool,
    /// A reset moved the pending timer with slack 0: the next poll sets the slack.
    slack_unset: bool,
}

impl Sleep {
    /// The instant this sleep completes at.
    pub fn deadline(&self) -> Instant {
        Instant::from_nanos(self.deadline)
    }

    /// Whether the deadline has passed, by the clock: a `sleep_until(now)` is elapsed before
    /// its first poll (Tokio's answers whether its timer has fired, so not before a poll).
    pub fn is_elapsed(&self) -> bool {
        nanotime() >= self.deadline
    }

    /// Moves the deadline to `deadline`, whether or not this sleep has completed; it can then
    /// be awaited again. A waiting timer is moved in place (Go's `modtimer`), keeping the
    /// waker it has.
    pub fn reset(self: Pin<&mut Self>, deadline: Instant) {
        self.get_mut().reset_inner(deadline.as_nanos());
    }

    fn reset_inner(&mut self, deadline: Nanos) {
        self.deadline = deadline;
        self.yield_first = false;
        let Some(t) = self.timer.as_ref().filter(|_| self.armed) else {
            return;
        };
        // A pending timer still holds its waker: move it in place (in a runtime), without
        // reading the clock (the caller has just read it to make `deadline`; a second
        // reading was a third of a reset). A deadline that has passed then runs at the heap's
        // next check, whose wake-up finds the sleep due, as a poll would have. The slack
        // needs the clock: 0 (as precise as the runtime can) until the next poll sets it.
        // Otherwise (fired, or a deadline that never comes) stop it; the next poll registers
        // again if it has to wait. The heaps take only deadlines > 0 (Go's `when` is never
        // negative either: its `when(d)` clamps): a user's instant at or before the clock's
        // epoch (`Instant::from_nanos(0)`, `Instant::now() - Duration::MAX`) is due as 1 is.
        if deadline != NEVER && move_pending(t, deadline.max(1)) {
            self.slack_unset = true;
            return;
        }
        del(t);
        self.armed = false;
    }

    fn disarm(&mut self) {
        if self.armed {
            if let Some(t) = &self.timer {
                del(t);
            }
            self.armed = false;
        }
    }
}

/// Moves a pending timer to `deadline` in place (Go's `modtimer`), with no slack. Returns false if
/// it was not pending (it ran, and its wake-up is spent) or this thread is in no runtime
/// (`modtimer` finds no runtime before it touches the timer): the caller then stops it.
/// `is_pending` first keeps a timer that ran out of any heap (re-arming it would insert it
/// only for the caller's stop to undo); should it run between the two, `modtimer` re-arms it
/// and says it was not pending, and the caller's stop undoes that.
fn move_pending(t: &Arc<Timer>, deadline: Nanos) -> bool {
    if !t.is_pending() {
        return false;
    }
    t.set_slack(0);
    gort_sched::timer_api::modtimer(t, deadline, 0, None) == Some(true)
}

impl Future for Sleep {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let this = self.get_mut();
        // Exact: due at `now >= deadline`, never rounded up (tokio#6866).
        let now = nanotime();
        if now >= this.deadline {
            if std::mem::take(&mut this.yield_first) {
                cx.waker().wake_by_ref();
                return Poll::Pending;
            }
            this.disarm();
            return Poll::Ready(());
        }
        this.yield_first = false;
        if this.deadline == NEVER {
            return Poll::Pending; // never comes: no timer at all
        }
        let t = this.timer.get_or_insert_with(Timer::new);
        // Waker first, then look at the timer (see `Timer::set_waker`): either a run in
        // progress takes this waker, or we see below that the timer has run.
        t.set_waker(cx.waker());
        if !this.armed {
            arm_own(t, this.deadline, slack(this.deadline - now), WHAT);
            this.armed = true;
        } else if !t.is_pending() {
            // It ran (its wake-up may have gone to an older waker) or the runtime dropped it.
            if nanotime() >= this.deadline {
                this.armed = false;
                return Poll::Ready(());
            }
            arm_own(t, this.deadline, slack(this.deadline - now), WHAT);
        } else if this.slack_unset {
            t.set_slack(slack(this.deadline - now));
        }
        this.slack_unset = false;
        Poll::Pending
    }
}

impl Drop for Sleep {
    fn drop(&mut self) {
        self.disarm();
        // A timer that ran (or was stopped and already left its heap) is ours alone: kept
        // for this thread's next sleep instead of freed (`Timer::recycle`).
        if let Some(t) = self.timer.take() {
            Timer::recycle(t);
        }
    }
}

impl fmt::Debug for Sleep {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Sleep")
            .field("deadline", &self.deadline())
            .field("armed", &self.armed)
            .finish()
    }
}
