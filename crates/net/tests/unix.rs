//! Unix domain stream sockets end to end: echo over a listener in a temporary directory,
//! many concurrent clients, half-close, a peer dropped while a read waits, a drop that wakes
//! a blocked task, a connect that waits for room in a full accept queue without blocking an
//! M, the path left in place after the listener is dropped, and the split halves.

#[allow(dead_code, unused_macros)] // only the helpers: `unix_deadlines.rs` runs the cases
#[path = "support/conn_cases.rs"]
mod conn_cases;
#[path = "support/temp_dir.rs"]
mod temp_dir;

use gort::net::{OwnedReadHalf, OwnedWriteHalf, ReadHalf, UnixListener, UnixStream, WriteHalf};
use gort::time::Instant;
use std::net::Shutdown;
use std::os::fd::AsRawFd;
use std::sync::Arc;
use std::time::Duration;
use temp_dir::TempDir;

use conn_cases::{run, spawn_read, MS};

/// Echoes every connection of `listener` until the client closes it.
fn spawn_echo_server(listener: UnixListener) {
    gort::spawn(async move {
        while let Ok((conn, _)) = listener.accept().await {
            gort::spawn(async move {
                let mut buf = [0; 4096];
                while let Ok(n @ 1..) = conn.read(&mut buf).await {
                    conn.write_all(&buf[..n]).await.unwrap();
                }
            });
        }
    });
}

#[test]
fn the_socket_types_are_send_sync_unpin_and_debug() {
    fn check<T: Send + Sync + Unpin + std::fmt::Debug>() {}
    check::<UnixListener>();
    check::<UnixStream>();
    check::<gort::net::UnixDatagram>();
    check::<OwnedReadHalf<UnixStream>>();
    check::<OwnedWriteHalf<UnixStream>>();
    check::<ReadHalf<'static, UnixStream>>();
    check::<WriteHalf<'static, UnixStream>>();
    fn send<F: std::future::Future + Send>(_: F) {}
    run(async {
        // Not polled: only their types are checked.
        let (s, _) = UnixStream::pair().unwrap();
        send(s.read(&mut []));
        send(s.write_all(&[]));
        send(UnixStream::connect("/nonexistent"));
        let d = gort::net::UnixDatagram::unbound().unwrap();
        send(d.send_to(&[], "/nonexistent"));
        send(d.recv_from(&mut []));
    });
}

#[test]
fn echo_over_a_listener_in_a_temp_dir() {
    run(async {
        let dir = TempDir::new("echo");
        let listener = UnixListener::bind(dir.join("echo.sock")).unwrap();
        let bound = listener.local_addr().unwrap();
        assert_eq!(bound.as_pathname(), Some(dir.join("echo.sock").as_path()));
        spawn_echo_server(listener);
        let c = UnixStream::connect(dir.join("echo.sock")).await.unwrap();
        assert_eq!(
            c.peer_addr().unwrap().as_pathname(),
            bound.as_pathname(),
            "the client's peer is the listener's path"
        );
        assert!(c.local_addr().unwrap().is_unnamed());
        let big: Vec<u8> = (0..1 << 20).map(|i| (i % 251) as u8).collect();
        let (r, w) = c.into_split();
        let writer = gort::spawn(async move {
            w.write_all(&big).await.unwrap();
            big
        });
        let mut got = vec![0; 1 << 20];
        r.read_exact(&mut got).await.unwrap();
        assert!(got == writer.await.unwrap(), "the echo differs");
    });
}

#[test]
fn two_hundred_concurrent_clients_each_get_their_own_echo() {
    run(async {
        let dir = TempDir::new("many");
        spawn_echo_server(UnixListener::bind(dir.join("s")).unwrap());
        let path = dir.join("s");
        let clients: Vec<_> = (0..200u32)
            .map(|i| {
                let path = path.clone();
                gort::spawn(async move {
                    let c = UnixStream::connect(&path).await.unwrap();
                    for round in 0..10u32 {
                        let msg = (i * 1000 + round).to_be_bytes();
                        c.write_all(&msg).await.unwrap();
                        let mut back = [0; 4];
                        c.read_exact(&mut back).await.unwrap();
                        assert_eq!(back, msg);
                    }
                })
            })
            .collect();
        for c in clients {
            c.await.unwrap();
        }
    });
}

#[test]
fn a_half_closed_stream_ends_the_peers_reads_and_still_reads_its_reply() {
    run(async {
        let (c, s) = UnixStream::pair().unwrap();
        c.write_all(b"request").await.unwrap();
        c.shutdown(Shutdown::Write).unwrap();
        let mut req = [0; 7];
        s.read_exact(&mut req).await.unwrap();
        assert_eq!(&req, b"request");
        let mut buf = [0; 16];
        assert_eq!(s.read(&mut buf).await.unwrap(), 0, "no end of stream");
        s.write_all(b"reply").await.unwrap();
        drop(s);
        let mut reply = [0; 5];
        c.read_exact(&mut reply).await.unwrap();
        assert_eq!(&reply, b"reply");
        assert_eq!(c.read(&mut buf).await.unwrap(), 0);
        assert!(
            c.write_all(b"more").await.is_err(),
            "written after shutdown"
        );
    });
}

/// Blocks a one-byte read on one end of a pair in a task of its own, calls `end` with that
/// end and the other one 20 ms later (it gives back what must stay open), and asserts that
/// the read returns end of stream; returns the read's end.
async fn end_a_blocked_read(
    end: impl FnOnce(&UnixStream, UnixStream) -> Option<UnixStream>,
) -> Arc<UnixStream> {
    let (c, s) = UnixStream::pair().unwrap();
    let c = Arc::new(c);
    let reader = spawn_read(&c);
    gort::time::sleep(20 * MS).await; // the read blocks
    let _kept = end(&c, s);
    assert_eq!(reader.await.unwrap().0.unwrap(), 0, "no end of stream");
    c
}

#[test]
fn a_peer_dropped_while_a_read_waits_ends_the_read_and_fails_writes() {
    run(async {
        let c = end_a_blocked_read(|_, peer| {
            drop(peer);
            None
        })
        .await;
        let err = c.write_all(b"x").await.unwrap_err();
        assert_eq!(err.kind(), std::io::ErrorKind::BrokenPipe);
        let err = c.read_exact(&mut [0; 1]).await.unwrap_err();
        assert_eq!(err.kind(), std::io::ErrorKind::UnexpectedEof);
    });
}

/// Go ends a goroutine's blocked `Read` by closing the connection; here the reader holds it,
/// and `shutdown(Both)` from another task ends the read with end of stream (the peer stays
/// open).
#[test]
fn shutting_down_both_ways_ends_a_read_blocked_in_another_task() {
    run(async {
        end_a_blocked_read(|c, peer| {
            c.shutdown(Shutdown::Both).unwrap();
            Some(peer)
        })
        .await;
    });
}

/// A listener with an accept queue of one (re-listened with a backlog of 0): a second
/// connect finds it full (Linux says `EAGAIN`, and sends no readiness when room appears),
/// waits without blocking the runtime's only M (a ticker task runs meanwhile), and connects
/// once the first connection is accepted.
#[test]
fn a_connect_to_a_full_accept_queue_waits_for_room_without_blocking_an_m() {
    let rt = gort::Builder::new().procs(1).build().unwrap();
    rt.block_on(async {
        let dir = TempDir::new("full-queue");
        let std_listener = std::os::unix::net::UnixListener::bind(dir.join("s")).unwrap();
        // SAFETY: `listen` on a descriptor the listener owns and keeps open for the call.
        assert_eq!(unsafe { libc::listen(std_listener.as_raw_fd(), 0) }, 0);
        let listener = UnixListener::from_std(std_listener).unwrap();
        let first = UnixStream::connect(dir.join("s")).await.unwrap();
        let path = dir.join("s");
        let second = gort::spawn(async move { UnixStream::connect(path).await });
        let ticks = gort::spawn(async {
            let mut n = 0;
            for _ in 0..20 {
                gort::time::sleep(MS).await;
                n += 1;
            }
            n
        });
        assert_eq!(ticks.await.unwrap(), 20);
        assert!(!second.is_finished(), "connected past a full queue");
        let (accepted, _) = listener.accept().await.unwrap();
        let second = gort::time::timeout(Duration::from_secs(10), second)
            .await
            .expect("the waiting connect never connected")
            .unwrap()
            .unwrap();
        let (accepted2, _) = listener.accept().await.unwrap();
        first.write_all(b"1").await.unwrap();
        second.write_all(b"2").await.unwrap();
        let mut b = [0; 1];
        accepted.read_exact(&mut b).await.unwrap();
        assert_eq!(&b, b"1");
        accepted2.read_exact(&mut b).await.unwrap();
        assert_eq!(&b, b"2");
    });
}

#[test]
fn connecting_where_nobody_listens_fails_with_the_os_error() {
    run(async {
        let dir = TempDir::new("refused");
        let err = UnixStream::connect(dir.join("missing")).await.unwrap_err();
        assert_eq!(err.kind(), std::io::ErrorKind::NotFound);
        // A socket file whose listener is gone: refused.
        drop(UnixListener::bind(dir.join("gone")).unwrap());
        let err = UnixStream::connect(dir.join("gone")).await.unwrap_err();
        assert_eq!(err.kind(), std::io::ErrorKind::ConnectionRefused);
    });
}

/// As std's and Tokio's (unlike Go's), a dropped listener leaves its path: binding again
/// fails until the program removes it.
#[test]
fn a_dropped_listener_leaves_its_path_and_rebinding_needs_it_removed() {
    run(async {
        let dir = TempDir::new("rebind");
        drop(UnixListener::bind(dir.join("s")).unwrap());
        assert!(dir.join("s").exists());
        let err = UnixListener::bind(dir.join("s")).unwrap_err();
        assert_eq!(err.kind(), std::io::ErrorKind::AddrInUse);
        std::fs::remove_file(dir.join("s")).unwrap();
        UnixListener::bind(dir.join("s")).unwrap();
    });
}

/// The owned halves move to two tasks, come back together with `reunite`, and the stream
/// is whole again; dropping a write half ends the peer's stream.
#[test]
fn owned_halves_work_apart_and_reunite() {
    run(async {
        let (a, b) = UnixStream::pair().unwrap();
        let (r, w) = a.into_split();
        let w = gort::spawn(async move {
            w.write_all(b"half").await.unwrap();
            w
        })
        .await
        .unwrap();
        let mut buf = [0; 4];
        b.read_exact(&mut buf).await.unwrap();
        b.write_all(b"back").await.unwrap();
        r.set_read_deadline(Some(Instant::now() + Duration::from_secs(10)))
            .unwrap();
        r.read_exact(&mut buf).await.unwrap();
        assert_eq!(&buf, b"back");
        let a = r.reunite(w).unwrap();
        a.write_all(b"whole").await.unwrap();
        let (_r, w) = a.into_split();
        drop(w);
        let mut got = [0; 8];
        assert_eq!(b.read(&mut got).await.unwrap(), 5);
        assert_eq!(
            b.read(&mut got).await.unwrap(),
            0,
            "the write half was dropped"
        );
    });
}

#[test]
fn borrowed_halves_close_write_and_read_on() {
    run(async {
        let (a, b) = UnixStream::pair().unwrap();
        let (r, w) = a.split();
        w.write_all(b"req").await.unwrap();
        w.close_write().unwrap();
        let mut buf = [0; 8];
        assert_eq!(b.read(&mut buf).await.unwrap(), 3);
        assert_eq!(b.read(&mut buf).await.unwrap(), 0);
        b.write_all(b"rep").await.unwrap();
        assert_eq!(r.read(&mut buf).await.unwrap(), 3);
        assert!(r.local_addr().unwrap().is_unnamed());
    });
}

/// Linux's abstract namespace: a listener bound to a name that is no file, reached by
/// `connect_addr`; the name is free again once the listener is dropped (nothing to remove).
#[cfg(target_os = "linux")]
#[test]
fn an_abstract_name_is_bound_reached_and_freed_with_the_listener() {
    use std::os::linux::net::SocketAddrExt;
    use std::os::unix::net::SocketAddr;
    run(async {
        let name = format!("gort-test-abstract-{}", std::process::id());
        let addr = SocketAddr::from_abstract_name(name.as_bytes()).unwrap();
        let listener = UnixListener::bind_addr(&addr).unwrap();
        let bound = listener.local_addr().unwrap();
        assert_eq!(bound.as_abstract_name(), Some(name.as_bytes()));
        assert_eq!(
            UnixListener::bind_addr(&addr).unwrap_err().kind(),
            std::io::ErrorKind::AddrInUse
        );
        spawn_echo_server(listener);
        let c = UnixStream::connect_addr(&addr).await.unwrap();
        c.write_all(b"abstract").await.unwrap();
        let mut back = [0; 8];
        c.read_exact(&mut back).await.unwrap();
        assert_eq!(&back, b"abstract");
    });
    run(async {
        // The first runtime, its echo server and so the listener are gone.
        let name = format!("gort-test-abstract-{}", std::process::id());
        let addr = SocketAddr::from_abstract_name(name.as_bytes()).unwrap();
        UnixListener::bind_addr(&addr).unwrap();
    });
}
