//! A write to a connection the peer has closed fails with `EPIPE` (or `ECONNRESET`) and never
//! raises `SIGPIPE`, even in a process where `SIGPIPE` has its default action (it ends the
//! process): a CLI that restores it for `| head`, a library loaded by a C host, a binary
//! built with `-Zon-broken-pipe=kill`. Go ignores `SIGPIPE` for every descriptor but 1 and 2;
//! Rust's `main` ignores it only in binaries it starts. Each case runs in a child process
//! (this test binary, started again) that sets `SIG_DFL` first: the parent sees whether it
//! was killed.

use gort::net::{TcpListener, TcpStream, UnixStream};
use std::io::ErrorKind;
use std::process::Command;
use std::time::Duration;

/// Set in the child: run the case, with `SIGPIPE`'s default action.
const CHILD: &str = "GORT_SIGPIPE_CHILD";

/// Runs the test `name` of this binary in a child process and checks that it exited
/// normally (a `SIGPIPE` would kill it: signal 13).
fn in_child(name: &str, case: impl FnOnce()) {
    if std::env::var_os(CHILD).is_some() {
        // SAFETY: setting a signal's disposition to SIG_DFL; no handler is installed.
        unsafe { libc::signal(libc::SIGPIPE, libc::SIG_DFL) };
        case();
        return;
    }
    let exe = std::env::current_exe().unwrap();
    let out = Command::new(exe)
        .args([name, "--exact", "--nocapture", "--test-threads=1"])
        .env(CHILD, "1")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "the child died: {:?}\n{}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Whether `e` is what a write to a closed connection gives.
fn is_closed_error(e: &std::io::Error) -> bool {
    matches!(e.kind(), ErrorKind::BrokenPipe | ErrorKind::ConnectionReset)
}

/// Writes `chunk`s with `write` until it fails (the peer is gone), returning the error.
async fn write_until_error<F, Fut>(mut write: F) -> std::io::Error
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = std::io::Result<usize>>,
{
    for _ in 0..10_000 {
        if let Err(e) = write().await {
            return e;
        }
        gort::time::sleep(Duration::from_millis(1)).await;
    }
    panic!("writes to a closed peer kept succeeding");
}

#[test]
fn tcp_write_to_a_closed_peer_fails_without_sigpipe() {
    in_child("tcp_write_to_a_closed_peer_fails_without_sigpipe", || {
        gort::Runtime::new().unwrap().block_on(async {
            let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
            let c = TcpStream::connect(l.local_addr().unwrap()).await.unwrap();
            drop(l.accept().await.unwrap());
            let e = write_until_error(|| c.write(b"x")).await;
            assert!(is_closed_error(&e), "{e:?}");
        });
    });
}

#[test]
fn unix_write_to_a_closed_peer_fails_without_sigpipe() {
    in_child("unix_write_to_a_closed_peer_fails_without_sigpipe", || {
        gort::Runtime::new().unwrap().block_on(async {
            let (a, b) = UnixStream::pair().unwrap();
            drop(b);
            let e = write_until_error(|| a.write(b"x")).await;
            assert!(is_closed_error(&e), "{e:?}");
            let e = a.write_all(&[7; 100_000]).await.unwrap_err();
            assert!(is_closed_error(&e), "{e:?}");
        });
    });
}

/// The ecosystem's vectored writes (`writev`: hyper's head and body in one call).
#[cfg(feature = "tokio-io")]
#[test]
fn vectored_writes_to_a_closed_peer_fail_without_sigpipe() {
    use std::io::IoSlice;
    use tokio::io::AsyncWriteExt;
    in_child(
        "vectored_writes_to_a_closed_peer_fail_without_sigpipe",
        || {
            gort::Runtime::new().unwrap().block_on(async {
                let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
                let c = TcpStream::connect(l.local_addr().unwrap()).await.unwrap();
                drop(l.accept().await.unwrap());
                let bufs = [IoSlice::new(b"head"), IoSlice::new(b"body")];
                let e = write_until_error(|| async { (&c).write_vectored(&bufs).await }).await;
                assert!(is_closed_error(&e), "{e:?}");

                let (a, b) = UnixStream::pair().unwrap();
                drop(b);
                let e = write_until_error(|| async { (&a).write_vectored(&bufs).await }).await;
                assert!(is_closed_error(&e), "{e:?}");
            });
        },
    );
}
