//! Where real programs hand gort::net their own sockets and names: `from_std` given a
//! blocking socket, a listening socket, an unconnected one, one still connecting, a
//! duplicate of a registered one or a listener that does not listen; `ToSocketAddrs` impls
//! that name nothing, panic or block; names that do not resolve; a connect whose first
//! address refuses; IPv6 and dual-stack listeners; socket options on shut-down and reset
//! sockets. Each must end in a result or an error of the right kind, never a hang (a
//! watchdog fails a case after 30 s), a panic or a leaked fd. The cases run one at a time
//! (`serial`): some count the process's fds.
//!
//! Run: `cargo test -p gort-net --features tokio-io,futures-io --test abuse_edges`
#![cfg(all(feature = "tokio-io", feature = "futures-io"))]

#[allow(dead_code)] // not every helper is used by this binary
#[path = "support/watchdog.rs"]
mod watchdog;

#[allow(dead_code)] // not every helper is used by this binary
#[path = "support/tcp.rs"]
mod tcp;

use gort::net::{TcpListener, TcpStream};
use gort::time::Instant;
use std::io::{self, ErrorKind};
use std::net::{Shutdown, SocketAddr, ToSocketAddrs};
use std::os::fd::{FromRawFd, IntoRawFd};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tcp::{linger_zero, tcp_pair};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use watchdog::{open_fds, serial};

fn run<F: std::future::Future>(f: F) -> F::Output {
    gort::Builder::new().procs(2).build().unwrap().block_on(f)
}

/// `from_std` of a std stream left blocking: gort makes it non-blocking, so a read with
/// nothing to read waits on the poller (a deadline ends it) instead of blocking an M, and
/// the other tasks of a one-P runtime keep running meanwhile.
#[test]
fn from_std_of_a_blocking_stream_never_blocks_an_m() {
    serial(|| {
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
    serial(|| {
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
    serial(|| {
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
    serial(|| {
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
    serial(|| {
        run(async {
            let (c, s) = tcp_pair().await;
            s.shutdown(Shutdown::Both).unwrap();
            let _ = s.shutdown(Shutdown::Both);
            s.set_nodelay(false).unwrap();
            s.set_keepalive(Some(Duration::from_secs(30))).unwrap();
            assert_eq!(s.keepalive().unwrap(), Some(Duration::from_secs(30)));
            s.set_keepalive(None).unwrap();

            linger_zero(&c);
            let (c2, s2) = tcp_pair().await;
            linger_zero(&c2);
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

/// Names that resolve to nothing fail the connect or bind with the resolver's error (std's
/// `failed to lookup address information`), and a string that is no address (no port)
/// with `InvalidInput`, as std's.
#[test]
fn names_that_do_not_resolve_fail() {
    serial(|| {
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
    serial(|| {
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
    serial(|| {
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
