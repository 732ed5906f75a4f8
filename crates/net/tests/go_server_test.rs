//! Ports of Go 1.19's `src/net/server_test.go` (its mockserver echo patterns), one test per
//! Go test that maps onto gort's sockets (named in each doc comment), each under a
//! watchdog. "unixpacket" (`SOCK_SEQPACKET`) has no gort type and is not ported.

#[path = "support/temp_dir.rs"]
mod temp_dir;
#[path = "support/watchdog.rs"]
#[allow(dead_code)]
mod watchdog;

use gort::net::{TcpListener, TcpStream, UdpSocket, UnixDatagram, UnixListener, UnixStream};
use std::net::Shutdown;
use temp_dir::TempDir;
use watchdog::within;

const CLIENTS: usize = 8;

fn run<F: std::future::Future + Send + 'static>(f: F) -> F::Output
where
    F::Output: Send + 'static,
{
    within(|| gort::Runtime::new().unwrap().block_on(f))
}

/// Echoes what `read` gives to `write` until end of stream (Go's `transponder`).
macro_rules! echo_until_eof {
    ($c:expr) => {{
        let mut buf = [0; 256];
        loop {
            match $c.read(&mut buf).await.unwrap() {
                0 => break,
                n => $c.write_all(&buf[..n]).await.unwrap(),
            }
        }
    }};
}

/// Spawns the server half of TestTCPServer and TestUnixAndUnixpacketServer: accepts
/// `CLIENTS` connections on the listener `$l` and echoes each in a task of its own until its
/// end of stream (Go's `transponder`); the handle ends when every connection has.
macro_rules! spawn_echo_server {
    ($l:expr) => {{
        let l = $l;
        gort::spawn(async move {
            let mut conns = Vec::new();
            for _ in 0..CLIENTS {
                let (c, _) = l.accept().await.unwrap();
                conns.push(gort::spawn(async move { echo_until_eof!(c) }));
            }
            for c in conns {
                c.await.unwrap();
            }
        })
    }};
}

/// Runs `client(i)` for each of `CLIENTS` clients at once, each in a task, and waits for
/// them all.
async fn run_clients<Fut>(client: impl Fn(usize) -> Fut)
where
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    let clients: Vec<_> = (0..CLIENTS).map(|i| gort::spawn(client(i))).collect();
    for c in clients {
        c.await.unwrap();
    }
}

/// Go: TestTCPServer (server_test.go). One listener, several clients at once on IPv4 and
/// IPv6 loopback: each writes a message, half-closes, and reads its own message back.
#[test]
fn tcp_server() {
    run(async {
        for host in ["127.0.0.1", "[::1]"] {
            let Ok(l) = TcpListener::bind(format!("{host}:0")).await else {
                continue; // no IPv6 loopback here
            };
            let addr = l.local_addr().unwrap();
            let server = spawn_echo_server!(l);
            run_clients(|i| async move {
                let c = TcpStream::connect(addr).await.unwrap();
                let msg = format!("TCP SERVER TEST {i}");
                c.write_all(msg.as_bytes()).await.unwrap();
                c.shutdown(Shutdown::Write).unwrap();
                let mut got = Vec::new();
                let mut buf = [0; 64];
                loop {
                    match c.read(&mut buf).await.unwrap() {
                        0 => break,
                        n => got.extend_from_slice(&buf[..n]),
                    }
                }
                assert_eq!(got, msg.as_bytes());
            })
            .await;
            server.await.unwrap();
        }
    });
}

/// Go: TestUnixAndUnixpacketServer (server_test.go), its "unix" half: as TestTCPServer,
/// on a path and on an abstract name.
#[test]
fn unix_server() {
    run(async {
        let dir = TempDir::new("go-unix-server");
        let path = dir.join("sock");
        let l = UnixListener::bind(&path).unwrap();
        let server = spawn_echo_server!(l);
        run_clients(|i| {
            let path = path.clone();
            async move {
                let c = UnixStream::connect(&path).await.unwrap();
                let msg = format!("UNIX SERVER TEST {i}");
                c.write_all(msg.as_bytes()).await.unwrap();
                c.shutdown(Shutdown::Write).unwrap();
                let mut got = vec![0; msg.len()];
                c.read_exact(&mut got).await.unwrap();
                assert_eq!(got, msg.as_bytes());
                assert_eq!(c.read(&mut [0; 1]).await.unwrap(), 0);
            }
        })
        .await;
        server.await.unwrap();
    });
}

/// Go: TestUDPServer (server_test.go). An echo server answers each client's datagram to
/// the address it came from; connected and unconnected clients get their own back.
#[test]
fn udp_server() {
    run(async {
        let server = UdpSocket::bind("127.0.0.1:0").await.unwrap();
        let addr = server.local_addr().unwrap();
        let echo = gort::spawn(async move {
            let mut buf = [0; 256];
            for _ in 0..CLIENTS {
                let (n, from) = server.recv_from(&mut buf).await.unwrap();
                server.send_to(&buf[..n], from).await.unwrap();
            }
        });
        run_clients(|i| async move {
            let c = UdpSocket::bind("127.0.0.1:0").await.unwrap();
            let msg = format!("UDP SERVER TEST {i}");
            let mut buf = [0; 64];
            if i % 2 == 0 {
                c.connect(addr).await.unwrap();
                c.send(msg.as_bytes()).await.unwrap();
                let n = c.recv(&mut buf).await.unwrap();
                assert_eq!(&buf[..n], msg.as_bytes());
            } else {
                c.send_to(msg.as_bytes(), addr).await.unwrap();
                let (n, from) = c.recv_from(&mut buf).await.unwrap();
                assert_eq!((&buf[..n], from), (msg.as_bytes(), addr));
            }
        })
        .await;
        echo.await.unwrap();
    });
}

/// Go: TestUnixgramServer (server_test.go). An echo server bound to a path answers each
/// bound client at the address its datagram came from (`send_to_addr`).
#[test]
fn unixgram_server() {
    run(async {
        let dir = TempDir::new("go-unixgram-server");
        let spath = dir.join("server");
        let server = UnixDatagram::bind(&spath).unwrap();
        let echo = gort::spawn(async move {
            let mut buf = [0; 256];
            for _ in 0..CLIENTS {
                let (n, from) = server.recv_from(&mut buf).await.unwrap();
                server.send_to_addr(&buf[..n], &from).await.unwrap();
            }
        });
        run_clients(|i| {
            let (spath, cpath) = (spath.clone(), dir.join(&format!("client{i}")));
            async move {
                let c = UnixDatagram::bind(&cpath).unwrap();
                let msg = format!("UNIXGRAM SERVER TEST {i}");
                c.send_to(msg.as_bytes(), &spath).await.unwrap();
                let mut buf = [0; 64];
                let (n, from) = c.recv_from(&mut buf).await.unwrap();
                assert_eq!(&buf[..n], msg.as_bytes());
                assert_eq!(from.as_pathname(), Some(spath.as_path()));
            }
        })
        .await;
        echo.await.unwrap();
    });
}
