//! What hostile peers and demanding programs do to sockets: resets in the middle of a large
//! write, writes after a half-close, zero-length transfers, UDP's zero-length, truncated and
//! refused datagrams, deadlines far in the past or the future or set from a thread of no
//! runtime. Each must end in a result or an error of the right kind, never a hang: a
//! watchdog fails a case that runs past 20 s.

#[path = "support/tcp.rs"]
mod tcp;

use gort::net::{TcpListener, TcpStream, UdpSocket};
use gort::time::Instant;
use std::io::ErrorKind;
use std::net::Shutdown;
use std::sync::Arc;
use std::time::Duration;
use tcp::tcp_pair as pair;

/// Runs `f` on a fresh runtime, failing the test if it has not finished in 20 s.
fn run<F: std::future::Future + Send + 'static>(f: F) -> F::Output
where
    F::Output: Send,
{
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(gort::Runtime::new().unwrap().block_on(f));
    });
    rx.recv_timeout(Duration::from_secs(20))
        .expect("the case hung (or panicked)")
}

/// Closes `s` with `SO_LINGER` 0: the peer gets a reset, not an end of stream.
fn reset(s: TcpStream) {
    tcp::linger_zero(&s);
    drop(s);
}

#[test]
fn a_reset_in_the_middle_of_a_large_write_fails_it() {
    run(async {
        let (c, s) = pair().await;
        let c = Arc::new(c);
        let writer = {
            let c = c.clone();
            // 64 MiB: far more than the socket buffers hold, so the write blocks.
            gort::spawn(async move { c.write_all(&vec![1; 64 << 20]).await })
        };
        let mut got = vec![0; 1 << 16];
        s.read_exact(&mut got).await.unwrap();
        reset(s);
        let e = writer.await.unwrap().unwrap_err();
        assert!(
            matches!(e.kind(), ErrorKind::ConnectionReset | ErrorKind::BrokenPipe),
            "{e:?}"
        );
        // The reset is final: later writes fail and reads end.
        assert!(c.write(b"x").await.is_err());
        let r = c.read(&mut [0; 8]).await;
        assert!(matches!(r, Ok(0) | Err(_)), "{r:?}");
    });
}

#[test]
fn a_read_blocked_when_the_peer_resets_fails_with_connection_reset() {
    run(async {
        let (c, s) = pair().await;
        let c = Arc::new(c);
        let reader = {
            let c = c.clone();
            gort::spawn(async move { c.read(&mut [0; 16]).await })
        };
        gort::time::sleep(Duration::from_millis(20)).await;
        reset(s);
        let e = reader.await.unwrap().unwrap_err();
        assert_eq!(e.kind(), ErrorKind::ConnectionReset, "{e:?}");
    });
}

#[test]
fn a_write_after_the_own_write_half_is_shut_fails_with_broken_pipe() {
    run(async {
        let (c, s) = pair().await;
        c.shutdown(Shutdown::Write).unwrap();
        let e = c.write(b"late").await.unwrap_err();
        assert_eq!(e.kind(), ErrorKind::BrokenPipe, "{e:?}");
        let e = c.write_all(b"late").await.unwrap_err();
        assert_eq!(e.kind(), ErrorKind::BrokenPipe, "{e:?}");
        // The peer reads the end of stream and can still answer.
        assert_eq!(s.read(&mut [0; 4]).await.unwrap(), 0);
        s.write_all(b"reply").await.unwrap();
        s.shutdown(Shutdown::Write).unwrap();
        let mut buf = Vec::new();
        let mut chunk = [0; 2];
        loop {
            match c.read(&mut chunk).await.unwrap() {
                0 => break,
                n => buf.extend_from_slice(&chunk[..n]),
            }
        }
        assert_eq!(buf, b"reply");
        // The end of stream stays: every later read gives 0 at once.
        for _ in 0..3 {
            assert_eq!(c.read(&mut chunk).await.unwrap(), 0);
        }
    });
}

#[test]
fn zero_length_transfers_return_at_once() {
    run(async {
        let (c, s) = pair().await;
        // Nothing to read: a zero-length read still returns at once (as Go's and std's; it
        // waited for data before, as the kernel's recv of 0 bytes does).
        assert_eq!(c.read(&mut []).await.unwrap(), 0);
        c.read_exact(&mut []).await.unwrap();
        assert_eq!(c.write(&[]).await.unwrap(), 0);
        c.write_all(&[]).await.unwrap();
        // They consumed and sent nothing.
        c.write_all(b"ab").await.unwrap();
        let mut two = [0; 2];
        s.read_exact(&mut two).await.unwrap();
        assert_eq!(&two, b"ab");
        // After a short read (the direction drained), a zero-length read still returns.
        c.write_all(b"x").await.unwrap();
        let mut big = [0; 64];
        assert_eq!(s.read(&mut big).await.unwrap(), 1);
        assert_eq!(s.read(&mut []).await.unwrap(), 0);
        // Unix streams and split halves, the same.
        let (u, _v) = gort::net::UnixStream::pair().unwrap();
        assert_eq!(u.read(&mut []).await.unwrap(), 0);
        let (r, _w) = u.into_split();
        assert_eq!(r.read(&mut []).await.unwrap(), 0);
    });
}

#[test]
fn udp_zero_length_and_truncated_datagrams() {
    run(async {
        let a = UdpSocket::bind("127.0.0.1:0").await.unwrap();
        let b = UdpSocket::bind("127.0.0.1:0").await.unwrap();
        let to = b.local_addr().unwrap();
        // A zero-length datagram is a datagram: received as 0 bytes, from its sender.
        assert_eq!(a.send_to(&[], to).await.unwrap(), 0);
        let mut buf = [0; 8];
        let (n, from) = b.recv_from(&mut buf).await.unwrap();
        assert_eq!((n, from), (0, a.local_addr().unwrap()));
        // A datagram longer than the buffer: the buffer's length, the rest is lost (Go's).
        a.send_to(b"0123456789", to).await.unwrap();
        a.send_to(b"next", to).await.unwrap();
        let (n, _) = b.recv_from(&mut buf[..4]).await.unwrap();
        assert_eq!(&buf[..n], b"0123");
        let (n, _) = b.recv_from(&mut buf).await.unwrap();
        assert_eq!(&buf[..n], b"next");
        // An empty buffer takes a whole datagram.
        a.send_to(b"gone", to).await.unwrap();
        a.send_to(b"kept", to).await.unwrap();
        assert_eq!(b.recv_from(&mut []).await.unwrap().0, 0);
        let (n, _) = b.recv_from(&mut buf).await.unwrap();
        assert_eq!(&buf[..n], b"kept");
        // Larger than any UDP datagram: an error at once, not a wait.
        let e = a.send_to(&vec![0; 70_000], to).await.unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::EMSGSIZE), "{e:?}");
    });
}

#[test]
fn udp_recv_on_an_unconnected_socket_fails_and_a_refused_peer_fails_recv() {
    run(async {
        let s = UdpSocket::bind("127.0.0.1:0").await.unwrap();
        // send without a peer: the OS's error, at once.
        let e = s.send(b"x").await.unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::EDESTADDRREQ), "{e:?}");
        // A port nobody listens on: the ICMP error arrives later and fails the blocked recv
        // (Linux's ECONNREFUSED), which must be woken for it.
        let closed = UdpSocket::bind("127.0.0.1:0").await.unwrap();
        let port = closed.local_addr().unwrap();
        drop(closed);
        s.connect(port).await.unwrap();
        s.send(b"anyone?").await.unwrap();
        let e = s.recv(&mut [0; 8]).await.unwrap_err();
        assert_eq!(e.kind(), ErrorKind::ConnectionRefused, "{e:?}");
        // The error is reported once; the socket stays usable.
        let deadline = Instant::now() + Duration::from_millis(30);
        s.set_read_deadline(Some(deadline)).unwrap();
        let e = s.recv(&mut [0; 8]).await.unwrap_err();
        assert_eq!(e.kind(), ErrorKind::TimedOut, "{e:?}");
    });
}

#[test]
fn deadlines_far_in_the_past_or_the_future_neither_overflow_nor_fire() {
    run(async {
        let (c, s) = pair().await;
        let far_past = [
            Instant::from_nanos(i64::MIN),
            Instant::from_nanos(-1),
            Instant::from_nanos(0),
            Instant::now() - Duration::MAX,
        ];
        for d in far_past {
            c.set_deadline(Some(d)).unwrap();
            let e = c.read(&mut [0; 1]).await.unwrap_err();
            assert_eq!(e.kind(), ErrorKind::TimedOut, "{d:?}");
            let e = c.write(b"x").await.unwrap_err();
            assert_eq!(e.kind(), ErrorKind::TimedOut, "{d:?}");
        }
        let far_future = [
            Instant::NEVER,
            Instant::from_nanos(i64::MAX - 1),
            Instant::now() + Duration::from_secs(200 * 365 * 86_400),
            Instant::now() + Duration::MAX,
            Instant::now() + Duration::from_secs(3600),
        ];
        for d in far_future {
            c.set_deadline(Some(d)).unwrap();
            s.write_all(b"y").await.unwrap();
            let mut one = [0; 1];
            c.read_exact(&mut one).await.unwrap();
            c.write_all(b"z").await.unwrap();
            s.read_exact(&mut one).await.unwrap();
        }
        // From far in the future to a near one: the timer is moved earlier and fires.
        c.set_read_deadline(Some(Instant::from_nanos(i64::MAX - 1)))
            .unwrap();
        c.set_read_deadline(Some(Instant::now() + Duration::from_millis(20)))
            .unwrap();
        let e = c.read(&mut [0; 1]).await.unwrap_err();
        assert_eq!(e.kind(), ErrorKind::TimedOut);
    });
}

#[test]
fn deadlines_set_from_a_thread_of_no_runtime_reach_a_blocked_read() {
    let (handle_tx, handle_rx) = std::sync::mpsc::channel();
    run(async move {
        let (c, s) = pair().await;
        let c = Arc::new(c);
        let reader = {
            let c = c.clone();
            gort::spawn(async move { c.read(&mut [0; 1]).await })
        };
        gort::time::sleep(Duration::from_millis(10)).await;
        handle_tx.send(c.clone()).unwrap();
        // A plain thread: a deadline still to come needs a runtime's timer and is refused
        // (the blocked read goes on); one in the past needs none and ends the read.
        let plain = std::thread::spawn(move || {
            let c: Arc<TcpStream> = handle_rx.recv().unwrap();
            let later = Instant::now() + Duration::from_millis(1);
            assert!(c.set_read_deadline(Some(later)).is_err());
            std::thread::sleep(Duration::from_millis(50));
            c.set_read_deadline(Some(Instant::now())).unwrap();
        });
        let e = reader.await.unwrap().unwrap_err();
        assert_eq!(e.kind(), ErrorKind::TimedOut, "{e:?}");
        gort::task::spawn_blocking(move || plain.join().unwrap())
            .await
            .unwrap();
        // Cleared from the plain thread as well: the next read waits for data again.
        c.set_read_deadline(None).unwrap();
        s.write_all(b"k").await.unwrap();
        c.read_exact(&mut [0; 1]).await.unwrap();
    });
}

#[test]
fn many_readers_of_one_udp_socket_each_get_a_distinct_datagram() {
    run(async {
        const READERS: usize = 16;
        let server = Arc::new(UdpSocket::bind("127.0.0.1:0").await.unwrap());
        let to = server.local_addr().unwrap();
        let readers: Vec<_> = (0..READERS)
            .map(|_| {
                let server = server.clone();
                gort::spawn(async move {
                    let mut buf = [0; 8];
                    let (n, _) = server.recv_from(&mut buf).await?;
                    Ok::<_, std::io::Error>(buf[..n].to_vec())
                })
            })
            .collect();
        gort::time::sleep(Duration::from_millis(20)).await;
        let client = UdpSocket::bind("127.0.0.1:0").await.unwrap();
        for i in 0..READERS - 4 {
            client.send_to(&[i as u8], to).await.unwrap();
        }
        // The 4 left are ended by a deadline set in the past.
        gort::time::sleep(Duration::from_millis(50)).await;
        server.set_read_deadline(Some(Instant::now())).unwrap();
        let mut got = Vec::new();
        let mut timed_out = 0;
        for r in readers {
            match r.await.unwrap() {
                Ok(d) => got.push(d[0]),
                Err(e) if e.kind() == ErrorKind::TimedOut => timed_out += 1,
                Err(e) => panic!("{e:?}"),
            }
        }
        got.sort_unstable();
        assert_eq!(got, (0..(READERS - 4) as u8).collect::<Vec<_>>());
        assert_eq!(timed_out, 4);
    });
}

#[test]
fn a_passed_deadline_from_a_plain_thread_stops_a_blocked_accept() {
    run(async {
        let l = Arc::new(TcpListener::bind("127.0.0.1:0").await.unwrap());
        let acceptor = {
            let l = l.clone();
            gort::spawn(async move { l.accept().await.map(|_| ()) })
        };
        gort::time::sleep(Duration::from_millis(10)).await;
        let l2 = l.clone();
        std::thread::spawn(move || l2.set_deadline(Some(Instant::now())).unwrap())
            .join()
            .unwrap();
        let e = acceptor.await.unwrap().unwrap_err();
        assert_eq!(e.kind(), ErrorKind::TimedOut, "{e:?}");
        // Cleared, the listener accepts again: nothing was lost.
        l.set_deadline(None).unwrap();
        let addr = l.local_addr().unwrap();
        let c = gort::spawn(async move { TcpStream::connect(addr).await.map(|_| ()) });
        l.accept().await.unwrap();
        c.await.unwrap().unwrap();
    });
}

#[test]
fn shutdown_from_a_plain_thread_ends_a_read_that_follows_a_short_one() {
    run(async {
        let (c, s) = pair().await;
        let c = Arc::new(c);
        s.write_all(b"ab").await.unwrap();
        // A short read: the direction is drained, the next read waits for an edge.
        assert_eq!(c.read(&mut [0; 64]).await.unwrap(), 2);
        let reader = {
            let c = c.clone();
            gort::spawn(async move { c.read(&mut [0; 64]).await })
        };
        gort::time::sleep(Duration::from_millis(20)).await;
        let c2 = c.clone();
        std::thread::spawn(move || c2.shutdown(Shutdown::Read).unwrap())
            .join()
            .unwrap();
        assert_eq!(reader.await.unwrap().unwrap(), 0);
        drop(s);
    });
}

#[test]
fn two_thousand_concurrent_connects_are_all_accepted_and_served() {
    const N: usize = 2000;
    run(async {
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = l.local_addr().unwrap();
        let server = gort::spawn(async move {
            let mut served = Vec::new();
            for _ in 0..N {
                let (conn, _) = l.accept().await.unwrap();
                served.push(gort::spawn(async move {
                    let mut b = [0; 2];
                    conn.read_exact(&mut b).await.unwrap();
                    conn.write_all(&b).await.unwrap();
                }));
            }
            for s in served {
                s.await.unwrap();
            }
        });
        let clients: Vec<_> = (0..N)
            .map(|i| {
                gort::spawn(async move {
                    let c = TcpStream::connect(addr).await.unwrap();
                    let id = (i as u16).to_le_bytes();
                    c.write_all(&id).await.unwrap();
                    let mut back = [0; 2];
                    c.read_exact(&mut back).await.unwrap();
                    assert_eq!(back, id);
                })
            })
            .collect();
        for c in clients {
            c.await.unwrap();
        }
        server.await.unwrap();
    });
}

#[test]
fn unix_datagrams_zero_length_truncated_and_to_a_closed_peer() {
    use gort::net::UnixDatagram;
    run(async {
        let (a, b) = UnixDatagram::pair().unwrap();
        assert_eq!(a.send(&[]).await.unwrap(), 0);
        let mut buf = [0; 8];
        assert_eq!(b.recv(&mut buf).await.unwrap(), 0);
        a.send(b"0123456789").await.unwrap();
        a.send(b"next").await.unwrap();
        assert_eq!(b.recv(&mut buf[..4]).await.unwrap(), 4);
        let n = b.recv(&mut buf).await.unwrap();
        assert_eq!(&buf[..n], b"next");
        drop(b);
        let e = a.send(b"x").await.unwrap_err();
        assert_eq!(e.kind(), ErrorKind::ConnectionRefused, "{e:?}");
    });
}
