//! Tokio's `tests/time_panic.rs`, ported to `gort::time`: each test keeps its Tokio name and a
//! comment naming its file, and runs under a watchdog. Tokio checks that a misuse panics at
//! the caller's line (`#[track_caller]`); gort's `pause`, `resume`, `interval` and
//! `interval_at` are `#[track_caller]` too. Added: timer edge values (zero, `Duration::MAX`,
//! far deadlines) complete or panic clearly, never hang.
//!
//! Where gort deliberately differs: `Instant + Duration::MAX` saturates at `Instant::NEVER`
//! instead of panicking (documented on `gort::time::Instant`); every gort runtime has timers
//! (there is no runtime "without `enable_time`"), and a `Timeout` made outside a runtime
//! panics only when it is polled and must wait (documented on `gort::time::timeout`), so
//! `timeout_panic_caller` and `timeout_at_panic_caller` check that panic and its message
//! instead of the creation site.

mod support;

use gort::time::{interval, interval_at, timeout, timeout_at, Instant};
use std::panic::Location;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use support::within;

/// Tokio's `test_panic`: runs `f`, which must panic, and returns the file of the panic's
/// location and its message. The panic hook is process-wide: a lock keeps this file's tests
/// from seeing each other's panics.
fn test_panic(f: impl FnOnce() + std::panic::UnwindSafe) -> (String, String) {
    static HOOK: Mutex<()> = Mutex::new(());
    let _serial = HOOK.lock().unwrap_or_else(|e| e.into_inner());
    let seen: Arc<Mutex<Option<String>>> = Arc::default();
    let prev = std::panic::take_hook();
    let s = seen.clone();
    std::panic::set_hook(Box::new(move |info| {
        let file = info.location().map(|l: &Location<'_>| l.file().to_string());
        *s.lock().unwrap() = file;
    }));
    let r = std::panic::catch_unwind(f);
    std::panic::set_hook(prev);
    let msg = support::panic_message(r.expect_err("no panic"));
    let file = seen.lock().unwrap().take().unwrap_or_default();
    (file, msg)
}

fn rt_combinations() -> Vec<gort::Runtime> {
    (1..=2)
        .map(|procs| gort::Builder::new().procs(procs).build().unwrap())
        .collect()
}

// time_panic.rs
#[test]
fn pause_panic_caller() {
    within(|| {
        for rt in rt_combinations() {
            let (file, _) = test_panic(std::panic::AssertUnwindSafe(|| {
                rt.block_on(async {
                    gort::time::pause();
                    gort::time::pause();
                });
            }));
            assert_eq!(file, file!());
        }
    });
}

// time_panic.rs
#[test]
fn resume_panic_caller() {
    within(|| {
        let rt = gort::Builder::new().procs(1).build().unwrap();
        let (file, _) = test_panic(std::panic::AssertUnwindSafe(|| {
            rt.block_on(async {
                gort::time::resume();
            });
        }));
        assert_eq!(file, file!());
    });
}

// time_panic.rs
#[test]
fn interval_panic_caller() {
    within(|| {
        let (file, _) = test_panic(|| {
            let _ = interval(Duration::from_millis(0));
        });
        assert_eq!(file, file!());
    });
}

// time_panic.rs
#[test]
fn interval_at_panic_caller() {
    within(|| {
        let (file, _) = test_panic(|| {
            let _ = interval_at(Instant::now(), Duration::from_millis(0));
        });
        assert_eq!(file, file!());
    });
}

// time_panic.rs (outside any runtime: the poll that must wait panics, with a clear message)
#[test]
fn timeout_panic_caller() {
    within(|| {
        let (_, msg) = test_panic(|| {
            futures::executor::block_on(async {
                let _ = timeout(Duration::from_millis(5), std::future::pending::<()>()).await;
            });
        });
        assert!(msg.contains("runtime"), "unclear panic: {msg:?}");
    });
}

// time_panic.rs (as `timeout_panic_caller`, with a deadline)
#[test]
fn timeout_at_panic_caller() {
    within(|| {
        let (_, msg) = test_panic(|| {
            futures::executor::block_on(async {
                let deadline = Instant::now() + Duration::from_millis(5);
                let _ = timeout_at(deadline, std::future::pending::<()>()).await;
            });
        });
        assert!(msg.contains("runtime"), "unclear panic: {msg:?}");
    });
}

// time_panic.rs (edge values: a zero or passed deadline completes at once, `Duration::MAX`
// waits "forever" without overflowing, and loses a race against a short sleep)
#[test]
fn timer_edge_values() {
    within(|| {
        let rt = gort::Builder::new().procs(1).build().unwrap();
        rt.block_on(async {
            gort::time::sleep(Duration::ZERO).await;
            gort::time::sleep_until(Instant::now() - Duration::from_secs(1)).await;
            assert_eq!(timeout(Duration::ZERO, async { 1 }).await, Ok(1));
            assert!(timeout(Duration::ZERO, std::future::pending::<()>())
                .await
                .is_err());
            assert_eq!(timeout(Duration::MAX, async { 2 }).await, Ok(2));
            let got = gort::select! {
                _ = gort::time::sleep(Duration::MAX) => 0,
                _ = gort::time::sleep(Duration::from_millis(5)) => 1,
            };
            assert_eq!(got, 1);
            let got = gort::select! {
                _ = timeout(Duration::MAX, std::future::pending::<()>()) => 0,
                _ = gort::time::sleep(Duration::from_millis(5)) => 1,
            };
            assert_eq!(got, 1);
            let mut iv = interval(Duration::MAX);
            iv.tick().await; // the first tick is at once
            let got = gort::select! {
                _ = iv.tick() => 0,
                _ = gort::time::sleep(Duration::from_millis(5)) => 1,
            };
            assert_eq!(got, 1);
        });
    });
}

// time_panic.rs (`Instant + Duration::MAX`: Tokio's overflows and panics; gort's saturates at
// `Instant::NEVER`, documented on `gort::time::Instant` (tokio#5183), and a sleep until it
// never fires, neither panicking nor hanging a select)
#[test]
fn instant_add_max_saturates() {
    within(|| {
        assert_eq!(Instant::now() + Duration::MAX, Instant::NEVER);
        let rt = gort::Builder::new().procs(1).build().unwrap();
        rt.block_on(async {
            let got = gort::select! {
                _ = gort::time::sleep_until(Instant::now() + Duration::MAX) => 0,
                _ = gort::time::sleep(Duration::from_millis(5)) => 1,
            };
            assert_eq!(got, 1);
        });
    });
}
