//! TCP and UDP on real loopback sockets: data, end of stream, concurrency on one connection,
//! cancel safety, closing, UDP, and the type guarantees the public API promises.

use gort::net::{TcpListener, TcpStream, UdpSocket};
use gort::time::Instant;
use std::io::ErrorKind;
use std::net::{Shutdown, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

const MS: Duration = Duration::from_millis(1);

fn run<F: std::future::Future>(f: F) -> F::Output {
    gort::Runtime::new().unwrap().block_on(f)
}

/// A connected pair: (client, server side).
async fn pair() -> (TcpStream, TcpStream) {
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    let c = gort::spawn(async move { TcpStream::connect(addr).await.unwrap() });
    let (s, _) = l.accept().await.unwrap();
    (c.await.unwrap(), s)
}

#[test]
fn public_types_are_send_sync_debug_and_the_stream_is_unpin() {
    fn check<T: Send + Sync + std::fmt::Debug>() {}
    fn unpin<T: Unpin>() {}
    check::<TcpListener>();
    check::<TcpStream>();
    check::<UdpSocket>();
    unpin::<TcpStream>();
}

#[test]
fn echo_round_trips_a_megabyte_in_both_directions() {
    run(async {
        let (c, s) = pair().await;
        let s = Arc::new(s);
        let s2 = s.clone();
        let echo = gort::spawn(async move {
            let mut buf = vec![0; 16 * 1024];
            loop {
                match s2.read(&mut buf).await.unwrap() {
                    0 => break,
                    n => s2.write_all(&buf[..n]).await.unwrap(),
                }
            }
            s2.shutdown(Shutdown::Write).unwrap();
        });
        let data: Vec<u8> = (0..1 << 20).map(|i| (i % 251) as u8).collect();
        let c = Arc::new(c);
        let writer = {
            let c = c.clone();
            let data = data.clone();
            gort::spawn(async move {
                c.write_all(&data).await.unwrap();
                c.shutdown(Shutdown::Write).unwrap();
            })
        };
        // Read while the writer writes: a full send buffer on both sides would otherwise
        // deadlock (one task reads while another writes on the same connection).
        let mut got = Vec::new();
        let mut buf = vec![0; 8192];
        loop {
            match c.read(&mut buf).await.unwrap() {
                0 => break,
                n => got.extend_from_slice(&buf[..n]),
            }
        }
        writer.await.unwrap();
        echo.await.unwrap();
        assert!(got == data, "echoed bytes differ");
    });
}

#[test]
fn read_exact_at_end_of_stream_fails_with_unexpected_eof_and_read_returns_zero() {
    run(async {
        let (c, s) = pair().await;
        s.write_all(b"abc").await.unwrap();
        drop(s);
        let mut buf = [0; 5];
        let err = c.read_exact(&mut buf).await.unwrap_err();
        assert_eq!(err.kind(), ErrorKind::UnexpectedEof);
        assert_eq!(c.read(&mut buf).await.unwrap(), 0);
    });
}

/// A read shorter than its buffer lets the next read wait for an edge without a syscall,
/// but not past an end of stream that came before it: the peer's FIN, counted while the
/// reader slept, sends no later edge.
#[test]
fn a_short_read_then_an_end_of_stream_already_seen_returns_zero() {
    run(async {
        let (c, s) = pair().await;
        s.write_all(b"abc").await.unwrap();
        s.shutdown(Shutdown::Write).unwrap();
        // The poller counts the data's and the FIN's edges while nobody reads.
        gort::time::sleep(50 * MS).await;
        let mut buf = [0; 64];
        assert_eq!(c.read(&mut buf).await.unwrap(), 3);
        let eof = gort::time::timeout(Duration::from_secs(10), c.read(&mut buf)).await;
        assert_eq!(eof.expect("the read after the short one hung").unwrap(), 0);
    });
}

/// After a short read the next one waits without a syscall; data that comes later wakes it.
#[test]
fn a_read_after_a_short_one_gets_data_that_comes_later() {
    run(async {
        let (c, s) = pair().await;
        let mut buf = [0; 64];
        for round in 0..50u8 {
            let reader = async { c.read(&mut buf).await.unwrap() };
            let writer = async {
                gort::time::sleep(MS).await;
                s.write_all(&[round; 10]).await.unwrap();
            };
            let (n, ()) = futures::join!(reader, writer);
            assert_eq!(n, 10);
        }
    });
}

#[test]
fn connect_to_a_closed_port_fails_with_the_os_error() {
    run(async {
        let addr = {
            let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            l.local_addr().unwrap()
        };
        let err = TcpStream::connect(addr).await.unwrap_err();
        assert_eq!(err.kind(), ErrorKind::ConnectionRefused);
    });
}

#[test]
fn host_names_resolve_on_the_blocking_pool() {
    run(async {
        let l = TcpListener::bind(("localhost", 0)).await.unwrap();
        let port = l.local_addr().unwrap().port();
        let c = gort::spawn(async move { TcpStream::connect(format!("localhost:{port}")).await });
        let (_s, _) = l.accept().await.unwrap();
        assert!(c.await.unwrap().is_ok());
    });
}

#[test]
fn from_std_makes_sockets_non_blocking() {
    run(async {
        let l = TcpListener::from_std(std::net::TcpListener::bind("127.0.0.1:0").unwrap()).unwrap();
        let addr = l.local_addr().unwrap();
        let std_client = std::net::TcpStream::connect(addr).unwrap();
        let c = TcpStream::from_std(std_client).unwrap();
        let (s, peer) = l.accept().await.unwrap();
        assert_eq!(peer, c.local_addr().unwrap());
        assert_eq!(c.peer_addr().unwrap(), addr);
        c.set_nodelay(true).unwrap();
        // Nothing to read: a blocking socket would hang this task's M; a non-blocking one
        // lets the deadline end the read.
        c.set_read_deadline(Some(Instant::now() + 20 * MS)).unwrap();
        let err = c.read(&mut [0; 4]).await.unwrap_err();
        assert_eq!(err.kind(), ErrorKind::TimedOut);
        drop(s);
    });
}

/// Cancel safety: a read dropped while pending (the other arm of a `select!` won) loses no
/// data and leaves the socket usable; so does an accept.
#[test]
fn dropping_pending_reads_and_accepts_under_select_loses_nothing() {
    run(async {
        let (c, s) = pair().await;
        let s = Arc::new(s);
        let (tx, rx) = gort::chan::bounded::<()>(0);
        let reader = {
            let s = s.clone();
            gort::spawn(async move {
                let mut got = Vec::new();
                let mut buf = [0; 3];
                let mut cancelled = 0;
                while got.len() < 3000 {
                    let tick = gort::time::after(Duration::from_micros(50));
                    gort::select! {
                        r = s.read(&mut buf) => got.extend_from_slice(&buf[..r.unwrap()]),
                        _ = tick.recv() => cancelled += 1,
                    }
                }
                drop(tx);
                (got, cancelled)
            })
        };
        let data: Vec<u8> = (0..3000).map(|i| (i % 253) as u8).collect();
        for chunk in data.chunks(100) {
            c.write_all(chunk).await.unwrap();
            gort::time::sleep(Duration::from_micros(200)).await;
        }
        assert_eq!(rx.recv().await, None);
        let (got, cancelled) = reader.await.unwrap();
        assert_eq!(got, data, "a cancelled read lost or duplicated data");
        assert!(
            cancelled > 0,
            "no read was cancelled: the test proved nothing"
        );

        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = l.local_addr().unwrap();
        for _ in 0..3 {
            gort::select! {
                _ = l.accept() => panic!("nobody connected"),
                _ = gort::time::sleep(5 * MS) => {}
            }
        }
        let c = gort::spawn(async move { TcpStream::connect(addr).await.unwrap() });
        let (_s, peer) = l.accept().await.unwrap();
        assert_eq!(peer, c.await.unwrap().local_addr().unwrap());
    });
}

#[test]
fn udp_send_to_recv_from_connect_send_recv() {
    run(async {
        let a = UdpSocket::bind("127.0.0.1:0").await.unwrap();
        let b = UdpSocket::bind("127.0.0.1:0").await.unwrap();
        let (aa, ba): (SocketAddr, SocketAddr) = (a.local_addr().unwrap(), b.local_addr().unwrap());
        let b = Arc::new(b);
        let b2 = b.clone();
        let recv = gort::spawn(async move {
            let mut buf = [0; 64];
            let (n, from) = b2.recv_from(&mut buf).await.unwrap();
            (buf[..n].to_vec(), from)
        });
        gort::time::sleep(5 * MS).await; // let the receiver block first
        assert_eq!(a.send_to(b"hello", ba).await.unwrap(), 5);
        assert_eq!(recv.await.unwrap(), (b"hello".to_vec(), aa));

        a.connect(ba).await.unwrap();
        b.connect(aa).await.unwrap();
        a.send(b"x").await.unwrap();
        let mut buf = [0; 8];
        assert_eq!(b.recv(&mut buf).await.unwrap(), 1);
        assert_eq!(&buf[..1], b"x");
    });
}

#[test]
fn udp_read_deadline_times_out_and_a_cleared_one_lets_data_through() {
    run(async {
        let a = UdpSocket::bind("127.0.0.1:0").await.unwrap();
        let b = UdpSocket::bind("127.0.0.1:0").await.unwrap();
        let deadline = Instant::now() + 20 * MS;
        b.set_read_deadline(Some(deadline)).unwrap();
        let err = b.recv_from(&mut [0; 8]).await.unwrap_err();
        assert_eq!(err.kind(), ErrorKind::TimedOut);
        assert!(Instant::now() >= deadline, "timed out early");
        // Not sticky: a later deadline (or none) makes receives work again.
        b.set_deadline(None).unwrap();
        a.send_to(b"y", b.local_addr().unwrap()).await.unwrap();
        assert_eq!(b.recv_from(&mut [0; 8]).await.unwrap().0, 1);
        // A write deadline in the past fails sends at once; reads are unaffected.
        a.set_write_deadline(Some(Instant::now() - MS)).unwrap();
        let err = a.send_to(b"z", b.local_addr().unwrap()).await.unwrap_err();
        assert_eq!(err.kind(), ErrorKind::TimedOut);
    });
}

#[test]
fn sockets_used_outside_a_runtime_fail_instead_of_panicking() {
    let std_l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let err = TcpListener::from_std(std_l).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Other);
}

/// A thread without a P (here `block_on`) that blocks on a socket while no task runs is
/// served by an M blocked in the poller, not by sysmon's look every 10 ms (which would make
/// these 200 accepts take ~2 s; they take well under 0.2 s). A loaded machine can make them
/// take over a second too (1.08 and 1.37 s seen beside CPU hogs), so the test also counts
/// sysmon's looks: served by sysmon, each accept costs one (sysmon parks only while an M
/// watches the sockets); served by the poller, a handful in all (1 to 7 seen).
#[test]
fn block_on_waiting_on_a_socket_gets_a_poller_without_waiting_for_sysmon() {
    let rt = gort::Runtime::new().unwrap();
    let l = rt.block_on(TcpListener::bind("127.0.0.1:0")).unwrap();
    let addr = l.local_addr().unwrap();
    let (tx, rx) = std::sync::mpsc::channel::<()>();
    let clients = std::thread::spawn(move || {
        for _ in 0..200 {
            let c = std::net::TcpStream::connect(addr).unwrap();
            rx.recv().unwrap(); // the next connect only after this one was accepted
            drop(c);
        }
    });
    let t0 = std::time::Instant::now();
    let looks_before = rt.metrics().sysmon_wakeups;
    rt.block_on(async {
        for _ in 0..200 {
            // Let every M park first (no task runs, no timer is pending).
            std::thread::sleep(Duration::from_micros(200));
            l.accept().await.unwrap();
            tx.send(()).unwrap();
        }
    });
    clients.join().unwrap();
    let took = t0.elapsed();
    let looks = rt.metrics().sysmon_wakeups - looks_before;
    assert!(
        took < Duration::from_secs(1) || looks < 100,
        "200 accepts took {took:?}, and sysmon looked {looks} times meanwhile"
    );
}

#[test]
fn udp_peer_addr_is_the_connected_peer() {
    run(async {
        let server = UdpSocket::bind("127.0.0.1:0").await.unwrap();
        let client = UdpSocket::bind("127.0.0.1:0").await.unwrap();
        assert_eq!(
            client.peer_addr().unwrap_err().kind(),
            ErrorKind::NotConnected
        );
        client.connect(server.local_addr().unwrap()).await.unwrap();
        assert_eq!(client.peer_addr().unwrap(), server.local_addr().unwrap());
    });
}

#[test]
fn udp_from_std_socket_waits_on_the_netpoller() {
    run(async {
        let std_socket = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        std_socket.set_broadcast(true).unwrap();
        let socket = Arc::new(UdpSocket::from_std(std_socket).unwrap());
        let addr = socket.local_addr().unwrap();
        // A receive that has to wait: the datagram comes later, from another task.
        let receiver = {
            let socket = socket.clone();
            gort::spawn(async move {
                let mut buf = [0; 8];
                let (n, _) = socket.recv_from(&mut buf).await.unwrap();
                buf[..n].to_vec()
            })
        };
        gort::time::sleep(10 * MS).await;
        let sender = UdpSocket::bind("127.0.0.1:0").await.unwrap();
        sender.send_to(b"later", addr).await.unwrap();
        assert_eq!(receiver.await.unwrap(), b"later");
    });
}

/// Go's idiom of closing a connection to unblock another goroutine's read and write, as the
/// `TcpStream` docs give it: `shutdown(Both)` from another task.
#[test]
fn shutdown_from_another_task_ends_a_blocked_read_and_a_blocked_write() {
    run(async {
        let (c, s) = pair().await;
        let c = Arc::new(c);
        let reader = {
            let c = c.clone();
            gort::spawn(async move { c.read(&mut [0; 8]).await.unwrap() })
        };
        let writer = {
            let c = c.clone();
            // The peer never reads: this write fills both buffers and blocks.
            gort::spawn(async move { c.write_all(&vec![0; 64 << 20]).await })
        };
        gort::time::sleep(20 * MS).await;
        c.shutdown(Shutdown::Both).unwrap();
        let read = gort::time::timeout(Duration::from_secs(10), reader).await;
        assert_eq!(read.unwrap().unwrap(), 0);
        let written = gort::time::timeout(Duration::from_secs(10), writer).await;
        assert!(written.unwrap().unwrap().is_err());
        drop(s);
    });
}
