//! Loom models of a stream's write lock (`gort_net::write_lock`, the real source through
//! `gort_loom`): writers that take it, wait for it, and give their place up, in every
//! interleaving. Invariants:
//!
//! - mutual exclusion: two guards never live at once;
//! - no lost wake-up: a writer left `Pending` is woken once the lock is free and it is first,
//!   also when the writer ahead of it gave its place up (its `Acquire` dropped);
//! - the word is back to free with nobody queued when every writer is done.
//!
//! A writer's task is the channel models' `block_on`: it waits for its waker between polls,
//! so a lost wake-up leaves every thread blocked, which loom reports as a deadlock.
//!
//! Run: `RUSTFLAGS="--cfg loom" LOOM_MAX_PREEMPTIONS=2 cargo test --release -p gort-net --test loom_write_lock`
#![cfg(loom)]

use gort_loom::atomic::{AtomicBool, Ordering::SeqCst};
use gort_loom::thread;
use gort_net::write_lock::{WriteGuard, WriteLock};
use std::sync::Arc;
use std::task::Poll;

// The channel models' `block_on` (a lost wake-up shows as a loom deadlock) and `poll_once`.
#[path = "../../chan/tests/loom_support/mod.rs"]
mod loom_support;
use loom_support::{block_on, poll_once};

/// Takes the lock as a task would.
fn take(lock: &WriteLock) -> WriteGuard<'_> {
    block_on(lock.lock())
}

/// Holds the lock for one step, checking that nobody else holds it.
fn hold(lock: &WriteLock, inside: &AtomicBool) {
    let guard = take(lock);
    assert!(!inside.swap(true, SeqCst), "two writers hold the lock");
    inside.store(false, SeqCst);
    drop(guard);
}

#[test]
fn writers_exclude_each_other_and_each_gets_its_turn() {
    loom::model(|| {
        let lock = Arc::new(WriteLock::default());
        let inside = Arc::new(AtomicBool::new(false));
        let other = {
            let (lock, inside) = (lock.clone(), inside.clone());
            thread::spawn(move || hold(&lock, &inside))
        };
        hold(&lock, &inside);
        other.join().unwrap();
        assert!(lock.is_free_and_unqueued());
    });
}

#[test]
fn a_writer_that_gives_its_place_up_passes_the_turn_on() {
    loom::model(|| {
        let lock = Arc::new(WriteLock::default());
        let held = take(&lock);
        let quitter = {
            let lock = lock.clone();
            thread::spawn(move || {
                let mut acquire = lock.lock();
                // Pending behind the holder, or the lock was already free: either way the
                // future is dropped with its guard (if any) at once.
                if let Poll::Ready(guard) = poll_once(&mut acquire) {
                    drop(guard);
                }
            })
        };
        let waiter = {
            let lock = lock.clone();
            thread::spawn(move || drop(take(&lock)))
        };
        drop(held);
        quitter.join().unwrap();
        waiter.join().unwrap();
        assert!(lock.is_free_and_unqueued());
    });
}
