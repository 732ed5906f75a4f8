//! Tokio's `tcp_connect.rs`, `tcp_split.rs`, `uds_split.rs` and `unix_shutdown.rs`, ported to
//! gort's `TcpListener`, `TcpStream` and `UnixStream` (with the `tokio-io` adapters where the
//! test uses Tokio's traits): each test keeps its Tokio name and a comment naming its file,
//! under a watchdog on a runtime of 2 Ps.
//!
//! Skipped, gort's net being Go's (no such API): the `peek` lines of `tcp_split.rs`,
//! `tcp_peek.rs`, `tcp_into_std.rs` (no `into_std`: a gort socket converts from std's, not
//! back), `net_lookup_host.rs` (no `lookup_host`: `connect` resolves names itself, as the
//! `host` cases below check), `tcp_socket.rs` and `uds_socket.rs` (no `TcpSocket` or
//! `UnixSocket` builder), `uds_cred.rs` (no `peer_cred`).

#[path = "support/mock_task.rs"]
mod mock_task;
mod support;

use futures::join;
use gort::net::{TcpListener, TcpStream, UnixStream};
use mock_task::rt_test;
use std::io::{Read, Write};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

/// tcp_connect.rs's `connect_v4` and `connect_v6`: the two ends agree on the addresses.
async fn connect_on(bind: &'static str) {
    let (mine, theirs, peer) = support::tcp_pair_at(bind).await;
    assert_eq!(
        mine.peer_addr().unwrap().is_ipv4(),
        bind.starts_with("127.")
    );
    assert_eq!(peer, theirs.peer_addr().unwrap());
    assert_eq!(mine.local_addr().unwrap(), theirs.peer_addr().unwrap());
    assert_eq!(theirs.local_addr().unwrap(), mine.peer_addr().unwrap());
}

// tcp_connect.rs
#[test]
fn connect_v4() {
    rt_test(2, false, || connect_on("127.0.0.1:0"));
}

// tcp_connect.rs
#[test]
fn connect_v6() {
    // Tokio's test needs IPv6 on loopback; so does this one.
    if std::net::TcpListener::bind("[::1]:0").is_err() {
        eprintln!("skip: no IPv6 loopback");
        return;
    }
    rt_test(2, false, || connect_on("[::1]:0"));
}

/// The `connect_addr_*` cases: accept on one side, connect to `target(port)` on the other.
fn connect_addr<A>(target: impl FnOnce(u16) -> A + Send + 'static)
where
    A: std::net::ToSocketAddrs + Send + 'static,
{
    rt_test(2, false, || async move {
        let srv = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = target(srv.local_addr().unwrap().port());
        let server = async {
            srv.accept().await.unwrap();
        };
        let client = async {
            TcpStream::connect(addr).await.unwrap();
        };
        join!(server, client);
    });
}

// tcp_connect.rs
#[test]
fn connect_addr_ip_string() {
    connect_addr(|port| format!("127.0.0.1:{port}"));
}

// tcp_connect.rs (gort's addresses are owned: `'static`)
#[test]
fn connect_addr_ip_str_slice() {
    connect_addr(|port| &*format!("127.0.0.1:{port}").leak());
}

// tcp_connect.rs: a name resolved by `connect`. Only IPv4 listens here, so a `localhost`
// that resolves to `::1` first must fall back to `127.0.0.1`, as Tokio's does.
#[test]
fn connect_addr_host_string() {
    connect_addr(|port| format!("localhost:{port}"));
}

// tcp_connect.rs
#[test]
fn connect_addr_ip_port_tuple() {
    connect_addr(|port| (std::net::IpAddr::from([127, 0, 0, 1]), port));
}

// tcp_connect.rs
#[test]
fn connect_addr_ip_str_port_tuple() {
    connect_addr(|port| ("127.0.0.1", port));
}

// tcp_connect.rs
#[test]
fn connect_addr_host_str_port_tuple() {
    connect_addr(|port| ("localhost", port));
}

// tcp_split.rs, without its `peek` lines (see the header).
#[test]
fn split() {
    const MSG: &[u8] = b"split";
    rt_test(2, false, || async {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let handle = std::thread::spawn(move || {
            let (mut stream, _) = listener.accept().unwrap();
            stream.write_all(MSG).unwrap();
            let mut read_buf = [0u8; 32];
            let read_len = stream.read(&mut read_buf).unwrap();
            assert_eq!(&read_buf[..read_len], MSG);
        });
        let stream = TcpStream::connect(addr).await.unwrap();
        let (read_half, write_half) = stream.split();
        let mut read_buf = [0u8; 32];
        let read_len = read_half.read(&mut read_buf[..]).await.unwrap();
        assert_eq!(&read_buf[..read_len], MSG);
        assert_eq!(write_half.write(MSG).await.unwrap(), MSG.len());
        handle.join().unwrap();
    });
}

// uds_split.rs: the halves of `UnixStream::split` through Tokio's traits, `shutdown` of the
// write half read as the end of the stream on the other side.
#[test]
fn uds_split() {
    rt_test(2, false, || async {
        let (a, b) = UnixStream::pair().unwrap();
        let (mut a_read, mut a_write) = a.split();
        let (mut b_read, mut b_write) = b.split();
        let (a_response, b_response) = futures::future::try_join(
            send_recv_all(&mut a_read, &mut a_write, b"A"),
            send_recv_all(&mut b_read, &mut b_write, b"B"),
        )
        .await
        .unwrap();
        assert_eq!(a_response, b"B");
        assert_eq!(b_response, b"A");
    });
}

async fn send_recv_all(
    read: &mut (dyn AsyncRead + Unpin),
    write: &mut (dyn AsyncWrite + Unpin),
    input: &[u8],
) -> std::io::Result<Vec<u8>> {
    write.write_all(input).await?;
    write.shutdown().await?;
    let mut output = Vec::new();
    read.read_to_end(&mut output).await?;
    Ok(output)
}

// unix_shutdown.rs
#[test]
fn shutdown() {
    rt_test(2, false, || async {
        let (mut a, mut b) = UnixStream::pair().unwrap();
        let handle = gort::spawn(async move {
            AsyncWriteExt::shutdown(&mut b).await.unwrap();
        });
        // The peer observes the shutdown as a read of 0.
        let mut buf = [0u8; 1];
        let n = AsyncReadExt::read(&mut a, &mut buf).await.unwrap();
        assert_eq!(n, 0);
        handle.await.unwrap();
    });
}

// unix_shutdown.rs: `shutdown` is a cleanup call, which a peer's exit does not fail (tokio#8520,
// as tokio#4665 for TCP), twice.
#[test]
fn shutdown_after_peer_dropped() {
    rt_test(2, false, || async {
        let (mut stream, peer) = UnixStream::pair().unwrap();
        drop(peer);
        AsyncWriteExt::shutdown(&mut stream).await.unwrap();
        AsyncWriteExt::shutdown(&mut stream).await.unwrap();
    });
}
