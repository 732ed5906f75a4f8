//! Two tasks writing to one connection at once (Go: "multiple goroutines may invoke methods
//! on a Conn simultaneously"): each `write_all` arrives whole, as each Go `Write` does, even
//! when a small send buffer makes the kernel take it in many pieces.

#[path = "support/sockopt.rs"]
mod sockopt;

use gort::net::{TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::sync::Arc;
use std::time::Duration;

const BLOCK: usize = 64 * 1024;
const BLOCKS_PER_WRITER: usize = 8;
const WRITERS: [u8; 3] = [b'a', b'b', b'c'];

/// Reads everything the writers send, slowly, so that every `write_all` waits for room.
async fn read_slowly(peer: TcpStream, total: usize) -> Vec<u8> {
    let mut all = Vec::with_capacity(total);
    let mut buf = vec![0; 32 * 1024];
    while all.len() < total {
        let n = peer.read(&mut buf).await.unwrap();
        assert!(n > 0, "the writers stopped early");
        all.extend_from_slice(&buf[..n]);
        gort::time::sleep(Duration::from_micros(100)).await;
    }
    all
}

#[test]
fn concurrent_write_alls_do_not_interleave() {
    gort::Runtime::new().unwrap().block_on(async {
        let (conn, peer) = connected_with_a_small_send_buffer().await;
        let conn = Arc::new(conn);
        let writers: Vec<_> = WRITERS
            .into_iter()
            .map(|letter| {
                let conn = conn.clone();
                gort::spawn(async move {
                    let block = vec![letter; BLOCK];
                    for _ in 0..BLOCKS_PER_WRITER {
                        conn.write_all(&block).await.unwrap();
                    }
                })
            })
            .collect();
        let total = BLOCK * BLOCKS_PER_WRITER * WRITERS.len();
        let all = read_slowly(peer, total).await;
        for w in writers {
            w.await.unwrap();
        }
        let torn = all
            .chunks(BLOCK)
            .filter(|b| b.iter().any(|&x| x != b[0]))
            .count();
        assert_eq!(torn, 0, "blocks whose bytes came from two writers");
    });
}

#[test]
fn a_writer_given_up_while_waiting_or_writing_lets_the_next_one_write() {
    gort::Runtime::new().unwrap().block_on(async {
        let (conn, peer) = connected_with_a_small_send_buffer().await;
        let big = vec![b'x'; 8 << 20]; // more than the buffers hold: the write waits for room
        let short = Duration::from_millis(20);
        // Gives up while writing (holding the lock), then while waiting for it.
        let holder = gort::time::timeout(short, conn.write_all(&big));
        let waiter = gort::time::timeout(short, conn.write_all(b"never"));
        let (held, waited) = futures::future::join(holder, waiter).await;
        assert!(held.is_err() && waited.is_err());
        // Both gave the lock up: a later write goes through once the peer reads.
        let reader = gort::spawn(async move {
            let mut buf = vec![0; 1 << 16];
            let mut tail = Vec::new();
            loop {
                let n = peer.read(&mut buf).await.unwrap();
                if n == 0 {
                    return tail;
                }
                tail.extend_from_slice(&buf[..n]);
                let keep = tail.len().saturating_sub(4);
                tail.drain(..keep);
            }
        });
        gort::time::timeout(Duration::from_secs(10), conn.write_all(b"done"))
            .await
            .expect("the lock was left held")
            .unwrap();
        conn.shutdown(std::net::Shutdown::Write).unwrap();
        assert_eq!(reader.await.unwrap(), b"done");
    });
}

/// A connection (and its peer) whose send buffer is smaller than a block, so that a
/// `write_all` of one waits for room several times.
async fn connected_with_a_small_send_buffer() -> (TcpStream, TcpStream) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let conn = TcpStream::connect(listener.local_addr().unwrap())
        .await
        .unwrap();
    let fd = conn.as_raw_fd();
    sockopt::set_opt(fd, libc::SOL_SOCKET, libc::SO_SNDBUF, 16 * 1024);
    assert!(sockopt::get_opt(fd, libc::SOL_SOCKET, libc::SO_SNDBUF) < BLOCK as libc::c_int);
    let (peer, _) = listener.accept().await.unwrap();
    (conn, peer)
}
