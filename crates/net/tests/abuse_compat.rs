//! Where real programs meet gort::net: the tokio-io adapters polled from several tasks at
//! once through `&TcpStream` (two readers and a writer), tokio `ReadBuf`s that arrive with
//! filled and initialized parts, reads and writes after a reset, owned halves dropped with
//! operations pending or reunited wrongly, `from_std` given a blocking socket, a listening
//! socket, an unconnected one, one still connecting, a duplicate of a registered one or a
//! listener that does not listen, `ToSocketAddrs` impls that name nothing, panic or block,
//! names that do not resolve, a connect whose first address refuses, IPv6 and dual-stack
//! listeners, socket options on shut-down and reset sockets, and trait reads given up by
//! 100,000 tasks on one idle socket. Each must end in the bytes sent or an error of the right
//! kind, never a hang (a watchdog fails a case after 30 s), a panic or a leaked fd.
//!
//! Run: `cargo test -p gort-net --features tokio-io,futures-io --test abuse_compat`
#![cfg(all(feature = "tokio-io", feature = "futures-io"))]

#[allow(dead_code)] // not every helper is used by this binary
#[path = "support/watchdog.rs"]
mod watchdog;

use gort::net::{TcpListener, TcpStream};
use gort::time::Instant;
use std::io::{self, ErrorKind};
use std::net::{Shutdown, SocketAddr, ToSocketAddrs};
use std::os::fd::{AsRawFd, FromRawFd, IntoRawFd};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt, ReadBuf};
use watchdog::{open_fds, serial, within};

fn run<F: std::future::Future>(f: F) -> F::Output {
    gort::Builder::new().procs(2).build().unwrap().block_on(f)
}

async fn tcp_pair() -> (TcpStream, TcpStream) {
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let c = TcpStream::connect(l.local_addr().unwrap()).await.unwrap();
    let (s, _) = l.accept().await.unwrap();
    (c, s)
}

/// Sets `SO_LINGER` to zero: closing the socket then sends a reset instead of a FIN.
fn linger_zero(fd: std::os::fd::RawFd) {
    let linger = libc::linger {
        l_onoff: 1,
        l_linger: 0,
    };
    let len = std::mem::size_of::<libc::linger>() as libc::socklen_t;
    // SAFETY: `linger` is valid for reads of `len` bytes for the call; `fd` is open.
    let rc = unsafe {
        libc::setsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_LINGER,
            (&linger as *const libc::linger).cast(),
            len,
        )
    };
    assert_eq!(rc, 0, "setsockopt: {}", io::Error::last_os_error());
}

/// Two tasks read one stream through `&TcpStream`'s tokio `AsyncRead` while a third writes
/// back through its `AsyncWrite`: every byte the peer sent is read once, by one reader or
/// the other, and neither reader is left waiting once the peer closes (each slot in the
/// direction's waiter list is woken).
#[test]
fn two_trait_readers_and_a_trait_writer_share_one_stream() {
    within(|| {
        run(async {
            const TOTAL: usize = 4 << 20;
            let (c, s) = tcp_pair().await;
            let s = Arc::new(s);
            let readers: Vec<_> = (0..2)
                .map(|_| {
                    let s = s.clone();
                    gort::spawn(async move {
                        let (mut n, mut sum) = (0usize, 0u64);
                        let mut buf = vec![0; 1 << 14];
                        loop {
                            let got = AsyncReadExt::read(&mut &*s, &mut buf).await.unwrap();
                            if got == 0 {
                                return (n, sum);
                            }
                            n += got;
                            sum += buf[..got].iter().map(|&b| u64::from(b)).sum::<u64>();
                        }
                    })
                })
                .collect();
            let writer = {
                let s = s.clone();
                gort::spawn(async move {
                    AsyncWriteExt::write_all(&mut &*s, &vec![7; TOTAL])
                        .await
                        .unwrap()
                })
            };
            let peer = gort::spawn(async move {
                let data: Vec<u8> = (0..TOTAL).map(|i| (i % 251) as u8).collect();
                let mut back = vec![0; TOTAL];
                let (r, w) = c.split();
                let send = async {
                    w.write_all(&data).await.unwrap();
                    w.close_write().unwrap();
                };
                let recv = async { r.read_exact(&mut back).await.unwrap() };
                futures::join!(send, recv);
                assert!(back.iter().all(|&b| b == 7));
                data.iter().map(|&b| u64::from(b)).sum::<u64>()
            });
            let sent_sum = peer.await.unwrap();
            writer.await.unwrap();
            let (mut n, mut sum) = (0, 0);
            for r in readers {
                let (rn, rs) = r.await.unwrap();
                n += rn;
                sum += rs;
            }
            assert_eq!((n, sum), (TOTAL, sent_sum));
        })
    });
}

/// A tokio `ReadBuf` that arrives with a filled part and an initialized part beyond it:
/// the read appends after the filled part, keeps what was filled, and the initialized
/// count never shrinks (tokio's contract, which hyper's and tokio-util's buffers rely on).
#[test]
fn a_read_buf_with_filled_and_initialized_parts_is_appended_to() {
    within(|| {
        run(async {
            let (c, s) = tcp_pair().await;
            c.write_all(b"world").await.unwrap();
            let mut storage = [std::mem::MaybeUninit::<u8>::uninit(); 64];
            let mut buf = ReadBuf::uninit(&mut storage);
            buf.put_slice(b"hello ");
            // Initialized past the filled part, as a reused buffer is.
            buf.initialize_unfilled_to(20);
            buf.set_filled(6);
            let mut s = &s;
            std::future::poll_fn(|cx| {
                tokio::io::AsyncRead::poll_read(std::pin::Pin::new(&mut s), cx, &mut buf)
            })
            .await
            .unwrap();
            assert_eq!(buf.filled(), b"hello world");
            assert_eq!(buf.initialized().len(), 26);
            // A buffer with no room reads nothing (`Ok` with nothing filled), at once.
            let mut full = [0u8; 3];
            let mut buf = ReadBuf::new(&mut full);
            buf.set_filled(3);
            std::future::poll_fn(|cx| {
                tokio::io::AsyncRead::poll_read(std::pin::Pin::new(&mut s), cx, &mut buf)
            })
            .await
            .unwrap();
            assert_eq!(buf.filled().len(), 3);
        })
    });
}

/// After the peer resets the connection, a trait read fails with `ConnectionReset` (or sees
/// the end of stream, if the reset raced the read) and every later one returns at once:
/// an error or `Ok(0)`, never a wait. A trait write after the reset fails (no `SIGPIPE`).
#[test]
fn trait_reads_and_writes_after_a_reset_fail_at_once() {
    within(|| {
        run(async {
            let (c, s) = tcp_pair().await;
            let reader = gort::spawn(async move {
                let mut s = &s;
                let mut buf = [0; 16];
                // Waits for the reset (nothing arrives before it).
                let first = AsyncReadExt::read(&mut s, &mut buf).await;
                let second = AsyncReadExt::read(&mut s, &mut buf).await;
                (first.map_err(|e| e.kind()), second.map_err(|e| e.kind()))
            });
            gort::time::sleep(Duration::from_millis(50)).await;
            linger_zero(c.as_raw_fd());
            drop(c);
            let (first, second) = reader.await.unwrap();
            assert!(
                matches!(first, Err(ErrorKind::ConnectionReset) | Ok(0)),
                "{first:?}"
            );
            assert!(matches!(second, Err(_) | Ok(0)), "{second:?}");
        });
        run(async {
            let (c, s) = tcp_pair().await;
            linger_zero(c.as_raw_fd());
            drop(c);
            gort::time::sleep(Duration::from_millis(50)).await;
            let mut s = &s;
            let mut failed = None;
            for _ in 0..4 {
                if let Err(e) = AsyncWriteExt::write_all(&mut s, &[1; 1024]).await {
                    failed = Some(e.kind());
                    break;
                }
            }
            assert!(
                matches!(
                    failed,
                    Some(ErrorKind::ConnectionReset | ErrorKind::BrokenPipe)
                ),
                "{failed:?}"
            );
            assert!(AsyncWriteExt::flush(&mut s).await.is_ok());
        });
    });
}

/// Owned halves with an operation pending on the other: the write half dropped while the
/// read half waits (the read still gets what the peer sends later), the read half dropped
/// while a large write waits for room (the write completes as the peer reads). A reunite of
/// halves of two streams gives both back, still working.
#[test]
fn owned_halves_dropped_with_operations_pending() {
    within(|| {
        run(async {
            let (c, s) = tcp_pair().await;
            let (r, w) = s.into_split();
            let reader = gort::spawn(async move {
                let mut buf = [0; 5];
                r.read_exact(&mut buf).await.map(|()| buf)
            });
            gort::time::sleep(Duration::from_millis(20)).await;
            drop(w); // shuts writing down; the peer reads end of stream
            let mut eof = [0; 1];
            assert_eq!(c.read(&mut eof).await.unwrap(), 0);
            c.write_all(b"later").await.unwrap();
            assert_eq!(&reader.await.unwrap().unwrap(), b"later");
        });
        run(async {
            const BIG: usize = 16 << 20;
            let (c, s) = tcp_pair().await;
            let (r, w) = s.into_split();
            let writer = gort::spawn(async move { w.write_all(&vec![3; BIG]).await });
            gort::time::sleep(Duration::from_millis(20)).await;
            drop(r);
            let mut all = vec![0; BIG];
            c.read_exact(&mut all).await.unwrap();
            writer.await.unwrap().unwrap();
            assert!(all.iter().all(|&b| b == 3));
        });
        run(async {
            let (a, _pa) = tcp_pair().await;
            let (b, pb) = tcp_pair().await;
            let (ar, _aw) = a.into_split();
            let (_br, bw) = b.into_split();
            let gort::net::ReuniteError(ar, bw) = ar.reunite(bw).unwrap_err();
            bw.write_all(b"ok").await.unwrap();
            let mut buf = [0; 2];
            pb.read_exact(&mut buf).await.unwrap();
            assert_eq!(&buf, b"ok");
            ar.set_read_deadline(Some(Instant::now())).unwrap();
            assert_eq!(
                ar.read(&mut buf).await.unwrap_err().kind(),
                ErrorKind::TimedOut
            );
        });
    });
}

/// `from_std` of a std stream left blocking: gort makes it non-blocking, so a read with
/// nothing to read waits on the poller (a deadline ends it) instead of blocking an M, and
/// the other tasks of a one-P runtime keep running meanwhile.
#[test]
fn from_std_of_a_blocking_stream_never_blocks_an_m() {
    within(|| {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let c = std::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (_peer, _) = l.accept().unwrap();
        c.set_nonblocking(false).unwrap();
        let rt = gort::Builder::new().procs(1).build().unwrap();
        rt.block_on(async move {
            let ticks = Arc::new(AtomicUsize::new(0));
            let ticker = {
                let ticks = ticks.clone();
                gort::spawn(async move {
                    for _ in 0..5 {
                        gort::time::sleep(Duration::from_millis(10)).await;
                        ticks.fetch_add(1, Ordering::Relaxed);
                    }
                })
            };
            let c = TcpStream::from_std(c).unwrap();
            c.set_read_deadline(Some(Instant::now() + Duration::from_millis(300)))
                .unwrap();
            let mut buf = [0; 4];
            let err = AsyncReadExt::read(&mut &c, &mut buf).await.unwrap_err();
            assert_eq!(err.kind(), ErrorKind::TimedOut);
            ticker.await.unwrap();
            assert_eq!(ticks.load(Ordering::Relaxed), 5);
        });
    });
}

/// `from_std` of sockets that are not connected streams (a listening socket, a fresh
/// unconnected one): reads and writes fail at once with the OS's error, no hang, and the
/// fds are closed when the streams drop.
#[test]
fn from_std_of_sockets_that_are_not_connected_streams_fails_at_once() {
    serial(|| {
        let before = open_fds();
        run(async {
            let listening = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            // SAFETY: the descriptor is the listener's, given up by `into_raw_fd`.
            let as_stream = unsafe { std::net::TcpStream::from_raw_fd(listening.into_raw_fd()) };
            let s = TcpStream::from_std(as_stream).unwrap();
            let mut buf = [0; 4];
            assert_eq!(
                s.read(&mut buf).await.unwrap_err().kind(),
                ErrorKind::NotConnected
            );
            assert!(s.write(b"x").await.is_err());
            assert!(s.peer_addr().is_err());

            // SAFETY: plain `socket(2)`; the descriptor is owned by the std stream below.
            let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_STREAM, 0) };
            assert!(fd >= 0);
            // SAFETY: `fd` is a fresh socket nobody else owns.
            let fresh = unsafe { std::net::TcpStream::from_raw_fd(fd) };
            let s = TcpStream::from_std(fresh).unwrap();
            assert_eq!(
                s.read(&mut buf).await.unwrap_err().kind(),
                ErrorKind::NotConnected
            );
            let mut t = &s;
            assert!(AsyncWriteExt::write(&mut t, b"x").await.is_err());
            assert!(s.set_nodelay(true).is_ok());
        });
        assert_eq!(open_fds(), before);
    });
}

/// A stream and its `try_clone` registered side by side in one runtime (two descriptors,
/// one socket): each works, and dropping one leaves the other working (its registration is
/// its own). Dropping both leaves no fd behind.
#[test]
fn a_std_stream_and_its_clone_registered_in_one_runtime() {
    serial(|| {
        let before = open_fds();
        run(async {
            let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            let c = std::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
            let (p, _) = l.accept().unwrap();
            let peer = TcpStream::from_std(p).unwrap();
            let clone = c.try_clone().unwrap();
            let a = TcpStream::from_std(c).unwrap();
            let b = TcpStream::from_std(clone).unwrap();
            let reader = gort::spawn(async move {
                let mut buf = [0; 3];
                b.read_exact(&mut buf).await.map(|()| (buf, b))
            });
            gort::time::sleep(Duration::from_millis(20)).await;
            peer.write_all(b"one").await.unwrap();
            let (buf, b) = reader.await.unwrap().unwrap();
            assert_eq!(&buf, b"one");
            drop(a);
            // The clone still reads and writes after the original's drop.
            let reader = gort::spawn(async move {
                let mut buf = [0; 3];
                b.read_exact(&mut buf).await.map(|()| (buf, b))
            });
            gort::time::sleep(Duration::from_millis(20)).await;
            peer.write_all(b"two").await.unwrap();
            let (buf, b) = reader.await.unwrap().unwrap();
            assert_eq!(&buf, b"two");
            b.write_all(b"back").await.unwrap();
            let mut buf = [0; 4];
            peer.read_exact(&mut buf).await.unwrap();
            assert_eq!(&buf, b"back");
        });
        assert_eq!(open_fds(), before);
    });
}

/// A `ToSocketAddrs` of a fixed list of addresses (std's impls of slices want `'static`).
#[derive(Clone)]
struct Addrs(Vec<SocketAddr>);

impl ToSocketAddrs for Addrs {
    type Iter = std::vec::IntoIter<SocketAddr>;
    fn to_socket_addrs(&self) -> io::Result<Self::Iter> {
        Ok(self.0.clone().into_iter())
    }
}

/// A `ToSocketAddrs` that panics when resolved.
struct Panics;

impl ToSocketAddrs for Panics {
    type Iter = std::vec::IntoIter<SocketAddr>;
    fn to_socket_addrs(&self) -> io::Result<Self::Iter> {
        panic!("resolver exploded (a test's)")
    }
}

/// A `ToSocketAddrs` that takes `0` to resolve to `1`, as a slow DNS server does.
struct Slow(Duration, SocketAddr);

impl ToSocketAddrs for Slow {
    type Iter = std::vec::IntoIter<SocketAddr>;
    fn to_socket_addrs(&self) -> io::Result<Self::Iter> {
        std::thread::sleep(self.0);
        Ok(vec![self.1].into_iter())
    }
}

/// A free loopback port: bound, then closed (a connect to it is refused).
fn refused_addr() -> SocketAddr {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap()
}

/// Address lists as std takes them: an empty one fails with `InvalidInput` (std's error);
/// one whose first address refuses connects to the second (std tries each in turn); one
/// whose addresses all refuse fails with the last one's error.
#[test]
fn connect_tries_each_address_in_turn() {
    within(|| {
        run(async {
            let empty = TcpStream::connect(Addrs(vec![])).await.unwrap_err();
            assert_eq!(empty.kind(), ErrorKind::InvalidInput);
            assert_eq!(
                std::net::TcpStream::connect(&[][..] as &[SocketAddr])
                    .unwrap_err()
                    .kind(),
                ErrorKind::InvalidInput
            );
            let bind = TcpListener::bind(Addrs(vec![])).await.unwrap_err();
            assert_eq!(bind.kind(), ErrorKind::InvalidInput);

            let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
            let good = l.local_addr().unwrap();
            let c = TcpStream::connect(Addrs(vec![refused_addr(), good]))
                .await
                .unwrap();
            let (s, _) = l.accept().await.unwrap();
            assert_eq!(s.peer_addr().unwrap(), c.local_addr().unwrap());

            let all_bad = TcpStream::connect(Addrs(vec![refused_addr(), refused_addr()]))
                .await
                .unwrap_err();
            assert_eq!(all_bad.kind(), ErrorKind::ConnectionRefused);
        })
    });
}

/// A resolver that panics fails the connect or bind with an error (the panic stays on the
/// blocking pool's thread, which goes on serving); the runtime still resolves afterwards.
#[test]
fn a_panicking_resolver_is_an_error_not_a_hang() {
    within(|| {
        run(async {
            for _ in 0..3 {
                assert!(TcpStream::connect(Panics).await.is_err());
                assert!(TcpListener::bind(Panics).await.is_err());
            }
            let l = TcpListener::bind("localhost:0").await.unwrap();
            let port = l.local_addr().unwrap().port();
            let _c = TcpStream::connect(("localhost", port)).await.unwrap();
            l.accept().await.unwrap();
        })
    });
}

/// A resolver that blocks for a second runs on the blocking pool: on a one-P runtime, the
/// other tasks go on meanwhile (a ticker keeps ticking), and the connect then succeeds.
#[test]
fn a_slow_resolver_stalls_no_task() {
    within(|| {
        let rt = gort::Builder::new().procs(1).build().unwrap();
        rt.block_on(async {
            let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
            let addr = l.local_addr().unwrap();
            let ticks = Arc::new(AtomicUsize::new(0));
            let ticker = {
                let ticks = ticks.clone();
                gort::spawn(async move {
                    for _ in 0..20 {
                        gort::time::sleep(Duration::from_millis(10)).await;
                        ticks.fetch_add(1, Ordering::Relaxed);
                    }
                })
            };
            let slow = gort::spawn(TcpStream::connect(Slow(Duration::from_secs(1), addr)));
            ticker.await.unwrap();
            // The ticker's 20 ticks of 10 ms ended well before the resolver's second.
            assert!(!slow.is_finished());
            let c = slow.await.unwrap().unwrap();
            let (s, _) = l.accept().await.unwrap();
            assert_eq!(s.peer_addr().unwrap(), c.local_addr().unwrap());
        });
    });
}

/// Socket options on a stream that is shut down, and on one whose peer reset it: the OS's
/// answer (`Ok` or an error), never a panic; `peer_addr` of the reset one is an error.
#[test]
fn socket_options_on_shut_down_and_reset_streams() {
    within(|| {
        run(async {
            let (c, s) = tcp_pair().await;
            s.shutdown(Shutdown::Both).unwrap();
            let _ = s.shutdown(Shutdown::Both);
            s.set_nodelay(false).unwrap();
            s.set_keepalive(Some(Duration::from_secs(30))).unwrap();
            assert_eq!(s.keepalive().unwrap(), Some(Duration::from_secs(30)));
            s.set_keepalive(None).unwrap();

            linger_zero(c.as_raw_fd());
            let (c2, s2) = tcp_pair().await;
            linger_zero(c2.as_raw_fd());
            drop(c2);
            gort::time::sleep(Duration::from_millis(50)).await;
            let _ = s2.set_nodelay(true);
            let _ = s2.set_keepalive(Some(Duration::from_secs(1)));
            let _ = s2.keepalive();
            assert!(s2.peer_addr().is_err());
            assert!(s2.local_addr().is_ok());
            let mut buf = [0; 1];
            assert!(matches!(s2.read(&mut buf).await, Err(_) | Ok(0)));
            let _ = s2.shutdown(Shutdown::Write);
            // A period the kernel refuses is an error, and leaves keep-alive as it was.
            assert!(s2
                .set_keepalive(Some(Duration::from_secs(1 << 20)))
                .is_err());
        })
    });
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

/// The trait reads of `reads_given_up_by_many_tasks_on_an_idle_socket_keep_no_memory`
/// (`abuse_fds.rs`): 100,000 distinct tasks each give up a tokio `AsyncReadExt::read` on
/// one shared, idle `&TcpStream` under a `timeout`. A trait poll has no future of its own
/// to take its waker back when dropped: until the waiter list capped such slots, each task
/// left one, keeping its memory (82 MiB after 20,000 tasks), and each registration scanned
/// them all under the descriptor's lock (quadratic: 4.3 s for 20,000 in debug; this case
/// hit the 30 s watchdog). With the cap (256 slots): 4 MiB, 3.4 s.
#[test]
fn trait_reads_given_up_by_many_tasks_on_an_idle_socket_keep_no_memory() {
    serial(|| {
        run(async {
            let (c, _s) = tcp_pair().await;
            let c = Arc::new(c);
            let before = rss_mib();
            for _ in 0..200 {
                let batch: Vec<_> = (0..500)
                    .map(|_| {
                        let c = c.clone();
                        gort::spawn(async move {
                            let mut buf = [0u8; 4096];
                            let limit = Duration::from_micros(200);
                            let mut r = &*c;
                            let read = AsyncReadExt::read(&mut r, &mut buf);
                            let _ = gort::time::timeout(limit, read).await;
                            std::hint::black_box(&buf);
                        })
                    })
                    .collect();
                for t in batch {
                    t.await.unwrap();
                }
            }
            let grown = rss_mib().saturating_sub(before);
            assert!(grown < 64, "{grown} MiB kept by given-up trait reads");
        })
    });
}

/// Many tasks wait in one `&TcpStream` trait read at once, fewer than the cap on trait-poll
/// slots (256) and more: past the cap each new registration wakes an older one, which polls
/// again; none may be lost. When the peer sends one byte per reader and closes, every
/// reader ends.
#[test]
fn many_trait_readers_are_all_woken() {
    within(|| {
        run(readers_each_get_a_byte::<100>());
        run(readers_each_get_a_byte::<300>());
    });
}

async fn readers_each_get_a_byte<const READERS: usize>() {
    let (c, s) = tcp_pair().await;
    let s = Arc::new(s);
    let readers: Vec<_> = (0..READERS)
        .map(|_| {
            let s = s.clone();
            gort::spawn(async move {
                let mut r = &*s;
                let mut n = 0;
                let mut buf = [0; 1];
                while AsyncReadExt::read(&mut r, &mut buf).await.unwrap() == 1 {
                    n += 1;
                }
                n
            })
        })
        .collect();
    gort::time::sleep(Duration::from_millis(20)).await;
    c.write_all(&[1; READERS]).await.unwrap();
    c.shutdown(Shutdown::Write).unwrap();
    let mut total = 0;
    for r in readers {
        total += r.await.unwrap();
    }
    assert_eq!(total, READERS);
}

/// Names that resolve to nothing fail the connect or bind with the resolver's error (std's
/// `failed to lookup address information`), and a string that is no address (no port)
/// with `InvalidInput`, as std's.
#[test]
fn names_that_do_not_resolve_fail() {
    within(|| {
        run(async {
            assert!(TcpStream::connect("nonexistent.invalid:80").await.is_err());
            assert!(TcpStream::connect(("nonexistent.invalid", 80))
                .await
                .is_err());
            assert!(TcpListener::bind("nonexistent.invalid:0").await.is_err());
            let no_port = TcpStream::connect("127.0.0.1").await.unwrap_err();
            assert_eq!(no_port.kind(), ErrorKind::InvalidInput);
            assert_eq!(
                std::net::TcpStream::connect("127.0.0.1")
                    .unwrap_err()
                    .kind(),
                ErrorKind::InvalidInput
            );
        })
    });
}

/// IPv6: a listener on `[::1]` takes connections over IPv6; one on `[::]` (dual-stack
/// where `net.ipv6.bindv6only` is 0, Linux's default) takes an IPv4 client too, whose
/// address it reports IPv4-mapped, as std does.
#[test]
fn ipv6_and_dual_stack_listeners() {
    within(|| {
        run(async {
            let Ok(l) = TcpListener::bind("[::1]:0").await else {
                eprintln!("no IPv6 loopback here: skipped");
                return;
            };
            let c = TcpStream::connect(l.local_addr().unwrap()).await.unwrap();
            let (s, peer) = l.accept().await.unwrap();
            assert_eq!(peer, c.local_addr().unwrap());
            assert!(peer.is_ipv6());
            c.write_all(b"six").await.unwrap();
            let mut buf = [0; 3];
            s.read_exact(&mut buf).await.unwrap();

            let dual = std::fs::read_to_string("/proc/sys/net/ipv6/bindv6only")
                .is_ok_and(|v| v.trim() == "0");
            if !dual {
                return;
            }
            let l = TcpListener::bind("[::]:0").await.unwrap();
            let port = l.local_addr().unwrap().port();
            let c = TcpStream::connect(("127.0.0.1", port)).await.unwrap();
            let (_s, peer) = l.accept().await.unwrap();
            match peer {
                SocketAddr::V6(v6) => {
                    assert_eq!(v6.ip().to_ipv4_mapped(), Some([127, 0, 0, 1].into()))
                }
                SocketAddr::V4(_) => panic!("{peer}: not IPv4-mapped"),
            }
            assert_eq!(peer.port(), c.local_addr().unwrap().port());
        })
    });
}

/// A socket whose non-blocking connect is still in progress, handed to `from_std`: the
/// first write waits for the handshake and goes through; one whose connect is refused
/// fails its read and write with `ConnectionRefused` (the socket's pending error), at once.
#[test]
fn from_std_of_a_stream_still_connecting() {
    fn connecting(addr: SocketAddr) -> std::net::TcpStream {
        let SocketAddr::V4(v4) = addr else {
            unreachable!()
        };
        // SAFETY: plain `socket(2)`; the descriptor is owned by the std stream below.
        let fd = unsafe {
            libc::socket(
                libc::AF_INET,
                libc::SOCK_STREAM | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
                0,
            )
        };
        assert!(fd >= 0);
        // SAFETY: `fd` is a fresh socket nobody else owns.
        let stream = unsafe { std::net::TcpStream::from_raw_fd(fd) };
        let sin = libc::sockaddr_in {
            sin_family: libc::AF_INET as libc::sa_family_t,
            sin_port: v4.port().to_be(),
            sin_addr: libc::in_addr {
                s_addr: u32::from(*v4.ip()).to_be(),
            },
            sin_zero: [0; 8],
        };
        let len = std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t;
        // SAFETY: `sin` is a valid `sockaddr_in` of `len` bytes for the call.
        let rc = unsafe { libc::connect(fd, (&sin as *const libc::sockaddr_in).cast(), len) };
        let err = io::Error::last_os_error();
        assert!(
            rc == 0 || err.raw_os_error() == Some(libc::EINPROGRESS),
            "{err}"
        );
        stream
    }
    serial(|| {
        let before = open_fds();
        run(async {
            let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
            let c = TcpStream::from_std(connecting(l.local_addr().unwrap())).unwrap();
            c.write_all(b"early").await.unwrap();
            let (s, _) = l.accept().await.unwrap();
            let mut buf = [0; 5];
            s.read_exact(&mut buf).await.unwrap();
            assert_eq!(&buf, b"early");

            let refused = TcpStream::from_std(connecting(refused_addr())).unwrap();
            let mut r = &refused;
            let read = AsyncReadExt::read(&mut r, &mut buf).await.unwrap_err();
            assert_eq!(read.kind(), ErrorKind::ConnectionRefused);
            // The pending error was consumed by the read: the write finds the socket dead.
            assert!(refused.write(b"x").await.is_err());
        });
        assert_eq!(open_fds(), before);
    });
}

/// `TcpListener::from_std` of a socket that is bound but not listening: `accept` fails at
/// once (`EINVAL`), after a yield, instead of waiting for connections that cannot come.
#[test]
fn from_std_of_a_listener_that_does_not_listen() {
    within(|| {
        run(async {
            // SAFETY: plain `socket(2)`; the descriptor is owned by the std listener below.
            let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_STREAM, 0) };
            assert!(fd >= 0);
            // SAFETY: `fd` is a fresh socket nobody else owns.
            let not_listening = unsafe { std::net::TcpListener::from_raw_fd(fd) };
            let l = TcpListener::from_std(not_listening).unwrap();
            let err = l.accept().await.unwrap_err();
            assert_eq!(err.raw_os_error(), Some(libc::EINVAL), "{err}");
        })
    });
}

/// A gort socket read and written through the traits by other executors (a program that
/// keeps a Tokio runtime for a library, or a plain thread's `futures::executor::block_on`):
/// the socket stays registered with its gort runtime, whose poller wakes the foreign
/// wakers; no gort budget applies there. A deadline still to come cannot be set from those
/// threads (its timer needs a gort runtime: an error, nothing else changes); a passed one
/// can, and ends a foreign executor's pending read.
#[test]
fn gort_sockets_polled_by_tokio_and_by_a_plain_thread() {
    within(|| {
        let rt = gort::Builder::new().procs(2).build().unwrap();
        let (c, s) = rt.block_on(tcp_pair());
        let (c, s) = (Arc::new(c), Arc::new(s));
        let tokio_rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        // Tokio echoes what the gort task sends.
        let echo = {
            let s = s.clone();
            tokio_rt.spawn(async move {
                let mut buf = vec![0; 1 << 16];
                let (mut r, mut w) = (&*s, &*s);
                loop {
                    let n = AsyncReadExt::read(&mut r, &mut buf).await.unwrap();
                    if n == 0 {
                        return;
                    }
                    AsyncWriteExt::write_all(&mut w, &buf[..n]).await.unwrap();
                }
            })
        };
        let data: Vec<u8> = (0..1 << 20).map(|i| (i % 253) as u8).collect();
        let back = {
            let c = c.clone();
            let data = data.clone();
            rt.block_on(async move {
                let writer = {
                    let c = c.clone();
                    gort::spawn(async move {
                        c.write_all(&data).await.unwrap();
                        c.shutdown(Shutdown::Write).unwrap();
                    })
                };
                let mut back = vec![0; 1 << 20];
                c.read_exact(&mut back).await.unwrap();
                writer.await.unwrap();
                back
            })
        };
        assert!(back == data);
        tokio_rt.block_on(echo).unwrap();

        // A plain thread's executor, its read ended by a passed deadline set from yet
        // another plain thread.
        let future_deadline = Some(Instant::now() + Duration::from_secs(5));
        assert!(s.set_read_deadline(future_deadline).is_err());
        let reader = {
            let c = c.clone();
            std::thread::spawn(move || {
                futures::executor::block_on(async {
                    let mut r = &*c;
                    let mut buf = [0; 8];
                    let n = AsyncReadExt::read(&mut r, &mut buf).await.unwrap();
                    assert_eq!(&buf[..n], b"hi");
                    AsyncReadExt::read(&mut r, &mut buf).await
                })
            })
        };
        std::thread::sleep(Duration::from_millis(50));
        rt.block_on(s.write_all(b"hi")).unwrap();
        std::thread::sleep(Duration::from_millis(50));
        c.set_read_deadline(Some(Instant::now())).unwrap();
        let err = reader.join().unwrap().unwrap_err();
        assert_eq!(err.kind(), ErrorKind::TimedOut);
    });
}

/// TCP urgent data (`MSG_OOB`: telnet's Synch, FTP's ABOR) in the middle of a stream: a
/// read stops at the urgent mark, shorter than asked although more bytes are queued behind
/// the mark. Every byte but the urgent one (out of band, `SO_OOBINLINE` off) must still be
/// read without the peer sending anything more.
#[test]
fn urgent_data_in_the_middle_of_a_stream() {
    within(|| {
        run(async {
            let (c, s) = tcp_pair().await;
            let send = |buf: &[u8], flags| {
                // SAFETY: `buf` is valid for reads of its length for the call.
                let n = unsafe { libc::send(c.as_raw_fd(), buf.as_ptr().cast(), buf.len(), flags) };
                assert_eq!(n, buf.len() as isize, "{}", io::Error::last_os_error());
            };
            send(b"abc", 0);
            send(b"X", libc::MSG_OOB);
            send(b"def", 0);
            gort::time::sleep(Duration::from_millis(50)).await;
            let mut got = Vec::new();
            let mut buf = [0; 64];
            while got.len() < 6 {
                let n = s.read(&mut buf).await.unwrap();
                assert!(n > 0);
                got.extend_from_slice(&buf[..n]);
            }
            assert_eq!(got, b"abcdef");
            // The same through the tokio-io trait.
            send(b"ghi", 0);
            send(b"Y", libc::MSG_OOB);
            send(b"jkl", 0);
            gort::time::sleep(Duration::from_millis(50)).await;
            let mut got = Vec::new();
            let mut r = &s;
            while got.len() < 6 {
                let n = AsyncReadExt::read(&mut r, &mut buf).await.unwrap();
                assert!(n > 0);
                got.extend_from_slice(&buf[..n]);
            }
            assert_eq!(got, b"ghijkl");
            drop(c);
        })
    });
}

/// A Unix stream's out-of-band byte (Linux 5.15 and later) stops a read the same way as
/// TCP's urgent data.
#[test]
fn out_of_band_data_in_the_middle_of_a_unix_stream() {
    within(|| {
        run(async {
            let mut buf = [0; 64];
            let (a, b) = gort::net::UnixStream::pair().unwrap();
            a.write_all(b"abc").await.unwrap();
            // SAFETY: the byte is valid for reads for the call.
            let oob = unsafe { libc::send(a.as_raw_fd(), b"Z".as_ptr().cast(), 1, libc::MSG_OOB) };
            if oob != 1 {
                eprintln!(
                    "no MSG_OOB on Unix streams here: {}",
                    io::Error::last_os_error()
                );
                return;
            }
            a.write_all(b"def").await.unwrap();
            gort::time::sleep(Duration::from_millis(50)).await;
            let mut got = Vec::new();
            while got.len() < 6 {
                let n = b.read(&mut buf).await.unwrap();
                assert!(n > 0);
                got.extend_from_slice(&buf[..n]);
            }
            assert_eq!(got, b"abcdef");
        })
    });
}

/// Sends `data` on `fd` with one descriptor (`pass`) attached (`SCM_RIGHTS`).
fn send_with_fd(fd: std::os::fd::RawFd, data: &[u8], pass: std::os::fd::RawFd) {
    let mut iov = libc::iovec {
        iov_base: data.as_ptr() as *mut libc::c_void,
        iov_len: data.len(),
    };
    // SAFETY: CMSG_SPACE only computes a size.
    let space = unsafe { libc::CMSG_SPACE(std::mem::size_of::<libc::c_int>() as u32) } as usize;
    let mut control = vec![0u8; space];
    // SAFETY: an all-zero `msghdr` is valid; the pointers set below outlive the call.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.as_mut_ptr().cast();
    msg.msg_controllen = space as _;
    // SAFETY: `msg` has a control buffer of `space` bytes, room for one header with one int.
    unsafe {
        let cmsg = libc::CMSG_FIRSTHDR(&msg);
        (*cmsg).cmsg_level = libc::SOL_SOCKET;
        (*cmsg).cmsg_type = libc::SCM_RIGHTS;
        (*cmsg).cmsg_len = libc::CMSG_LEN(std::mem::size_of::<libc::c_int>() as u32) as _;
        std::ptr::write_unaligned(libc::CMSG_DATA(cmsg).cast::<libc::c_int>(), pass);
    }
    // SAFETY: `msg` and what it points to are valid for the call.
    let n = unsafe { libc::sendmsg(fd, &msg, 0) };
    assert_eq!(n, data.len() as isize, "{}", io::Error::last_os_error());
}

/// A Unix stream peer that passes a descriptor with some of its bytes (`SCM_RIGHTS`), then
/// sends more: a read stops after the bytes that carried the descriptor, shorter than asked
/// while the next bytes are queued. Every byte must still be read without the peer
/// sending anything more: before, a read stopped there was taken for an empty queue, and
/// the next waited for an edge that the queued bytes never bring (it hung).
#[test]
fn a_unix_stream_read_past_bytes_that_carried_a_descriptor() {
    serial(|| {
        let before = open_fds();
        run(async {
            let (a, b) = gort::net::UnixStream::pair().unwrap();
            let passed = std::fs::File::open("/dev/null").unwrap();
            let mut buf = [0; 64];
            for trait_read in [false, true] {
                send_with_fd(a.as_raw_fd(), b"abc", passed.as_raw_fd());
                a.write_all(b"def").await.unwrap();
                send_with_fd(a.as_raw_fd(), b"ghi", passed.as_raw_fd());
                gort::time::sleep(Duration::from_millis(50)).await;
                let mut got = Vec::new();
                while got.len() < 9 {
                    let n = if trait_read {
                        AsyncReadExt::read(&mut &b, &mut buf).await.unwrap()
                    } else {
                        b.read(&mut buf).await.unwrap()
                    };
                    assert!(n > 0);
                    got.extend_from_slice(&buf[..n]);
                }
                assert_eq!(got, b"abcdefghi");
            }
            drop(passed);
        });
        // The passed descriptors were closed on receipt, as a `read(2)` closes them.
        assert_eq!(open_fds(), before);
    });
}
