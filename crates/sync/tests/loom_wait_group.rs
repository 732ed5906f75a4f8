//! loom model of `WaitGroup` on the real source: the last `done` wakes a parked waiter (no
//! lost wake-up), and a waiter returns only after every `done`.
//!
//! Run with `RUSTFLAGS="--cfg loom" LOOM_MAX_PREEMPTIONS=2 cargo test --release -p gort-sync
//! --test loom_wait_group`.
#![cfg(loom)]

use std::sync::atomic::Ordering::SeqCst;

// The block_on of the channel crate's models: one copy for both crates.
#[path = "../../chan/tests/loom_support/mod.rs"]
mod loom_support;

use gort_sync::WaitGroup;
use loom::sync::atomic::AtomicUsize;
use loom::sync::Arc;
use loom::thread;
use loom_support::block_on;

#[test]
fn last_done_wakes_the_waiter() {
    loom::model(|| {
        let wg = WaitGroup::new();
        let finished = Arc::new(AtomicUsize::new(0));
        wg.add(2);
        let workers: Vec<_> = (0..2)
            .map(|_| {
                let (wg, finished) = (wg.clone(), finished.clone());
                thread::spawn(move || {
                    finished.fetch_add(1, SeqCst);
                    wg.done();
                })
            })
            .collect();
        block_on(wg.wait());
        assert_eq!(finished.load(SeqCst), 2, "wait returned before every done");
        for w in workers {
            w.join().unwrap();
        }
    });
}

#[test]
fn waiter_dropped_while_done_runs() {
    loom::model(|| {
        let wg = WaitGroup::new();
        wg.add(1);
        let worker = {
            let wg = wg.clone();
            thread::spawn(move || wg.done())
        };
        {
            // Poll once (maybe parks), then drop: must not disturb `done`.
            let mut wait = Box::pin(wg.wait());
            let waker = futures::task::noop_waker();
            let mut cx = std::task::Context::from_waker(&waker);
            let _ = std::future::Future::poll(wait.as_mut(), &mut cx);
        }
        worker.join().unwrap();
        block_on(wg.wait());
        assert_eq!(wg.count(), 0);
    });
}
