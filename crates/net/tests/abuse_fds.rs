//! Sockets and runtimes ending in the wrong order: a runtime dropped while tasks are blocked
//! on sockets with deadlines armed, sockets that outlive their runtime or are used from
//! another one, connects cancelled while their handshake is stalled. Nothing may hang and
//! no fd may leak (the runtime's own included): each case counts `/proc/self/fd` before it
//! and after. The cases take one lock, as a case running beside another would open fds
//! meanwhile.

#[allow(dead_code)] // not every helper is used by this binary
#[path = "support/tcp.rs"]
mod tcp;

use gort::net::{TcpListener, TcpStream, UdpSocket};
use gort::time::Instant;
use std::io::ErrorKind;
use std::os::fd::AsRawFd;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;
use tcp::tcp_pair;

fn open_fds() -> usize {
    std::fs::read_dir("/proc/self/fd").unwrap().count()
}

/// One case at a time: fd counts are process-wide.
fn serial() -> MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    LOCK.lock().unwrap_or_else(|e| e.into_inner())
}

/// Runs `f` on another thread, failing the test if it has not returned in 20 s.
fn watchdog<R: Send + 'static>(what: &str, f: impl FnOnce() -> R + Send + 'static) -> R {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    rx.recv_timeout(Duration::from_secs(20))
        .unwrap_or_else(|_| panic!("{what} hung (or panicked)"))
}

/// Asserts that the fd count came back to `baseline` (it may take a moment for the threads
/// of a dropped runtime to close theirs).
fn assert_back_to(baseline: usize, what: &str) {
    for _ in 0..200 {
        if open_fds() <= baseline {
            return;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    panic!("{what}: {} fds open, {baseline} before", open_fds());
}

fn far() -> Instant {
    Instant::now() + Duration::from_secs(60)
}

#[test]
fn a_runtime_dropped_with_blocked_operations_and_armed_deadlines_leaves_no_fd() {
    let _serial = serial();
    let baseline = open_fds();
    watchdog("the runtime's drop", || {
        let rt = gort::Runtime::new().unwrap();
        rt.block_on(async {
            let l = Arc::new(TcpListener::bind("127.0.0.1:0").await.unwrap());
            let addr = l.local_addr().unwrap();
            let mut pairs = Vec::new();
            for _ in 0..20 {
                let c = TcpStream::connect(addr).await.unwrap();
                let (s, _) = l.accept().await.unwrap();
                pairs.push((Arc::new(c), s));
            }
            // Blocked: an accept, reads and writes (a full send buffer), a UDP receive, all
            // with deadlines a minute away.
            l.set_deadline(Some(far())).unwrap();
            gort::spawn(async move { l.accept().await });
            for (i, (c, s)) in pairs.into_iter().enumerate() {
                c.set_deadline(Some(far())).unwrap();
                let c2 = c.clone();
                gort::spawn(async move { c2.read(&mut [0; 8]).await });
                if i % 2 == 0 {
                    gort::spawn(async move { c.write_all(&vec![0; 16 << 20]).await });
                }
                // The peer stays open, owned by a task that never ends.
                gort::spawn(async move {
                    let _s = s;
                    std::future::pending::<()>().await
                });
            }
            let u = UdpSocket::bind("127.0.0.1:0").await.unwrap();
            u.set_read_deadline(Some(far())).unwrap();
            gort::spawn(async move { u.recv(&mut [0; 8]).await });
            gort::time::sleep(Duration::from_millis(50)).await;
        });
        drop(rt);
    });
    assert_back_to(baseline, "after the runtime's drop");
}

#[test]
fn a_socket_that_outlives_its_runtime_fails_at_once_and_closes_its_fd() {
    let _serial = serial();
    let baseline = open_fds();
    watchdog("the socket after its runtime", || {
        let rt = gort::Runtime::new().unwrap();
        let (c, s) = rt.block_on(async {
            let (c, s) = tcp_pair().await;
            c.set_read_deadline(Some(far())).unwrap();
            (c, s)
        });
        drop(rt);
        // Its runtime is gone: nothing would ever poll it, so its operations fail at once
        // (closed), on another runtime as on none.
        let other = gort::Runtime::new().unwrap();
        other.block_on(async {
            s.write_all(b"x").await.unwrap_err();
            let e = c.read(&mut [0; 1]).await.unwrap_err();
            assert_eq!(e.kind(), ErrorKind::NotConnected, "{e:?}");
            c.set_read_deadline(Some(Instant::now())).unwrap();
            c.set_read_deadline(None).unwrap();
        });
        drop(other);
        // Deadlines from a plain thread: cleared or passed works, and so does the drop.
        c.set_deadline(None).unwrap();
        c.set_deadline(Some(Instant::now())).unwrap();
        drop((c, s));
    });
    assert_back_to(baseline, "after the sockets' drop");
}

#[test]
fn sockets_made_on_one_runtime_serve_tasks_of_another_while_it_lives() {
    let _serial = serial();
    let baseline = open_fds();
    watchdog("the second runtime's tasks", || {
        let home = gort::Runtime::new().unwrap();
        let (c, s) = home.block_on(async {
            let (c, s) = tcp_pair().await;
            (Arc::new(c), s)
        });
        let other = gort::Runtime::new().unwrap();
        other.block_on(async {
            // A deadline armed on this runtime's timers ends a read on the other's poller.
            c.set_read_deadline(Some(Instant::now() + Duration::from_millis(30)))
                .unwrap();
            let e = c.read(&mut [0; 1]).await.unwrap_err();
            assert_eq!(e.kind(), ErrorKind::TimedOut);
            c.set_read_deadline(None).unwrap();
            let reader = {
                let c = c.clone();
                gort::spawn(async move {
                    let mut b = [0; 5];
                    c.read_exact(&mut b).await.map(|()| b)
                })
            };
            gort::time::sleep(Duration::from_millis(20)).await;
            s.write_all(b"hello").await.unwrap();
            assert_eq!(&reader.await.unwrap().unwrap(), b"hello");
        });
        drop((c, s));
        drop(other);
        drop(home);
    });
    assert_back_to(baseline, "after both runtimes");
}

/// A listener whose accept queue is full: the kernel drops further SYNs, so a connect to it
/// stalls in its handshake (retransmitting). Returns the listener and the connections that
/// fill its queue.
fn full_listener() -> (std::net::TcpListener, Vec<std::net::TcpStream>) {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    // SAFETY: `listen` on the listener's own open socket.
    assert_eq!(unsafe { libc::listen(l.as_raw_fd(), 0) }, 0);
    let addr = l.local_addr().unwrap();
    let mut queued = Vec::new();
    while let Ok(s) = std::net::TcpStream::connect_timeout(&addr, Duration::from_millis(300)) {
        queued.push(s);
        assert!(queued.len() < 64, "the accept queue never filled");
    }
    (l, queued)
}

#[test]
fn connects_cancelled_while_their_handshake_stalls_leave_no_fd() {
    let _serial = serial();
    let (l, queued) = full_listener();
    let addr = l.local_addr().unwrap();
    let rt = gort::Runtime::new().unwrap();
    rt.block_on(async {});
    let baseline = open_fds();
    watchdog("the cancelled connects", move || {
        rt.block_on(async move {
            let connects: Vec<_> = (0..200)
                .map(|_| {
                    gort::spawn(async move {
                        gort::time::timeout(Duration::from_millis(100), TcpStream::connect(addr))
                            .await
                    })
                })
                .collect();
            for c in connects {
                assert!(c.await.unwrap().is_err(), "a connect got through");
            }
        });
        assert_back_to(baseline, "after the cancelled connects");
        drop((l, queued));
    });
}

/// A deadline armed on one runtime's timers (a minute away), then moved earlier from a task
/// of another: the move must reach the first runtime's timer, whose Ms sleep until the old
/// instant, and end the read on time. (It woke only the caller's runtime, and the read
/// waited for the old deadline: the watchdog failed the case.)
#[test]
fn a_deadline_armed_on_one_runtime_and_moved_earlier_from_another_fires_on_time() {
    let _serial = serial();
    watchdog("the moved deadline", || {
        let home = gort::Runtime::new().unwrap();
        let (c, s) = home.block_on(async {
            let (c, s) = tcp_pair().await;
            c.set_read_deadline(Some(far())).unwrap();
            (Arc::new(c), s)
        });
        let other = gort::Runtime::new().unwrap();
        other.block_on(async {
            let start = std::time::Instant::now();
            c.set_read_deadline(Some(Instant::now() + Duration::from_millis(30)))
                .unwrap();
            let e = c.read(&mut [0; 1]).await.unwrap_err();
            assert_eq!(e.kind(), ErrorKind::TimedOut);
            assert!(
                start.elapsed() < Duration::from_secs(10),
                "{:?}",
                start.elapsed()
            );
            // And moved earlier again from the home runtime, with the other's timer armed.
            c.set_read_deadline(Some(far())).unwrap();
        });
        home.block_on(async {
            let start = std::time::Instant::now();
            c.set_read_deadline(Some(Instant::now() + Duration::from_millis(30)))
                .unwrap();
            let e = c.read(&mut [0; 1]).await.unwrap_err();
            assert_eq!(e.kind(), ErrorKind::TimedOut);
            assert!(
                start.elapsed() < Duration::from_secs(10),
                "{:?}",
                start.elapsed()
            );
            c.set_read_deadline(Some(far())).unwrap();
        });
        // The runtime holding the armed timer goes first; the socket is then moved on.
        drop(home);
        other.block_on(async {
            // Closed with its runtime: the deadline is taken (and arms nothing), the read
            // fails at once.
            c.set_read_deadline(Some(Instant::now() + Duration::from_millis(30)))
                .unwrap();
            let e = c.read(&mut [0; 1]).await.unwrap_err();
            assert_eq!(e.kind(), ErrorKind::NotConnected, "{e:?}");
            c.set_read_deadline(None).unwrap();
        });
        drop((c, s));
        drop(other);
    });
}

/// The CPU time this process has used (user and system).
fn cpu_time() -> Duration {
    // SAFETY: getrusage fills the zeroed struct it is given.
    let usage = unsafe {
        let mut u: libc::rusage = std::mem::zeroed();
        assert_eq!(libc::getrusage(libc::RUSAGE_SELF, &mut u), 0);
        u
    };
    let tv = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
    tv(usage.ru_utime) + tv(usage.ru_stime)
}

/// Sockets left in every final state nobody reads (an end of stream, a reset, a refused
/// datagram, a connection queued on a listener nobody accepts from) while other tasks block
/// on idle ones: edge-triggered, none of them may keep an M busy.
#[test]
fn sockets_left_hung_up_reset_or_refused_cost_no_cpu_while_tasks_wait() {
    let _serial = serial();
    watchdog("the idle wait", || {
        gort::Runtime::new().unwrap().block_on(async {
            let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
            let addr = l.local_addr().unwrap();
            let (mut keep, mut clients) = (Vec::new(), Vec::new());
            for i in 0..300 {
                let c = Arc::new(TcpStream::connect(addr).await.unwrap());
                let (s, _) = l.accept().await.unwrap();
                match i % 3 {
                    0 => drop(s), // an end of stream waits in c
                    1 => {
                        tcp::linger_zero(&s);
                        drop(s); // a reset waits in c
                    }
                    _ => {
                        // An idle connection a task blocks on, with a deadline armed.
                        c.set_read_deadline(Some(far())).unwrap();
                        let c2 = c.clone();
                        gort::spawn(async move { c2.read(&mut [0; 1]).await });
                        keep.push(s);
                    }
                }
                clients.push(c); // kept, its final state unread
            }
            let u = UdpSocket::bind("127.0.0.1:0").await.unwrap();
            let gone = UdpSocket::bind("127.0.0.1:0").await.unwrap();
            u.connect(gone.local_addr().unwrap()).await.unwrap();
            drop(gone);
            u.send(b"refused").await.unwrap();
            // Connections queued on the listener, never accepted.
            let mut queued = Vec::new();
            for _ in 0..10 {
                queued.push(TcpStream::connect(addr).await.unwrap());
            }
            gort::time::sleep(Duration::from_millis(100)).await;
            let (cpu, wall) = (cpu_time(), std::time::Instant::now());
            gort::time::sleep(Duration::from_millis(1000)).await;
            let used = cpu_time() - cpu;
            let elapsed = wall.elapsed();
            // A spinning M would use about the whole second.
            assert!(
                used < elapsed / 4,
                "{used:?} of CPU over {elapsed:?} with every task waiting"
            );
            drop((keep, clients, queued, u, l));
        });
    });
}

/// Sockets dropped on every kind of thread while their deadlines fire: the last owner is a
/// task that ends as the deadline passes, a plain thread, or the read that the expiry ends.
/// No fire may reach a dropped descriptor, nothing may hang or panic, no fd may stay.
#[test]
fn sockets_dropped_as_their_deadlines_fire_on_any_thread_leave_no_fd() {
    let _serial = serial();
    let rt = gort::Runtime::new().unwrap();
    let l = rt.block_on(TcpListener::bind("127.0.0.1:0")).unwrap();
    let addr = l.local_addr().unwrap();
    // Warm the runtime's lazily made parts before the baseline.
    rt.block_on(async {
        let c = TcpStream::connect(addr).await.unwrap();
        drop(l.accept().await.unwrap());
        c.set_read_deadline(Some(Instant::now())).unwrap();
    });
    let baseline = open_fds();
    let l = Arc::new(l);
    watchdog("the racing drops", move || {
        let (tx, rx) = std::sync::mpsc::channel::<Arc<TcpStream>>();
        let plain = std::thread::spawn(move || {
            for c in rx {
                std::thread::sleep(Duration::from_micros(200));
                drop(c);
            }
        });
        rt.block_on(async move {
            for _round in 0..20 {
                let (mut tasks, mut peers) = (Vec::new(), Vec::new());
                for i in 0..50u64 {
                    let c = Arc::new(TcpStream::connect(addr).await.unwrap());
                    let (s, _) = l.accept().await.unwrap();
                    let due = Instant::now() + Duration::from_micros(100 + 37 * (i % 13));
                    c.set_deadline(Some(due)).unwrap();
                    let reader = c.clone();
                    tasks.push(gort::spawn(async move {
                        let r = reader.read(&mut [0; 1]).await;
                        assert!(r.is_err(), "nothing was sent: {r:?}");
                    }));
                    match i % 3 {
                        0 => drop(c),
                        1 => tx.send(c).unwrap(),
                        _ => {
                            tasks.push(gort::spawn(async move {
                                gort::time::sleep(Duration::from_micros(150)).await;
                                drop(c);
                            }));
                        }
                    }
                    peers.push(s);
                }
                for t in tasks {
                    t.await.unwrap();
                }
                drop(peers);
            }
            drop(tx);
            drop(l);
        });
        plain.join().unwrap();
        drop(rt);
    });
    assert_back_to(baseline, "after the racing drops");
}

fn rss_mib() -> usize {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let kib: usize = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap();
    kib / 1024
}

/// Reads given up under a `timeout` by 100,000 distinct tasks on a socket that stays idle:
/// each dropped read must take its waker out of the descriptor. Left in until the socket's
/// next readiness, each kept its finished task's memory (a 4 KiB buffer here): ~460 MB for
/// this case.
#[test]
fn reads_given_up_by_many_tasks_on_an_idle_socket_keep_no_memory() {
    let _serial = serial();
    watchdog("the given-up reads", || {
        gort::Runtime::new().unwrap().block_on(async {
            let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
            let c = Arc::new(TcpStream::connect(l.local_addr().unwrap()).await.unwrap());
            let (_s, _) = l.accept().await.unwrap();
            let u = Arc::new(UdpSocket::bind("127.0.0.1:0").await.unwrap());
            let before = rss_mib();
            for _ in 0..200 {
                let batch: Vec<_> = (0..500)
                    .map(|i| {
                        let (c, u) = (c.clone(), u.clone());
                        gort::spawn(async move {
                            let mut buf = [0u8; 4096];
                            let limit = Duration::from_micros(200);
                            if i % 2 == 0 {
                                let _ = gort::time::timeout(limit, c.read(&mut buf)).await;
                            } else {
                                let _ = gort::time::timeout(limit, u.recv(&mut buf)).await;
                            }
                            std::hint::black_box(&buf);
                        })
                    })
                    .collect();
                for t in batch {
                    t.await.unwrap();
                }
            }
            let grown = rss_mib().saturating_sub(before);
            assert!(grown < 64, "{grown} MiB kept by given-up reads");
        });
    });
}

/// Unix connects into a full accept queue retry on fresh sockets (Linux gives no edge when
/// room appears): given up under a `timeout`, none may leave a socket behind, and none may
/// keep an M busy while it waits.
#[test]
fn unix_connects_given_up_on_a_full_queue_leave_no_fd() {
    use gort::net::{UnixListener, UnixStream};
    let _serial = serial();
    let dir = std::env::temp_dir().join(format!("gort-abuse-fds-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("full.sock");
    let rt = gort::Runtime::new().unwrap();
    let (l, queued) = rt.block_on(async {
        let l = UnixListener::bind(&path).unwrap();
        // SAFETY: `listen` on the listener's own open socket: a queue of one.
        assert_eq!(unsafe { libc::listen(l.as_raw_fd(), 0) }, 0);
        let mut queued = Vec::new();
        while let Ok(Ok(s)) =
            gort::time::timeout(Duration::from_millis(100), UnixStream::connect(&path)).await
        {
            queued.push(s);
            assert!(queued.len() < 64, "the accept queue never filled");
        }
        (l, queued)
    });
    let baseline = open_fds();
    let p = path.clone();
    let rt = watchdog("the given-up Unix connects", move || {
        rt.block_on(async move {
            let (cpu, wall) = (cpu_time(), std::time::Instant::now());
            let connects: Vec<_> = (0..50)
                .map(|_| {
                    let p = p.clone();
                    gort::spawn(async move {
                        gort::time::timeout(Duration::from_millis(300), UnixStream::connect(p))
                            .await
                    })
                })
                .collect();
            for c in connects {
                assert!(c.await.unwrap().is_err(), "a connect got through");
            }
            let used = cpu_time() - cpu;
            assert!(
                used < wall.elapsed(),
                "{used:?} of CPU in {:?}",
                wall.elapsed()
            );
        });
        rt
    });
    assert_back_to(baseline, "after the given-up Unix connects");
    drop((l, queued, rt));
    let _ = std::fs::remove_dir_all(&dir);
}
