//! A runtime's own clock: the real clock until a test pauses it, then a virtual one.
//!
//! Every runtime owns a [`RuntimeClock`] and makes it current on each of its threads (its
//! Ms, sysmon, its blocking-pool threads, and a thread inside its `block_on` or `enter`
//! guard). [`nanotime`](super::nanotime) reads the current thread's clock only while some
//! clock in the process is virtual ([`VIRTUAL_CLOCKS`] is non-zero): a runtime that is never
//! paused costs one relaxed load per reading.
//!
//! The state is a pair, whether paused and a value: the frozen reading (paused) or the offset
//! from the real clock (running; non-zero only after a pause and a resume). The value needs
//! all 64 bits (a paused clock reads up to [`NEVER`](super::NEVER), about 292 years), so the
//! pair is read under a sequence count (a seqlock), and a reader never sees half a
//! transition. (Packing the flag into the value's low bit lost its top bit: a jump past 146
//! years wrapped the clock to a negative reading and the poller M jumped again for ever,
//! `tests/abuse_paused.rs`.) Transitions are rare (pause, resume, a jump) and take a lock,
//! which serialises the writers and keeps [`VIRTUAL_CLOCKS`] exact.

use super::{real_nanotime_exact, Nanos};
use gort_loom::atomic::{
    fence, AtomicBool, AtomicI64, AtomicU64,
    Ordering::{Acquire, Relaxed, Release, SeqCst},
};
use gort_loom::{Mutex, MutexGuard};
use std::cell::Cell;
// The process-wide count is a `static`, which loom's atomics cannot be; the models cover one
// clock's seqlock (`tests/loom_runtime_clock.rs`), not the count.
use std::sync::atomic::AtomicUsize;

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
    /// Twice the number of transitions written, plus one while one is being written.
    seq: AtomicU64,
    /// Whether the clock is paused (written only under `transition`, read through `seq`).
    paused: AtomicBool,
    /// Paused, the frozen reading; running, the offset added to the real clock (0 for a clock
    /// that was never paused). Written only under `transition`, read through `seq`.
    value: AtomicI64,
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
    pub fn new() -> RuntimeClock {
        RuntimeClock {
            seq: AtomicU64::new(0),
            paused: AtomicBool::new(false),
            value: AtomicI64::new(0),
            transition: Mutex::new(()),
            holds: AtomicUsize::new(0),
        }
    }

    /// Now, on this clock (ns since the process's clock epoch, like [`nanotime`](super::nanotime)).
    ///
    /// A running clock reads the real clock inside the seqlock's window: a reading taken after
    /// a concurrent `pause` froze the clock would be later than the frozen one, and the clock
    /// would go back (by the reader's delay, tens of microseconds under load:
    /// `tests/abuse_paused.rs`). Readers and transitions read the real clock exactly, not by
    /// the counter's extrapolation, which trails it by up to ~100 ns on one thread and not on
    /// another (the clock went back by 5 ns). `nanotime` does not come here while no clock in
    /// the process is virtual (`current_virtual_now`): a clock's first pause, racing a
    /// thread preempted between that check and its reading, can still freeze below the
    /// reading that thread returns (the check stays first there: it is every timer's path).
    #[inline]
    pub fn now(&self) -> Nanos {
        // Never paused: the real clock, on its fast path (the scheduler's park paths read a
        // running runtime's clock here, next to a syscall). Read before the check, with a
        // fence pairing with the one a transition takes before its own reading: a `pause`
        // that the check did not see reads the real clock after this reading, and freezes
        // at or after it (the loom model found the clock going back without the fence).
        let real = super::real_nanotime();
        fence(SeqCst);
        if self.seq.load(Relaxed) == 0 {
            return real;
        }
        self.read(|paused, value| {
            if paused {
                value
            } else {
                real_nanotime_exact().saturating_add(value)
            }
        })
    }

    /// Whether the clock is paused.
    #[inline]
    pub fn is_paused(&self) -> bool {
        // Never paused: one load, on the scheduler's paths of a running runtime.
        self.seq.load(Acquire) != 0 && self.read(|paused, _| paused)
    }

    /// `f(paused, value)` of one transition: the reader's side of the seqlock. A writer holds
    /// the transition lock for a few stores, so a reader that meets one retries briefly.
    #[inline]
    fn read<T>(&self, f: impl Fn(bool, Nanos) -> T) -> T {
        loop {
            let before = self.seq.load(Acquire);
            if before & 1 == 0 {
                let out = f(self.paused.load(Relaxed), self.value.load(Relaxed));
                // Orders the loads and the real-clock read in `f` before the re-read of
                // `seq`: if it is unchanged, no transition began before they were done
                // (SeqCst, to pair with the writer's fence around its own real-clock read).
                fence(SeqCst);
                if self.seq.load(Relaxed) == before {
                    return out;
                }
            }
            gort_loom::yield_now();
        }
    }

    /// The writer's side of the seqlock, under the transition lock (`_t`): `f` maps the state
    /// to the new one (`None`: unchanged). Readers retry while it runs, so a real-clock
    /// reading `f` takes is later than every reading a reader returns from the old state.
    fn transition(
        &self,
        _t: &MutexGuard<'_, ()>,
        f: impl FnOnce(bool, Nanos) -> Option<(bool, Nanos)>,
    ) -> Option<(bool, Nanos)> {
        // Only writers store, and they hold the lock: these two are of one transition.
        let (paused, value) = (self.paused.load(Relaxed), self.value.load(Relaxed));
        let seq = self.seq.load(Relaxed);
        self.seq.store(seq + 1, Relaxed);
        // The odd count is visible before `f` reads the real clock and before the stores.
        fence(SeqCst);
        let next = f(paused, value);
        if let Some((paused, value)) = next {
            self.paused.store(paused, Relaxed);
            self.value.store(value, Relaxed);
        }
        self.seq.store(seq + 2, Release);
        next
    }

    /// Freezes the clock at its current reading. Returns false if it was already paused.
    pub fn pause(&self) -> bool {
        let t = self.lock();
        if self.is_paused() {
            return false;
        }
        if self.value.load(Relaxed) == 0 {
            // Before the transition: readers of this clock start reading it here first.
            VIRTUAL_CLOCKS.fetch_add(1, SeqCst);
        }
        self.transition(&t, |_, offset| {
            Some((true, real_nanotime_exact().saturating_add(offset)))
        })
        .is_some()
    }

    /// Lets the clock run again from the paused reading on (at the real clock's rate).
    /// Returns false if it was not paused.
    pub fn resume(&self) -> bool {
        let t = self.lock();
        let done = self.transition(&t, |paused, frozen| {
            paused.then(|| (false, frozen - real_nanotime_exact()))
        });
        if done == Some((false, 0)) {
            VIRTUAL_CLOCKS.fetch_sub(1, SeqCst);
        }
        done.is_some()
    }

    /// Moves a paused clock forward to `to`. Returns false (and does nothing) if the clock
    /// runs or already reads `to` or later: time never goes back.
    pub fn jump_to(&self, to: Nanos) -> bool {
        let t = self.lock();
        self.transition(&t, |paused, frozen| {
            (paused && to > frozen).then_some((true, to))
        })
        .is_some()
    }

    /// The transition lock.
    fn lock(&self) -> MutexGuard<'_, ()> {
        self.transition.lock()
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
        if self.paused.load(Relaxed) || self.value.load(Relaxed) != 0 {
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
