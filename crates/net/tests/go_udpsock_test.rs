//! Ports of Go 1.19's `src/net/udpsock_test.go`, one test per Go test that maps onto
//! [`gort::net::UdpSocket`] (named in each doc comment), each under a watchdog.
//!
//! Not ported: TestResolveUDPAddr (gort resolves through std's `ToSocketAddrs`),
//! TestIPv6LinkLocalUnicastUDP (needs a link-local interface and zones, which gort's
//! addresses, std's `SocketAddrV6` scope ids, pass through untouched), TestAllocs and
//! TestUDPIPVersionReadMsg / TestIPv6WriteMsgUDPAddrPortTargetAddrIPVersion (gort has no
//! `ReadMsgUDP`/`WriteMsgUDPAddrPort`, no out-of-band data), TestUDPReadTimeout (in
//! `go_timeout_test.rs`).

#[path = "support/watchdog.rs"]
#[allow(dead_code)]
mod watchdog;

use gort::net::UdpSocket;
use std::io::ErrorKind;
use std::net::SocketAddr;
use watchdog::within;

fn run<F: std::future::Future + Send + 'static>(f: F) -> F::Output
where
    F::Output: Send + 'static,
{
    within(|| gort::Runtime::new().unwrap().block_on(f))
}

/// A bound socket `c1` and a socket `c2` connected to it (Go's `newLocalPacketListener`
/// and `Dial("udp", c1.LocalAddr())`).
async fn dialed() -> (UdpSocket, UdpSocket) {
    let c1 = UdpSocket::bind("127.0.0.1:0").await.unwrap();
    let c2 = UdpSocket::bind("127.0.0.1:0").await.unwrap();
    c2.connect(c1.local_addr().unwrap()).await.unwrap();
    (c1, c2)
}

/// Go: TestWriteToUDP (udpsock_test.go). `WriteTo` on an unconnected socket reaches the
/// address; on a connected one, `Write` reaches the peer, and `WriteTo` another address
/// fails in Go (`ErrWriteToConnected`) but is allowed by Linux and gort (as std's and
/// Tokio's `send_to`): checked to deliver where it was sent.
#[test]
fn write_to_udp() {
    run(async {
        let c = UdpSocket::bind("127.0.0.1:0").await.unwrap();
        let peer = UdpSocket::bind("127.0.0.1:0").await.unwrap();
        let pa = peer.local_addr().unwrap();
        assert_eq!(c.send_to(b"WRITETO TEST", pa).await.unwrap(), 12);
        let mut b = [0; 32];
        let (n, from) = peer.recv_from(&mut b).await.unwrap();
        assert_eq!(
            (&b[..n], from),
            (&b"WRITETO TEST"[..], c.local_addr().unwrap())
        );

        let (c1, c2) = dialed().await;
        assert_eq!(c2.send(b"WRITE TEST").await.unwrap(), 10);
        let (n, from) = c1.recv_from(&mut b).await.unwrap();
        assert_eq!(
            (&b[..n], from),
            (&b"WRITE TEST"[..], c2.local_addr().unwrap())
        );
        c2.send_to(b"elsewhere", pa).await.unwrap();
        let (n, _) = peer.recv_from(&mut b).await.unwrap();
        assert_eq!(&b[..n], b"elsewhere");
    });
}

/// Go: TestUDPConnLocalName (udpsock_test.go). A socket bound to port 0 reports the port
/// it got.
#[test]
fn udp_conn_local_name() {
    run(async {
        for addr in ["127.0.0.1:0", "[::1]:0"] {
            let Ok(c) = UdpSocket::bind(addr).await else {
                continue; // no IPv6 loopback here
            };
            let la = c.local_addr().unwrap();
            assert_ne!(la.port(), 0, "{la}");
        }
    });
}

/// Go: TestUDPConnLocalAndRemoteNames (udpsock_test.go). A connected socket reports its
/// own bound address and its peer's; an unconnected one has no peer (`NotConnected`).
#[test]
fn udp_conn_local_and_remote_names() {
    run(async {
        let (c1, c2) = dialed().await;
        let e = c1.peer_addr().unwrap_err();
        assert_eq!(e.kind(), ErrorKind::NotConnected, "{e}");
        assert_eq!(c2.peer_addr().unwrap(), c1.local_addr().unwrap());
        let la: SocketAddr = c2.local_addr().unwrap();
        assert!(la.ip().is_loopback() && la.port() != 0, "{la}");
    });
}

/// Go: TestUDPZeroBytePayload (udpsock_test.go). An empty datagram is sent (0 bytes
/// written) and received as one: 0 bytes, with its sender's address; into a buffer or an
/// empty one.
#[test]
fn udp_zero_byte_payload() {
    run(async {
        let (c1, c2) = dialed().await;
        for gen in [false, true] {
            assert_eq!(c2.send(&[]).await.unwrap(), 0);
            let mut b = [0; 8];
            if gen {
                assert_eq!(c1.recv_from(&mut []).await.unwrap().0, 0);
            } else {
                let (n, from) = c1.recv_from(&mut b).await.unwrap();
                assert_eq!((n, from), (0, c2.local_addr().unwrap()));
            }
        }
        // Nothing is left queued: the next datagram is the next one sent.
        c2.send(b"after").await.unwrap();
        let mut b = [0; 8];
        let (n, _) = c1.recv_from(&mut b).await.unwrap();
        assert_eq!(&b[..n], b"after");
    });
}

/// Go: TestUDPZeroByteBuffer (udpsock_test.go). A receive into an empty buffer takes one
/// datagram (0 bytes read, no error, the sender's address) and drops its bytes: the next
/// receive gets the next datagram. Unlike a stream's empty read, it waits for a datagram.
#[test]
fn udp_zero_byte_buffer() {
    run(async {
        let (c1, c2) = dialed().await;
        let b1 = b"UDP ZERO BYTE BUFFER TEST";
        for gen in [false, true] {
            c2.send(b1).await.unwrap();
            if gen {
                let (n, from) = c1.recv_from(&mut []).await.unwrap();
                assert_eq!((n, from), (0, c2.local_addr().unwrap()));
            } else {
                c1.connect(c2.local_addr().unwrap()).await.unwrap();
                assert_eq!(c1.recv(&mut []).await.unwrap(), 0);
            }
        }
        c2.send(b"next").await.unwrap();
        let mut b = [0; 8];
        assert_eq!(c1.recv(&mut b).await.unwrap(), 4);
        assert_eq!(&b[..4], b"next");
        // With nothing queued, an empty receive waits for a datagram.
        gort::select! {
            r = c1.recv(&mut []) => panic!("an empty receive returned {r:?} with nothing queued"),
            _ = gort::time::sleep(std::time::Duration::from_millis(50)) => {}
        }
    });
}

/// Go: TestUDPReadSizeError (udpsock_test.go). A datagram longer than the buffer fills it
/// and the rest is lost, with no error (`recv(2)`'s truncation), through `recv_from` and
/// `recv`; the next receive starts at the next datagram.
#[test]
fn udp_read_size_error() {
    run(async {
        let (c1, c2) = dialed().await;
        c1.connect(c2.local_addr().unwrap()).await.unwrap();
        let b1 = b"READ SIZE ERROR TEST";
        for generic_read in [false, true] {
            assert_eq!(c2.send(b1).await.unwrap(), b1.len());
            let mut b2 = vec![0; b1.len() - 1];
            let n = if generic_read {
                c1.recv(&mut b2).await.unwrap()
            } else {
                c1.recv_from(&mut b2).await.unwrap().0
            };
            assert_eq!(n, b1.len() - 1);
            assert_eq!(&b2[..], &b1[..n]);
        }
        c2.send(b"X").await.unwrap();
        let mut b = [0; 32];
        assert_eq!(c1.recv(&mut b).await.unwrap(), 1);
    });
}
