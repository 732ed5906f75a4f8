//! Tokio's `coop_budget.rs`, `join_handle_panic.rs` and `rt_time_start_paused.rs`, ported to
//! gort: each test keeps its Tokio name and a comment naming its file, under a watchdog.
//!
//! Tokio's `#[tokio::test]` body runs on the current-thread runtime's one worker, beside the
//! tasks it spawns; gort's `block_on` runs on its own thread, beside the Ps. So the budget
//! test runs its body as a task on a runtime of one P (`task_on_one_p`), sharing that P with the
//! task it spawns, as Tokio's does.

mod support;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;
use support::{one_p, paused, task_on_one_p, within, PanicsOnDrop};

/// The cooperative budget: ready operations per task poll (Tokio's and gort's).
const BUDGET: usize = 128;

// coop_budget.rs: two connected UDP sockets on loopback never say `WouldBlock`, so the loop
// below yields only when its budget is spent: once per 64 packets (a send and a receive each
// spend a unit), each time letting the counting task run once. The budget runs out before
// packets 65, 129, ..., 961: 15 turns in 1024 packets, which gort gives exactly (an extra turn
// and a missing one both fail). Tokio's test asserts 1024 / 64 = 16 for its current-thread
// scheduler, whose counting task gets one turn more.
#[test]
fn coop_budget_udp_send_recv() {
    task_on_one_p(|| async {
        const N_ITERATIONS: usize = 1024;
        const PACKET: &[u8] = b"Hello, world";
        const PACKET_LEN: usize = 12;

        let tx = gort::net::UdpSocket::bind("127.0.0.1:0").await.unwrap();
        let rx = gort::net::UdpSocket::bind("127.0.0.1:0").await.unwrap();
        tx.connect(rx.local_addr().unwrap()).await.unwrap();
        rx.connect(tx.local_addr().unwrap()).await.unwrap();

        let tracker = Arc::new(AtomicUsize::default());
        let tracker_clone = Arc::clone(&tracker);
        gort::yield_now().await;
        gort::spawn(async move {
            loop {
                tracker_clone.fetch_add(1, Ordering::SeqCst);
                gort::yield_now().await;
            }
        });
        for _ in 0..N_ITERATIONS {
            tx.send(PACKET).await.unwrap();
            let mut tmp = [0; PACKET_LEN];
            assert_eq!(PACKET_LEN, rx.recv(&mut tmp).await.unwrap());
            assert_eq!(PACKET, &tmp);
        }
        assert_eq!(
            N_ITERATIONS / (BUDGET / 2) - 1,
            tracker.load(Ordering::SeqCst)
        );
    });
}

// coop_budget.rs
#[test]
fn test_has_budget_remaining() {
    task_on_one_p(|| async {
        // At the beginning, budget should be available.
        assert!(gort::task::has_budget_remaining());
        // Deplete the budget.
        for _ in 0..BUDGET {
            gort::task::consume_budget().await;
        }
        assert!(!gort::task::has_budget_remaining());
    });
}

// join_handle_panic.rs: the output's drop panics where the handle is dropped, and that panic
// does not reach the task that drops the handle.
#[test]
fn test_panics_do_not_propagate_when_dropping_join_handle() {
    within(|| {
        one_p().block_on(async {
            let join_handle = gort::spawn(async move { PanicsOnDrop });
            // Only drop the handle once the task has completed.
            while !join_handle.is_finished() {
                gort::time::sleep(Duration::from_millis(1)).await;
            }
            drop(join_handle);
        });
    });
}

/// join_handle_panic.rs's case with the handle dropped while the task is still running: the
/// output is then dropped by the task as it completes, on its M, which must survive it.
#[test]
fn panics_do_not_kill_the_m_when_the_handle_went_first() {
    within(|| {
        let rt = one_p();
        rt.block_on(async {
            let (tx, rx) = tokio::sync::oneshot::channel::<()>();
            let join_handle = gort::spawn(async move {
                let _ = rx.await;
                PanicsOnDrop
            });
            drop(join_handle);
            tx.send(()).unwrap();
            // The P still runs tasks.
            assert_eq!(gort::spawn(async { 7 }).await.unwrap(), 7);
        });
    });
}

// rt_time_start_paused.rs
#[test]
fn test_start_paused() {
    within(|| {
        let rt = paused(1);
        rt.block_on(async {
            let now = gort::time::Instant::now();
            // Pause a few times with std's sleep: `now` stays the same.
            for _ in 0..5 {
                std::thread::sleep(Duration::from_millis(1));
                assert_eq!(now, gort::time::Instant::now());
            }
        });
    });
}
