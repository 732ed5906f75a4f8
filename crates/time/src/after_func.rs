//! [`after_func`]: run a function on its own after a delay (Go's `time.AfterFunc`).

use std::fmt;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;
use std::time::Duration;

use gort_loom::Arc as SyncArc;
use gort_timer::{del, nanotime, Fire, Nanos, Timer, NEVER};

use crate::runtime_timer::{arm_fire, nanos, slack};

const WHAT: &str = "gort::time::after_func";

/// The runtime timer's payload, which a firing queues on a run queue as a
/// [`Callback`](gort_sched::timer_api::Callback). `f` is inline, so an `after_func` costs two
/// allocations (this and the runtime timer) and a firing none (the queue's reference keeps
/// this payload alive until `f` has run).
struct Spawner<F>(F);

impl<F: Fn() + Send + Sync + 'static> Fire for Spawner<F> {
    fn fire(self: Arc<Self>, _when: Nanos) {
        // Queued as its own unit of work (Go's `go f()`); the payload itself is what the run
        // queue holds, so a firing allocates nothing. The scheduler catches a panic in `f`
        // and counts it (Metrics::task_panics).
        if let Err(me) = gort_sched::timer_api::run_callback(self) {
            // Timers only run on runtime threads; should one ever run elsewhere, still call
            // `f`, and keep its panic away from the thread that ran the timer.
            let _ = catch_unwind(AssertUnwindSafe(|| (me.0)()));
        }
    }
}

impl<F: Fn() + Send + Sync + 'static> gort_sched::timer_api::Callback for Spawner<F> {
    fn call(&self) {
        (self.0)()
    }
}

/// Calls `f` in its own unit of work once `d` has passed (Go's `time.AfterFunc`): the
/// firing queues `f` on a run queue like a task (no allocation), never runs it on the timer
/// machinery; firings that overlap run concurrently, as Go's goroutines do.
///
/// - A panic in `f` is caught by the scheduler and counted in the runtime's
///   `Metrics::task_panics`; it never takes the runtime down.
/// - Dropping the returned [`AfterFunc`] does not cancel it (as in Go); keep the handle to
///   [`stop`](AfterFunc::stop) or [`reset`](AfterFunc::reset) it.
/// - [`Duration::MAX`] never fires and costs no heap entry; such a timer counts as never
///   pending, so its [`stop`](AfterFunc::stop) returns false where Go's returns true: after
///   a false `stop` of a timer that may have been armed that far, do not wait for `f`.
///
/// # Panics
///
/// Outside a gort runtime (unless `d` is so long that nothing needs registering).
///
/// # Examples
///
/// ```
/// use std::sync::atomic::{AtomicBool, Ordering};
/// use std::sync::Arc;
/// use std::time::Duration;
/// let rt = gort::Runtime::new().unwrap();
/// rt.block_on(async {
///     let done = Arc::new(AtomicBool::new(false));
///     let d = done.clone();
///     let _f = gort::time::after_func(Duration::from_millis(1), move || {
///         d.store(true, Ordering::SeqCst);
///     });
///     while !done.load(Ordering::SeqCst) {
///         gort::time::sleep(Duration::from_millis(1)).await;
///     }
/// });
/// ```
#[doc(alias = "AfterFunc")]
#[track_caller]
pub fn after_func(d: Duration, f: impl Fn() + Send + Sync + 'static) -> AfterFunc {
    let h = AfterFunc {
        timer: Timer::new(),
        payload: Arc::new(Spawner(f)),
    };
    h.reset(d);
    h
}

/// The handle of an [`after_func`] timer.
pub struct AfterFunc {
    timer: SyncArc<Timer>,
    /// Installed by every arming that finds it gone ([`modify_fire`], inside the status it
    /// owns, so no lock of ours is needed against a concurrent stop). A stop or a firing
    /// takes it out of the timer at once, so once the handle is dropped too, `f` and its
    /// captures go as soon as the last firing ran (the timer crate's payload rule).
    payload: Arc<dyn Fire>,
}

impl AfterFunc {
    /// Stops the timer. Returns true if it stopped it before it fired (`f` will not run for
    /// this arming); false if it had already fired (`f` has been started: `stop` does not
    /// wait for it) or was already stopped.
    #[doc(alias = "Stop")]
    pub fn stop(&self) -> bool {
        del(&self.timer)
    }

    /// Re-arms the timer to fire `d` from now. Returns true if it was pending (it now fires
    /// only at the new time). After it fired, a reset runs `f` again, possibly while the
    /// previous run is still going.
    ///
    /// # Panics
    ///
    /// Outside a gort runtime (unless `d` is so long that nothing needs registering).
    #[doc(alias = "Reset")]
    #[track_caller]
    pub fn reset(&self, d: Duration) -> bool {
        let d = nanos(d);
        let when = nanotime().saturating_add(d);
        if when == NEVER {
            return del(&self.timer);
        }
        arm_fire(&self.timer, when, &self.payload, slack(d), WHAT)
    }
}

impl fmt::Debug for AfterFunc {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AfterFunc")
            .field("timer", &self.timer)
            .finish_non_exhaustive()
    }
}
