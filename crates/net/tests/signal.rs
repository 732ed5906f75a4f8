//! `gort::signal`: signals raised at this test process with `libc::raise` and `kill`.
//!
//! Signal handling is process-wide, so the tests of this binary each use signals of their
//! own (`SIGUSR1`, `SIGUSR2`, `SIGHUP`, `SIGWINCH`, `SIGALRM`, a real-time one); the ones that may end a
//! process (`SIGINT`, `SIGTERM` with nobody listening) run in a child process of this
//! binary (`--exact child`, with `CHILD` naming the case).

use gort::signal::{self, Signal};
use std::io::ErrorKind;
use std::os::unix::process::ExitStatusExt;
use std::process::Command;
use std::time::Duration;

/// Which case `child` runs, in a child process.
const CHILD: &str = "GORT_SIGNAL_TEST_CHILD";

fn runtime() -> gort::Runtime {
    gort::Builder::new().procs(2).build().unwrap()
}

/// Sends `signal` to this process (any thread may take it), as `kill -SIG pid` does.
fn kill_self(signal: Signal) {
    // SAFETY: kill sends a signal to this process; the caller listens for it.
    assert_eq!(unsafe { libc::kill(libc::getpid(), signal.as_raw()) }, 0);
}

/// Raises `signal` on this thread.
fn raise(signal: Signal) {
    // SAFETY: raise sends a signal to this thread; the caller listens for it.
    assert_eq!(unsafe { libc::raise(signal.as_raw()) }, 0);
}

/// `rx.recv()` with a generous bound, so that a lost signal fails instead of hanging.
async fn recv(rx: &gort::chan::Receiver<Signal>) -> Option<Signal> {
    gort::time::timeout(Duration::from_secs(20), rx.recv())
        .await
        .expect("no signal delivered within 20 s")
}

#[test]
fn notify_delivers_each_listed_signal() {
    runtime().block_on(async {
        let rx = signal::notify(&[Signal::USER_DEFINED1, Signal::HANGUP]).unwrap();
        raise(Signal::USER_DEFINED1);
        assert_eq!(recv(&rx).await, Some(Signal::USER_DEFINED1));
        kill_self(Signal::HANGUP);
        assert_eq!(recv(&rx).await, Some(Signal::HANGUP));
        // From a plain thread too.
        std::thread::spawn(|| kill_self(Signal::USER_DEFINED1));
        assert_eq!(recv(&rx).await, Some(Signal::USER_DEFINED1));
    });
}

#[test]
fn every_subscription_gets_every_signal_it_asked_for() {
    runtime().block_on(async {
        let a = signal::notify(&[Signal::USER_DEFINED2]).unwrap();
        let b = signal::notify(&[Signal::USER_DEFINED2, Signal::WINDOW_CHANGE]).unwrap();
        raise(Signal::USER_DEFINED2);
        assert_eq!(recv(&a).await, Some(Signal::USER_DEFINED2));
        assert_eq!(recv(&b).await, Some(Signal::USER_DEFINED2));
        raise(Signal::WINDOW_CHANGE);
        assert_eq!(recv(&b).await, Some(Signal::WINDOW_CHANGE));
        gort::time::sleep(Duration::from_millis(50)).await;
        assert!(a.try_recv().is_err(), "a did not ask for SIGWINCH");
    });
}

#[test]
fn signals_raised_while_one_is_pending_coalesce() {
    runtime().block_on(async {
        let rx = signal::notify(&[Signal::ALARM]).unwrap();
        for _ in 0..5 {
            raise(Signal::ALARM);
        }
        assert_eq!(recv(&rx).await, Some(Signal::ALARM));
        // The channel holds one pending SIGALRM: nothing piles up behind it.
        gort::time::sleep(Duration::from_millis(50)).await;
        assert!(rx.len() <= 1, "{} signals queued", rx.len());
        raise(Signal::ALARM);
        assert_eq!(recv(&rx).await, Some(Signal::ALARM));
    });
}

#[test]
fn dropping_the_receiver_ends_the_delivering_task() {
    let rt = runtime();
    let idle = rt.metrics().tasks_alive;
    let rx = rt.block_on(async { signal::notify(&[Signal::HANGUP]).unwrap() });
    assert_eq!(rt.metrics().tasks_alive, idle + 1);
    drop(rx);
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while rt.metrics().tasks_alive > idle && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(2));
    }
    assert_eq!(rt.metrics().tasks_alive, idle);
}

#[test]
fn the_channel_closes_when_the_runtime_shuts_down() {
    let rt = runtime();
    // A signal no other test raises (the channel must be empty when it closes).
    let unraised = Signal::from_raw(libc::SIGRTMIN() + 1);
    let rx = rt.block_on(async { signal::notify(&[unraised]).unwrap() });
    drop(rt);
    assert!(runtime().block_on(recv(&rx)).is_none());
}

#[test]
fn signals_that_cannot_be_listened_for_are_invalid_input() {
    let kind = |signals: &[Signal]| signal::notify(signals).unwrap_err().kind();
    runtime().block_on(async {
        assert_eq!(kind(&[]), ErrorKind::InvalidInput);
        for raw in [libc::SIGKILL, libc::SIGSTOP, libc::SIGSEGV, 0, -1, 65] {
            let s = Signal::from_raw(raw);
            assert_eq!(kind(&[Signal::HANGUP, s]), ErrorKind::InvalidInput, "{s:?}");
        }
    });
    // Outside a runtime: an error, not a panic.
    assert!(signal::notify(&[Signal::HANGUP]).is_err());
}

/// The cases that may end their process, run by the parent tests below in a child each.
#[test]
fn child() {
    let Ok(case) = std::env::var(CHILD) else {
        return;
    };
    runtime().block_on(async {
        match case.as_str() {
            "ctrl_c" => {
                let _all_along = signal::notify(&[Signal::INTERRUPT]).unwrap();
                let ctrl_c = gort::spawn(signal::ctrl_c());
                while !ctrl_c.is_finished() {
                    raise(Signal::INTERRUPT);
                    gort::time::sleep(Duration::from_millis(5)).await;
                }
                ctrl_c.await.unwrap().unwrap();
                println!("ctrl_c returned");
            }
            "default_back" => {
                let rx = signal::notify(&[Signal::TERMINATE]).unwrap();
                kill_self(Signal::TERMINATE);
                assert_eq!(recv(&rx).await, Some(Signal::TERMINATE));
                println!("survived a SIGTERM while listening");
                drop(rx);
                kill_self(Signal::TERMINATE); // nobody listens: the process ends, as in Go
                gort::time::sleep(Duration::from_secs(20)).await;
                println!("survived a SIGTERM after the receiver was dropped");
            }
            other => panic!("unknown case {other}"),
        }
    });
}

/// Runs `child` with `case`: its exit status and standard output.
fn run_child(case: &str) -> (std::process::ExitStatus, String) {
    let out = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "child", "--nocapture", "--test-threads=1"])
        .env(CHILD, case)
        .output()
        .unwrap();
    (
        out.status,
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

#[test]
fn ctrl_c_returns_on_a_sigint() {
    let (status, out) = run_child("ctrl_c");
    assert!(status.success(), "{status:?}: {out}");
    assert!(out.contains("ctrl_c returned"), "{out}");
}

#[test]
fn a_signals_default_action_is_back_once_nobody_listens() {
    let (status, out) = run_child("default_back");
    assert!(out.contains("survived a SIGTERM while listening"), "{out}");
    assert!(!out.contains("after the receiver was dropped"), "{out}");
    assert_eq!(status.signal(), Some(libc::SIGTERM), "{status:?}: {out}");
}

/// A subscription waits for a signal that may never come: it must not hold a paused clock
/// (as a task blocked on a socket does), or a test that listens for Ctrl-C could never
/// sleep through virtual time.
#[test]
fn a_subscription_does_not_hold_a_paused_clock() {
    let (done, finished) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let rt = gort::Builder::new()
            .procs(2)
            .start_paused(true)
            .build()
            .unwrap();
        let elapsed = rt.block_on(async {
            let _signals = signal::notify(&[Signal::WINDOW_CHANGE]).unwrap();
            let start = gort::time::Instant::now();
            gort::time::sleep(Duration::from_secs(60)).await;
            start.elapsed()
        });
        let _ = done.send(elapsed);
    });
    // Real time bounds the test: a held clock leaves the sleep waiting forever.
    let elapsed = finished
        .recv_timeout(Duration::from_secs(20))
        .expect("the paused clock did not move in 20 s of real time");
    assert_eq!(elapsed, Duration::from_secs(60));
}
