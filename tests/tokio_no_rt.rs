//! Tokio's `no_rt.rs` and `net_bind_resource.rs`, ported to gort: gort's calls made outside a
//! runtime (no `block_on`, no task; futures polled by `futures::executor::block_on`) end in a
//! panic that says what to do, or in an error, and never hang (each case runs under the
//! watchdog).
//!
//! Where gort deliberately differs (its rustdoc says so): `gort::net` outside a runtime
//! returns an error ("gort::net must be used inside a gort runtime") where Tokio panics, so
//! `panics_when_no_reactor`, `io_panics_when_no_tokio_context` and
//! `no_runtime_panics_binding_net_tcp_listener` check the error; timers panic, as Tokio's do.
//! Skipped: `fs_panics_when_no_tokio_context` and `stdout_panics_when_no_tokio_context`
//! (gort has no `fs` or `io::stdout`); `net_panic.rs` (its `from_std` panics come from a
//! runtime without I/O, and gort's I/O is always on; outside a runtime they are the errors
//! checked here); `io_panic.rs` (its panics are `tokio::io`'s own utilities: `ReadBuf`,
//! `duplex`, `AsyncFd`, `BufReader`, which gort runs unchanged or does not have).

mod support;

use std::io::ErrorKind;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::time::Duration;
use support::{panic_message, within};

/// The message `f` panicked with, under the watchdog; `None` if it returned.
fn panic_of(f: impl FnOnce() + Send + 'static) -> Option<String> {
    within(move || catch_unwind(AssertUnwindSafe(f)).err().map(panic_message))
}

/// Asserts that `f` panics with a message that names the gort runtime it needs.
#[track_caller]
fn panics_outside(what: &str, f: impl FnOnce() + Send + 'static) {
    match panic_of(f) {
        Some(msg) => assert!(
            msg.contains("gort runtime"),
            "{what}: the panic does not say a gort runtime is needed: {msg:?}"
        ),
        None => panic!("{what}: no panic outside a runtime"),
    }
}

/// Asserts that `err` says a gort runtime is needed.
#[track_caller]
fn needs_runtime(what: &str, err: std::io::Error) {
    assert!(
        err.to_string().contains("gort runtime"),
        "{what}: the error does not say a gort runtime is needed: {err}"
    );
}

// no_rt.rs
#[test]
fn timeout_panics_when_no_tokio_context() {
    panics_outside("timeout", || {
        let (_tx, rx) = tokio::sync::oneshot::channel::<()>();
        let dur = Duration::from_millis(10);
        let _ = futures::executor::block_on(gort::time::timeout(dur, rx));
    });
}

// no_rt.rs: an error, not Tokio's panic.
#[test]
fn panics_when_no_reactor() {
    let err = within(|| {
        let srv = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = srv.local_addr().unwrap();
        futures::executor::block_on(gort::net::TcpStream::connect(addr)).unwrap_err()
    });
    needs_runtime("TcpStream::connect", err);
}

// no_rt.rs: an error, not Tokio's panic.
#[test]
fn io_panics_when_no_tokio_context() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let err = gort::net::TcpListener::from_std(listener).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Other);
    needs_runtime("TcpListener::from_std", err);
}

// net_bind_resource.rs: an error, not Tokio's panic.
#[test]
fn no_runtime_panics_binding_net_tcp_listener() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("failed to bind listener");
    let err = gort::net::TcpListener::from_std(listener).unwrap_err();
    needs_runtime("TcpListener::from_std", err);
}

/// The rest of `gort::net` the same way: binds, connects and `from_std` of every socket.
#[test]
fn every_socket_outside_a_runtime_is_an_error() {
    let errs = within(|| {
        use futures::executor::block_on;
        use gort::net::*;
        let dir = std::env::temp_dir().join(format!("gort-no-rt-{}", std::process::id()));
        let _ = std::fs::create_dir(&dir);
        let path = dir.join("sock");
        let std_l = std::os::unix::net::UnixListener::bind(&path).unwrap();
        let errs = vec![
            (
                "TcpListener::bind",
                block_on(TcpListener::bind("127.0.0.1:0")).unwrap_err(),
            ),
            (
                "UdpSocket::bind",
                block_on(UdpSocket::bind("127.0.0.1:0")).unwrap_err(),
            ),
            (
                "UnixListener::bind",
                UnixListener::bind(dir.join("other")).unwrap_err(),
            ),
            (
                "UnixStream::connect",
                block_on(UnixStream::connect(&path)).unwrap_err(),
            ),
            ("UnixStream::pair", UnixStream::pair().unwrap_err()),
            (
                "UnixDatagram::unbound",
                UnixDatagram::unbound().unwrap_err(),
            ),
            (
                "UnixListener::from_std",
                UnixListener::from_std(std_l).unwrap_err(),
            ),
            (
                "UdpSocket::from_std",
                UdpSocket::from_std(std::net::UdpSocket::bind("127.0.0.1:0").unwrap()).unwrap_err(),
            ),
        ];
        let _ = std::fs::remove_dir_all(&dir);
        errs
    });
    for (what, err) in errs {
        needs_runtime(what, err);
    }
}

/// `gort::signal::notify` outside a runtime (Tokio's `signal_no_rt.rs`, also in
/// `tokio_signal.rs`): an error.
#[test]
fn signal_notify_is_an_error() {
    let err = gort::signal::notify(&[gort::signal::Signal::HANGUP]).unwrap_err();
    needs_runtime("signal::notify", err);
}

/// Spawning, and every timer that has to wait, panics and says where to call it.
#[test]
fn spawns_and_timers_panic_with_a_clear_message() {
    panics_outside("spawn", || drop(gort::spawn(async {})));
    panics_outside("spawn_blocking", || drop(gort::spawn_blocking(|| {})));
    panics_outside("Handle::current", || drop(gort::Handle::current()));
    panics_outside("JoinSet::spawn", || {
        gort::task::JoinSet::new().spawn(async {});
    });
    panics_outside("sleep", || {
        futures::executor::block_on(gort::time::sleep(Duration::from_millis(10)))
    });
    panics_outside("sleep_until", || {
        let at = gort::time::Instant::now() + Duration::from_millis(10);
        futures::executor::block_on(gort::time::sleep_until(at))
    });
    panics_outside("Interval::tick", || {
        let mut i = gort::time::interval(Duration::from_millis(10));
        futures::executor::block_on(async {
            i.tick().await;
            i.tick().await;
        })
    });
    panics_outside("Timer::new", || {
        drop(gort::time::Timer::new(Duration::from_secs(1)))
    });
    panics_outside("Ticker::new", || {
        drop(gort::time::Ticker::new(Duration::from_secs(1)))
    });
    panics_outside("after", || drop(gort::time::after(Duration::from_secs(1))));
    panics_outside("after_func", || {
        drop(gort::time::after_func(Duration::from_secs(1), || {}))
    });
}

/// What needs no runtime works without one, as Tokio's `yield_now` and `sync` do: channels,
/// contexts without deadlines, a `WaitGroup`, `yield_now`, a ready `sleep(0)`: only
/// `std::task::Waker`s are involved.
#[test]
fn what_needs_no_runtime_works_without_one() {
    within(|| {
        use futures::executor::block_on;
        let (tx, rx) = gort::chan::bounded::<u32>(0);
        let sender = std::thread::spawn(move || block_on(tx.send(7)).unwrap());
        assert_eq!(block_on(rx.recv()), Some(7));
        sender.join().unwrap();

        let (ctx, cancel) = gort::context::with_cancel(&gort::context::Context::background());
        std::thread::spawn(move || cancel.cancel());
        block_on(ctx.done().recv());
        assert_eq!(ctx.err(), Some(gort::context::Error::Canceled));

        let wg = gort::sync::WaitGroup::new();
        wg.add(1);
        let done = wg.clone();
        std::thread::spawn(move || done.done());
        block_on(wg.wait());

        block_on(gort::yield_now());
        block_on(gort::time::sleep(Duration::ZERO));
    });
}
