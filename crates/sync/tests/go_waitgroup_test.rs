//! Ports of Go 1.19's `src/sync/waitgroup_test.go`, one test per Go test, named in its doc
//! comment. Goroutines are `gort::spawn`ed tasks, channels `gort::chan`; each test runs on a
//! fresh runtime of 1 P and of 4 under a watchdog.
//!
//! Not ported: the benchmarks (speed is measured by `benches/`, not by tests).

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicI32, Ordering::SeqCst};
use std::sync::Arc;

use gort::chan::bounded;
use gort::sync::WaitGroup;

#[path = "../../time/tests/support/watchdog.rs"]
mod watchdog;

use watchdog::on_1_and_4_procs;

/// Go's `testWaitGroup`: `n` tasks each `done` `wg1` then wait on `wg2`; none may pass
/// `wg2.wait()` before the last `wg2.done()`, and every one must pass after it.
async fn test_wait_group(wg1: &WaitGroup, wg2: &WaitGroup) {
    let n = 16;
    wg1.add(n);
    wg2.add(n);
    let (exited_tx, exited) = bounded(n as usize);
    for _ in 0..n {
        let (wg1, wg2, exited_tx) = (wg1.clone(), wg2.clone(), exited_tx.clone());
        gort::spawn(async move {
            wg1.done();
            wg2.wait().await;
            exited_tx.send(true).await.unwrap();
        });
    }
    wg1.wait().await;
    for _ in 0..n {
        assert!(
            exited.try_recv().is_err(),
            "WaitGroup released group too soon"
        );
        wg2.done();
    }
    for _ in 0..n {
        exited.recv().await.unwrap(); // Will block if barrier fails to unlock someone.
    }
}

/// Go: TestWaitGroup. The same two groups reused 8 times: a group is a barrier in a proper
/// state after each use.
#[test]
fn wait_group() {
    on_1_and_4_procs(|| async {
        let (wg1, wg2) = (WaitGroup::new(), WaitGroup::new());
        for _ in 0..8 {
            test_wait_group(&wg1, &wg2).await;
        }
    });
}

/// Go: TestWaitGroupMisuse. A second `done` after `add(1)` panics with Go's message.
#[test]
fn wait_group_misuse() {
    let wg = WaitGroup::new();
    wg.add(1);
    wg.done();
    let panic = catch_unwind(AssertUnwindSafe(|| wg.done())).expect_err("Should panic");
    let message = panic
        .downcast_ref::<String>()
        .map(String::as_str)
        .or_else(|| panic.downcast_ref::<&str>().copied());
    assert_eq!(message, Some("sync: negative WaitGroup counter"));
    assert_eq!(wg.count(), 0, "the counter is left unchanged");
}

/// Go: TestWaitGroupRace. Two tasks each bump a counter then `done`: `wait` never returns
/// before both bumps (a spurious wake-up would see fewer), 1000 times.
#[test]
fn wait_group_race() {
    on_1_and_4_procs(|| async {
        for _ in 0..1000 {
            let wg = WaitGroup::new();
            let n = Arc::new(AtomicI32::new(0));
            for _ in 0..2 {
                wg.add(1);
                let (wg, n) = (wg.clone(), n.clone());
                gort::spawn(async move {
                    n.fetch_add(1, SeqCst);
                    wg.done();
                });
            }
            wg.wait().await;
            assert_eq!(n.load(SeqCst), 2, "Spurious wakeup from Wait");
        }
    });
}

/// Go: TestWaitGroupAlign. A group in a struct after a byte, `done` from another task
/// (Go checks its 64-bit atomics' alignment; here the group is an `Arc`, so this checks
/// that a group embedded in a shared struct works).
#[test]
fn wait_group_align() {
    struct X {
        _x: u8,
        wg: WaitGroup,
    }
    on_1_and_4_procs(|| async {
        let x = Arc::new(X {
            _x: 0,
            wg: WaitGroup::new(),
        });
        x.wg.add(1);
        let x2 = x.clone();
        gort::spawn(async move { x2.wg.done() });
        x.wg.wait().await;
    });
}
