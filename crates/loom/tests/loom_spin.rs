//! loom model of [`gort_loom::SpinLock`] (the real one, `RealSpinLock` under loom): critical
//! sections never overlap (loom's cell checks it) and each sees the last one's writes (the
//! plain-store release).
//!
//! Run with `RUSTFLAGS="--cfg loom" LOOM_MAX_PREEMPTIONS=2 cargo test --release -p gort-loom
//! --test loom_spin`.
#![cfg(loom)]

use gort_loom::{thread, Arc, RealSpinLock as SpinLock};

/// Two threads each add to a pair under the lock; no update is lost or torn.
#[test]
fn sections_exclude_each_other() {
    loom::model(|| {
        let lock = Arc::new(SpinLock::new((0u32, 0u32)));
        let threads: Vec<_> = (0..1)
            .map(|_| {
                let lock = lock.clone();
                thread::spawn(move || {
                    lock.with(|(a, b)| {
                        *a += 1;
                        *b += 1;
                    })
                })
            })
            .collect();
        lock.with(|(a, b)| {
            assert_eq!(a, b, "a section saw another one's half-done update");
            *a += 1;
            *b += 1;
        });
        for t in threads {
            t.join().unwrap();
        }
        assert_eq!(lock.with(|pair| *pair), (2, 2));
    });
}

/// Three threads, one section each, at most one preemption: a waiter that loses the CAS to a
/// third thread waits again. (With more preemptions loom explores every count of a waiter's
/// spins, which does not end in reasonable time.)
#[test]
fn a_waiter_that_loses_the_race_waits_again() {
    let mut model = loom::model::Builder::new();
    model.preemption_bound = Some(1);
    model.check(|| {
        let lock = Arc::new(SpinLock::new(0u32));
        let threads: Vec<_> = (0..2)
            .map(|_| {
                let lock = lock.clone();
                thread::spawn(move || lock.with(|n| *n += 1))
            })
            .collect();
        lock.with(|n| *n += 1);
        for t in threads {
            t.join().unwrap();
        }
        assert_eq!(lock.with(|n| *n), 3);
    });
}
