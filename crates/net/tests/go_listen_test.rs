//! Ports of Go 1.19's `src/net/listen_test.go`, one test per Go test that maps onto gort's
//! listeners (named in each doc comment), each under a watchdog.
//!
//! Not ported: TestWildWildcardListener (Go's empty-host forms: std's `ToSocketAddrs`
//! needs a host), the multicast listeners (gort's `UdpSocket` has no group joins; set them
//! through `AsRawFd`), TestListenConfigControl (no `ListenConfig.Control`: `from_std` a
//! socket configured first).

#[path = "support/watchdog.rs"]
#[allow(dead_code)]
mod watchdog;

use gort::net::{TcpListener, TcpStream, UdpSocket};
use std::io::ErrorKind;
use std::sync::Arc;
use std::time::Duration;
use watchdog::within;

fn run<F: std::future::Future + Send + 'static>(f: F) -> F::Output
where
    F::Output: Send + 'static,
{
    within(|| gort::Runtime::new().unwrap().block_on(f))
}

/// Go: TestTCPListener (listen_test.go). A second listener on an address already listened
/// on fails with `AddrInUse`, and the first keeps working.
#[test]
fn tcp_listener() {
    run(async {
        for host in ["127.0.0.1", "[::1]"] {
            let Ok(l1) = TcpListener::bind(format!("{host}:0")).await else {
                continue; // no IPv6 loopback here
            };
            let addr = l1.local_addr().unwrap();
            let e = TcpListener::bind(addr).await.unwrap_err();
            assert_eq!(e.kind(), ErrorKind::AddrInUse, "{e}");
            let _c = TcpStream::connect(addr).await.unwrap();
            l1.accept().await.unwrap();
        }
    });
}

/// Go: TestUDPListener (listen_test.go). A second UDP socket bound to a bound address
/// fails with `AddrInUse`.
#[test]
fn udp_listener() {
    run(async {
        let c1 = UdpSocket::bind("127.0.0.1:0").await.unwrap();
        let e = UdpSocket::bind(c1.local_addr().unwrap()).await.unwrap_err();
        assert_eq!(e.kind(), ErrorKind::AddrInUse, "{e}");
    });
}

/// Go: TestDualStackTCPListener (listen_test.go). A listener on the IPv6 wildcard also
/// takes IPv4 connections (Linux's default `bindv6only=0`, as Go's "tcp" listeners), and
/// an IPv4 listener cannot then take the same port.
#[test]
fn dual_stack_tcp_listener() {
    run(async {
        if std::fs::read_to_string("/proc/sys/net/ipv6/bindv6only")
            .map_or(true, |s| s.trim() != "0")
        {
            return; // not dual-stack by default here
        }
        let Ok(l) = TcpListener::bind("[::]:0").await else {
            return; // no IPv6 here
        };
        let port = l.local_addr().unwrap().port();
        let c = TcpStream::connect(("127.0.0.1", port)).await.unwrap();
        let (s, from) = l.accept().await.unwrap();
        assert_eq!(from.port(), c.local_addr().unwrap().port());
        c.write_all(b"v4").await.unwrap();
        let mut b = [0; 2];
        s.read_exact(&mut b).await.unwrap();
        let e = TcpListener::bind(("0.0.0.0", port)).await.unwrap_err();
        assert_eq!(e.kind(), ErrorKind::AddrInUse, "{e}");
    });
}

/// Go: TestDualStackUDPListener (listen_test.go). A socket on the IPv6 wildcard receives
/// IPv4 datagrams too.
#[test]
fn dual_stack_udp_listener() {
    run(async {
        if std::fs::read_to_string("/proc/sys/net/ipv6/bindv6only")
            .map_or(true, |s| s.trim() != "0")
        {
            return;
        }
        let Ok(c) = UdpSocket::bind("[::]:0").await else {
            return;
        };
        let port = c.local_addr().unwrap().port();
        let s = UdpSocket::bind("127.0.0.1:0").await.unwrap();
        s.send_to(b"v4", ("127.0.0.1", port)).await.unwrap();
        let mut b = [0; 2];
        let (n, from) = c.recv_from(&mut b).await.unwrap();
        assert_eq!(n, 2);
        assert_eq!(from.port(), s.local_addr().unwrap().port());
    });
}

/// Go: TestClosingListener (listen_test.go). A listener closed while a task waits in its
/// accept loop leaves its address free to listen on again at once. Go closes it from
/// another goroutine; gort ends the wait with a passed deadline and the last `Arc` drops.
#[test]
fn closing_listener() {
    run(async {
        let l = Arc::new(TcpListener::bind("127.0.0.1:0").await.unwrap());
        let addr = l.local_addr().unwrap();
        let acceptor = {
            let l = l.clone();
            gort::spawn(async move {
                while let Ok((c, _)) = l.accept().await {
                    drop(c);
                }
            })
        };
        gort::time::sleep(Duration::from_millis(1)).await;
        l.set_deadline(Some(gort::time::Instant::now())).unwrap();
        acceptor.await.unwrap();
        drop(l);
        let l2 = TcpListener::bind(addr).await.unwrap();
        assert_eq!(l2.local_addr().unwrap(), addr);
    });
}
