//! Adversarial probes of `gort::signal`: subscriptions made and dropped in a loop, hundreds
//! of listeners of one signal, listeners on two runtimes (one shut down), signals raised
//! while nobody waits in `recv`, storms of `SIGCHLD` and `SIGUSR1` sent with `kill` from
//! other threads (and runtimes dropped during one), subscriptions made from the blocking pool,
//! glibc's internal signals refused, subscriptions made by tasks of a runtime being shut
//! down (after which the signal's default action must be back), and `SIGPIPE` ignored again
//! after its last listener.
//!
//! Signals are process-wide: each test of this binary uses signals of its own, and those
//! whose default action ends the process are only sent while a subscription certainly
//! listens; the cases that check the default action run in a child process.

#[path = "support/watchdog.rs"]
mod watchdog;

use gort::chan::Receiver;
use gort::signal::{self, Signal};
use std::os::unix::process::ExitStatusExt;
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;
use watchdog::{open_fds, serial};

/// Which case `child` runs, in a child process.
const CHILD: &str = "GORT_ABUSE_SIGNAL_CHILD";

fn runtime() -> gort::Runtime {
    gort::Builder::new().procs(2).build().unwrap()
}

/// A real-time signal of this binary's own (`SIGRTMIN + n`); its default ends the process.
fn rt_signal(n: i32) -> Signal {
    Signal::from_raw(libc::SIGRTMIN() + n)
}

/// Sends `signal` to this process (any thread may take it), as `kill -SIG pid` does.
fn kill_self(signal: Signal) {
    // SAFETY: kill sends a signal to this process; the caller listens for it.
    assert_eq!(unsafe { libc::kill(libc::getpid(), signal.as_raw()) }, 0);
}

/// `rx.recv()` with a generous bound, so that a lost signal fails instead of hanging.
async fn recv(rx: &Receiver<Signal>) -> Option<Signal> {
    gort::time::timeout(Duration::from_secs(20), rx.recv())
        .await
        .expect("no signal delivered within 20 s")
}

/// Whether `rx` holds no signal for `quiet` (after a storm: what was pending has come).
async fn drain(rx: &Receiver<Signal>, quiet: Duration) -> usize {
    let mut n = 0;
    while let Ok(Some(_)) = gort::time::timeout(quiet, rx.recv()).await {
        n += 1;
    }
    n
}

/// Waits (up to 10 s) for the fd count to come back to `before`: a dropped subscription's
/// task closes its pipe once it runs.
async fn fds_back_to(before: usize) {
    for _ in 0..1000 {
        if open_fds() <= before {
            return;
        }
        gort::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("{} fds open, {before} before", open_fds());
}

/// 2,000 subscriptions made and dropped (half of them after a signal was delivered to
/// them) leave no fd, and a subscription made after them still gets its signal.
#[test]
fn subscriptions_made_and_dropped_in_a_loop_leak_nothing() {
    serial(|| {
        runtime().block_on(async {
            let sig = rt_signal(1);
            drop(signal::notify(&[sig]).unwrap());
            fds_back_to(open_fds()).await;
            let before = open_fds();
            for i in 0..2_000 {
                let rx = signal::notify(&[sig, Signal::WINDOW_CHANGE]).unwrap();
                if i % 2 == 0 {
                    kill_self(sig);
                    assert_eq!(recv(&rx).await, Some(sig));
                }
                drop(rx);
            }
            fds_back_to(before).await;
            let rx = signal::notify(&[sig]).unwrap();
            kill_self(sig);
            assert_eq!(recv(&rx).await, Some(sig));
        })
    });
}

/// 300 subscriptions of one signal each get it, every time, over 20 rounds.
#[test]
fn hundreds_of_listeners_of_one_signal_each_get_it() {
    serial(|| {
        runtime().block_on(async {
            let sig = rt_signal(2);
            let rxs: Vec<_> = (0..300).map(|_| signal::notify(&[sig]).unwrap()).collect();
            for _ in 0..20 {
                kill_self(sig);
                for rx in &rxs {
                    assert_eq!(recv(rx).await, Some(sig));
                }
            }
        })
    });
}

/// Listeners on two runtimes both get a signal; the one whose runtime shut down sees its
/// channel closed, and the other still gets the next ones. A subscription made on one
/// runtime may be received from on the other.
#[test]
fn listeners_on_two_runtimes_and_one_shut_down() {
    serial(|| {
        let sig = rt_signal(3);
        let a = runtime();
        let b = runtime();
        let rx_a = a.block_on(async { signal::notify(&[sig]).unwrap() });
        let rx_b = b.block_on(async { signal::notify(&[sig]).unwrap() });
        for _ in 0..50 {
            kill_self(sig);
            // Each received on the other runtime.
            assert_eq!(b.block_on(recv(&rx_a)), Some(sig));
            assert_eq!(a.block_on(recv(&rx_b)), Some(sig));
        }
        drop(a);
        assert_eq!(b.block_on(recv(&rx_a)), None, "a's channel closes with a");
        for _ in 0..50 {
            kill_self(sig);
            assert_eq!(b.block_on(recv(&rx_b)), Some(sig));
        }
    });
}

/// `notify` from a blocking closure of the runtime's pool and from a `Handle::block_on`
/// inside it: the subscription lives on the runtime and its signals come.
#[test]
fn subscriptions_made_from_the_blocking_pool_get_their_signals() {
    serial(|| {
        runtime().block_on(async {
            let sig = rt_signal(8);
            let handle = gort::Handle::current();
            let rx = gort::spawn_blocking(move || {
                let plain = signal::notify(&[sig]);
                let nested = handle.block_on(async { signal::notify(&[sig]) });
                (plain, nested)
            })
            .await
            .unwrap();
            let (plain, nested) = (rx.0.unwrap(), rx.1.unwrap());
            for _ in 0..10 {
                kill_self(sig);
                assert_eq!(recv(&plain).await, Some(sig));
                assert_eq!(recv(&nested).await, Some(sig));
            }
        })
    });
}

/// The C library's own real-time signals (32 and 33 on glibc: thread cancellation and
/// `setxid`) cannot be listened for: an error, no panic, nothing left behind, and a
/// subscription to a listable signal with them in the same list fails as a whole.
#[test]
fn the_c_librarys_internal_signals_are_refused() {
    serial(|| {
        runtime().block_on(async {
            let before = open_fds();
            for n in [32, 33] {
                let internal = Signal::from_raw(n);
                assert!(signal::notify(&[internal]).is_err(), "signal {n}");
                // SIGWINCH (28) is registered first, then taken back.
                let with = [Signal::WINDOW_CHANGE, internal];
                assert!(signal::notify(&with).is_err(), "signal {n}");
            }
            fds_back_to(before).await;
            let rx = signal::notify(&[rt_signal(9)]).unwrap();
            kill_self(rt_signal(9));
            assert_eq!(recv(&rx).await, Some(rt_signal(9)));
        })
    });
}

/// Runtimes with subscriptions (some with a task blocked in `recv`) dropped while another
/// thread sends a storm of `SIGCHLD`: handlers run while subscriptions stop, no hang, no
/// crash, and every pipe is closed in the end.
#[test]
fn runtimes_with_subscriptions_dropped_during_a_storm_leave_nothing() {
    serial(|| {
        let before = open_fds();
        let stop = Arc::new(AtomicBool::new(false));
        let storm = std::thread::spawn({
            let stop = stop.clone();
            move || {
                while !stop.load(Ordering::Relaxed) {
                    kill_self(Signal::CHILD);
                    std::thread::yield_now();
                }
            }
        });
        for _ in 0..50 {
            let rt = runtime();
            let kept: Vec<_> = rt.block_on(async {
                (0..20)
                    .map(|i| {
                        let rx = signal::notify(&[Signal::CHILD]).unwrap();
                        if i % 2 == 0 {
                            gort::spawn(async move { while rx.recv().await.is_some() {} });
                            None
                        } else {
                            Some(rx)
                        }
                    })
                    .collect()
            });
            std::thread::sleep(Duration::from_millis(2));
            drop(rt);
            drop(kept);
        }
        stop.store(true, Ordering::Relaxed);
        storm.join().unwrap();
        assert_eq!(open_fds(), before, "pipes left open");
    });
}

/// Signals raised while no task waits in `recv` wait in the channel, one per listed signal
/// (the documented coalescing): five of each of two signals give one of each, then nothing.
#[test]
fn signals_raised_while_nobody_receives_coalesce_to_one_per_signal() {
    serial(|| {
        runtime().block_on(async {
            let (s1, s2) = (rt_signal(4), rt_signal(5));
            let rx = signal::notify(&[s1, s2]).unwrap();
            for _ in 0..5 {
                kill_self(s1);
                kill_self(s2);
            }
            gort::time::sleep(Duration::from_millis(200)).await;
            let mut got = vec![recv(&rx).await.unwrap(), recv(&rx).await.unwrap()];
            got.sort();
            assert_eq!(got, [s1, s2]);
            assert_eq!(drain(&rx, Duration::from_millis(200)).await, 0);
            // The next signal after that comes through.
            kill_self(s2);
            assert_eq!(recv(&rx).await, Some(s2));
        })
    });
}

/// A storm of `SIGCHLD` while the program is busy (nobody receives), then one signal of
/// another kind (a `SIGTERM` asking for a graceful shutdown, say): the storm merges into one
/// `SIGCHLD` and the other signal still finds its slot. Before, each wake-up of the storm
/// sent one more `SIGCHLD`, they filled both slots, and the other signal was dropped.
#[test]
fn a_storm_of_one_signal_never_crowds_out_another() {
    serial(|| {
        runtime().block_on(async {
            let term = rt_signal(7);
            let rx = signal::notify(&[Signal::CHILD, term]).unwrap();
            for _ in 0..20 {
                for _ in 0..50 {
                    kill_self(Signal::CHILD);
                }
                // Let the delivering task run: the next kills come in a wake-up of their own.
                gort::time::sleep(Duration::from_millis(2)).await;
            }
            kill_self(term);
            gort::time::sleep(Duration::from_millis(50)).await;
            let mut got = vec![recv(&rx).await.unwrap(), recv(&rx).await.unwrap()];
            got.sort();
            assert_eq!(
                got,
                [Signal::CHILD, term],
                "the storm crowded the other signal out"
            );
            assert_eq!(drain(&rx, Duration::from_millis(100)).await, 0);
        })
    });
}

/// Storms of `SIGCHLD` and `SIGUSR1` sent by four threads with `kill` (and `SIGCHLD` from
/// real children exiting) while the task receives: it keeps up (no hang, the M is not
/// stuck draining the pipe), and after the storm every signal sent after the receiver's
/// last one is followed by one more delivery: nothing is lost beyond coalescing.
#[test]
fn storms_of_sigchld_and_sigusr1_lose_nothing_beyond_coalescing() {
    serial(|| {
        runtime().block_on(async {
            let rx = signal::notify(&[Signal::CHILD, Signal::USER_DEFINED1]).unwrap();
            let stop = Arc::new(AtomicBool::new(false));
            let storm: Vec<_> = (0..4)
                .map(|t| {
                    let stop = stop.clone();
                    std::thread::spawn(move || {
                        let mut sent = 0u64;
                        while !stop.load(Ordering::Relaxed) && sent < 50_000 {
                            kill_self(if t % 2 == 0 {
                                Signal::CHILD
                            } else {
                                Signal::USER_DEFINED1
                            });
                            sent += 1;
                        }
                        sent
                    })
                })
                .collect();
            let children = std::thread::spawn(|| {
                for _ in 0..50 {
                    Command::new("true").status().unwrap();
                }
            });
            let mut got = [0u64; 2];
            let start = std::time::Instant::now();
            // Receive for 500 ms, or until the storm is over (each thread stops after 50,000).
            while start.elapsed() < Duration::from_millis(500) {
                match gort::time::timeout(Duration::from_millis(100), rx.recv()).await {
                    Ok(Some(Signal::CHILD)) => got[0] += 1,
                    Ok(Some(Signal::USER_DEFINED1)) => got[1] += 1,
                    Ok(other) => panic!("{other:?}"),
                    Err(_) if storm.iter().all(|t| t.is_finished()) => break,
                    Err(_) => {}
                }
            }
            stop.store(true, Ordering::Relaxed);
            let sent: u64 = storm.into_iter().map(|t| t.join().unwrap()).sum();
            children.join().unwrap();
            assert!(got[0] > 0 && got[1] > 0, "{got:?} of {sent} sent");
            drain(&rx, Duration::from_millis(300)).await;
            // Ping-pong after the storm: each signal sent on an empty channel comes.
            for i in 0..500 {
                let sig = if i % 2 == 0 {
                    Signal::CHILD
                } else {
                    Signal::USER_DEFINED1
                };
                kill_self(sig);
                assert_eq!(recv(&rx).await, Some(sig));
            }
            // Keep listening a while: no SIGUSR1 may arrive once nobody listens.
            drain(&rx, Duration::from_millis(300)).await;
        })
    });
}

/// The cases that may end their process, run by the parent tests below in a child each.
#[test]
fn child() {
    let Ok(case) = std::env::var(CHILD) else {
        return;
    };
    let sig = rt_signal(6);
    match case.as_str() {
        "shutdown_race" => {
            // Tasks subscribe in a loop while their runtime is dropped under them.
            for round in 0..20 {
                let rt = runtime();
                for _ in 0..16 {
                    rt.spawn(async move {
                        loop {
                            match signal::notify(&[sig, Signal::USER_DEFINED2]) {
                                Ok(rx) => {
                                    gort::yield_now().await;
                                    drop(rx);
                                }
                                Err(_) => return,
                            }
                            let keep = signal::notify(&[sig]);
                            gort::yield_now().await;
                            drop(keep);
                        }
                    });
                }
                std::thread::sleep(Duration::from_millis(5 + round % 5));
                drop(rt);
            }
            println!("runtimes dropped");
            // Nobody listens any more: the default action (the process ends) is back.
            kill_self(sig);
            std::thread::sleep(Duration::from_secs(20));
            println!("survived a signal nobody listens for");
        }
        "sigpipe_ignored" => {
            // Rust's runtime ignores SIGPIPE before main: listening for it delivers it, and
            // once nobody listens it is ignored again (not given a default that would kill).
            let pipe_write = || {
                let mut fds = [0; 2];
                // SAFETY: `fds` has room for the two descriptors `pipe` writes.
                assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
                // SAFETY: closing the read end this call just made; writing one byte from a
                // valid buffer to the write end, then closing it.
                unsafe {
                    libc::close(fds[0]);
                    let n = libc::write(fds[1], b"x".as_ptr().cast(), 1);
                    let e = std::io::Error::last_os_error();
                    libc::close(fds[1]);
                    assert_eq!((n, e.raw_os_error()), (-1, Some(libc::EPIPE)));
                }
            };
            runtime().block_on(async {
                let rx = signal::notify(&[Signal::PIPE]).unwrap();
                pipe_write();
                assert_eq!(recv(&rx).await, Some(Signal::PIPE));
                drop(rx);
                gort::time::sleep(Duration::from_millis(20)).await;
            });
            pipe_write();
            kill_self(Signal::PIPE);
            std::thread::sleep(Duration::from_millis(200));
            println!("SIGPIPE ignored again");
        }
        "storm_then_default" => {
            runtime().block_on(async {
                let rx = signal::notify(&[Signal::USER_DEFINED1]).unwrap();
                for _ in 0..10_000 {
                    kill_self(Signal::USER_DEFINED1);
                }
                assert_eq!(recv(&rx).await, Some(Signal::USER_DEFINED1));
                drain(&rx, Duration::from_millis(300)).await;
                println!("survived the storm while listening");
                drop(rx);
            });
            kill_self(Signal::USER_DEFINED1);
            std::thread::sleep(Duration::from_secs(20));
            println!("survived a SIGUSR1 after the receiver was dropped");
        }
        other => panic!("unknown case {other}"),
    }
}

/// Runs `child` with `case`: its exit status and standard output.
fn run_child(case: &str) -> (std::process::ExitStatus, String) {
    let out = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "child", "--nocapture", "--test-threads=1"])
        .env(CHILD, case)
        .output()
        .unwrap();
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    (out.status, text)
}

/// Subscriptions made by tasks of runtimes dropped under them: no hang, and once every
/// runtime is gone nobody listens, so the signal's default action ends the process.
#[test]
fn subscriptions_made_while_the_runtime_shuts_down_give_the_default_back() {
    let (status, out) = serial(|| run_child("shutdown_race"));
    assert!(out.contains("runtimes dropped"), "{status:?}: {out}");
    assert!(!out.contains("survived a signal"), "{out}");
    assert_eq!(
        status.signal(),
        Some(libc::SIGRTMIN() + 6),
        "{status:?}: {out}"
    );
}

/// `SIGPIPE`, ignored by Rust's runtime, is delivered while listened for and ignored again
/// afterwards: a write to a closed pipe fails with `EPIPE` and the process lives on.
#[test]
fn sigpipe_is_ignored_again_once_nobody_listens() {
    let (status, out) = serial(|| run_child("sigpipe_ignored"));
    assert!(status.success(), "{status:?}: {out}");
    assert!(out.contains("SIGPIPE ignored again"), "{out}");
}

/// After a storm of 10,000 `SIGUSR1` while listening, dropping the receiver gives the
/// default action back.
#[test]
fn a_storm_while_listening_then_the_default_action() {
    let (status, out) = serial(|| run_child("storm_then_default"));
    assert!(
        out.contains("survived the storm while listening"),
        "{status:?}: {out}"
    );
    assert!(!out.contains("after the receiver was dropped"), "{out}");
    assert_eq!(status.signal(), Some(libc::SIGUSR1), "{status:?}: {out}");
}
