//! Unix sockets shut down: a listener shut down through its descriptor under a blocked
//! accept, a datagram socket shut down for reading under a blocked receive, and sends after
//! a socket's own shutdown raising no `SIGPIPE`.

#[path = "support/temp_dir.rs"]
mod temp_dir;
#[allow(dead_code)] // open_fds
#[path = "support/watchdog.rs"]
mod watchdog;

use gort::net::{UnixDatagram, UnixListener, UnixStream};
use std::io::ErrorKind;
use std::sync::Arc;
use std::time::Duration;
use temp_dir::TempDir;
use watchdog::serial;

fn run<F: std::future::Future>(f: F) -> F::Output {
    gort::Runtime::new().unwrap().block_on(f)
}

/// Writes and sends after the socket's own `shutdown(Write)`, and datagrams to a peer that
/// is gone, fail with an error and raise no `SIGPIPE`, even where it has its default action
/// (run in a child process that restores it: the signal would kill it).
#[test]
fn sends_after_an_own_shutdown_fail_without_sigpipe() {
    const CHILD: &str = "GORT_ABUSE_UNIX_SIGPIPE_CHILD";
    if std::env::var_os(CHILD).is_none() {
        let out = serial(|| {
            std::process::Command::new(std::env::current_exe().unwrap())
                .args([
                    "sends_after_an_own_shutdown_fail_without_sigpipe",
                    "--exact",
                    "--nocapture",
                    "--test-threads=1",
                ])
                .env(CHILD, "1")
                .output()
                .unwrap()
        });
        let text = String::from_utf8_lossy(&out.stdout).into_owned()
            + &String::from_utf8_lossy(&out.stderr);
        assert!(
            out.status.success(),
            "the child died: {:?}\n{text}",
            out.status
        );
        assert!(text.contains("no SIGPIPE"), "{text}");
        return;
    }
    // SAFETY: setting a signal's disposition to SIG_DFL; no handler is installed.
    unsafe { libc::signal(libc::SIGPIPE, libc::SIG_DFL) };
    run(async {
        use std::net::Shutdown;
        let (c, _peer) = UnixStream::pair().unwrap();
        c.shutdown(Shutdown::Write).unwrap();
        let e = c.write(b"x").await.unwrap_err();
        assert_eq!(e.kind(), ErrorKind::BrokenPipe, "{e}");
        let e = c.write_all(b"x").await.unwrap_err();
        assert_eq!(e.kind(), ErrorKind::BrokenPipe, "{e}");
        let (r, w) = c.into_split();
        let e = w.write(b"x").await.unwrap_err();
        assert_eq!(e.kind(), ErrorKind::BrokenPipe, "{e}");
        drop((r, w));

        let (a, b) = UnixDatagram::pair().unwrap();
        a.shutdown(Shutdown::Write).unwrap();
        let e = a.send(b"x").await.unwrap_err();
        assert_eq!(e.kind(), ErrorKind::BrokenPipe, "{e}");
        drop(b);
        let (a, b) = UnixDatagram::pair().unwrap();
        drop(b);
        assert!(a.send(b"x").await.is_err(), "a send to a peer that is gone");
        let dir = TempDir::new("abuse-unix-sigpipe");
        let path = dir.join("d");
        let d = UnixDatagram::bind(&path).unwrap();
        let u = UnixDatagram::unbound().unwrap();
        u.shutdown(Shutdown::Write).unwrap();
        let e = u.send_to(b"x", &path).await.unwrap_err();
        assert_eq!(e.kind(), ErrorKind::BrokenPipe, "{e}");
        drop(d);
    });
    println!("no SIGPIPE");
}

/// A Unix listener shut down through its descriptor (`libc::shutdown`, as `fd.rs` suggests
/// to end a blocked operation) while an accept is blocked on it: the accept ends with
/// `InvalidInput`, as a TCP listener's does (`EINVAL`), and so does every later one; the
/// connection queued before the shutdown was accepted first. Before, the kernel said
/// `EAGAIN` for ever after one hang-up edge, and the accept waited for good.
#[test]
fn a_listener_shut_down_through_its_fd_ends_a_blocked_accept() {
    use std::os::fd::AsRawFd;
    serial(|| {
        run(async {
            let dir = TempDir::new("abuse-unix-lshut");
            let path = dir.join("l");
            let l = Arc::new(UnixListener::bind(&path).unwrap());
            let acceptor = gort::spawn({
                let l = l.clone();
                async move { l.accept().await.map(|_| ()) }
            });
            gort::time::sleep(Duration::from_millis(20)).await;
            // SAFETY: shutting down a socket this test owns; the descriptor stays open.
            assert_eq!(unsafe { libc::shutdown(l.as_raw_fd(), libc::SHUT_RDWR) }, 0);
            let res = gort::time::timeout(Duration::from_secs(10), acceptor)
                .await
                .expect("the accept still waits 10 s after the shutdown");
            let e = res.unwrap().unwrap_err();
            assert_eq!(e.kind(), ErrorKind::InvalidInput, "{e}");
            let e = l.accept().await.unwrap_err();
            assert_eq!(e.kind(), ErrorKind::InvalidInput, "{e}");

            // A connection queued before a shutdown of the read side only is accepted first.
            let path = dir.join("l2");
            let l = UnixListener::bind(&path).unwrap();
            let _c = UnixStream::connect(&path).await.unwrap();
            // SAFETY: as above.
            assert_eq!(unsafe { libc::shutdown(l.as_raw_fd(), libc::SHUT_RD) }, 0);
            let first = l.accept().await;
            let then = l.accept().await;
            assert!(first.is_ok(), "{:?}", first.map(|_| ()));
            let e = then.unwrap_err();
            assert_eq!(e.kind(), ErrorKind::InvalidInput, "{e}");
        })
    });
}

/// `UnixDatagram::shutdown(Read)` ends a receive blocked in another task with `Ok(0)`, and
/// later receives return `Ok(0)` at once, as its documentation says. The kernel says
/// `EAGAIN` to a non-blocking receive after the shutdown (a blocking one returns 0), after
/// one hang-up edge.
#[test]
fn a_datagram_socket_shut_down_for_reading_ends_a_blocked_receive() {
    serial(|| {
        run(async {
            use std::net::Shutdown;
            let (a, _b) = UnixDatagram::pair().unwrap();
            let a = Arc::new(a);
            let receiver = gort::spawn({
                let a = a.clone();
                async move { a.recv(&mut [0; 8]).await }
            });
            gort::time::sleep(Duration::from_millis(20)).await;
            a.shutdown(Shutdown::Read).unwrap();
            let res = gort::time::timeout(Duration::from_secs(10), receiver)
                .await
                .expect("the receive still waits 10 s after the shutdown");
            assert_eq!(res.unwrap().unwrap(), 0);
            assert_eq!(a.recv(&mut [0; 8]).await.unwrap(), 0);
            let (n, from) = a.recv_from(&mut [0; 8]).await.unwrap();
            assert_eq!(n, 0);
            assert!(from.is_unnamed(), "{from:?}");

            // Shut down for writing only, a socket still receives (and waits to).
            let (c, d) = UnixDatagram::pair().unwrap();
            c.shutdown(Shutdown::Write).unwrap();
            c.set_read_deadline(Some(gort::time::Instant::now() + Duration::from_millis(30)))
                .unwrap();
            let e = c.recv(&mut [0; 8]).await.unwrap_err();
            assert_eq!(e.kind(), ErrorKind::TimedOut, "{e}");
            c.set_read_deadline(None).unwrap();
            d.send(b"still").await.unwrap();
            let mut buf = [0; 8];
            assert_eq!(c.recv(&mut buf).await.unwrap(), 5);
            assert_eq!(&buf[..5], b"still");
        })
    });
}
