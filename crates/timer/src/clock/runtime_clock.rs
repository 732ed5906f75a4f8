//! A runtime's own clock: the real clock until a test pauses it, then a virtual one.
//!
//! Every runtime owns a [`RuntimeClock`] and makes it current on each of its threads (its
//! Ms, sysmon, its blocking-pool threads, and a thread inside its `block_on` or `enter`
//! guard). [`nanotime`](super::nanotime) reads the current thread's clock only while some
//! clock in the process is virtual ([`VIRTUAL_CLOCKS`] is non-zero): a runtime that is never
//! paused costs one relaxed load per reading.
//!
//! The state is one word, so a reader never sees half a transition: bit 0 says paused; the
//! rest is the frozen reading (paused) or the offset from the real clock (running; non-zero
//! only after a pause and a resume). Transitions are rare (pause, resume, a jump) and take a
//! lock, which keeps [`VIRTUAL_CLOCKS`] exact.

use super::{real_nanotime, Nanos};
use std::cell::Cell;
use std::sync::atomic::{
    AtomicI64, AtomicUsize,
    Ordering::{Acquire, Relaxed, Release, SeqCst},
};
use std::sync::{Mutex, MutexGuard};

/// How many clocks in the process are not plain real time (paused, or resumed with an offset).
static VIRTUAL_CLOCKS: AtomicUsize = AtomicUsize::new(0);

thread_local! {
    /// The clock of the runtime this thread belongs to, or null. Set by the scheduler's
    /// context guard, which keeps the runtime (and so its clock) alive while it is set.
    static CURRENT: Cell<*const RuntimeClock> = const { Cell::new(std::ptr::null()) };
}

/// One runtime's clock. Real time until [`pause`](RuntimeClock::pause).
///
/// # Examples
///
/// ```
/// use gort_timer::RuntimeClock;
/// let clock = RuntimeClock::new();
/// clock.pause();
/// let t = clock.now();
/// assert_eq!(clock.now(), t); // frozen
/// assert!(clock.jump_to(t + 1_000_000_000));
/// assert_eq!(clock.now(), t + 1_000_000_000);
/// clock.resume();
/// assert!(clock.now() >= t + 1_000_000_000); // goes on from the paused instant
/// ```
pub struct RuntimeClock {
    /// `value << 1 | paused`: paused, `value` is the frozen reading; running, it is the offset
    /// added to the real clock (0 for a clock that was never paused).
    state: AtomicI64,
    /// Serialises transitions (and the count in `VIRTUAL_CLOCKS`).
    transition: Mutex<()>,
    /// Activities outside the Ps that keep a paused clock from jumping: a `block_on` future
    /// that runs or was woken, a task inside `block_in_place`.
    holds: AtomicUsize,
}

impl Default for RuntimeClock {
    fn default() -> Self {
        Self::new()
    }
}

impl RuntimeClock {
    /// A clock that reads the real time.
    pub const fn new() -> RuntimeClock {
        RuntimeClock {
            state: AtomicI64::new(0),
            transition: Mutex::new(()),
            holds: AtomicUsize::new(0),
        }
    }

    /// Now, on this clock (ns since the process's clock epoch, like [`nanotime`](super::nanotime)).
    #[inline]
    pub fn now(&self) -> Nanos {
        let s = self.state.load(Acquire);
        if s & 1 == 1 {
            s >> 1
        } else {
            real_nanotime() + (s >> 1)
        }
    }

    /// Whether the clock is paused.
    #[inline]
    pub fn is_paused(&self) -> bool {
        self.state.load(Acquire) & 1 == 1
    }

    /// Freezes the clock at its current reading. Returns false if it was already paused.
    pub fn pause(&self) -> bool {
        let _t = self.lock();
        let s = self.state.load(Acquire);
        if s & 1 == 1 {
            return false;
        }
        if s == 0 {
            VIRTUAL_CLOCKS.fetch_add(1, SeqCst);
        }
        let frozen = real_nanotime() + (s >> 1);
        self.state.store(frozen << 1 | 1, Release);
        true
    }

    /// Lets the clock run again from the paused reading on (at the real clock's rate).
    /// Returns false if it was not paused.
    pub fn resume(&self) -> bool {
        let _t = self.lock();
        let s = self.state.load(Acquire);
        if s & 1 == 0 {
            return false;
        }
        let offset = (s >> 1) - real_nanotime();
        self.state.store(offset << 1, Release);
        if offset == 0 {
            VIRTUAL_CLOCKS.fetch_sub(1, SeqCst);
        }
        true
    }

    /// Moves a paused clock forward to `to`. Returns false (and does nothing) if the clock
    /// runs or already reads `to` or later: time never goes back.
    pub fn jump_to(&self, to: Nanos) -> bool {
        let _t = self.lock();
        let s = self.state.load(Acquire);
        if s & 1 == 0 || to <= s >> 1 {
            return false;
        }
        self.state.store(to << 1 | 1, Release);
        true
    }

    /// The transition lock (nothing is done under it that could panic and poison it).
    fn lock(&self) -> MutexGuard<'_, ()> {
        self.transition.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Counts an activity that must finish before a paused clock may jump.
    #[inline]
    pub fn hold(&self) {
        self.holds.fetch_add(1, SeqCst);
    }

    /// Ends an activity counted by [`hold`](RuntimeClock::hold). Returns true when it was the
    /// last one: a paused runtime may have become quiescent.
    #[inline]
    pub fn release(&self) -> bool {
        let prev = self.holds.fetch_sub(1, SeqCst);
        debug_assert!(prev > 0, "gort: clock hold released twice");
        prev == 1
    }

    /// Activities now holding the clock.
    pub fn holds(&self) -> usize {
        self.holds.load(SeqCst)
    }

    /// Makes this clock the current thread's (`null` = none); returns the previous one.
    ///
    /// # Safety
    ///
    /// `clock` must stay alive until it is replaced on this thread (the scheduler's context
    /// guard keeps its runtime alive while its clock is current).
    pub unsafe fn set_current(clock: *const RuntimeClock) -> *const RuntimeClock {
        CURRENT
            .try_with(|c| c.replace(clock))
            .unwrap_or(std::ptr::null())
    }
}

impl Drop for RuntimeClock {
    fn drop(&mut self) {
        if *self.state.get_mut() != 0 {
            VIRTUAL_CLOCKS.fetch_sub(1, SeqCst);
        }
    }
}

/// This thread's runtime clock reading, when some clock in the process is virtual and this
/// thread belongs to a runtime; `None` means "read the real clock".
#[inline]
pub(super) fn current_virtual_now() -> Option<Nanos> {
    if VIRTUAL_CLOCKS.load(Relaxed) == 0 {
        return None;
    }
    current_now_slow()
}

#[inline(never)]
fn current_now_slow() -> Option<Nanos> {
    let clock = CURRENT.try_with(|c| c.get()).ok()?;
    // SAFETY: a non-null current clock is alive while it is set (`set_current`'s contract).
    unsafe { clock.as_ref() }.map(RuntimeClock::now)
}
