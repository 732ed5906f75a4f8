//! Tokio's `udp.rs`, `uds_stream.rs` and `uds_datagram.rs`, ported to gort's `UdpSocket`,
//! `UnixListener`/`UnixStream` (with the `tokio-io` adapters) and `UnixDatagram`: each test
//! keeps its Tokio name (prefixed `udp_`, `uds_` or `uds_dgram_` where the files share
//! one) and a comment naming its file, and runs under a watchdog on a runtime of 2 Ps.
//!
//! Skipped, gort's net being Go's: the `poll_*`, `try_*`, `peek*`, `*_buf`, `ready` and
//! `readable` cases (Go's `net` has none of them: reads and writes are `async fn`s on `&self`,
//! with deadlines).

#[path = "support/mock_task.rs"]
mod mock_task;
mod support;

use gort::net::{UdpSocket, UnixDatagram, UnixListener, UnixStream};
use mock_task::rt_test;
use std::future::{poll_fn, Future};
use std::io::{self, ErrorKind};
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::Arc;
use std::task::Poll;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const MSG: &[u8] = b"hello";

/// A fresh directory for socket paths, removed when dropped (Tokio's `tempfile`).
struct TempDir(PathBuf);

impl TempDir {
    fn new() -> TempDir {
        static N: AtomicUsize = AtomicUsize::new(0);
        let n = N.fetch_add(1, SeqCst);
        let dir = std::env::temp_dir().join(format!("gort-tokio-uds-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        TempDir(dir)
    }
    fn join(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

// udp.rs `send_recv`
#[test]
fn udp_send_recv() {
    rt_test(2, false, || async {
        let sender = UdpSocket::bind("127.0.0.1:0").await.unwrap();
        let receiver = UdpSocket::bind("127.0.0.1:0").await.unwrap();
        sender
            .connect(receiver.local_addr().unwrap())
            .await
            .unwrap();
        receiver
            .connect(sender.local_addr().unwrap())
            .await
            .unwrap();
        sender.send(MSG).await.unwrap();
        let mut recv_buf = [0u8; 32];
        let len = receiver.recv(&mut recv_buf[..]).await.unwrap();
        assert_eq!(&recv_buf[..len], MSG);
    });
}

// udp.rs
#[test]
fn send_to_recv_closed_returns_err() {
    rt_test(2, false, || async {
        let sender = UdpSocket::bind("127.0.0.1:0").await.unwrap();
        let receiver = UdpSocket::bind("127.0.0.1:0").await.unwrap();
        let receiver_addr = receiver.local_addr().unwrap();
        drop(receiver);
        sender.connect(receiver_addr).await.unwrap();
        sender.send(MSG).await.unwrap();
        let mut recv_buf = [0u8; 32];
        let err = gort::time::timeout(Duration::from_secs(5), sender.recv(&mut recv_buf))
            .await
            .expect("timed out instead of returning error")
            .unwrap_err();
        assert!(matches!(
            err.kind(),
            ErrorKind::ConnectionRefused | ErrorKind::ConnectionReset
        ));
    });
}

// udp.rs
#[test]
fn send_to_recv_from() {
    rt_test(2, false, || async {
        let sender = UdpSocket::bind("127.0.0.1:0").await.unwrap();
        let receiver = UdpSocket::bind("127.0.0.1:0").await.unwrap();
        sender
            .send_to(MSG, receiver.local_addr().unwrap())
            .await
            .unwrap();
        let mut recv_buf = [0u8; 32];
        let (len, addr) = receiver.recv_from(&mut recv_buf[..]).await.unwrap();
        assert_eq!(&recv_buf[..len], MSG);
        assert_eq!(addr, sender.local_addr().unwrap());
    });
}

// udp.rs `split`
#[test]
fn udp_split() {
    rt_test(2, false, || async {
        let s = Arc::new(UdpSocket::bind("127.0.0.1:0").await.unwrap());
        let r = s.clone();
        let addr = s.local_addr().unwrap();
        gort::spawn(async move {
            s.send_to(MSG, addr).await.unwrap();
        });
        let mut recv_buf = [0u8; 32];
        let (len, _) = r.recv_from(&mut recv_buf[..]).await.unwrap();
        assert_eq!(&recv_buf[..len], MSG);
    });
}

// udp.rs
#[test]
fn split_chan() {
    rt_test(2, false, || async {
        let socket = UdpSocket::bind("127.0.0.1:0").await.unwrap();
        let addr = socket.local_addr().unwrap();
        let s = Arc::new(socket);
        let r = s.clone();
        let (tx, mut rx) = tokio::sync::mpsc::channel::<(Vec<u8>, std::net::SocketAddr)>(1_000);
        gort::spawn(async move {
            while let Some((bytes, addr)) = rx.recv().await {
                s.send_to(&bytes, addr).await.unwrap();
            }
        });
        gort::spawn(async move {
            let mut buf = [0u8; 32];
            loop {
                let (len, addr) = r.recv_from(&mut buf).await.unwrap();
                tx.send((buf[..len].to_vec(), addr)).await.unwrap();
            }
        });
        let sender = UdpSocket::bind("127.0.0.1:0").await.unwrap();
        sender.send_to(MSG, addr).await.unwrap();
        let mut recv_buf = [0u8; 32];
        let (len, _) = sender.recv_from(&mut recv_buf).await.unwrap();
        assert_eq!(&recv_buf[..len], MSG);
    });
}

/// Accepts and connects at once on `path` (Tokio's `try_join(accept, connect)`).
async fn pair_on(path: PathBuf) -> (UnixStream, UnixStream) {
    let listener = UnixListener::bind(&path).unwrap();
    let (accepted, client) = tokio::join!(listener.accept(), UnixStream::connect(&path));
    (accepted.unwrap().0, client.unwrap())
}

// uds_stream.rs
#[test]
fn accept_read_write() {
    rt_test(2, false, || async {
        let dir = TempDir::new();
        let (mut server, mut client) = pair_on(dir.join("connect.sock")).await;
        AsyncWriteExt::write_all(&mut client, b"hello")
            .await
            .unwrap();
        drop(client);
        let mut buf = vec![];
        AsyncReadExt::read_to_end(&mut server, &mut buf)
            .await
            .unwrap();
        assert_eq!(&buf, b"hello");
        assert_eq!(AsyncReadExt::read(&mut server, &mut buf).await.unwrap(), 0);
    });
}

// uds_stream.rs
#[test]
fn accept_read_write_socketaddr() {
    rt_test(2, false, || async {
        let dir = TempDir::new();
        let addr = std::os::unix::net::SocketAddr::from_pathname(dir.join("connect.sock")).unwrap();
        let listener = UnixListener::bind_addr(&addr).unwrap();
        let (accepted, client) = tokio::join!(listener.accept(), UnixStream::connect_addr(&addr));
        let (mut server, mut client) = (accepted.unwrap().0, client.unwrap());
        AsyncWriteExt::write_all(&mut client, b"hello")
            .await
            .unwrap();
        drop(client);
        let mut buf = vec![];
        AsyncReadExt::read_to_end(&mut server, &mut buf)
            .await
            .unwrap();
        assert_eq!(&buf, b"hello");
    });
}

// uds_stream.rs `shutdown`
#[test]
fn uds_shutdown() {
    rt_test(2, false, || async {
        let dir = TempDir::new();
        let (mut server, mut client) = pair_on(dir.join("connect.sock")).await;
        AsyncWriteExt::shutdown(&mut client).await.unwrap();
        let mut buf = [0u8; 1];
        assert_eq!(AsyncReadExt::read(&mut server, &mut buf).await.unwrap(), 0);
    });
}

// uds_stream.rs (tokio#3879): a connect polled once, then the listener dropped, fails.
#[test]
fn epollhup() {
    rt_test(2, false, || async {
        let dir = TempDir::new();
        let path = dir.join("connect.sock");
        let listener = UnixListener::bind(&path).unwrap();
        let mut connect = std::pin::pin!(UnixStream::connect(&path));
        // A Unix connect to a listener with room in its backlog completes at once: Tokio's
        // "pending" first poll is the OS's choice, so either is accepted here.
        let first = poll_fn(|cx| Poll::Ready(connect.as_mut().poll(cx))).await;
        drop(listener);
        let res = match first {
            Poll::Ready(res) => res,
            Poll::Pending => connect.await,
        };
        if let Err(err) = res {
            assert!(
                matches!(
                    err.kind(),
                    ErrorKind::ConnectionRefused | ErrorKind::ConnectionReset
                ),
                "unexpected error kind: {:?}",
                err.kind()
            );
        }
    });
}

// uds_stream.rs (tokio#6767)
#[test]
fn abstract_socket_name() {
    use std::os::linux::net::SocketAddrExt;
    rt_test(2, false, || async {
        let name = format!("gort-tokio-abstract-{}", std::process::id());
        let addr = std::os::unix::net::SocketAddr::from_abstract_name(name.as_bytes()).unwrap();
        let listener = UnixListener::bind_addr(&addr).unwrap();
        let (accepted, client) = tokio::join!(listener.accept(), UnixStream::connect_addr(&addr));
        accepted.unwrap();
        client.unwrap();
    });
}

// uds_stream.rs
#[test]
fn pair_starts_writable() {
    rt_test(2, false, || async {
        let (a, b) = UnixStream::pair().unwrap();
        a.write_all(b"x").await.unwrap();
        let mut buf = [0u8; 1];
        b.read_exact(&mut buf).await.unwrap();
        assert_eq!(&buf, b"x");
    });
}

async fn echo_server(socket: UnixDatagram) -> io::Result<()> {
    let mut recv_buf = vec![0u8; 1024];
    loop {
        let (len, peer_addr) = socket.recv_from(&mut recv_buf[..]).await?;
        if let Some(path) = peer_addr.as_pathname() {
            socket.send_to(&recv_buf[..len], path).await?;
        }
    }
}

// uds_datagram.rs
#[test]
fn echo() {
    rt_test(2, false, || async {
        let dir = TempDir::new();
        let server_path = dir.join("server.sock");
        let server_socket = UnixDatagram::bind(&server_path).unwrap();
        gort::spawn(async move {
            let _ = echo_server(server_socket).await;
        });
        let socket = UnixDatagram::bind(dir.join("client.sock")).unwrap();
        socket.connect(&server_path).unwrap();
        socket.send(b"ECHO").await.unwrap();
        let mut recv_buf = [0u8; 16];
        let len = socket.recv(&mut recv_buf[..]).await.unwrap();
        assert_eq!(&recv_buf[..len], b"ECHO");
    });
}

// uds_datagram.rs
#[test]
fn echo_from() {
    rt_test(2, false, || async {
        let dir = TempDir::new();
        let server_path = dir.join("server.sock");
        let server_socket = UnixDatagram::bind(&server_path).unwrap();
        gort::spawn(async move {
            let _ = echo_server(server_socket).await;
        });
        let socket = UnixDatagram::bind(dir.join("client.sock")).unwrap();
        socket.connect(&server_path).unwrap();
        socket.send(b"ECHO").await.unwrap();
        let mut recv_buf = [0u8; 16];
        let (len, addr) = socket.recv_from(&mut recv_buf[..]).await.unwrap();
        assert_eq!(&recv_buf[..len], b"ECHO");
        assert_eq!(addr.as_pathname(), Some(server_path.as_path()));
    });
}

// uds_datagram.rs `split`
#[test]
fn uds_dgram_split() {
    rt_test(2, false, || async {
        let dir = TempDir::new();
        let path = dir.join("split.sock");
        let s = Arc::new(UnixDatagram::bind(&path).unwrap());
        let r = s.clone();
        let ((), ()) = tokio::try_join! {
            async {
                s.send_to(MSG, &path).await?;
                io::Result::Ok(())
            },
            async {
                let mut recv_buf = [0u8; 32];
                let (len, _) = r.recv_from(&mut recv_buf[..]).await?;
                assert_eq!(&recv_buf[..len], MSG);
                Ok(())
            },
        }
        .unwrap();
    });
}
