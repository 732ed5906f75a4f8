//! Ports of Go 1.19's `src/net/tcpsock_test.go`, one test per Go test that maps onto
//! [`gort::net::TcpListener`] and [`gort::net::TcpStream`] (named in each doc comment),
//! each under a watchdog.
//!
//! Not ported: TestResolveTCPAddr (std's `ToSocketAddrs` resolves), TestIPv6LinkLocalUnicastTCP
//! (needs a link-local interface; scope ids pass through std's `SocketAddrV6` untouched),
//! TestTCPReadWriteAllocs (gort's per-operation allocations are measured by the benchmarks
//! and `deadline_memory.rs`, not here), TestTCPStress (the stress suite's job).

#[path = "support/watchdog.rs"]
#[allow(dead_code)]
mod watchdog;

use gort::net::{TcpListener, TcpStream, UnixStream};
use std::net::Shutdown;
use std::sync::Arc;
use watchdog::within;

fn run<F: std::future::Future + Send + 'static>(f: F) -> F::Output
where
    F::Output: Send + 'static,
{
    within(|| gort::Runtime::new().unwrap().block_on(f))
}

/// Go: TestTCPListenerName (tcpsock_test.go). A listener bound to port 0 reports the
/// address and port it got.
#[test]
fn tcp_listener_name() {
    run(async {
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let a = l.local_addr().unwrap();
        assert!(a.ip().is_loopback() && a.port() != 0, "{a}");
    });
}

/// Go: TestTCPConcurrentAccept (tcpsock_test.go). Several tasks accept on one listener
/// while several dial it: every dial is accepted exactly once, and the accepting tasks
/// end when the listener's deadline is moved to now (gort's stand-in for Go's
/// `ln.Close()` from another goroutine).
#[test]
fn tcp_concurrent_accept() {
    run(async {
        const ACCEPTERS: usize = 4;
        const DIALS: usize = 100;
        let l = Arc::new(TcpListener::bind("127.0.0.1:0").await.unwrap());
        let addr = l.local_addr().unwrap();
        let mut accepters = Vec::new();
        for _ in 0..ACCEPTERS {
            let l = l.clone();
            accepters.push(gort::spawn(async move {
                let mut n = 0;
                loop {
                    match l.accept().await {
                        Ok((c, _)) => {
                            let mut b = [0; 1];
                            c.read_exact(&mut b).await.unwrap();
                            n += 1;
                        }
                        Err(e) => {
                            assert_eq!(e.kind(), std::io::ErrorKind::TimedOut, "{e}");
                            return n;
                        }
                    }
                }
            }));
        }
        let mut dialers = Vec::new();
        for _ in 0..DIALS {
            dialers.push(gort::spawn(async move {
                let c = TcpStream::connect(addr).await.unwrap();
                c.write_all(b"x").await.unwrap();
                c
            }));
        }
        let mut conns = Vec::new();
        for d in dialers {
            conns.push(d.await.unwrap());
        }
        // Each accepted connection is dropped once its byte is read, so every dialer reads
        // EOF once the accepters have served it; then the accepters are stopped.
        for c in &conns {
            assert_eq!(c.read(&mut [0; 1]).await.unwrap(), 0);
        }
        l.set_deadline(Some(gort::time::Instant::now())).unwrap();
        let mut accepted = 0;
        for a in accepters {
            accepted += a.await.unwrap();
        }
        assert_eq!(accepted, DIALS);
    });
}

/// Go: TestSelfConnect (Go's old tcp_test.go; the rule is `selfConnect` in 1.19's
/// tcpsock_posix.go). Dials to a local port nobody listens on must fail, never "connect"
/// to themselves: Linux may pick the destination port as the source (TCP's simultaneous
/// open), and Go closes such a socket and dials again. The port is an even one, the parity
/// Linux gives connects first, and the dials cycle through the whole ephemeral range
/// (before the fix, one in about 22 000 dials here came back self-connected).
#[test]
fn tcp_self_connect() {
    run(async {
        let (low, high) = ephemeral_range();
        let port = loop {
            let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            let p = l.local_addr().unwrap().port() + 1;
            drop(l);
            if p % 2 == 0 && std::net::TcpListener::bind(("127.0.0.1", p)).is_ok() {
                break p;
            }
        };
        for i in 0..(high - low + 1000) {
            if let Ok(c) = TcpStream::connect(("127.0.0.1", port)).await {
                let (l, p) = (c.local_addr().unwrap(), c.peer_addr().unwrap());
                assert_ne!(l, p, "dial #{i} to {p}: connected to itself");
            }
        }
    });
}

/// Linux's ephemeral port range (`ip_local_port_range`), or its default.
fn ephemeral_range() -> (u32, u32) {
    let r = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .unwrap_or_else(|_| "32768 60999".into());
    let mut it = r.split_whitespace().map(|x| x.parse().unwrap());
    (it.next().unwrap(), it.next().unwrap())
}

/// Go: TestTCPBig (tcpsock_test.go, which writes 5 GB behind `-tcpbig`): one `write_all`
/// of 64 MiB arrives whole and in order while the peer reads it in pieces.
#[test]
fn tcp_big() {
    run(async {
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = l.local_addr().unwrap();
        let size = 64 << 20;
        let pattern: Arc<Vec<u8>> = Arc::new((0..size).map(|i| (i % 251) as u8).collect());
        let writer = {
            let pattern = pattern.clone();
            gort::spawn(async move {
                let (c, _) = l.accept().await.unwrap();
                c.write_all(&pattern).await.unwrap();
            })
        };
        let c = TcpStream::connect(addr).await.unwrap();
        let mut buf = vec![0; 1 << 20];
        let mut got = 0usize;
        loop {
            let n = c.read(&mut buf).await.unwrap();
            if n == 0 {
                break;
            }
            // A memcmp against the pattern (cheap in debug builds too).
            assert!(got + n <= size, "more bytes than written");
            assert!(
                buf[..n] == pattern[got..got + n],
                "wrong bytes in {got}..{}",
                got + n
            );
            got += n;
        }
        assert_eq!(got, size);
        writer.await.unwrap();
    });
}

/// Go: TestCopyPipeIntoTCP (tcpsock_test.go). Go copies an `io.Pipe` into a TCP
/// connection with `io.Copy` (its splice path); gort has no pipe type, so the source is a
/// Unix stream pair and the copy a read/write loop (the `gort::net` table's `io.Copy`).
/// The 2 bytes written arrive, then EOF once the source ends: the reader's `ReadFull` of
/// 100 bytes gets 2 and `UnexpectedEof`.
#[test]
fn copy_pipe_into_tcp() {
    run(async {
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = l.local_addr().unwrap();
        let server = gort::spawn(async move {
            let (c, _) = l.accept().await.unwrap();
            let mut buf = [0; 100];
            let mut n = 0;
            loop {
                match c.read(&mut buf[n..]).await.unwrap() {
                    0 => break,
                    k => n += k,
                }
            }
            assert_eq!(n, 2);
            let e = c.read_exact(&mut [0; 100]).await.unwrap_err();
            assert_eq!(e.kind(), std::io::ErrorKind::UnexpectedEof);
        });
        let c = TcpStream::connect(addr).await.unwrap();
        let (pw, pr) = UnixStream::pair().unwrap();
        let copier = gort::spawn(async move {
            let mut buf = [0; 32];
            loop {
                match pr.read(&mut buf).await.unwrap() {
                    0 => break,
                    n => c.write_all(&buf[..n]).await.unwrap(),
                }
            }
            c.shutdown(Shutdown::Write).unwrap();
            c
        });
        pw.write_all(b"ab").await.unwrap();
        drop(pw);
        let _c = copier.await.unwrap();
        server.await.unwrap();
    });
}

/// Go: TestTCPConnSpecificMethods (protoconn_test.go). The TCP-specific setters (keep-alive
/// off then a 3 s period, no-delay off; `SetLinger` has no method: `AsRawFd`) and deadlines
/// all succeed on a dialed connection, which then still echoes through a server.
#[test]
fn tcp_conn_specific_methods() {
    run(async {
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = l.local_addr().unwrap();
        let server = gort::spawn(async move {
            let (c, _) = l.accept().await.unwrap();
            let mut b = [0; 128];
            let n = c.read(&mut b).await.unwrap();
            c.write_all(&b[..n]).await.unwrap();
        });
        let c = TcpStream::connect(addr).await.unwrap();
        c.set_keepalive(None).unwrap();
        assert_eq!(c.keepalive().unwrap(), None);
        c.set_keepalive(Some(std::time::Duration::from_secs(3)))
            .unwrap();
        assert_eq!(
            c.keepalive().unwrap(),
            Some(std::time::Duration::from_secs(3))
        );
        c.set_nodelay(false).unwrap();
        c.local_addr().unwrap();
        c.peer_addr().unwrap();
        let later = gort::time::Instant::now() + std::time::Duration::from_secs(10);
        c.set_deadline(Some(later)).unwrap();
        c.set_read_deadline(Some(later)).unwrap();
        c.set_write_deadline(Some(later)).unwrap();
        c.write_all(b"TCPCONN TEST").await.unwrap();
        let mut rb = [0; 128];
        assert_eq!(c.read(&mut rb).await.unwrap(), 12);
        server.await.unwrap();
    });
}

/// Go: TestTCPSpuriousConnSetupCompletion (tcpsock_unix_test.go). Many dials, a few at a
/// time, each bounded by 50 ms (Go's `Dialer.Timeout`: here `gort::time::timeout`), while
/// a server accepts, reads a byte and closes: a dial that reports success has a completed
/// connection, whose first write never fails with `NotConnected` (a spurious completion of
/// the non-blocking connect would).
#[test]
fn tcp_spurious_conn_setup_completion() {
    run(async {
        const ATTEMPTS: usize = 2000;
        const THROTTLE: usize = 4;
        let l = Arc::new(TcpListener::bind("127.0.0.1:0").await.unwrap());
        let addr = l.local_addr().unwrap();
        let acceptor = {
            let l = l.clone();
            gort::spawn(async move {
                while let Ok((c, _)) = l.accept().await {
                    gort::spawn(async move {
                        let _ = c.read(&mut [0; 1]).await;
                    });
                }
            })
        };
        let (tx, rx) = gort::chan::bounded::<()>(THROTTLE);
        let mut dials = Vec::new();
        for i in 0..ATTEMPTS {
            tx.send(()).await.unwrap();
            let rx = rx.clone();
            dials.push(gort::spawn(async move {
                let d = std::time::Duration::from_millis(50);
                if let Ok(Ok(c)) = gort::time::timeout(d, TcpStream::connect(addr)).await {
                    if let Err(e) = c.write(&[0]).await {
                        assert_ne!(e.kind(), std::io::ErrorKind::NotConnected, "#{i}: {e}");
                    }
                }
                rx.recv().await.unwrap();
            }));
        }
        for d in dials {
            d.await.unwrap();
        }
        l.set_deadline(Some(gort::time::Instant::now())).unwrap();
        acceptor.await.unwrap();
    });
}

/// Go: TestTCPSpuriousConnSetupCompletionWithCancel (tcpsock_unix_test.go), locally (Go's
/// dials golang.org:3): dials to a port nobody listens on, each dropped after a random
/// 0-5 ms (Go cancels its context), five at a time: none may succeed, so a dropped dial
/// leaves nothing behind that the next one could complete with.
#[test]
fn tcp_spurious_conn_setup_completion_with_cancel() {
    run(async {
        const TRIES: u64 = 2000;
        let port = {
            let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            l.local_addr().unwrap().port()
        };
        let (tx, rx) = gort::chan::bounded::<()>(5);
        let mut dials = Vec::new();
        for i in 0..TRIES {
            tx.send(()).await.unwrap();
            let rx = rx.clone();
            dials.push(gort::spawn(async move {
                // A cheap spread of 0-5 ms cancellation delays.
                let d = std::time::Duration::from_micros((i * 7919) % 5000);
                let r = gort::time::timeout(d, TcpStream::connect(("127.0.0.1", port))).await;
                assert!(
                    !matches!(r, Ok(Ok(_))),
                    "dial #{i} to an unbound port succeeded"
                );
                rx.recv().await.unwrap();
            }));
        }
        for d in dials {
            d.await.unwrap();
        }
    });
}
