//! TCP keep-alive: on at 15 s for dialed and accepted connections (Go's default since 1.13),
//! and `TcpStream::set_keepalive`. Each option is read back with `getsockopt` on a real
//! loopback connection.

use gort::net::{TcpListener, TcpStream};
use std::net::SocketAddr;
use std::os::fd::AsRawFd;
use std::time::Duration;

#[path = "support/sockopt.rs"]
mod sockopt;
use sockopt::get_opt;

/// `(SO_KEEPALIVE, TCP_KEEPIDLE, TCP_KEEPINTVL)` of `conn`.
fn keepalive_options(conn: &impl AsRawFd) -> (libc::c_int, libc::c_int, libc::c_int) {
    let fd = conn.as_raw_fd();
    (
        get_opt(fd, libc::SOL_SOCKET, libc::SO_KEEPALIVE),
        get_opt(fd, libc::IPPROTO_TCP, libc::TCP_KEEPIDLE),
        get_opt(fd, libc::IPPROTO_TCP, libc::TCP_KEEPINTVL),
    )
}

/// A dialed connection and the accepted end of it.
async fn loopback_pair() -> (TcpStream, TcpStream) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let dialed = TcpStream::connect(listener.local_addr().unwrap())
        .await
        .unwrap();
    let (accepted, _) = listener.accept().await.unwrap();
    (dialed, accepted)
}

#[gort::test]
async fn dialed_and_accepted_connections_have_keepalive_on_at_15_seconds() {
    let (dialed, accepted) = loopback_pair().await;
    assert_eq!(keepalive_options(&dialed), (1, 15, 15));
    assert_eq!(keepalive_options(&accepted), (1, 15, 15));
    assert_eq!(dialed.keepalive().unwrap(), Some(Duration::from_secs(15)));
    assert_eq!(accepted.keepalive().unwrap(), Some(Duration::from_secs(15)));
}

/// The kernel's timer kind of the IPv4 loopback socket from `local` to `remote`, from
/// `/proc/net/tcp` (`tr`: 0 none, 1 retransmit, 2 keep-alive, 3 TIME_WAIT, 4 zero window);
/// `None` where that file cannot be read.
fn timer_kind(local: SocketAddr, remote: SocketAddr) -> Option<u32> {
    let table = std::fs::read_to_string("/proc/net/tcp").ok()?;
    let hex = |a: SocketAddr| format!("0100007F:{:04X}", a.port());
    let (local, remote) = (hex(local), hex(remote));
    let row = table.lines().find(|l| {
        let mut f = l.split_whitespace().skip(1);
        f.next() == Some(local.as_str()) && f.next() == Some(remote.as_str())
    });
    let timer = row.unwrap_or_else(|| panic!("no {local} -> {remote} in\n{table}"));
    let kind = timer.split_whitespace().nth(5).unwrap().split(':').next();
    Some(u32::from_str_radix(kind.unwrap(), 16).unwrap())
}

/// The accepted socket gets its options from the listener (set there once): check that the
/// kernel armed its keep-alive timer, not only copied the flag, and the dialed one's too.
#[gort::test]
async fn the_kernel_runs_the_keepalive_timer_of_both_ends() {
    let (dialed, accepted) = loopback_pair().await;
    let (near, far) = (dialed.local_addr().unwrap(), dialed.peer_addr().unwrap());
    for (local, remote) in [(near, far), (far, near)] {
        if let Some(kind) = timer_kind(local, remote) {
            assert_eq!(
                kind, 2,
                "{local} -> {remote}: timer kind {kind}, not keep-alive"
            );
        }
    }
    drop(accepted);
}

#[gort::test]
async fn a_listener_from_std_gives_keepalive_to_what_it_accepts() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let listener = TcpListener::from_std(listener).unwrap();
    let _dialed = TcpStream::connect(listener.local_addr().unwrap())
        .await
        .unwrap();
    let (accepted, _) = listener.accept().await.unwrap();
    assert_eq!(keepalive_options(&accepted), (1, 15, 15));
}

#[gort::test]
async fn set_keepalive_sets_idle_and_interval_and_none_turns_it_off() {
    let (conn, _peer) = loopback_pair().await;
    conn.set_keepalive(Some(Duration::from_secs(42))).unwrap();
    assert_eq!(keepalive_options(&conn), (1, 42, 42));
    assert_eq!(conn.keepalive().unwrap(), Some(Duration::from_secs(42)));

    conn.set_keepalive(None).unwrap();
    assert_eq!(keepalive_options(&conn).0, 0);
    assert_eq!(conn.keepalive().unwrap(), None);

    // Rounded up to whole seconds, at least one, as Go's SetKeepAlivePeriod does.
    conn.set_keepalive(Some(Duration::from_millis(2500)))
        .unwrap();
    assert_eq!(keepalive_options(&conn), (1, 3, 3));
    conn.set_keepalive(Some(Duration::ZERO)).unwrap();
    assert_eq!(keepalive_options(&conn), (1, 1, 1));
}

#[gort::test]
async fn a_period_the_kernel_refuses_fails_and_leaves_keepalive_as_it_was() {
    let (conn, _peer) = loopback_pair().await;
    conn.set_keepalive(None).unwrap();
    let err = conn
        .set_keepalive(Some(Duration::from_secs(1 << 20)))
        .unwrap_err();
    assert_eq!(err.kind(), std::io::ErrorKind::InvalidInput);
    assert_eq!(conn.keepalive().unwrap(), None);
}

#[gort::test]
async fn a_stream_from_std_keeps_its_sockets_setting() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let std_conn = std::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
    let before = keepalive_options(&std_conn).0;
    let conn = TcpStream::from_std(std_conn).unwrap();
    assert_eq!(keepalive_options(&conn).0, before);
}

/// As keep-alive, `TCP_NODELAY` reaches an accepted socket from its listener (set there once,
/// not per accept), and a dialed one has it too: Go's default on both ends.
#[gort::test]
async fn dialed_and_accepted_connections_have_nodelay() {
    let (dialed, accepted) = loopback_pair().await;
    for conn in [&dialed, &accepted] {
        assert_eq!(
            get_opt(conn.as_raw_fd(), libc::IPPROTO_TCP, libc::TCP_NODELAY),
            1
        );
    }
    let std_listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let listener = TcpListener::from_std(std_listener).unwrap();
    let _dialed = TcpStream::connect(listener.local_addr().unwrap())
        .await
        .unwrap();
    let (accepted, _) = listener.accept().await.unwrap();
    assert_eq!(
        get_opt(accepted.as_raw_fd(), libc::IPPROTO_TCP, libc::TCP_NODELAY),
        1
    );
}
