//! Go 1.19's per-P timer heaps and atomic timer state machine (`runtime/time.go`), ported to
//! Rust and runtime-agnostic: no threads, tasks or channels here. A scheduler owns one
//! [`Timers`] per P and calls [`Timers::check`] every scheduling round; a time library
//! creates [`Timer`]s and arms, stops and re-arms them with [`modify`] (or [`modify_fire`],
//! [`modify_cell`], [`add_cell`]: gort-sched's `timer_api` calls them) and [`del`];
//! [`Timers::add`] is Go's `addtimer` for a fresh timer (tests and examples). The design
//! reference is `design/TIMERS.md` (and the Go source it cites).
//!
//! # The specification
//!
//! The one specification of this crate is `design/TIMERS.md`: the statuses, every transition
//! with who performs it and under which lock, how each operation reacts to each status, who
//! touches each field, the memory orderings, the invariants ([`Timers::verify`] checks what
//! invariants 2-5 say of one heap, and its counters, under the lock), the deviations from Go
//! 1.19 and why, and the payload rule (payloads are released at once and dropped only with no
//! runtime lock held, outside every transient status). A unit test checks that it names every
//! [`Status`] and the operations the test lists.
//!
//! # Examples
//!
//! ```
//! use gort_timer::{del, modify, Timer, Timers};
//! use std::sync::atomic::{AtomicUsize, Ordering};
//! use std::sync::Arc;
//!
//! let p0 = Timers::new(0);
//! let fired = Arc::new(AtomicUsize::new(0));
//! let tick = Timer::new();
//! let f = fired.clone();
//! tick.set_fire(Arc::new(move |_| { f.fetch_add(1, Ordering::SeqCst); }));
//! p0.add(&tick, 10, 10, &|_| {}); // periodic: 10, 20, 30, ...
//! assert_eq!(p0.check(35, true).ran, 1); // missed ticks are skipped, not burst
//! assert_eq!(tick.when(), 40);
//! modify(&tick, 100, 0, &p0, &|_| {}); // now a one-shot at 100, lazily
//! assert_eq!(p0.check(99, true).ran, 0);
//! assert_eq!(p0.check(100, true).ran, 1);
//! assert!(!del(&tick)); // it already ran
//! assert_eq!(fired.load(Ordering::SeqCst), 2);
//! ```

#![warn(missing_docs)]

mod cell;
mod clock;
mod entry;
mod heap;
mod lifecycle;
mod ops;
mod recycle;
mod run;
mod slots;
mod status;
mod target;
mod timer;
mod timers;
mod tref;

#[cfg(all(test, not(loom)))]
mod tests;

pub use cell::{CellFire, CellRef, CellTimer, TimerCell};
pub use clock::{
    deadline_after, epoch, nanotime, nanotime_exact, Nanos, RuntimeClock, CLOCK_TRAIL, NEVER,
};
pub use heap::{lateness_bucket, LATENESS_BUCKETS};
pub use lifecycle::{Released, TimerStats};
pub use ops::{add_cell, del, modify, modify_cell, modify_fire, reset};
pub use status::Status;
pub use timer::{Fire, Host, OwnerHost, Timer};
pub use timers::{min_nonzero, Checked, Timers};

/// `Timer` and `Timers` are shared across scheduler threads.
const _: () = {
    const fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<Timer>();
    assert_send_sync::<Timers>();
    assert_send_sync::<CellTimer>();
};
