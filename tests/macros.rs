//! Compile-pass tests of `#[gort::main]` and `#[gort::test]` (issue 17, item 5): every return
//! type a plain `fn main`/`#[test]` accepts, with other attributes kept. Before, a return
//! type failed to expand ("custom attribute panicked: expected `|`"). Their compile-fail
//! messages are unit tests of the expansion in `crates/macros`.

use std::time::Duration;

#[gort::test]
async fn unit_return() {
    gort::time::sleep(Duration::from_millis(1)).await;
}

#[gort::test]
async fn result_return_with_question_mark() -> Result<(), std::num::ParseIntError> {
    let n: u32 = "7".parse()?;
    assert_eq!(gort::spawn(async move { n + 1 }).await.unwrap(), 8);
    Ok(())
}

#[gort::test(procs = 2)]
async fn boxed_error_return() -> Result<(), Box<dyn std::error::Error>> {
    gort::time::sleep(Duration::from_millis(1)).await;
    let n: i32 = "-3".parse()?;
    if n > 0 {
        return Err("positive".into());
    }
    Ok(())
}

#[gort::test]
#[should_panic(expected = "from the test body")]
async fn should_panic_is_kept() {
    gort::time::sleep(Duration::from_millis(1)).await;
    panic!("from the test body");
}

#[gort::test]
#[ignore = "checks that #[ignore] is kept: running it fails"]
async fn ignore_is_kept() {
    panic!("an ignored test ran");
}

/// `main` accepts any `Termination`: each of these is a `main` the attribute must expand.
mod mains {
    #[gort::main]
    pub async fn unit() {}

    #[gort::main(procs = 1)]
    pub async fn result() -> Result<(), std::fmt::Error> {
        Ok(())
    }

    #[gort::main]
    pub async fn failing() -> Result<(), String> {
        gort::time::sleep(std::time::Duration::from_millis(1)).await;
        Err("the body's error".to_owned())
    }

    #[gort::main]
    pub async fn exit_code() -> std::process::ExitCode {
        std::process::ExitCode::from(3)
    }

    #[gort::main]
    pub async fn opaque() -> impl std::process::Termination {
        gort::time::sleep(std::time::Duration::from_millis(1)).await;
    }

    #[gort::main]
    #[allow(unreachable_code)]
    pub async fn never_returns() -> ! {
        std::process::exit(0);
    }
}

#[test]
fn mains_run_on_a_runtime_and_return_their_value() {
    mains::unit();
    assert!(mains::result().is_ok());
    assert_eq!(mains::failing(), Err("the body's error".to_owned()));
    assert_eq!(mains::exit_code(), std::process::ExitCode::from(3));
    let _ = mains::opaque();
    let _ = mains::never_returns as fn() -> !;
}

#[gort::test(start_paused = true)]
async fn start_paused_runs_an_hour_at_once() {
    assert!(gort::time::is_paused());
    let wall = std::time::Instant::now();
    let start = gort::time::Instant::now();
    gort::time::sleep(std::time::Duration::from_secs(3600)).await;
    assert_eq!(start.elapsed(), std::time::Duration::from_secs(3600));
    assert!(wall.elapsed() < std::time::Duration::from_secs(5));
}

#[gort::test(procs = 2, start_paused = false)]
async fn start_paused_false_keeps_the_real_clock() {
    assert!(!gort::time::is_paused());
}
