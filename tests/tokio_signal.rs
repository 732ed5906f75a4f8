//! Tokio's `signal_*.rs` tests, ported to `gort::signal` (Go's `os/signal`: `notify` gives a
//! channel `Receiver<Signal>` where Tokio's `signal(kind)` gives a `Signal` with `recv`). Each
//! test keeps its Tokio name and a comment naming its file, under a watchdog. Signals are
//! process-wide: the tests of this binary take [`SIGNALS`] one at a time, so that one test's
//! signal never reaches another's subscriptions.
//!
//! Where gort deliberately differs (its rustdoc says so):
//! - `signal_drop_recv.rs`: Go's rule, not Tokio's: once the last receiver of a signal is
//!   dropped, the signal's default action is back (`gort::signal::notify`'s docs), so a
//!   `SIGUSR1` raised while nobody listens ends the process, where Tokio keeps its handler for
//!   good and hands the signal to the next listener. Ported as two tests: the listener made
//!   again receives a signal raised after it; and a child process raising it in between dies
//!   of it.
//! - `signal_no_rt.rs` and `signal_panic.rs`: `notify` outside a runtime and on a signal that
//!   cannot be caught returns an error (`notify`'s "Errors"), where Tokio panics; the ports
//!   check the errors.
//! - `signal_info.rs`: skipped, `SIGINFO` is BSD's and macOS's (the test is not built on
//!   Linux under Tokio either).

mod support;

use futures::stream::{FuturesUnordered, StreamExt};
use gort::signal::{self, Signal};
use std::collections::HashMap;
use std::io::ErrorKind;
use std::os::unix::process::ExitStatusExt;
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;
use support::within;

/// Taken by every test: one at a time raises signals at this process.
static SIGNALS: Mutex<()> = Mutex::new(());

fn serial() -> MutexGuard<'static, ()> {
    SIGNALS.lock().unwrap_or_else(|e| e.into_inner())
}

/// Tokio's `support::signal::send_signal`: `kill(getpid(), signal)`. In a process of many
/// threads, the kernel may run the handler on another one (the main thread) after `kill`
/// returns: a test receives each signal it sends before it drops its listeners, so that no
/// signal arrives once nobody listens (its default action would end this process).
fn send_signal(signal: libc::c_int) {
    // SAFETY: kill sends a signal to this process; the caller listens for it.
    let rc = unsafe { libc::kill(libc::getpid(), signal) };
    assert_eq!(
        rc,
        0,
        "kill({signal}) failed: {}",
        std::io::Error::last_os_error()
    );
}

/// A `#[tokio::test]` body (a runtime of one P, as Tokio's current-thread one), serialized
/// with the other signal tests, under the watchdog.
fn signal_test<Fut: std::future::Future<Output = ()>>(body: impl FnOnce() -> Fut + Send + 'static) {
    let _serial = serial();
    within(move || {
        gort::Builder::new()
            .procs(1)
            .build()
            .unwrap()
            .block_on(body())
    });
}

fn rt() -> gort::Runtime {
    gort::Builder::new().procs(1).build().unwrap()
}

// signal_ctrl_c.rs
#[test]
fn ctrl_c() {
    signal_test(|| async {
        // A net under the test: were SIGINT raised before `ctrl_c` listens, this subscription
        // takes it (and the test hangs into the watchdog) instead of the process ending.
        let _net = signal::notify(&[Signal::INTERRUPT]).unwrap();
        let mut ctrl_c = std::pin::pin!(signal::ctrl_c());
        // Tokio's current-thread runtime runs the spawned task only once this one waits, after
        // `ctrl_c` listens; a gort task may run at once on another thread, so poll `ctrl_c`
        // (it listens from its first poll) before spawning.
        assert!(futures::poll!(ctrl_c.as_mut()).is_pending());
        gort::spawn(async {
            send_signal(libc::SIGINT);
        });
        ctrl_c.as_mut().await.unwrap();
    });
}

// signal_drop_recv.rs, with the raise after the second listener (see the header).
#[test]
fn drop_then_get_a_signal() {
    signal_test(|| async {
        let sig = signal::notify(&[Signal::USER_DEFINED1]).expect("failed to create first signal");
        drop(sig);
        let sig = signal::notify(&[Signal::USER_DEFINED1]).expect("failed to create second signal");
        send_signal(libc::SIGUSR1);
        assert_eq!(sig.recv().await, Some(Signal::USER_DEFINED1));
    });
}

/// Tokio's `drop_then_get_a_signal` as written, in a child process: under Go's rule the
/// `SIGUSR1` raised while nobody listens ends it.
#[test]
fn drop_then_get_a_signal_between_listeners_has_the_default_action() {
    let _serial = serial();
    let run = support::run_child(
        "drop_then_get_a_signal_child",
        CHILD,
        Duration::from_secs(30),
        "the child hung",
    );
    assert_eq!(
        run.status.signal(),
        Some(libc::SIGUSR1),
        "{:?}\n{}",
        run.status,
        run.stderr
    );
}

const CHILD: &str = "GORT_TOKIO_SIGNAL_CHILD";

#[test]
#[ignore = "run by drop_then_get_a_signal_between_listeners_has_the_default_action"]
fn drop_then_get_a_signal_child() {
    if std::env::var(CHILD).is_err() {
        return;
    }
    rt().block_on(async {
        let sig = signal::notify(&[Signal::USER_DEFINED1]).unwrap();
        drop(sig);
    });
    // `kill` returns before the handler runs on some other thread (the main one): wait.
    send_signal(libc::SIGUSR1); // ends the process
    std::thread::sleep(Duration::from_secs(5));
    println!("the child survived a SIGUSR1 nobody listened for");
}

// signal_drop_rt.rs
#[test]
fn dropping_loops_does_not_cause_starvation() {
    let _serial = serial();
    within(|| {
        let kind = [Signal::USER_DEFINED1];
        let first_rt = rt();
        let first_signal = first_rt
            .block_on(async { signal::notify(&kind).expect("failed to register first signal") });
        let second_rt = rt();
        let second_signal = second_rt
            .block_on(async { signal::notify(&kind).expect("failed to register second signal") });
        send_signal(libc::SIGUSR1);
        first_rt
            .block_on(first_signal.recv())
            .expect("failed to await first signal");
        // Not in Tokio's test: the second listener takes the first signal too, so that the
        // receive below waits for the second one. Else it took the first, the test ended,
        // and the second one, still on its way (`kill` returns before the handler runs on
        // another thread), found nobody listening: its default action ended the process
        // (gort's rule, Go's; see the header).
        assert_eq!(
            second_rt.block_on(second_signal.recv()),
            Some(Signal::USER_DEFINED1)
        );
        drop(first_rt);
        drop(first_signal);
        send_signal(libc::SIGUSR1);
        assert_eq!(
            second_rt.block_on(second_signal.recv()),
            Some(Signal::USER_DEFINED1)
        );
    });
}

// signal_drop_signal.rs
#[test]
fn dropping_signal_does_not_deregister_any_other_instances() {
    signal_test(|| async {
        let kind = [Signal::USER_DEFINED1];
        // Signals should not starve based on ordering.
        let first_duplicate_signal =
            signal::notify(&kind).expect("failed to register first duplicate signal");
        let sig = signal::notify(&kind).expect("failed to register signal");
        let second_duplicate_signal =
            signal::notify(&kind).expect("failed to register second duplicate signal");
        drop(first_duplicate_signal);
        drop(second_duplicate_signal);
        send_signal(libc::SIGUSR1);
        assert_eq!(sig.recv().await, Some(Signal::USER_DEFINED1));
    });
}

// signal_multi_rt.rs
#[test]
fn multi_loop() {
    let _serial = serial();
    within(|| {
        let (sender, receiver) = std::sync::mpsc::channel();
        // Run multiple times, to make sure there are no race conditions.
        for _ in 0..10 {
            // Run multiple runtimes, each one in its own thread.
            let threads: Vec<_> = (0..4)
                .map(|_| {
                    let sender = sender.clone();
                    std::thread::spawn(move || {
                        rt().block_on(async {
                            let signal = signal::notify(&[Signal::HANGUP]).unwrap();
                            sender.send(()).unwrap();
                            assert_eq!(signal.recv().await, Some(Signal::HANGUP));
                        })
                    })
                })
                .collect();
            // Wait for them to declare they're ready.
            for _ in &threads {
                receiver.recv().unwrap();
            }
            send_signal(libc::SIGHUP);
            for t in threads {
                t.join().unwrap();
            }
        }
    });
}

// signal_no_rt.rs: an error, not Tokio's panic (see the header).
#[test]
fn no_runtime_panics_creating_signals() {
    let _serial = serial();
    let err = signal::notify(&[Signal::HANGUP]).unwrap_err();
    assert!(
        err.to_string().contains("runtime"),
        "not a clear error outside a runtime: {err}"
    );
}

// signal_notify_both.rs
#[test]
fn notify_both() {
    signal_test(|| async {
        let kind = [Signal::USER_DEFINED2];
        let signal1 = signal::notify(&kind).expect("failed to create signal1");
        let signal2 = signal::notify(&kind).expect("failed to create signal2");
        send_signal(libc::SIGUSR2);
        assert_eq!(signal1.recv().await, Some(Signal::USER_DEFINED2));
        assert_eq!(signal2.recv().await, Some(Signal::USER_DEFINED2));
    });
}

// signal_panic.rs: `InvalidInput`, not Tokio's panic (see the header).
#[test]
fn signal_panic_caller() {
    signal_test(|| async {
        for bad in [-1, 0, 65, libc::SIGKILL, libc::SIGSTOP, libc::SIGSEGV] {
            let err = signal::notify(&[Signal::from_raw(bad)]).unwrap_err();
            assert_eq!(err.kind(), ErrorKind::InvalidInput, "signal {bad}: {err}");
        }
    });
}

// signal_realtime.rs
#[test]
fn signal_realtime() {
    signal_test(|| async {
        // Every real-time signal from SIGRTMIN, capped at 28 as Tokio's test does (QEMU).
        let range = libc::SIGRTMIN()..=libc::SIGRTMAX().min(libc::SIGRTMIN() + 27);
        let signals: Vec<_> = range
            .clone()
            .map(|signum| {
                let sig = signal::notify(&[Signal::from_raw(signum)])
                    .unwrap_or_else(|e| panic!("failed to create signal for {signum}: {e}"));
                (signum, sig)
            })
            .collect();
        for signum in range.clone() {
            send_signal(signum);
        }
        let futures: FuturesUnordered<_> = signals
            .into_iter()
            .map(|(signum, sig)| async move { (signum, sig.recv().await) })
            .collect();
        let sleep = std::pin::pin!(gort::time::sleep(Duration::from_secs(5)));
        let done: HashMap<_, _> = futures.take_until(sleep).collect().await;
        let mut none = Vec::new();
        let mut missing = Vec::new();
        for signum in range {
            match done.get(&signum) {
                Some(Some(s)) => assert_eq!(s.as_raw(), signum),
                Some(None) => none.push(signum),
                None => missing.push(signum),
            }
        }
        assert!(
            none.is_empty() && missing.is_empty(),
            "no signals received for {none:?}; missing signals for {missing:?}"
        );
    });
}

// signal_twice.rs
#[test]
fn twice() {
    signal_test(|| async {
        let sig = signal::notify(&[Signal::USER_DEFINED1]).expect("failed to get signal");
        for _ in 0..2 {
            send_signal(libc::SIGUSR1);
            assert!(sig.recv().await.is_some());
        }
    });
}

// signal_usr1.rs
#[test]
fn signal_usr1() {
    signal_test(|| async {
        let signal = signal::notify(&[Signal::USER_DEFINED1]).expect("failed to create signal");
        send_signal(libc::SIGUSR1);
        assert_eq!(signal.recv().await, Some(Signal::USER_DEFINED1));
    });
}
