//! [`after_func`]: run a function on its own after a delay (Go's `time.AfterFunc`).

use std::fmt;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::time::Duration;

use gort_timer::{nanotime, CellFire, CellRef, CellTimer, Nanos, NEVER};

use crate::runtime_timer::{arm_cell, arm_new_cell, nanos, slack};

const WHAT: &str = "gort::time::after_func";

/// The callback, inline in its runtime timer's allocation (a `gort_timer::TimerCell`): an `after_func`
/// is one allocation, and a firing queues the cell itself on a run queue as a
/// [`Callback`](gort_sched::timer_api::Callback), allocating nothing (the queue's reference
/// keeps `f` alive until it has run).
struct Spawner<F>(F);

impl<F: Fn() + Send + Sync + 'static> CellFire for Spawner<F> {
    fn fire(cell: CellRef<Self>, _when: Nanos) {
        // Queued as its own unit of work (Go's `go f()`). The scheduler catches a panic in
        // `f` and counts it (Metrics::task_panics).
        if let Err(cell) = gort_sched::timer_api::run_callback(cell) {
            // Timers only run on runtime threads; should one ever run elsewhere, still call
            // `f`, and keep its panic away from the thread that ran the timer.
            let _ = catch_unwind(AssertUnwindSafe(|| (cell.payload().0)()));
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
/// - The timer waits in the runtime that armed it (or last reset it). Dropping that runtime
///   before `d` has passed drops `f` unrun: no runtime is left to run it (a Go program has
///   one runtime for its whole life, so Go has no such case). A [`reset`](AfterFunc::reset)
///   made later on another runtime arms it there. (A channel [`Timer`](crate::Timer) or a
///   [`sleep`](crate::sleep) is armed again by the wait on it, on the waiter's runtime; a
///   `gort::context` deadline is kept by a thread of its own until it comes.)
/// - Armed under an entered `gort::Handle` whose runtime is already gone, it does not panic
///   (nothing waits on it; a `sleep` or a `Timer` would wait for ever, so they panic there):
///   `f` never runs, and is dropped at the latest with that runtime's last handle.
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
    let mut timer = CellTimer::new(Spawner(f));
    let d = nanos(d);
    let when = nanotime().saturating_add(d);
    if when != NEVER {
        // The handle is the cell's only reference: Go's `addtimer`, not `modtimer`.
        arm_new_cell(&mut timer, when, slack(d), WHAT);
    }
    AfterFunc { timer }
}

/// The handle of an [`after_func`] timer.
pub struct AfterFunc {
    /// The runtime timer and `f` in one allocation; the handle is one pointer. Every arming
    /// that finds the payload gone installs the cell as its timer's payload
    /// ([`gort_timer::modify_cell`], inside the status it owns, so no lock of ours is needed
    /// against a concurrent stop). A stop or a firing takes it out of the timer at once, so
    /// once the handle is dropped too, `f` and its captures go as soon as the last firing ran
    /// (the timer crate's payload rule); the heaps' references keep only the memory.
    timer: CellTimer,
}

impl AfterFunc {
    /// Stops the timer. Returns true if it stopped it before it fired (`f` will not run for
    /// this arming); false if it had already fired (`f` has been started: `stop` does not
    /// wait for it), was already stopped, or was never pending (armed for [`Duration::MAX`]:
    /// see [`after_func`]).
    #[doc(alias = "Stop")]
    pub fn stop(&self) -> bool {
        self.timer.stop()
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
            return self.timer.stop();
        }
        arm_cell(&self.timer, when, slack(d), WHAT)
    }
}

impl fmt::Debug for AfterFunc {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AfterFunc")
            .field("timer", &self.timer)
            .finish_non_exhaustive()
    }
}
