//! Cases of `gort::select!` beside the port of Tokio's `tests/macros_select.rs`
//! (tests/tokio_macros_select.rs): losers dropped before the winner's body, a select loop
//! with a timer arm, Go's `default`, and the panic of a select whose arms are all disabled.
//! Each runs under a watchdog.

mod support;

use gort::select;
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::Arc;
use std::time::Duration;
// A `#[tokio::test]` body: a task on a runtime of 1 P, under the watchdog.
use support::task_on_one_p as rt;

async fn one() -> usize {
    1
}
async fn async_noop() {}
async fn async_never() -> ! {
    futures::future::pending().await
}

/// Counts drops.
struct DropCount(Arc<AtomicUsize>);
impl Drop for DropCount {
    fn drop(&mut self) {
        self.0.fetch_add(1, SeqCst);
    }
}

// macros_select.rs (the losing arms' futures are dropped before the winner's body runs)
#[test]
fn losers_dropped_before_body() {
    rt(|| async {
        let drops = Arc::new(AtomicUsize::new(0));
        let (d1, d2) = (DropCount(drops.clone()), DropCount(drops.clone()));
        let got = select! {
            _ = async move { let _d = d1; async_never().await } => unreachable!(),
            _ = async move { let _d = d2; async_never().await } => unreachable!(),
            v = one() => {
                assert_eq!(drops.load(SeqCst), 2, "losers still alive in the body");
                v
            }
        };
        assert_eq!(got, 1);
    });
}

// macros_select.rs (a select in a loop with a timer arm: the channel arm wins while values
// come, then the timer arm ends the loop)
#[test]
fn select_loop_with_timer_arm() {
    rt(|| async {
        let (tx, rx) = gort::chan::bounded::<u32>(1);
        gort::spawn(async move {
            for i in 0..5 {
                tx.send(i).await.unwrap();
            }
            gort::time::sleep(Duration::from_secs(60)).await;
            drop(tx);
        });
        let mut got = Vec::new();
        loop {
            select! {
                Some(v) = rx.recv() => got.push(v),
                _ = gort::time::sleep(Duration::from_millis(50)) => break,
            }
        }
        assert_eq!(got, [0, 1, 2, 3, 4]);
    });
}

// macros_select.rs (Go's `default`: taken when nothing is ready, never when an arm is)
#[test]
fn default_branch() {
    rt(|| async {
        let (tx, rx) = gort::chan::bounded::<u32>(1);
        let v = select! {
            v = rx.recv() => v,
            default => None,
        };
        assert_eq!(v, None);
        tx.try_send(3).unwrap();
        let v = select! {
            v = rx.recv() => v,
            default => None,
        };
        assert_eq!(v, Some(3));
    });
}

// macros_select.rs (`select!` with every arm disabled and no `else` panics, as Tokio's does)
#[test]
fn all_disabled_no_else_panics() {
    let r = std::panic::catch_unwind(|| {
        futures::executor::block_on(async {
            select! {
                _ = async_noop(), if false => {},
            }
        })
    });
    let msg = support::panic_message(r.unwrap_err());
    assert!(msg.contains("all branches are disabled"), "{msg}");
}
