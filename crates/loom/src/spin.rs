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

use std::fmt;

use crate::atomic::{AtomicBool, Ordering::*};
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
    locked: AtomicBool,
    value: UnsafeCell<T>,
}

// SAFETY: the value is reached only by the thread that holds the lock (`with`), whose acquire
// (an `Acquire` CAS) reads the previous holder's `Release` store; so `T: Send` is enough, as
// for `std::sync::Mutex`.
unsafe impl<T: Send> Sync for SpinLock<T> {}
// SAFETY: as above; moving the lock moves the value.
unsafe impl<T: Send> Send for SpinLock<T> {}

impl<T> SpinLock<T> {
    /// A new, unlocked lock holding `value`.
    pub fn new(value: T) -> Self {
        SpinLock {
            locked: AtomicBool::new(false),
            value: UnsafeCell::new(value),
        }
    }

    /// Runs `f` on the value with the lock held, and releases it (also if `f` panics).
    #[inline]
    pub fn with<R>(&self, f: impl FnOnce(&mut T) -> R) -> R {
        self.acquire();
        let _unlock = Unlock(&self.locked);
        // SAFETY: we hold the lock, so no other thread reaches the value until `_unlock`
        // stores `false`, after `f` returned (module docs).
        self.value.with_mut(|p| f(unsafe { &mut *p }))
    }

    #[inline]
    fn acquire(&self) {
        if self
            .locked
            .compare_exchange_weak(false, true, Acquire, Relaxed)
            .is_err()
        {
            self.acquire_contended();
        }
    }

    /// The waiting path: test (a plain load, so waiters do not bounce the line with locked
    /// instructions) until free, then try to set; back off between looks (module docs).
    #[cold]
    #[inline(never)]
    fn acquire_contended(&self) {
        let mut waits = 0;
        loop {
            while self.locked.load(Relaxed) {
                wait(&mut waits);
            }
            if self
                .locked
                .compare_exchange_weak(false, true, Acquire, Relaxed)
                .is_ok()
            {
                return;
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

/// Releases the lock when dropped: the plain store this lock is for.
struct Unlock<'a>(&'a AtomicBool);

impl Drop for Unlock<'_> {
    #[inline]
    fn drop(&mut self) {
        self.0.store(false, Release);
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
            .field("locked", &self.locked.load(Relaxed))
            .finish_non_exhaustive()
    }
}
