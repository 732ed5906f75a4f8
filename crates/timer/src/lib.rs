//! Go 1.19's per-P timer heaps and atomic timer state machine (`runtime/time.go`), ported to
//! Rust and runtime-agnostic: no threads, tasks or channels here. A scheduler owns one
//! [`Timers`] per P and calls [`Timers::check`] every scheduling round; a time library
//! creates [`Timer`]s and arms, stops and re-arms them with [`Timers::add`], [`del`] and
//! [`modify`]. The design reference is `design/TIMERS.md` (and the Go source it cites).
//!
//! # The state machine
//!
//! Statuses (abbreviated): NS `NoStatus`, Wt `Waiting`, Run `Running`, Del `Deleted`, Rmg
//! `Removing`, Rmd `Removed`, Mod `Modifying`, ME `ModifiedEarlier`, ML `ModifiedLater`, Mov
//! `Moving`. "A→B" is a CAS from the column's status to A, work, then a CAS to B; "wait"
//! spins (`yield_now`) and reloads; "panic" is `gort: timer data corruption: ...`.
//! Lock-holder rows (L) run under the heap lock and only see timers of that heap.
//!
//! | operation          | NS          | Wt          | Run   | Del          | Rmg   | Rmd         | Mod  | ME / ML      | Mov   |
//! |--------------------|-------------|-------------|-------|--------------|-------|-------------|------|--------------|-------|
//! | `add`              | Mod→Wt ¹    | panic       | panic | panic        | panic | panic       | panic| panic        | panic |
//! | `del`              | false       | Mod→Del ²   | wait  | false        | false | false       | wait | Mod→Del ²    | wait  |
//! | `modify`           | Mod→Wt ¹    | Mod→ME/ML ³ | wait  | Mod→ME/ML ³⁴ | wait  | Mod→Wt ¹    | wait | Mod→ME/ML ³  | wait  |
//! | `cleantimers` (L, root) | stop   | stop        | stop  | Rmg→Rmd      | stop  | stop        | stop | Mov→Wt ⁵     | stop  |
//! | `runtimer` (L, root)| panic      | Run→Wt/NS ⁶ | panic | Rmg→Rmd      | panic | panic       | wait | Mov→Wt ⁵     | panic |
//! | `adjust` (L, listed)| panic      | skip        | panic | Rmg→Rmd      | panic | panic       | wait | Mov→Wt ⁵     | panic |
//! | `clear_deleted` (L)| panic       | keep        | panic | Rmg→Rmd      | panic | panic       | wait | Mov→Wt ⁵     | panic |
//! | `move_to` (L, both)| panic       | Mov→Wt ⁷    | panic | Rmg→Rmd      | panic | panic       | wait | Mov→Wt ⁵⁷    | panic |
//! | `drain` (L)        | panic       | Rmg→Rmd ⁸   | panic | Rmg→Rmd      | panic | panic       | wait | Rmg→Rmd ⁸    | panic |
//!
//! 1. Insert into the heap (`add`: `self`; `modify`: `home`) under its lock, then CAS to
//!    `Waiting`, then `wake_netpoller(when)`. `add` accepts only NS.
//! 2. Returns true; bumps the owner's deleted count and takes the payload inside the window,
//!    drops the payload after it.
//! 3. Writes `nextwhen`; ME iff `when` < the heap key. ME: push on the owner's
//!    modified-earlier list, lower its summary, CAS, then `wake_netpoller(when)`. Returns
//!    true from Wt/ME/ML, false from Del.
//! 4. Resurrects in place (the entry is still heaped); decrements the owner's deleted count.
//! 5. `when = nextwhen`, re-positioned (root: remove + re-insert; `adjust`: re-sift at the
//!    recorded index; `clear_deleted`: compaction; `move_to`: insert into `dst`).
//! 6. Only if the root key `<= now` (else return it): claim the payload (one-shot: take it
//!    out; periodic: clone it), then periodic: re-key, sift down, Run→Wt; one-shot: remove,
//!    Run→NS. Unlock, run the payload (and drop it), relock.
//! 7. Owner cleared, inserted into `dst`.
//! 8. Owner cleared, payload taken (dropped after unlocking).
//!
//! Who owns what: the owner of a transient status (Run, Rmg, Mod, Mov) owns the timer
//! exclusively until it CASes out; a failed CAS out is corruption. Run, Rmg and Mov are taken
//! only under the heap lock; Mod is taken without any lock, and its holder never takes the
//! lock of a heap that holds the timer (only `home`'s, for a timer in no heap), so lock
//! holders may spin on Mod without deadlock. Go additionally runs Mod under `acquirem` (no
//! preemption); here callers are OS threads and tasks are never preempted mid-call, so a
//! descheduled holder only delays the spinners (see `design/TIMERS.md`).
//!
//! # Fields: who touches what
//!
//! | field | written by | read by |
//! |---|---|---|
//! | `Timer::status` | CAS by anyone, per the table | anyone |
//! | `Timer::owner` (Go's `pp`) | heap-lock holder owning a transient status (insert, remove, move) | Mod owner (dereferences, see below); lock holders (compare with self) |
//! | `Timer::when` (key copy) | heap-lock holder owning Run/Mov, or Mod owner before insertion | Mod owner (`modify`'s earlier test), lock holders, [`Timer::when`] |
//! | `Timer::nextwhen` | Mod owner | Mov owner under the lock |
//! | `Timer::period` | Mod owner (`add`, `modify`) | Run owner under the lock; [`reset`] (racy by contract, as in Go) |
//! | `Timer::index` | heap-lock holder on every move | heap-lock holder |
//! | `Timer::queued` | holder of the named heap's list lock | same |
//! | payload (`Timer::target`) | its own leaf lock: `set_*`, `del` (in Mod), `run_one` (in Run), `drain` | same |
//! | heap entries, counters in `Heap` | heap-lock holder | heap-lock holder |
//! | `timer0_when` | heap-lock holder | anyone (`wake_time`) |
//! | `modified_earliest` | lowered by Mod owners; zeroed by lock holders | anyone |
//! | `num`, `deleted`, `stopped` | lock holders; `deleted`/`stopped` also Mod owners | anyone (hints) |
//! | modified-earlier list | `modify` (push, Mod owner) and lock holders (take), under the list lock | same |
//!
//! Lock order: heap lock → list lock, heap lock → payload lock. `move_to` takes two heap
//! locks, lower id first. The list and payload locks are leaves.
//!
//! The owner pointer is safe to dereference for the holder of Mod taken from a heaped status
//! (Wt, Del, ME, ML): the pointee is the heap holding the timer, and that heap cannot be
//! freed before Mod is released, because `Timers::drop` runs [`Timers::drain`], which must
//! CAS every heaped timer out of its status and waits while it is Mod. `Timers` keeps its
//! state in a `Box`, so moving a `Timers` value does not move what timers point at.
//!
//! # Memory orderings
//!
//! - Status CAS: `AcqRel`. The status word hands the timer's plain fields (`owner`, `when`,
//!   `nextwhen`, `period`, all `Relaxed` atomics) from one owner to the next: taking a status
//!   acquires what the previous owner released on leaving one. Status loads are `Acquire`.
//! - `timer0_when` and `modified_earliest`: `SeqCst`. They are one side of a Dekker (store →
//!   load) hand-off with the scheduler: a submitter publishes a deadline and then, in
//!   `Host::wake_netpoller`, loads the poller's state; the poller publishes that it sleeps and
//!   then loads `wake_time`. With `SeqCst` on both sides one of them sees the other.
//! - The modified-earlier list is a mutex, and invariant 6 below rests on its ordering.
//! - `index`, `queued`, `num`, `deleted`, `stopped`: `Relaxed`; they are guarded by a lock
//!   or are hints.
//!
//! # Invariants
//!
//! 1. Heap entries and the `owner`/`when`/`index` of heaped timers change only under the heap
//!    lock, by the owner of a transient status.
//! 2. `owner` non-null ⇔ the timer is in that heap (outside windows under the lock).
//!    Heaped statuses: Wt, Del, ME, ML, and the transients; never NS or Rmd.
//! 3. Every heaped key is > 0 and equals the timer's `when`; the heap is 4-ary min-ordered.
//! 4. Lock free: `timer0_when` is the root key (0 if empty); `modified_earliest` is 0 or ≤
//!    the `nextwhen` of every ME timer in the heap, and is non-zero if there is one; an empty
//!    heap has `modified_earliest == 0` (go#51654). So `wake_time` never overstates.
//! 5. Every ME timer in a heap is on that heap's modified-earlier list.
//! 6. Publish order for modify-earlier: push on the list, *then* lower the summary, *then*
//!    CAS to ME. `adjust` zeroes the summary (after folding it into `timer0_when`), *then*
//!    takes the list, then processes each entry, waiting out Mod. Either the take sees the
//!    push (and `adjust` waits for and fixes the timer), or the push follows the take in the
//!    list lock's order, so the summary write follows the zeroing and survives.
//!
//! [`Timers::verify`] checks 1–5 under the lock.
//!
//! # Deviations from Go 1.19
//!
//! 1. go#41699: `adjusttimers` does not scan the heap. `modify` pushes a ME timer onto a
//!    per-`Timers` list (a small separate lock; once per arming, deduplicated by
//!    `Timer::queued`), and each timer records its heap index, so `adjust` re-sifts each
//!    listed timer in O(log n): O(k log n) for k modified timers. `modify` still never takes
//!    the lock of a heap holding the timer.
//! 2. `del` drops the payload at once (go#61542, go#60144); only the small heap entry waits
//!    for lazy removal.
//! 3. Periodic re-arm `when += period * (1 + (now - when) / period)` saturates to [`NEVER`]
//!    instead of relying on wrap-around.
//! 4. The callback receives the deadline `when` that came due ([`Fire::fire`]).
//! 5. The owner pointer is made sound as described above (`Timers` boxes its state and
//!    drains on drop).
//! 6. `add` claims the timer by CAS `NoStatus → Modifying` and publishes `Waiting` after the
//!    insertion (Go stores `Waiting` up front on a timer it assumes unpublished; an `Arc`
//!    may already be shared). A non-fresh timer panics instead of corrupting a heap.
//! 7. `del` counts the deleted entry before leaving Modifying (Go: after), so the count
//!    never goes below the truth (design/reference/go-timers.md §7.7) and the owner is never touched after
//!    Modifying ends.
//! 8. `move_to` removes stopped timers through Removing (Go: Deleted → Removed directly,
//!    safe only under stop-the-world), zeroes every summary of the source (1.23's `take`),
//!    calls `wake_netpoller` when the destination's earliest deadline dropped, and locks
//!    in id order rather than requiring stop-the-world.
//! 9. `adjust` and `clear_deleted` fold `modified_earliest` into `timer0_when` before
//!    zeroing it (Go 1.23's order), so lock-free readers do not lose the known modified
//!    deadline while the heap is re-keyed.
//! 10. `check` returns `min(root key, modified_earliest)` as the next deadline (Go: the root
//!     key only, though a modified-earlier timer may be due before it).
//! 11. `cleantimers` never bails out for preemption (there is no preemption here).
//! 12. The payload is claimed while the timer is still Running (a one-shot run consumes it),
//!     so a racing `del` that returns false never dropped the callback about to run, and a
//!     racing [`Timer::set_waker`] is either taken by the run or sees it finished.
//! 13. A one-shot run releases its callback (Go keeps `f`): see the payload rule (TIMERS.md
//!     deviation 17).
//!
//! # The payload rule
//!
//! Payloads (callbacks, wakers, what they capture) are user code. They are dropped only with
//! no heap lock held and outside every transient status, and a fired (one-shot) or stopped
//! timer's payload is released at once, never kept by an entry awaiting lazy removal. A
//! payload's `Drop` may therefore call anything, even re-arm timers on the same heap. A
//! timer whose last reference a heap lets go of under its lock is freed through
//! `Timer::release`, which defers its payload, if any, to after the unlock;
//! [`Timers::move_to`], which the scheduler calls under its own lock, returns such payloads
//! as [`Released`] for the caller to drop after unlocking. design/TIMERS.md has the table of
//! every place a payload leaves its timer.
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

mod clock;
mod entry;
mod heap;
mod lifecycle;
mod ops;
mod run;
mod slots;
mod status;
mod timer;
mod timers;

#[cfg(all(test, not(loom)))]
mod tests;

pub use clock::{deadline_after, epoch, nanotime, Nanos, NEVER};
pub use lifecycle::Released;
pub use ops::{del, modify, modify_fire, reset};
pub use status::Status;
pub use timer::{Fire, Host, Timer};
pub use timers::{Checked, TimerStats, Timers};

/// `Timer` and `Timers` are shared across scheduler threads.
const _: () = {
    const fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<Timer>();
    assert_send_sync::<Timers>();
};
