//! Ports of Go 1.19's `src/net/unixsock_test.go` and `unixsock_linux_test.go`, one test per
//! Go test that maps onto [`gort::net::UnixListener`], [`gort::net::UnixStream`] and
//! [`gort::net::UnixDatagram`] (named in each doc comment), each under a watchdog.
//!
//! Not ported: TestUnixUnlink's FileListener and SetUnlinkOnClose halves (gort has no
//! `File()`, `FileListener`, or `SetUnlinkOnClose`), TestUnixgramWrite's `WriteTo` on a
//! connected socket error (`ErrWriteToConnected`: Linux and gort allow it).

#[path = "support/temp_dir.rs"]
mod temp_dir;
#[path = "support/watchdog.rs"]
#[allow(dead_code)]
mod watchdog;

use gort::net::{UnixDatagram, UnixListener, UnixStream};
use std::io::ErrorKind;
use std::os::linux::net::SocketAddrExt;
use std::os::unix::net::SocketAddr;
use temp_dir::TempDir;
use watchdog::within;

fn run<F: std::future::Future + Send + 'static>(f: F) -> F::Output
where
    F::Output: Send + 'static,
{
    within(|| gort::Runtime::new().unwrap().block_on(f))
}

/// Go: TestReadUnixgramWithUnnamedSocket (unixsock_test.go). A datagram from an unbound
/// socket arrives with an unnamed sender address.
#[test]
fn read_unixgram_with_unnamed_socket() {
    run(async {
        let dir = TempDir::new("go-unixgram-unnamed");
        let path = dir.join("sock");
        let c = UnixDatagram::bind(&path).unwrap();
        let unnamed = UnixDatagram::unbound().unwrap();
        assert_eq!(unnamed.send_to(b"UNIXGRAM TEST", &path).await.unwrap(), 13);
        let mut b = [0; 32];
        let (n, from) = c.recv_from(&mut b).await.unwrap();
        assert_eq!(&b[..n], b"UNIXGRAM TEST");
        assert!(from.is_unnamed(), "{from:?}");
    });
}

/// Go: TestUnixgramZeroBytePayload (unixsock_test.go). An empty datagram is sent and
/// received as one (0 bytes, the sender's address), and nothing of it stays queued.
#[test]
fn unixgram_zero_byte_payload() {
    run(async {
        let dir = TempDir::new("go-unixgram-zbp");
        let (p1, p2) = (dir.join("c1"), dir.join("c2"));
        let c1 = UnixDatagram::bind(&p1).unwrap();
        let c2 = UnixDatagram::bind(&p2).unwrap();
        c2.connect(&p1).unwrap();
        for gen in [false, true] {
            assert_eq!(c2.send(&[]).await.unwrap(), 0);
            let mut b = [0; 8];
            if gen {
                assert_eq!(c1.recv(&mut b).await.unwrap(), 0);
            } else {
                let (n, from) = c1.recv_from(&mut b).await.unwrap();
                assert_eq!(n, 0);
                assert_eq!(from.as_pathname(), Some(p2.as_path()));
            }
        }
        c2.send(b"after").await.unwrap();
        let mut b = [0; 8];
        assert_eq!(c1.recv(&mut b).await.unwrap(), 5);
    });
}

/// Go: TestUnixgramZeroByteBuffer (unixsock_test.go). A receive into an empty buffer takes
/// one datagram (0 bytes, no error) and drops it; the next receive gets the next one.
#[test]
fn unixgram_zero_byte_buffer() {
    run(async {
        let dir = TempDir::new("go-unixgram-zbb");
        let (p1, p2) = (dir.join("c1"), dir.join("c2"));
        let c1 = UnixDatagram::bind(&p1).unwrap();
        let c2 = UnixDatagram::bind(&p2).unwrap();
        c2.connect(&p1).unwrap();
        let b1 = b"UNIXGRAM ZERO BYTE BUFFER TEST";
        for gen in [false, true] {
            c2.send(b1).await.unwrap();
            if gen {
                assert_eq!(c1.recv(&mut []).await.unwrap(), 0);
            } else {
                let (n, from) = c1.recv_from(&mut []).await.unwrap();
                assert_eq!(n, 0);
                assert_eq!(from.as_pathname(), Some(p2.as_path()));
            }
        }
        c2.send(b"next").await.unwrap();
        let mut b = [0; 8];
        assert_eq!(c1.recv(&mut b).await.unwrap(), 4);
        assert_eq!(&b[..4], b"next");
    });
}

/// Go: TestUnixgramWrite (unixsock_test.go). `WriteTo` a path with no socket fails;
/// `Write` on a connected socket reaches its peer.
#[test]
fn unixgram_write() {
    run(async {
        let dir = TempDir::new("go-unixgram-write");
        let path = dir.join("sock");
        let c = UnixDatagram::unbound().unwrap();
        let e = c.send_to(b"x", &path).await.unwrap_err();
        assert_eq!(e.kind(), ErrorKind::NotFound, "{e}");
        let server = UnixDatagram::bind(&path).unwrap();
        c.connect(&path).unwrap();
        assert_eq!(c.send(b"UNIXGRAM WRITE TEST").await.unwrap(), 19);
        let mut b = [0; 32];
        assert_eq!(server.recv(&mut b).await.unwrap(), 19);
    });
}

/// Go: TestUnixConnLocalAndRemoteNames (unixsock_test.go). The accepted side's local name
/// is the listener's path and its peer's is unnamed (the dialer did not bind); the
/// dialer's peer name is the path. Also with an abstract-namespace listener (Linux).
#[test]
fn unix_conn_local_and_remote_names() {
    run(async {
        let dir = TempDir::new("go-unix-names");
        let path = dir.join("sock");
        let l = UnixListener::bind(&path).unwrap();
        let c = UnixStream::connect(&path).await.unwrap();
        let (s, from) = l.accept().await.unwrap();
        assert!(from.is_unnamed(), "{from:?}");
        assert_eq!(s.local_addr().unwrap().as_pathname(), Some(path.as_path()));
        assert!(s.peer_addr().unwrap().is_unnamed());
        assert!(c.local_addr().unwrap().is_unnamed());
        assert_eq!(c.peer_addr().unwrap().as_pathname(), Some(path.as_path()));
        c.write_all(b"UNIXCONN LOCAL AND REMOTE NAME TEST")
            .await
            .unwrap();
        let mut b = [0; 35];
        s.read_exact(&mut b).await.unwrap();

        let name = format!("gort-go-names-{}", std::process::id());
        let addr = SocketAddr::from_abstract_name(name.as_bytes()).unwrap();
        let l = UnixListener::bind_addr(&addr).unwrap();
        let c = UnixStream::connect_addr(&addr).await.unwrap();
        let (s, _) = l.accept().await.unwrap();
        let local = s.local_addr().unwrap();
        assert_eq!(local.as_abstract_name(), Some(name.as_bytes()));
        assert_eq!(
            c.peer_addr().unwrap().as_abstract_name(),
            Some(name.as_bytes())
        );
    });
}

/// Go: TestUnixgramConnLocalAndRemoteNames (unixsock_test.go). A bound, connected datagram
/// socket reports its path and its peer's.
#[test]
fn unixgram_conn_local_and_remote_names() {
    run(async {
        let dir = TempDir::new("go-unixgram-names");
        let (p1, p2) = (dir.join("c1"), dir.join("c2"));
        let c1 = UnixDatagram::bind(&p1).unwrap();
        let c2 = UnixDatagram::bind(&p2).unwrap();
        c2.connect(&p1).unwrap();
        assert_eq!(c2.local_addr().unwrap().as_pathname(), Some(p2.as_path()));
        assert_eq!(c2.peer_addr().unwrap().as_pathname(), Some(p1.as_path()));
        let e = c1.peer_addr().unwrap_err();
        assert_eq!(e.kind(), ErrorKind::NotConnected, "{e}");
    });
}

/// Go: TestUnixUnlink (unixsock_test.go), against gort's documented rule, which is the
/// opposite of Go's: a dropped [`UnixListener`] leaves its socket file (as std's), so
/// binding the path again fails with `AddrInUse` until the file is removed. Go's listener
/// removes it on `Close`.
#[test]
fn unix_unlink() {
    run(async {
        let dir = TempDir::new("go-unix-unlink");
        let path = dir.join("sock");
        let l = UnixListener::bind(&path).unwrap();
        assert!(path.exists(), "no socket file after bind");
        drop(l);
        assert!(path.exists(), "gort's rule: the file stays after the drop");
        let e = UnixListener::bind(&path).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::AddrInUse, "{e}");
        std::fs::remove_file(&path).unwrap();
        let l = UnixListener::bind(&path).unwrap();
        drop(l);
    });
}

/// Go: TestUnixAutobind (unixsock_linux_test.go). Go binds an empty name to get Linux's
/// autobind (a kernel-chosen abstract name) and dials that name back. gort has no
/// empty-name bind, but a socket with `SO_PASSCRED` set autobinds when it sends (the
/// kernel's rule): the receiver sees an abstract sender name, equal to the sender's local
/// name, and a reply to it ([`UnixDatagram::send_to_addr`], or after
/// [`UnixDatagram::connect_addr`]) comes back.
#[test]
fn unix_autobind() {
    run(async {
        use std::os::fd::AsRawFd;
        let dir = TempDir::new("go-unix-autobind");
        let path = dir.join("sock");
        let server = UnixDatagram::bind(&path).unwrap();
        let c = UnixDatagram::unbound().unwrap();
        let on: libc::c_int = 1;
        let len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
        // SAFETY: `on` is valid for reads of `len` bytes for the call; the fd is open.
        let rc = unsafe {
            libc::setsockopt(
                c.as_raw_fd(),
                libc::SOL_SOCKET,
                libc::SO_PASSCRED,
                (&on as *const libc::c_int).cast(),
                len,
            )
        };
        assert_eq!(rc, 0, "{}", std::io::Error::last_os_error());
        c.send_to(b"hi", &path).await.unwrap();
        let mut b = [0; 8];
        let (_, from) = server.recv_from(&mut b).await.unwrap();
        let name = from.as_abstract_name().expect("an autobound abstract name");
        assert!(!name.is_empty());
        assert_eq!(c.local_addr().unwrap().as_abstract_name(), Some(name));

        assert_eq!(server.send_to_addr(b"reply", &from).await.unwrap(), 5);
        assert_eq!(c.recv(&mut b).await.unwrap(), 5);
        assert_eq!(&b[..5], b"reply");
        let other = UnixDatagram::unbound().unwrap();
        other.connect_addr(&from).unwrap();
        other.send(b"dial").await.unwrap();
        assert_eq!(c.recv(&mut b).await.unwrap(), 4);
        assert_eq!(&b[..4], b"dial");
        let e = other.connect_addr(&SocketAddr::from_abstract_name(b"gort-nobody-\0").unwrap());
        assert_eq!(e.unwrap_err().kind(), ErrorKind::ConnectionRefused);
    });
}

/// Go: TestUnixgramLinuxAbstractLongName (unixsock_linux_test.go). An abstract name as long
/// as `sun_path` allows (107 bytes after the leading NUL, zero-padded as Go's) binds, and a
/// datagram sent to it by an unbound socket arrives, with an unnamed sender.
#[test]
fn unixgram_linux_abstract_long_name() {
    run(async {
        let mut name = [0u8; 107];
        let tag = format!("abstract_test-{}", std::process::id());
        name[..tag.len()].copy_from_slice(tag.as_bytes());
        let addr = SocketAddr::from_abstract_name(name).unwrap();
        let c = UnixDatagram::bind_addr(&addr).unwrap();
        assert_eq!(c.local_addr().unwrap().as_abstract_name(), Some(&name[..]));
        let s = UnixDatagram::unbound().unwrap();
        assert_eq!(s.send_to_addr(&[1, 2, 3, 4, 5], &addr).await.unwrap(), 5);
        let mut b = [0; 64];
        c.set_read_deadline(Some(
            gort::time::Instant::now() + std::time::Duration::from_secs(5),
        ))
        .unwrap();
        let (n, from) = c.recv_from(&mut b).await.unwrap();
        assert_eq!(&b[..n], &[1, 2, 3, 4, 5]);
        assert!(from.is_unnamed(), "{from:?}");
        // One byte more does not fit.
        assert!(SocketAddr::from_abstract_name([b'x'; 108]).is_err());
    });
}
