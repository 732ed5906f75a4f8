//! Ports of Go 1.19's `src/net/net_test.go` (and `conn_test.go`'s TestConnAndListener), one
//! test per Go test that maps onto gort's API (named in each doc comment), on TCP and Unix
//! streams. Every test runs under a watchdog, so a hang fails it instead of stalling the run.
//!
//! Not ported: TestConnClose and TestPacketConnClose (a second `Close` and operations after
//! `Close`: a gort socket is closed by dropping it, so neither can be written), and
//! TestPacketConnClose's other half is a drop.

#[path = "support/watchdog.rs"]
#[allow(dead_code)]
mod watchdog;

#[allow(dead_code)] // not every helper is used by this binary
#[path = "support/tcp.rs"]
mod tcp;

use gort::net::{TcpListener, TcpStream, UnixListener, UnixStream};
use gort::time::Instant;
use std::io::ErrorKind;
use std::net::Shutdown;
use std::sync::Arc;
use std::time::Duration;
use tcp::linger_zero;
use watchdog::within;

fn run<F: std::future::Future + Send + 'static>(f: F) -> F::Output
where
    F::Output: Send + 'static,
{
    within(|| gort::Runtime::new().unwrap().block_on(f))
}

async fn tcp_pair() -> (TcpStream, TcpStream) {
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    let c = gort::spawn(async move { TcpStream::connect(addr).await.unwrap() });
    let (s, _) = l.accept().await.unwrap();
    (c.await.unwrap(), s)
}

/// Go: TestCloseRead (net_test.go). After `CloseRead`, a read returns no data: gort's (and
/// Linux's) `Ok(0)`, which is Go's `io.EOF`. (Bytes already queued before the `CloseRead`
/// are still delivered on Linux, in Go as in gort: the kernel's rule, not tested here.)
#[test]
fn close_read() {
    run(async {
        let (c, s) = tcp_pair().await;
        c.shutdown(Shutdown::Read).unwrap();
        let mut b = [0; 1];
        assert_eq!(c.read(&mut b).await.unwrap(), 0);
        assert_eq!(c.read(&mut b).await.unwrap(), 0);
        // The write half still works.
        c.write_all(b"x").await.unwrap();
        s.read_exact(&mut b).await.unwrap();
        assert_eq!(&b, b"x");

        let (u, _v) = UnixStream::pair().unwrap();
        u.shutdown(Shutdown::Read).unwrap();
        assert_eq!(u.read(&mut b).await.unwrap(), 0);
    });
}

/// Go: TestCloseWrite (net_test.go). The peer of a `CloseWrite` reads its data then EOF;
/// a write after one's own `CloseWrite` fails (`BrokenPipe`, no SIGPIPE), and reads still
/// work: on TCP and on Unix streams.
#[test]
fn close_write() {
    run(async {
        let (c, s) = tcp_pair().await;
        let server = gort::spawn(async move {
            let mut buf = [0; 64];
            let mut got = Vec::new();
            loop {
                match s.read(&mut buf).await.unwrap() {
                    0 => break,
                    n => got.extend_from_slice(&buf[..n]),
                }
            }
            assert_eq!(got, b"CLOSE WRITE TEST");
            s.write_all(b"reply").await.unwrap();
            s.shutdown(Shutdown::Write).unwrap();
            let e = s.write(b"late").await.unwrap_err();
            assert_eq!(e.kind(), ErrorKind::BrokenPipe, "{e}");
        });
        c.write_all(b"CLOSE WRITE TEST").await.unwrap();
        c.shutdown(Shutdown::Write).unwrap();
        let mut reply = Vec::new();
        let mut buf = [0; 64];
        loop {
            match c.read(&mut buf).await.unwrap() {
                0 => break,
                n => reply.extend_from_slice(&buf[..n]),
            }
        }
        assert_eq!(reply, b"reply");
        let e = c.write(b"late").await.unwrap_err();
        assert_eq!(e.kind(), ErrorKind::BrokenPipe, "{e}");
        server.await.unwrap();

        let (u, v) = UnixStream::pair().unwrap();
        u.write_all(b"unix").await.unwrap();
        u.shutdown(Shutdown::Write).unwrap();
        let mut b = [0; 4];
        v.read_exact(&mut b).await.unwrap();
        assert_eq!(v.read(&mut b).await.unwrap(), 0);
        let e = u.write(b"late").await.unwrap_err();
        assert_eq!(e.kind(), ErrorKind::BrokenPipe, "{e}");
        v.write_all(b"back").await.unwrap();
        u.read_exact(&mut b).await.unwrap();
        assert_eq!(&b, b"back");
    });
}

/// Go: TestListenerClose (net_test.go). Once a listener is closed (dropped), dialing its
/// address fails, and so does `Accept` (here: there is no listener left to call it on).
#[test]
fn listener_close() {
    run(async {
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = l.local_addr().unwrap();
        drop(l);
        let e = TcpStream::connect(addr).await.unwrap_err();
        assert_eq!(e.kind(), ErrorKind::ConnectionRefused, "{e}");

        let dir = std::env::temp_dir().join(format!("gort-go-net-lc-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("sock");
        let l = UnixListener::bind(&path).unwrap();
        drop(l);
        let e = UnixStream::connect(&path).await.unwrap_err();
        assert_eq!(e.kind(), ErrorKind::ConnectionRefused, "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    });
}

/// Go: TestListenCloseListen (net_test.go). A closed listener's address can be listened on
/// again at once, even after it accepted a connection (Go sets `SO_REUSEADDR`).
#[test]
fn listen_close_listen() {
    run(async {
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = l.local_addr().unwrap();
        let c = TcpStream::connect(addr).await.unwrap();
        let (s, _) = l.accept().await.unwrap();
        // The server side closes first, so its socket sits in TIME_WAIT on `addr`.
        drop(s);
        let mut b = [0; 1];
        assert_eq!(c.read(&mut b).await.unwrap(), 0);
        drop(c);
        drop(l);
        let l = TcpListener::bind(addr).await.unwrap();
        assert_eq!(l.local_addr().unwrap(), addr);
    });
}

/// Go: TestAcceptIgnoreAbortedConnRequest (net_test.go). Go's test fakes `ECONNABORTED`
/// from accept through a hook; the real case is a client that resets before its connection
/// is accepted. Accept must not fail for it: it returns that connection (whose read reports
/// the reset) or skips it, and the next good connection is accepted.
#[test]
fn accept_ignore_aborted_conn_request() {
    run(async {
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = l.local_addr().unwrap();
        let aborted = TcpStream::connect(addr).await.unwrap();
        linger_zero(&aborted);
        let aborted_port = aborted.local_addr().unwrap().port();
        drop(aborted);
        let good = TcpStream::connect(addr).await.unwrap();
        let good_port = good.local_addr().unwrap().port();
        good.write_all(b"ok").await.unwrap();
        loop {
            let (s, from) = l.accept().await.unwrap();
            if from.port() == aborted_port {
                let mut b = [0; 1];
                match s.read(&mut b).await {
                    Ok(0) => {}
                    Err(e) => assert_eq!(e.kind(), ErrorKind::ConnectionReset, "{e}"),
                    Ok(n) => panic!("read {n} bytes from an aborted connection"),
                }
                continue;
            }
            assert_eq!(from.port(), good_port);
            let mut b = [0; 2];
            s.read_exact(&mut b).await.unwrap();
            assert_eq!(&b, b"ok");
            break;
        }
    });
}

/// Go: TestZeroByteRead (net_test.go). A read into an empty buffer returns 0 at once, with
/// no error and without waiting for data, on TCP and Unix streams.
#[test]
fn zero_byte_read() {
    run(async {
        let (c, _s) = tcp_pair().await;
        let (u, _v) = UnixStream::pair().unwrap();
        for _ in 0..3 {
            assert_eq!(c.read(&mut []).await.unwrap(), 0);
            assert_eq!(u.read(&mut []).await.unwrap(), 0);
        }
        // With data pending too, and the data is still there afterwards.
        _s.write_all(b"d").await.unwrap();
        assert_eq!(c.read(&mut []).await.unwrap(), 0);
        let mut b = [0; 1];
        c.read_exact(&mut b).await.unwrap();
        assert_eq!(&b, b"d");
    });
}

/// Go: TestCloseUnblocksRead (net_test.go). Go closes the conn from another goroutine; a
/// gort socket that a blocked task holds cannot be dropped (it borrows it), so the other
/// task calls `shutdown(Shutdown::Both)` (the rule in `gort::net`'s table): the blocked
/// read returns `Ok(0)` (Go: an error), and a later write fails. Both ends, TCP and Unix.
#[test]
fn close_unblocks_read() {
    run(async {
        for client_side in [false, true] {
            let (c, s) = tcp_pair().await;
            let (c, s) = (Arc::new(c), Arc::new(s));
            let (reader, other) = if client_side { (c, s) } else { (s, c) };
            let r = reader.clone();
            let blocked = gort::spawn(async move {
                let mut b = [0; 8];
                r.read(&mut b).await
            });
            gort::time::sleep(Duration::from_millis(20)).await;
            reader.shutdown(Shutdown::Both).unwrap();
            assert_eq!(blocked.await.unwrap().unwrap(), 0);
            let e = reader.write(b"x").await.unwrap_err();
            assert_eq!(e.kind(), ErrorKind::BrokenPipe, "{e}");
            drop(other);
        }
        let (u, _v) = UnixStream::pair().unwrap();
        let u = Arc::new(u);
        let r = u.clone();
        let blocked = gort::spawn(async move { r.read(&mut [0; 8]).await });
        gort::time::sleep(Duration::from_millis(20)).await;
        u.shutdown(Shutdown::Both).unwrap();
        assert_eq!(blocked.await.unwrap().unwrap(), 0);
    });
}

/// Go: TestNotTemporaryRead (net_test.go). A read that fails because the peer reset the
/// connection reports the reset, not a timeout (Go: `!err.Timeout()`).
#[test]
fn not_temporary_read() {
    run(async {
        let (c, s) = tcp_pair().await;
        linger_zero(&s);
        drop(s);
        let e = c.read(&mut [0; 8]).await.unwrap_err();
        assert_eq!(e.kind(), ErrorKind::ConnectionReset, "{e}");
    });
}

/// Go: TestReadTimeoutUnblocksRead (net_test.go). A read deadline set in the past by
/// another task unblocks a read already waiting, with `TimedOut` (Go's
/// `os.ErrDeadlineExceeded`), and the connection stays usable after the deadline is
/// cleared.
#[test]
fn read_timeout_unblocks_read() {
    run(async {
        let (c, s) = tcp_pair().await;
        let c = Arc::new(c);
        let r = c.clone();
        let blocked = gort::spawn(async move { r.read(&mut [0; 8]).await });
        gort::time::sleep(Duration::from_millis(20)).await;
        c.set_read_deadline(Some(Instant::now() - Duration::from_secs(1)))
            .unwrap();
        let e = blocked.await.unwrap().unwrap_err();
        assert_eq!(e.kind(), ErrorKind::TimedOut, "{e}");
        c.set_read_deadline(None).unwrap();
        s.write_all(b"y").await.unwrap();
        let mut b = [0; 1];
        c.read_exact(&mut b).await.unwrap();
        assert_eq!(&b, b"y");
    });
}

/// Go: TestConnAndListener (conn_test.go). For each stream network: listen, dial, check
/// the addresses on both ends, and echo a message through the listener's server.
#[test]
fn conn_and_listener() {
    run(async {
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = l.local_addr().unwrap();
        let server = gort::spawn(async move {
            let (s, from) = l.accept().await.unwrap();
            assert_eq!(s.peer_addr().unwrap(), from);
            assert_eq!(s.local_addr().unwrap(), addr);
            let mut buf = [0; 64];
            loop {
                match s.read(&mut buf).await.unwrap() {
                    0 => return,
                    n => s.write_all(&buf[..n]).await.unwrap(),
                }
            }
        });
        let c = TcpStream::connect(addr).await.unwrap();
        assert_eq!(c.peer_addr().unwrap(), addr);
        assert_eq!(c.local_addr().unwrap().ip(), addr.ip());
        c.write_all(b"TCP CONN TEST").await.unwrap();
        let mut b = [0; 13];
        c.read_exact(&mut b).await.unwrap();
        assert_eq!(&b, b"TCP CONN TEST");
        c.shutdown(Shutdown::Write).unwrap();
        server.await.unwrap();

        let dir = std::env::temp_dir().join(format!("gort-go-net-cl-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("sock");
        let l = UnixListener::bind(&path).unwrap();
        assert_eq!(l.local_addr().unwrap().as_pathname(), Some(path.as_path()));
        let p = path.clone();
        let server = gort::spawn(async move {
            let (s, _) = l.accept().await.unwrap();
            assert_eq!(s.local_addr().unwrap().as_pathname(), Some(p.as_path()));
            let mut buf = [0; 64];
            let n = s.read(&mut buf).await.unwrap();
            s.write_all(&buf[..n]).await.unwrap();
        });
        let c = UnixStream::connect(&path).await.unwrap();
        assert_eq!(c.peer_addr().unwrap().as_pathname(), Some(path.as_path()));
        c.write_all(b"UNIX").await.unwrap();
        let mut b = [0; 4];
        c.read_exact(&mut b).await.unwrap();
        assert_eq!(&b, b"UNIX");
        server.await.unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
    });
}
