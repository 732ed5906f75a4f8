//! [`SpinLock`]: a lock for short critical sections that run no user code, released by a
//! plain store.
//!
//! parking_lot's (and a futex mutex's) release is a locked read-modify-write, because it must
//! see whether a waiter sleeps on the lock and wake it. A waiter here never sleeps on the lock
//! itself: it spins with an exponential backoff, then gives up the CPU (`yield_now`), then
//! sleeps for short fixed spells and looks again. Nobody needs waking, so the release is a
//! `Release` store: one locked instruction per critical section (the acquire) instead of two.
//!
//! The price is the waiter's when the holder is descheduled inside the critical section: it
//! spins about a microsecond, then yields, then naps ([`NAP`]) until the holder has run again.
//! So the lock is only for sections that are a few hundred instructions, never block and never
//! call out (no wakers, no drops of user values): the channel core's (CHANNELS.md).
//!
//! Under `--cfg loom` the lock is built from loom's atomics and cell, every wait is a loom
//! yield point, and loom checks that two critical sections never overlap.
//!
//! The lock word is also a stamp: it counts the critical sections (twice their number, plus
//! one while one runs), and [`SpinLock::with_stamp`] returns the word a section acquired and
//! the one it released: a later section that acquired an earlier one's release word knows
//! that none ran between them. A `select!` with `default` checks with it that the channels
//! it found not ready stayed so (CHANNELS.md, "`default` is a snapshot").

use std::fmt;

use crate::atomic::{AtomicUsize, Ordering::*};
use crate::UnsafeCell;

/// Spin rounds (each twice as long as the last, 2^0 + ... + 2^SPIN_ROUNDS hints) before a
/// waiter starts yielding the CPU: crossbeam-utils' `Backoff` spin limit.
#[cfg(not(loom))]
const SPIN_ROUNDS: u32 = 6;
/// Yields before a waiter starts to nap: the holder is descheduled, not merely busy.
#[cfg(not(loom))]
const YIELDS: u32 = 16;
/// A napping waiter's look interval: long enough not to burn a CPU the holder may need, short
/// against the OS time slice that descheduled the holder.
#[cfg(not(loom))]
const NAP: std::time::Duration = std::time::Duration::from_micros(50);

/// A mutual-exclusion lock whose release is a plain store (module docs), reached only through
/// [`SpinLock::with`] so that a guard is never held across an `await` or leaked.
pub struct SpinLock<T> {
    /// Even: free; odd: held. Each section adds 2 in all (1 to acquire, 1 to release), so
    /// the word is also the sections' count ([`Stamp`]). It wraps after 2^63 sections.
    state: AtomicUsize,
    value: UnsafeCell<T>,
}

/// The lock word around one critical section: what the section acquired and what its release
/// stored. A later section of the same lock has `before == ` an earlier one's `after` exactly
/// when none ran between them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Stamp {
    /// The (even) word the section acquired.
    pub before: usize,
    /// The (even) word its release stored.
    pub after: usize,
}

// SAFETY: the value is reached only by the thread that holds the lock (`with`), whose acquire
// (an `Acquire` read-modify-write) reads the previous holder's `Release` store; so `T: Send` is enough, as
// for `std::sync::Mutex`.
unsafe impl<T: Send> Sync for SpinLock<T> {}
// SAFETY: as above; moving the lock moves the value.
unsafe impl<T: Send> Send for SpinLock<T> {}

impl<T> SpinLock<T> {
    /// A new, unlocked lock holding `value`.
    pub fn new(value: T) -> Self {
        SpinLock {
            state: AtomicUsize::new(0),
            value: UnsafeCell::new(value),
        }
    }

    /// Runs `f` on the value with the lock held, and releases it (also if `f` panics).
    #[inline]
    pub fn with<R>(&self, f: impl FnOnce(&mut T) -> R) -> R {
        self.with_stamp(f).0
    }

    /// [`with`](SpinLock::with), also returning the section's [`Stamp`].
    #[inline]
    pub fn with_stamp<R>(&self, f: impl FnOnce(&mut T) -> R) -> (R, Stamp) {
        let before = self.acquire();
        let after = before.wrapping_add(2);
        let unlock = Unlock(&self.state, after);
        // SAFETY: we hold the lock, so no other thread reaches the value until `unlock`
        // stores the next even word, after `f` returned (module docs).
        let r = self.value.with_mut(|p| f(unsafe { &mut *p }));
        drop(unlock);
        (r, Stamp { before, after })
    }

    /// Takes the lock; returns the (even) word it held when free. The CAS needs the word
    /// (a count, no longer a flag), so it follows a load of it.
    #[inline]
    fn acquire(&self) -> usize {
        let s = self.state.load(Relaxed) & !1;
        if self
            .state
            .compare_exchange_weak(s, s + 1, Acquire, Relaxed)
            .is_ok()
        {
            return s;
        }
        self.acquire_contended()
    }

    /// The waiting path: test (a plain load, so waiters do not bounce the line with locked
    /// instructions) until free, then try to set; back off between looks (module docs).
    #[cold]
    #[inline(never)]
    fn acquire_contended(&self) -> usize {
        let mut waits = 0;
        loop {
            let s = self.state.load(Relaxed);
            if s & 1 == 0
                && self
                    .state
                    .compare_exchange_weak(s, s + 1, Acquire, Relaxed)
                    .is_ok()
            {
                return s;
            }
            wait(&mut waits);
        }
    }
}

/// One wait of a waiter that has waited `*waits` times: spin, then yield, then nap.
#[cfg(not(loom))]
fn wait(waits: &mut u32) {
    if *waits <= SPIN_ROUNDS {
        for _ in 0..1u32 << *waits {
            std::hint::spin_loop();
        }
    } else if *waits <= SPIN_ROUNDS + YIELDS {
        std::thread::yield_now();
    } else {
        std::thread::sleep(NAP);
    }
    *waits = waits.saturating_add(1);
}

/// Under loom every wait is one yield point (loom counts each as a branch of the model).
#[cfg(loom)]
fn wait(_waits: &mut u32) {
    loom::thread::yield_now();
}

/// Releases the lock when dropped (also on unwind): the plain store this lock is for, of the
/// next even word.
struct Unlock<'a>(&'a AtomicUsize, usize);

impl Drop for Unlock<'_> {
    #[inline]
    fn drop(&mut self) {
        self.0.store(self.1, Release);
    }
}

impl<T: Default> Default for SpinLock<T> {
    fn default() -> Self {
        SpinLock::new(T::default())
    }
}

impl<T> fmt::Debug for SpinLock<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SpinLock")
            .field("locked", &(self.state.load(Relaxed) & 1 == 1))
            .finish_non_exhaustive()
    }
}
