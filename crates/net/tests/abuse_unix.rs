//! Adversarial probes of Unix domain sockets and stream halves: truncated datagrams, ten
//! thousand pairs opened and dropped, bad paths and names, a path reused, sockets made
//! outside a runtime, `from_std` sockets that were blocking, halves used from two runtimes
//! and one runtime shut down under a blocked half, one half dropped while the other waits.

#[path = "support/temp_dir.rs"]
mod temp_dir;
#[path = "support/watchdog.rs"]
mod watchdog;

use gort::net::{UnixDatagram, UnixListener, UnixStream};
use std::io::ErrorKind;
use std::os::unix::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use temp_dir::TempDir;
use watchdog::{open_fds, serial};

fn run<F: std::future::Future>(f: F) -> F::Output {
    gort::Runtime::new().unwrap().block_on(f)
}

/// A datagram larger than the receive buffer fills the buffer and loses the rest (as
/// `recv(2)` and Go's `ReadFrom` do): `recv` returns the buffer's length, and the next
/// `recv` gets the next datagram, not the tail of this one.
#[test]
fn a_datagram_larger_than_the_buffer_is_truncated_and_the_next_one_is_whole() {
    serial(|| {
        run(async {
            let (a, b) = UnixDatagram::pair().unwrap();
            a.send(&[7; 1000]).await.unwrap();
            a.send(b"next").await.unwrap();
            let mut buf = [0; 10];
            assert_eq!(b.recv(&mut buf).await.unwrap(), 10);
            assert_eq!(buf, [7; 10]);
            assert_eq!(b.recv(&mut buf).await.unwrap(), 4);
            assert_eq!(&buf[..4], b"next");
            // An empty buffer waits for, and takes, a whole datagram (as UDP's).
            let (a, b) = (Arc::new(a), Arc::new(b));
            let recv = gort::spawn({
                let b = b.clone();
                async move { b.recv(&mut []).await }
            });
            gort::time::sleep(Duration::from_millis(20)).await;
            assert!(!recv.is_finished(), "an empty receive waits for a datagram");
            a.send(b"taken").await.unwrap();
            assert_eq!(recv.await.unwrap().unwrap(), 0);
            a.send(b"after").await.unwrap();
            assert_eq!(b.recv(&mut buf).await.unwrap(), 5);
            assert_eq!(&buf[..5], b"after");
        })
    });
}

/// 10,000 stream pairs (some with deadlines armed, some split, some reunited, some with a
/// read blocked when dropped)
/// and 2,000 datagram pairs, opened and dropped: every descriptor comes back.
#[test]
fn ten_thousand_pairs_opened_and_dropped_leave_no_fd() {
    serial(|| {
        run(async {
            // Warm up what the runtime opens once (its poller, timerfd, pools).
            drop(UnixStream::pair().unwrap());
            let before = open_fds();
            for i in 0..10_000 {
                let (a, b) = UnixStream::pair().unwrap();
                match i % 4 {
                    0 => {
                        // Dropped with both deadline timers armed.
                        let later = gort::time::Instant::now() + Duration::from_secs(3600);
                        a.set_deadline(Some(later)).unwrap();
                        b.set_read_deadline(Some(later)).unwrap();
                    }
                    1 => {
                        let (r, w) = a.into_split();
                        b.write_all(b"x").await.unwrap();
                        let mut buf = [0; 1];
                        r.read_exact(&mut buf).await.unwrap();
                        drop(w);
                    }
                    2 => {
                        let (r, w) = a.into_split();
                        let a = r.reunite(w).unwrap();
                        a.write_all(b"y").await.unwrap();
                    }
                    _ => {
                        let a = Arc::new(a);
                        let reader = gort::spawn({
                            let a = a.clone();
                            async move {
                                let mut buf = [0; 1];
                                a.read(&mut buf).await
                            }
                        });
                        gort::yield_now().await;
                        drop(b); // the blocked read sees the end
                        assert_eq!(reader.await.unwrap().unwrap(), 0);
                    }
                }
            }
            for _ in 0..2_000 {
                let (a, b) = UnixDatagram::pair().unwrap();
                a.send(b"d").await.unwrap();
                drop((a, b));
            }
            let after = open_fds();
            assert!(after <= before, "{before} fds before, {after} after");
        })
    });
}

/// Paths and names the kernel cannot take fail with an error, not a panic or a hang: a path
/// longer than `sun_path`, one holding a NUL, an abstract name too long, a path in a
/// directory that does not exist, a connect to a regular file and to a datagram socket.
#[test]
fn bad_paths_and_names_fail_with_an_error() {
    use std::os::linux::net::SocketAddrExt;
    serial(|| {
        run(async {
            let dir = TempDir::new("abuse-unix-paths");
            let long = dir.join(&"x".repeat(200));
            assert!(UnixListener::bind(&long).is_err());
            assert!(UnixDatagram::bind(&long).is_err());
            assert!(UnixStream::connect(&long).await.is_err());
            assert!(UnixListener::bind("/tmp/a\0b").is_err());
            assert!(SocketAddr::from_abstract_name([b'n'; 200]).is_err());
            let e = UnixListener::bind(dir.join("no/such/dir/sock")).unwrap_err();
            assert_eq!(e.kind(), ErrorKind::NotFound, "{e}");
            let file = dir.join("file");
            std::fs::write(&file, b"").unwrap();
            let e = UnixStream::connect(&file).await.unwrap_err();
            assert_eq!(e.kind(), ErrorKind::ConnectionRefused, "{e}");
            let dgram_path = dir.join("dgram");
            let _dgram = UnixDatagram::bind(&dgram_path).unwrap();
            assert!(UnixStream::connect(&dgram_path).await.is_err());
            let e = UnixListener::bind(&dgram_path).unwrap_err();
            assert_eq!(e.kind(), ErrorKind::AddrInUse, "{e}");
        })
    });
}

/// A path reused: after its listener is dropped and the file removed, a new listener binds
/// it; a connection accepted by the old one still works after its file was removed; the
/// new listener gets the new connects; an abstract name is free again at once.
#[test]
fn a_path_reused_by_a_new_listener_keeps_old_connections_apart() {
    use std::os::linux::net::SocketAddrExt;
    serial(|| {
        run(async {
            let dir = TempDir::new("abuse-unix-reuse");
            let path = dir.join("sock");
            let old = UnixListener::bind(&path).unwrap();
            let c_old = UnixStream::connect(&path).await.unwrap();
            let (s_old, _) = old.accept().await.unwrap();
            drop(old);
            std::fs::remove_file(&path).unwrap();
            let e = UnixStream::connect(&path).await.unwrap_err();
            assert_eq!(e.kind(), ErrorKind::NotFound, "{e}");
            let new = UnixListener::bind(&path).unwrap();
            let c_new = UnixStream::connect(&path).await.unwrap();
            let (s_new, _) = new.accept().await.unwrap();
            c_old.write_all(b"old").await.unwrap();
            c_new.write_all(b"new").await.unwrap();
            let mut buf = [0; 3];
            s_old.read_exact(&mut buf).await.unwrap();
            assert_eq!(&buf, b"old");
            s_new.read_exact(&mut buf).await.unwrap();
            assert_eq!(&buf, b"new");

            let name = format!("gort-abuse-reuse-{}", std::process::id());
            let addr = SocketAddr::from_abstract_name(name.as_bytes()).unwrap();
            for _ in 0..100 {
                let l = UnixListener::bind_addr(&addr).unwrap();
                let c = UnixStream::connect_addr(&addr).await.unwrap();
                let (s, _) = l.accept().await.unwrap();
                c.write_all(b"a").await.unwrap();
                s.read_exact(&mut buf[..1]).await.unwrap();
            }
        })
    });
}

/// A socket made outside a runtime fails with an error that says so, and leaves nothing
/// behind: no fd, and no file at the path (a retry inside a runtime binds it).
#[test]
fn sockets_made_outside_a_runtime_fail_and_leave_no_fd_nor_file() {
    serial(|| {
        let dir = TempDir::new("abuse-unix-outside");
        let before = open_fds();
        let e = UnixStream::pair().unwrap_err();
        assert!(e.to_string().contains("runtime"), "{e}");
        assert!(UnixDatagram::pair().is_err());
        assert!(UnixDatagram::unbound().is_err());
        let path = dir.join("listener");
        let e = UnixListener::bind(&path).unwrap_err();
        assert!(e.to_string().contains("runtime"), "{e}");
        assert!(!path.exists(), "a bind that failed left its socket file");
        let dgram = dir.join("dgram");
        assert!(UnixDatagram::bind(&dgram).is_err());
        assert!(!dgram.exists(), "a bind that failed left its socket file");
        let std_listener = std::os::unix::net::UnixListener::bind(dir.join("std")).unwrap();
        assert!(UnixListener::from_std(std_listener).is_err());
        assert_eq!(open_fds(), before);
        run(async {
            let _l = UnixListener::bind(&path).unwrap();
            let _d = UnixDatagram::bind(&dgram).unwrap();
        });
    });
}

/// `from_std` of blocking std sockets: they are made non-blocking, so a read that waits
/// blocks its task, not the one M of the runtime; the listener accepts the same way.
#[test]
fn from_std_of_blocking_sockets_never_blocks_an_m() {
    serial(|| {
        let dir = TempDir::new("abuse-unix-fromstd");
        let rt = gort::Builder::new().procs(1).build().unwrap();
        rt.block_on(async {
            let (a, b) = std::os::unix::net::UnixStream::pair().unwrap();
            let a = Arc::new(UnixStream::from_std(a).unwrap());
            let reader = gort::spawn({
                let a = a.clone();
                async move {
                    let mut buf = [0; 2];
                    a.read_exact(&mut buf).await.map(|()| buf)
                }
            });
            gort::time::sleep(Duration::from_millis(20)).await; // this task still runs
            use std::io::Write;
            (&b).write_all(b"hi").unwrap();
            assert_eq!(&reader.await.unwrap().unwrap(), b"hi");

            let path = dir.join("l");
            let l = std::os::unix::net::UnixListener::bind(&path).unwrap();
            let l = Arc::new(UnixListener::from_std(l).unwrap());
            let acceptor = gort::spawn({
                let l = l.clone();
                async move { l.accept().await.map(|_| ()) }
            });
            gort::time::sleep(Duration::from_millis(20)).await;
            let _c = UnixStream::connect(&path).await.unwrap();
            acceptor.await.unwrap().unwrap();

            let (d1, d2) = std::os::unix::net::UnixDatagram::pair().unwrap();
            let d1 = Arc::new(UnixDatagram::from_std(d1).unwrap());
            let receiver = gort::spawn({
                let d1 = d1.clone();
                async move { d1.recv(&mut [0; 8]).await }
            });
            gort::time::sleep(Duration::from_millis(20)).await;
            d2.send(b"dgram").unwrap();
            assert_eq!(receiver.await.unwrap().unwrap(), 5);
        });
    });
}

/// A stream made on runtime A, its read half reading in a task of runtime B and its write
/// half writing from A: the data flows both ways. Then A shuts down while B's read is
/// blocked: the read ends with an error instead of waiting for a poller that is gone.
#[test]
fn halves_used_from_two_runtimes_and_the_owners_shutdown_ends_a_blocked_read() {
    serial(|| {
        let a = gort::Runtime::new().unwrap();
        let b = gort::Runtime::new().unwrap();
        let (peer, r, w) = a.block_on(async {
            let (c, peer) = UnixStream::pair().unwrap();
            let (r, w) = c.into_split();
            (peer, r, w)
        });
        let peer = Arc::new(peer);
        let r = Arc::new(r);
        // Round trips: B reads what the peer (A) writes, A's half writes to the peer.
        for i in 0..200u32 {
            let reader = b.spawn({
                let r = r.clone();
                async move {
                    let mut buf = [0; 4];
                    r.read_exact(&mut buf)
                        .await
                        .map(|()| u32::from_le_bytes(buf))
                }
            });
            a.block_on(async {
                gort::yield_now().await;
                peer.write_all(&i.to_le_bytes()).await.unwrap();
                w.write_all(&i.to_le_bytes()).await.unwrap();
                let mut buf = [0; 4];
                peer.read_exact(&mut buf).await.unwrap();
                assert_eq!(u32::from_le_bytes(buf), i);
            });
            assert_eq!(b.block_on(reader).unwrap().unwrap(), i);
        }
        let blocked = b.spawn({
            let r = r.clone();
            async move { r.read(&mut [0; 8]).await }
        });
        b.block_on(gort::time::sleep(Duration::from_millis(20)));
        assert!(!blocked.is_finished());
        drop(a); // the socket's runtime shuts down under the blocked read
        let res = b.block_on(blocked).unwrap();
        let e = res.unwrap_err();
        assert_eq!(e.kind(), ErrorKind::NotConnected, "{e}");
        drop((w, peer));
    });
}

/// The write half dropped while the read half is blocked: the peer sees the end of the
/// stream, and the blocked read still gets what the peer sends afterwards. The read half
/// dropped while the write half is blocked on a full buffer: the write finishes once the
/// peer reads, every byte in order.
#[test]
fn one_half_dropped_while_the_other_is_blocked() {
    serial(|| {
        run(async {
            let (c, peer) = UnixStream::pair().unwrap();
            let (r, w) = c.into_split();
            let reader = gort::spawn(async move {
                let mut buf = [0; 5];
                r.read_exact(&mut buf).await.map(|()| buf)
            });
            gort::yield_now().await;
            drop(w);
            let mut buf = [0; 1];
            assert_eq!(
                peer.read(&mut buf).await.unwrap(),
                0,
                "the peer sees the end"
            );
            peer.write_all(b"later").await.unwrap();
            assert_eq!(&reader.await.unwrap().unwrap(), b"later");

            let (c, peer) = UnixStream::pair().unwrap();
            let (r, w) = c.into_split();
            let data: Vec<u8> = (0..4 << 20).map(|i: u32| (i % 253) as u8).collect();
            let writer = gort::spawn({
                let data = data.clone();
                async move { w.write_all(&data).await }
            });
            gort::time::sleep(Duration::from_millis(20)).await;
            assert!(
                !writer.is_finished(),
                "4 MiB fit in a Unix socket's buffer?"
            );
            drop(r);
            let mut got = vec![0; data.len()];
            peer.read_exact(&mut got).await.unwrap();
            writer.await.unwrap().unwrap();
            assert!(got == data, "bytes lost or reordered");
            assert_eq!(
                peer.read(&mut buf).await.unwrap(),
                0,
                "the write half's drop ends it"
            );
        })
    });
}

/// An accept, a stream read and a datagram receive blocked when their runtime shuts down
/// (the listener, stream and socket shared with the blocked tasks) end, and the sockets
/// dropped afterwards close their fds.
#[test]
fn blocked_unix_operations_end_at_runtime_shutdown_and_leave_no_fd() {
    serial(|| {
        let dir = TempDir::new("abuse-unix-shutdown");
        let before = open_fds();
        let rt = gort::Runtime::new().unwrap();
        let (l, s, d, peers) = rt.block_on(async {
            let l = Arc::new(UnixListener::bind(dir.join("l")).unwrap());
            let (s, s_peer) = UnixStream::pair().unwrap();
            let (d, d_peer) = UnixDatagram::pair().unwrap();
            (l, Arc::new(s), Arc::new(d), (s_peer, d_peer))
        });
        let (tx, rx) = std::sync::mpsc::channel();
        for i in 0..3 {
            let (l, s, d, tx) = (l.clone(), s.clone(), d.clone(), tx.clone());
            rt.spawn(async move {
                let res = match i {
                    0 => l.accept().await.map(|_| ()),
                    1 => s.read(&mut [0; 4]).await.map(|_| ()),
                    _ => d.recv(&mut [0; 4]).await.map(|_| ()),
                };
                tx.send(res.map_err(|e| e.kind())).unwrap();
            });
        }
        rt.block_on(gort::time::sleep(Duration::from_millis(20)));
        drop(rt);
        // The tasks were dropped with the runtime, or ran to their error before it ended.
        for res in rx.try_iter() {
            assert_eq!(res, Err(ErrorKind::NotConnected));
        }
        let e = gort::Runtime::new()
            .unwrap()
            .block_on(async { s.read(&mut [0; 4]).await.unwrap_err() });
        assert_eq!(e.kind(), ErrorKind::NotConnected, "{e}");
        drop((l, s, d, peers));
        assert_eq!(open_fds(), before);
    });
}

/// Halves of two different Unix streams do not reunite: the error says so, gives both back,
/// and both still work; the right pairs then reunite. One generic function over
/// `gort::net::Stream` serves the halves of either kind.
#[test]
fn unix_halves_of_different_streams_do_not_reunite_and_still_work() {
    use gort::net::{OwnedReadHalf, OwnedWriteHalf, Stream};
    async fn round_trip<S: Stream>(r: &OwnedReadHalf<S>, w: &OwnedWriteHalf<S>, peer: &[u8]) {
        w.write_all(b"ping").await.unwrap();
        let mut buf = [0; 4];
        r.read_exact(&mut buf).await.unwrap();
        assert_eq!(&buf, peer);
    }
    serial(|| {
        run(async {
            let (a, a_peer) = UnixStream::pair().unwrap();
            let (b, b_peer) = UnixStream::pair().unwrap();
            let (ar, aw) = a.into_split();
            let (br, bw) = b.into_split();
            let err = ar.reunite(bw).unwrap_err();
            assert_eq!(
                err.to_string(),
                "tried to reunite halves that are not from the same socket"
            );
            let gort::net::ReuniteError(ar, bw) = err;
            a_peer.write_all(b"pong").await.unwrap();
            round_trip(&ar, &aw, b"pong").await;
            let mut buf = [0; 4];
            a_peer.read_exact(&mut buf).await.unwrap();
            assert_eq!(&buf, b"ping");
            b_peer.write_all(b"pong").await.unwrap();
            round_trip(&br, &bw, b"pong").await;
            b_peer.read_exact(&mut buf).await.unwrap();
            let a = ar.reunite(aw).unwrap();
            let b = bw.reunite(br).unwrap();
            a.write_all(b"a").await.unwrap();
            b.write_all(b"b").await.unwrap();
            a_peer.read_exact(&mut buf[..1]).await.unwrap();
            assert_eq!(buf[0], b'a');
            b_peer.read_exact(&mut buf[..1]).await.unwrap();
            assert_eq!(buf[0], b'b');
        })
    });
}

/// Borrowed halves of a Unix stream: a read blocked on the read half in one task while the
/// write half's `close_write` runs in another ends the peer's stream and not the read; the
/// halves dropped leave the stream whole.
#[test]
fn borrowed_unix_halves_close_write_while_a_read_is_blocked() {
    serial(|| {
        run(async {
            let (c, peer) = UnixStream::pair().unwrap();
            let c = Arc::new(c);
            let reader = gort::spawn({
                let c = c.clone();
                async move {
                    let (r, _w) = c.split();
                    let mut buf = [0; 5];
                    r.read_exact(&mut buf).await.map(|()| buf)
                }
            });
            gort::yield_now().await;
            {
                let (_r, w) = c.split();
                w.write_all(b"last").await.unwrap();
                w.close_write().unwrap();
            }
            let mut got = Vec::new();
            let mut buf = [0; 8];
            while let n @ 1.. = peer.read(&mut buf).await.unwrap() {
                got.extend_from_slice(&buf[..n]);
            }
            assert_eq!(got, b"last");
            peer.write_all(b"reply").await.unwrap();
            assert_eq!(&reader.await.unwrap().unwrap(), b"reply");
            let e = c.write(b"x").await.unwrap_err();
            assert_eq!(e.kind(), ErrorKind::BrokenPipe, "{e}");
        })
    });
}

/// One Unix stream read at once by tasks of two runtimes (a read blocked on each): every
/// byte the peer writes is read exactly once, by one or the other, and nobody is left
/// waiting once the peer closes.
#[test]
fn one_stream_read_from_two_runtimes_at_once_loses_and_duplicates_nothing() {
    serial(|| {
        let a = gort::Runtime::new().unwrap();
        let b = gort::Runtime::new().unwrap();
        let (c, peer) = a.block_on(async { UnixStream::pair().unwrap() });
        let c = Arc::new(c);
        let reader = |c: Arc<UnixStream>| async move {
            let mut got = Vec::new();
            let mut buf = [0; 3];
            while let n @ 1.. = c.read(&mut buf).await.unwrap() {
                got.extend_from_slice(&buf[..n]);
            }
            got
        };
        let ra = a.spawn(reader(c.clone()));
        let rb = b.spawn(reader(c.clone()));
        a.block_on(async move {
            for i in 0..20_000u32 {
                peer.write_all(&[(i % 256) as u8]).await.unwrap();
                if i % 64 == 0 {
                    gort::yield_now().await;
                }
            }
        }); // the peer is dropped: both readers see the end
        let (ga, gb) = (a.block_on(ra).unwrap(), b.block_on(rb).unwrap());
        assert_eq!(ga.len() + gb.len(), 20_000, "{} + {}", ga.len(), gb.len());
        let mut counts = [0u32; 256];
        for &x in ga.iter().chain(&gb) {
            counts[x as usize] += 1;
        }
        for (v, &n) in counts.iter().enumerate() {
            let want = (0..20_000u32).filter(|i| i % 256 == v as u32).count() as u32;
            assert_eq!(n, want, "value {v}");
        }
    });
}
