//! One switch between `std`/`parking_lot` and [loom] for every atomic, lock, cell and thread
//! that gort's concurrent cores use.
//!
//! Code in gort never names `std::sync::atomic`, `parking_lot` or `std::cell::UnsafeCell`
//! directly in a data structure that a loom model covers; it names `gort_loom::...` instead, so
//! that `RUSTFLAGS="--cfg loom"` swaps in loom's instrumented versions (the habit of
//! `tokio/src/loom/mod.rs`). Under loom, [`Mutex`] is loom's mutex wrapped to keep
//! parking_lot's non-poisoning API, and [`UnsafeCell`] exposes loom's `with`/`with_mut` access
//! in both builds. [`SpinLock`] is loom's mutex under loom too (a spinning waiter makes loom
//! explore every count of its spins); its own model runs the real one, `RealSpinLock`.
//!
//! [loom]: https://docs.rs/loom

#![warn(missing_docs)]

mod spin;
#[cfg(not(loom))]
pub use spin::SpinLock;
/// The real [`SpinLock`] built from loom's atomics, for its own model (`tests/loom_spin.rs`);
/// every other model locks with loom's mutex instead, whose waiters loom sees block.
#[cfg(loom)]
pub use spin::SpinLock as RealSpinLock;
pub use spin::Stamp;

#[cfg(not(loom))]
mod imp {
    pub use std::sync::atomic;
    pub use std::sync::Arc;
    pub use std::thread;

    /// A mutex without poisoning (parking_lot's, outside loom).
    pub type Mutex<T> = parking_lot::Mutex<T>;
    /// The guard of [`Mutex`].
    pub type MutexGuard<'a, T> = parking_lot::MutexGuard<'a, T>;

    /// A lock of one byte guarding no value of its own, reached only through
    /// [`RawLock::with`]: for a structure that keeps what it guards in cells beside the lock,
    /// so that small fields can share the lock's word (a [`Mutex`] of `T` puts `T` after the
    /// lock, aligned, and the padding between is lost). parking_lot's raw mutex: waiters
    /// park, as on a [`Mutex`].
    pub struct RawLock(parking_lot::RawMutex);

    impl RawLock {
        /// A new, unlocked lock.
        pub const fn new() -> Self {
            RawLock(<parking_lot::RawMutex as parking_lot::lock_api::RawMutex>::INIT)
        }

        /// Runs `f` with the lock held, and releases it (also if `f` panics).
        #[inline]
        pub fn with<R>(&self, f: impl FnOnce() -> R) -> R {
            use parking_lot::lock_api::RawMutex as _;

            /// Unlocks on drop.
            struct Unlock<'a>(&'a parking_lot::RawMutex);
            impl Drop for Unlock<'_> {
                #[inline]
                fn drop(&mut self) {
                    // SAFETY: `with` locked this mutex on this thread just before building
                    // the guard, and nothing else unlocks it.
                    unsafe { self.0.unlock() }
                }
            }
            self.0.lock();
            let _unlock = Unlock(&self.0);
            f()
        }
    }

    impl Default for RawLock {
        fn default() -> Self {
            RawLock::new()
        }
    }

    impl std::fmt::Debug for RawLock {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("RawLock")
        }
    }

    /// A condition variable for [`Mutex`] (parking_lot's, outside loom), taking and returning
    /// the guard by value as std's and loom's do.
    #[derive(Debug, Default)]
    pub struct Condvar(parking_lot::Condvar);

    impl Condvar {
        /// A new condition variable.
        pub const fn new() -> Self {
            Condvar(parking_lot::Condvar::new())
        }
        /// Blocks until notified (or spuriously), unlocking `guard` meanwhile.
        pub fn wait<'a, T>(&self, mut guard: MutexGuard<'a, T>) -> MutexGuard<'a, T> {
            self.0.wait(&mut guard);
            guard
        }
        /// [`Condvar::wait`] for at most `timeout`; the flag says whether it timed out.
        pub fn wait_timeout<'a, T>(
            &self,
            mut guard: MutexGuard<'a, T>,
            timeout: std::time::Duration,
        ) -> (MutexGuard<'a, T>, bool) {
            let timed_out = self.0.wait_for(&mut guard, timeout).timed_out();
            (guard, timed_out)
        }
        /// Wakes one waiter.
        pub fn notify_one(&self) {
            self.0.notify_one();
        }
        /// Wakes every waiter.
        pub fn notify_all(&self) {
            self.0.notify_all();
        }
    }

    /// `std::cell::UnsafeCell` with loom's closure-based access, so one source serves both builds.
    #[derive(Debug, Default)]
    pub struct UnsafeCell<T>(std::cell::UnsafeCell<T>);

    impl<T> UnsafeCell<T> {
        /// Wraps `value`.
        pub const fn new(value: T) -> Self {
            UnsafeCell(std::cell::UnsafeCell::new(value))
        }
        /// Runs `f` with a shared raw pointer to the value.
        #[inline(always)]
        pub fn with<R>(&self, f: impl FnOnce(*const T) -> R) -> R {
            f(self.0.get())
        }
        /// Runs `f` with a unique raw pointer to the value.
        #[inline(always)]
        pub fn with_mut<R>(&self, f: impl FnOnce(*mut T) -> R) -> R {
            f(self.0.get())
        }
        /// Returns the value.
        pub fn into_inner(self) -> T {
            self.0.into_inner()
        }
    }

    /// Spin-loop hint (a loom yield point under loom).
    #[inline(always)]
    pub fn spin_loop() {
        std::hint::spin_loop()
    }

    /// Gives up the CPU while waiting for another thread (a loom yield point under loom).
    #[inline(always)]
    pub fn yield_now() {
        std::thread::yield_now()
    }
}

#[cfg(loom)]
mod imp {
    pub use loom::cell::UnsafeCell;
    pub use loom::sync::atomic;
    pub use loom::sync::Arc;
    pub use loom::thread;

    /// loom's mutex with parking_lot's API (no poisoning).
    #[derive(Debug, Default)]
    pub struct Mutex<T>(loom::sync::Mutex<T>);
    /// The guard of [`Mutex`].
    pub type MutexGuard<'a, T> = loom::sync::MutexGuard<'a, T>;

    impl<T> Mutex<T> {
        /// Wraps `value`.
        pub fn new(value: T) -> Self {
            Mutex(loom::sync::Mutex::new(value))
        }
        /// Locks, ignoring poisoning.
        pub fn lock(&self) -> MutexGuard<'_, T> {
            self.0.lock().unwrap_or_else(|e| e.into_inner())
        }
        /// Tries to lock without blocking.
        pub fn try_lock(&self) -> Option<MutexGuard<'_, T>> {
            self.0.try_lock().ok()
        }
    }

    /// `RawLock`'s API on loom's mutex of `()`.
    #[derive(Debug, Default)]
    pub struct RawLock(loom::sync::Mutex<()>);

    impl RawLock {
        /// A new, unlocked lock.
        pub fn new() -> Self {
            RawLock(loom::sync::Mutex::new(()))
        }
        /// Runs `f` with the lock held.
        pub fn with<R>(&self, f: impl FnOnce() -> R) -> R {
            let _held = self.0.lock().unwrap_or_else(|e| e.into_inner());
            f()
        }
    }

    /// [`SpinLock`](crate::SpinLock)'s API on loom's mutex (see the crate docs), with its
    /// stamp in a counter of its own, stepped under the mutex as the real lock word is.
    #[derive(Debug)]
    pub struct SpinLock<T>(loom::sync::Mutex<T>, atomic::AtomicUsize);

    impl<T> SpinLock<T> {
        /// Wraps `value`.
        pub fn new(value: T) -> Self {
            SpinLock(loom::sync::Mutex::new(value), atomic::AtomicUsize::new(0))
        }
        /// Runs `f` on the value with the lock held.
        pub fn with<R>(&self, f: impl FnOnce(&mut T) -> R) -> R {
            self.with_stamp(f).0
        }
        /// [`with`](SpinLock::with), also returning the section's stamp.
        pub fn with_stamp<R>(&self, f: impl FnOnce(&mut T) -> R) -> (R, crate::Stamp) {
            use atomic::Ordering::{Relaxed, Release};
            let mut guard = self.0.lock().unwrap_or_else(|e| e.into_inner());
            let before = self.1.load(Relaxed);
            self.1.store(before + 1, Relaxed);
            let r = f(&mut guard);
            let after = before + 2;
            self.1.store(after, Release);
            drop(guard);
            (r, crate::Stamp { before, after })
        }
    }

    impl<T: Default> Default for SpinLock<T> {
        fn default() -> Self {
            SpinLock::new(T::default())
        }
    }

    /// loom's condition variable, with the facade's API. Its timed wait never times out
    /// under loom, so a model cannot lean on a timeout to hide a lost wake-up.
    #[derive(Debug, Default)]
    pub struct Condvar(loom::sync::Condvar);

    impl Condvar {
        /// A new condition variable.
        pub fn new() -> Self {
            Condvar(loom::sync::Condvar::new())
        }
        /// Blocks until notified, unlocking `guard` meanwhile.
        pub fn wait<'a, T>(&self, guard: MutexGuard<'a, T>) -> MutexGuard<'a, T> {
            self.0.wait(guard).unwrap_or_else(|e| e.into_inner())
        }
        /// [`Condvar::wait`]; loom never times out (the flag is always false).
        pub fn wait_timeout<'a, T>(
            &self,
            guard: MutexGuard<'a, T>,
            _timeout: std::time::Duration,
        ) -> (MutexGuard<'a, T>, bool) {
            (self.wait(guard), false)
        }
        /// Wakes one waiter.
        pub fn notify_one(&self) {
            self.0.notify_one();
        }
        /// Wakes every waiter.
        pub fn notify_all(&self) {
            self.0.notify_all();
        }
    }

    /// A loom yield point.
    pub fn spin_loop() {
        loom::thread::yield_now()
    }

    /// A loom yield point.
    pub fn yield_now() {
        loom::thread::yield_now()
    }
}

pub use imp::*;
