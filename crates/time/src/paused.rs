//! A paused clock for tests: [`pause`], [`resume`], [`advance`], [`is_paused`]; the rules are
//! on [`pause`].

use crate::instant::Instant;
use crate::sleep::sleep_until;
use gort_sched::clock_api;
use std::future::{poll_fn, Future};
use std::pin::{pin, Pin};
use std::task::{Context, Poll};
use std::time::Duration;

/// Freezes the current runtime's clock, for tests of time-dependent code.
///
/// The clock is the runtime's: pausing it changes [`Instant::now`] and every deadline for
/// that runtime's tasks, blocking closures and `block_on`, and for no other runtime. While
/// paused, time moves in two ways:
///
/// - **Auto-advance**: when the runtime is quiescent (no task runnable or running on any P,
///   no `block_on`'s future running or woken, no blocking closure queued or running its
///   code, no task in `block_in_place`, no task blocked on a socket), the clock jumps to the
///   earliest deadline and the timers due then run; the tasks they wake run before the
///   clock moves again. A sleep of an hour returns at once, at exactly an hour later.
///
/// The rule: a thread that runs user code holds the clock, a thread that waits on the
/// runtime does not. A blocking closure sleeping in `std::thread::sleep` or a blocking read
/// runs user code, in real time: the clock does not jump past it (Tokio's `spawn_blocking`
/// does the same). A blocking closure or `block_in_place` parked in `Handle::block_on` of
/// the same runtime waits on it: the clock jumps for the sleeps of that future.
/// - **[`advance`]**: moves the clock forward by a duration, firing every timer due on the
///   way in deadline order, and returns when the runtime is quiescent at the new instant.
///
/// A task blocked on a socket holds the clock: its peer may live in real time, outside the
/// runtime, and jumping would make every network timeout fire at once. [`advance`] still
/// moves the clock then, up to its target.
///
/// Threads outside the runtime keep the real clock, and so does `std::time::Instant`: an
/// [`Instant`] of the virtual clock converts to the `std` instant at the same offset from the
/// clock's epoch, which is not the real time of anything.
///
/// Everything else is unchanged: `stop`/`reset` results, Go 1.23's no-stale-value rule, the
/// per-P heaps. design/TIMERS.md ("The paused clock") says how the clock reaches the heaps
/// and the poller.
///
/// # Panics
///
/// Outside a gort runtime, or if the clock is already paused.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// let rt = gort::Runtime::new().unwrap();
/// rt.block_on(async {
///     gort::time::pause();
///     let start = gort::time::Instant::now();
///     gort::time::sleep(Duration::from_secs(24 * 3600)).await; // a virtual day, at once
///     assert_eq!(gort::time::Instant::now() - start, Duration::from_secs(24 * 3600));
/// });
/// ```
#[track_caller]
pub fn pause() {
    assert!(
        clock_api::pause(),
        "gort::time::pause: the clock is already paused"
    );
}

/// Lets the current runtime's clock run again, at the real clock's rate, from the paused
/// instant on.
///
/// # Panics
///
/// Outside a gort runtime, or if the clock is not paused.
///
/// # Examples
///
/// ```
/// let rt = gort::Runtime::new().unwrap();
/// rt.block_on(async {
///     gort::time::pause();
///     let frozen = gort::time::Instant::now();
///     gort::time::resume();
///     assert!(!gort::time::is_paused());
///     assert!(gort::time::Instant::now() >= frozen);
/// });
/// ```
#[track_caller]
pub fn resume() {
    assert!(
        clock_api::resume(),
        "gort::time::resume: the clock is not paused"
    );
}

/// Whether the current runtime's clock is paused (false outside a runtime); see [`pause`].
///
/// # Examples
///
/// ```
/// let rt = gort::Builder::new().start_paused(true).build().unwrap();
/// assert!(rt.block_on(async { gort::time::is_paused() }));
/// assert!(!gort::time::is_paused()); // not in a runtime here
/// ```
pub fn is_paused() -> bool {
    clock_api::is_paused()
}

/// Moves the paused clock forward by `d`: every timer due up to `now + d` fires in deadline
/// order, the clock reading each one's deadline as it fires, and the tasks each wakes run
/// before a later one fires (a 1 s ticker advanced 10 s delivers what Go gives a slow
/// receiver: one value at a time, dropped ticks, no backlog). Returns when the runtime is
/// quiescent at `now + d` (see [`pause`]), or at once, wherever the clock is, if another task
/// [`resume`]s the clock meanwhile (the rest of the span would otherwise pass in real time).
///
/// The clock moves only while the runtime is quiescent: a task that never blocks (a loop
/// around `yield_now`) keeps an `advance` from returning, as it keeps a sleep from ending.
///
/// # Panics
///
/// When first polled, outside a gort runtime, if the clock is not paused, or if `now + d`
/// reaches the end of the clock ([`Instant::NEVER`], about 292 years after the clock's
/// epoch): `advance(Duration::MAX)` panics, as Tokio's does, instead of waiting for ever.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// let rt = gort::Builder::new().start_paused(true).build().unwrap();
/// rt.block_on(async {
///     let ticker = gort::time::Ticker::new(Duration::from_secs(1));
///     let start = gort::time::Instant::now();
///     gort::time::advance(Duration::from_millis(2500)).await;
///     assert_eq!(gort::time::Instant::now() - start, Duration::from_millis(2500));
///     // Nobody received: the channel holds the first tick (Go drops the later ones).
///     assert_eq!(ticker.c().try_recv().unwrap(), start + Duration::from_secs(1));
/// });
/// ```
#[track_caller]
pub fn advance(d: Duration) -> impl Future<Output = ()> + Send {
    let caller = std::panic::Location::caller();
    async move {
        assert!(
            is_paused(),
            "gort::time::advance (called at {caller}): the clock is not paused"
        );
        // A target at or past the end of the clock is a deadline that never comes: the
        // sleep below would never end (Tokio's `advance` panics on the overflow too).
        let Some(target) = Instant::now().checked_add(d).filter(|t| !t.is_never()) else {
            panic!("gort::time::advance (called at {caller}): {d:?} takes the clock past its end");
        };
        let advancing = clock_api::advance_begin(target.as_nanos());
        // A `resume` meanwhile ends the advance where the clock is: on a running clock the
        // rest of the span would pass in real time.
        let mut sleep = pin!(sleep_until(target));
        let resumed = poll_fn(|cx| {
            if sleep.as_mut().poll(cx).is_ready() {
                Poll::Ready(false)
            } else if advancing.resumed(cx.waker()) {
                Poll::Ready(true)
            } else {
                Poll::Pending
            }
        })
        .await;
        if resumed {
            return;
        }
        Quiescent {
            epoch: advancing.quiet_epoch(),
            advancing: &advancing,
        }
        .await;
    }
}

/// Ready once the runtime was quiescent (this task waiting here counts as not runnable).
struct Quiescent<'a> {
    epoch: u64,
    advancing: &'a clock_api::Advance,
}

impl Future for Quiescent<'_> {
    type Output = ();
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if self.advancing.wait_quiet(self.epoch, cx.waker()) {
            Poll::Ready(())
        } else {
            Poll::Pending
        }
    }
}
