//! `#[gort::test]` and `#[gort::main]` misused: a test that fails (a panic, or an `Err`
//! returned) while work it started still runs must fail, not hang (a runtime's drop waits
//! for its busy threads).

mod support;

use support::{panic_text, within};

/// Functions the attributes expanded, called by the tests below under a watchdog. Ignored as
/// tests of their own: each fails on purpose.
mod generated {
    use std::sync::atomic::{AtomicBool, Ordering::SeqCst};
    use std::sync::Arc;
    use std::time::Duration;

    #[gort::test(procs = 2)]
    #[ignore = "fails on purpose; run by a_failing_test_does_not_wait_for_its_blocking_closure"]
    pub async fn fails_while_a_blocking_closure_waits_for_its_end() {
        let done = Arc::new(AtomicBool::new(false));
        let d = done.clone();
        let _waiter = gort::spawn_blocking(move || {
            while !d.load(SeqCst) {
                std::thread::sleep(Duration::from_millis(1));
            }
        });
        gort::time::sleep(Duration::from_millis(5)).await;
        assert_eq!(1 + 1, 3, "the test's own assertion fails");
        done.store(true, SeqCst);
    }

    #[gort::test(procs = 2)]
    #[ignore = "fails on purpose; run by a_test_returning_err_does_not_wait_for_its_blocking_closure"]
    pub async fn returns_err_while_a_blocking_closure_waits_for_its_end() -> Result<(), String> {
        let done = Arc::new(AtomicBool::new(false));
        let d = done.clone();
        let _waiter = gort::spawn_blocking(move || {
            while !d.load(SeqCst) {
                std::thread::sleep(Duration::from_millis(1));
            }
        });
        let n: u32 = "not a number".parse().map_err(|e| format!("{e}"))?;
        done.store(true, SeqCst);
        assert_eq!(n, 0);
        Ok(())
    }

    #[gort::test(procs = 1)]
    #[ignore = "fails on purpose; run by a_failing_test_does_not_wait_for_a_task_that_never_yields"]
    pub async fn fails_while_a_task_spins() {
        let stop = Arc::new(AtomicBool::new(false));
        let s = stop.clone();
        let _spinner = gort::spawn(async move {
            while !s.load(SeqCst) {
                std::hint::spin_loop();
            }
        });
        gort::time::sleep(Duration::from_millis(5)).await;
        std::thread::sleep(Duration::from_millis(5));
        panic!("failed while a task spins");
    }
}

#[test]
fn a_failing_test_does_not_wait_for_its_blocking_closure() {
    let p = within(|| {
        std::panic::catch_unwind(generated::fails_while_a_blocking_closure_waits_for_its_end)
    })
    .unwrap_err();
    assert!(panic_text(&*p).contains("the test's own assertion fails"));
}

#[test]
fn a_failing_test_does_not_wait_for_a_task_that_never_yields() {
    let p = within(|| std::panic::catch_unwind(generated::fails_while_a_task_spins)).unwrap_err();
    assert_eq!(panic_text(&*p), "failed while a task spins");
}

#[test]
fn a_test_returning_err_does_not_wait_for_its_blocking_closure() {
    let res = within(generated::returns_err_while_a_blocking_closure_waits_for_its_end);
    assert_eq!(res, Err("invalid digit found in string".to_string()));
}

/// Any `Termination` a plain `#[test]` may return still compiles and passes: only a `Result`
/// is inspected for a failure before the runtime's drop.
#[gort::test]
async fn a_test_may_return_any_termination() -> std::process::ExitCode {
    gort::time::sleep(std::time::Duration::from_millis(1)).await;
    std::process::ExitCode::SUCCESS
}

static PASSED_DONE: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

#[gort::test]
#[ignore = "run by a_passing_result_test_still_waits_for_its_blocking_closure"]
async fn passes_with_a_detached_blocking_closure() -> Result<(), String> {
    use std::sync::atomic::{AtomicBool, Ordering::SeqCst};
    static STARTED: AtomicBool = AtomicBool::new(false);
    // Dropped at the end without being awaited: the runtime's drop waits for it once it
    // runs (a closure still queued at shutdown is dropped unrun).
    let _detached = gort::spawn_blocking(|| {
        STARTED.store(true, SeqCst);
        std::thread::sleep(std::time::Duration::from_millis(20));
        PASSED_DONE.store(true, SeqCst);
    });
    while !STARTED.load(SeqCst) {
        gort::time::sleep(std::time::Duration::from_millis(1)).await;
    }
    Ok(())
}

#[test]
fn a_passing_result_test_still_waits_for_its_blocking_closure() {
    assert_eq!(within(passes_with_a_detached_blocking_closure), Ok(()));
    assert!(PASSED_DONE.load(std::sync::atomic::Ordering::SeqCst));
}
