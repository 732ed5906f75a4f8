//! The sockets' descriptors (`AsRawFd`, `AsFd`): socket options gort has no method for, set
//! and read back through them, while the socket keeps working on the netpoller.

use gort::net::{TcpListener, TcpStream, UdpSocket};
use std::os::fd::{AsFd, AsRawFd};

#[path = "support/sockopt.rs"]
mod sockopt;
use sockopt::{get_opt, set_opt};

#[test]
fn keep_alive_set_through_the_stream_descriptor_sticks_and_the_stream_still_works() {
    gort::Runtime::new().unwrap().block_on(async {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        assert_eq!(
            get_opt(listener.as_raw_fd(), libc::SOL_SOCKET, libc::SO_ACCEPTCONN),
            1
        );
        let client = TcpStream::connect(listener.local_addr().unwrap())
            .await
            .unwrap();
        let (server, _) = listener.accept().await.unwrap();
        assert_eq!(client.as_fd().as_raw_fd(), client.as_raw_fd());
        set_opt(client.as_raw_fd(), libc::SOL_SOCKET, libc::SO_KEEPALIVE, 1);
        assert_eq!(
            get_opt(client.as_raw_fd(), libc::SOL_SOCKET, libc::SO_KEEPALIVE),
            1
        );
        client.write_all(b"still here").await.unwrap();
        let mut buf = [0; 10];
        server.read_exact(&mut buf).await.unwrap();
        assert_eq!(&buf, b"still here");
    });
}

#[test]
fn udp_descriptor_takes_socket_options() {
    gort::Runtime::new().unwrap().block_on(async {
        let socket = UdpSocket::bind("127.0.0.1:0").await.unwrap();
        set_opt(
            socket.as_fd().as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_BROADCAST,
            1,
        );
        assert_eq!(
            get_opt(socket.as_raw_fd(), libc::SOL_SOCKET, libc::SO_BROADCAST),
            1
        );
        socket
            .send_to(b"x", socket.local_addr().unwrap())
            .await
            .unwrap();
        let mut buf = [0; 1];
        assert_eq!(socket.recv_from(&mut buf).await.unwrap().0, 1);
    });
}

/// A dropped socket leaves its removal from the poller to the kernel (it closes the fd; no
/// `EPOLL_CTL_DEL`). A duplicate the program kept keeps the open file, so its registration
/// lives on: its events must reach nobody, not the socket that takes the freed slot, and the
/// duplicate stays a working socket.
#[gort::test]
async fn a_duplicate_of_a_dropped_socket_keeps_working_and_disturbs_no_other() {
    use std::io::{Read, Write};
    use std::time::Duration;
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let dialed = TcpStream::connect(addr).await.unwrap();
    let (peer, _) = listener.accept().await.unwrap();
    let dup = dialed.as_fd().try_clone_to_owned().unwrap();
    drop(dialed);
    // A new connection, likely in the freed slot: its read must wait for its own data.
    let next = TcpStream::connect(addr).await.unwrap();
    let (next_peer, _) = listener.accept().await.unwrap();
    peer.write_all(b"to the duplicate").await.unwrap(); // an edge on the old registration
    let deadline = gort::time::Instant::now() + Duration::from_millis(100);
    next.set_read_deadline(Some(deadline)).unwrap();
    let mut buf = [0u8; 16];
    let err = next.read(&mut buf).await.unwrap_err();
    assert_eq!(err.kind(), std::io::ErrorKind::TimedOut);
    next.set_read_deadline(None).unwrap();
    next_peer.write_all(b"own").await.unwrap();
    next.read_exact(&mut buf[..3]).await.unwrap();
    assert_eq!(&buf[..3], b"own");
    // The duplicate is still the dialed socket.
    let mut dup = std::net::TcpStream::from(dup);
    dup.set_nonblocking(false).unwrap();
    dup.read_exact(&mut buf).unwrap();
    assert_eq!(&buf, b"to the duplicate");
    dup.write_all(b"back").unwrap();
    peer.read_exact(&mut buf[..4]).await.unwrap();
    assert_eq!(&buf[..4], b"back");
}

/// A UDP socket shut down for reading through its descriptor (`libc::shutdown`; gort has no
/// method for it): a receive blocked in another task ends, as a blocking one would, instead
/// of waiting for good (the kernel says `EAGAIN` to a non-blocking receive after one
/// hang-up edge). `recv` returns `Ok(0)`, `recv_from` 0 bytes from the connected peer.
#[test]
fn a_udp_socket_shut_down_for_reading_through_its_descriptor_ends_a_blocked_receive() {
    use std::sync::Arc;
    use std::time::Duration;
    gort::Runtime::new().unwrap().block_on(async {
        let a = Arc::new(UdpSocket::bind("127.0.0.1:0").await.unwrap());
        let b = UdpSocket::bind("127.0.0.1:0").await.unwrap();
        a.connect(b.local_addr().unwrap()).await.unwrap();
        let receiver = gort::spawn({
            let a = a.clone();
            async move { a.recv(&mut [0; 8]).await }
        });
        gort::time::sleep(Duration::from_millis(20)).await;
        // SAFETY: `shutdown` on the socket's own open descriptor.
        assert_eq!(unsafe { libc::shutdown(a.as_raw_fd(), libc::SHUT_RD) }, 0);
        let res = gort::time::timeout(Duration::from_secs(10), receiver)
            .await
            .expect("the receive still waits 10 s after the shutdown");
        assert_eq!(res.unwrap().unwrap(), 0);
        assert_eq!(a.recv(&mut [0; 8]).await.unwrap(), 0);
        let (n, from) = a.recv_from(&mut [0; 8]).await.unwrap();
        assert_eq!((n, from), (0, b.local_addr().unwrap()));
    });
}
