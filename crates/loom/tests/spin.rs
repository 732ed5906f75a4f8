//! [`gort_loom::SpinLock`] under real threads: exclusion under contention, release on panic.
#![cfg(not(loom))]

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;
use std::thread;

use gort_loom::SpinLock;

/// More threads than cores add to a counter (so holders get descheduled and waiters reach the
/// yield and nap stages); every increment lands.
#[test]
fn contended_increments_all_land() {
    const THREADS: u64 = 8;
    const EACH: u64 = 20_000;
    let lock = Arc::new(SpinLock::new(0u64));
    let threads: Vec<_> = (0..THREADS)
        .map(|_| {
            let lock = lock.clone();
            thread::spawn(move || {
                for _ in 0..EACH {
                    lock.with(|n| {
                        let seen = *n;
                        std::hint::black_box(());
                        *n = seen + 1;
                    });
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    assert_eq!(lock.with(|n| *n), THREADS * EACH);
}

/// A section that panics releases the lock on its way out.
#[test]
fn a_panicking_section_releases_the_lock() {
    let lock = SpinLock::new(1);
    let r = catch_unwind(AssertUnwindSafe(|| lock.with(|_| panic!("in the section"))));
    assert!(r.is_err());
    assert_eq!(lock.with(|n| *n), 1);
}
