//! Tokio's TCP tests (`tcp_accept.rs`, `tcp_echo.rs`, `tcp_shutdown.rs`, `tcp_into_split.rs`,
//! `io_copy_bidirectional.rs`), ported to gort's `TcpListener` and `TcpStream` with the
//! `tokio-io` adapters (`tokio::io`'s `copy`, `copy_bidirectional`, `AsyncReadExt`,
//! `AsyncWriteExt`): each test keeps its Tokio name and a comment naming its file, and runs
//! under a watchdog on a runtime of 2 Ps.
//!
//! Skipped, gort's net being Go's: `peek` (the `peek` lines of `split`), `try_read`,
//! `try_write`, `ready(Interest)`, `readable`, `poll_read_ready` and `set_linger` (Go's
//! `net.Conn` has none; `tcp_stream.rs` is all of these); `no_extra_poll` (no `poll_accept`);
//! the `tokio_test::io` mock cases of `io_copy_bidirectional.rs` (they test Tokio's `copy`,
//! not a socket). `accept_many` is ported over `accept` futures polled once each.

#[path = "support/mock_task.rs"]
mod mock_task;
mod support;

use gort::net::{TcpListener, TcpStream};
use mock_task::rt_test;
use std::future::{poll_fn, Future};
use std::io::{self, ErrorKind, Read, Write};
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicBool, Ordering::SeqCst};
use std::sync::Arc;
use std::task::Poll;
use std::time::Duration;
use support::linger_zero;
use tokio::io::{copy, copy_bidirectional, AsyncReadExt, AsyncWriteExt};
use tokio::sync::{mpsc, oneshot};

/// `tcp_accept.rs`'s `test_accept!`: bind `target`, accept in a task, connect, and check
/// that the two ends agree on the addresses.
async fn accept_on(target: impl std::net::ToSocketAddrs + Send + 'static) {
    let (cli, srv, _) = support::tcp_pair_at(target).await;
    assert_eq!(cli.local_addr().unwrap(), srv.peer_addr().unwrap());
}

// tcp_accept.rs (`test_accept!`'s five cases)
#[test]
fn ip_str() {
    rt_test(2, false, || accept_on("127.0.0.1:0"));
}

// tcp_accept.rs
#[test]
fn host_str() {
    rt_test(2, false, || accept_on("localhost:0"));
}

// tcp_accept.rs
#[test]
fn socket_addr() {
    rt_test(2, false, || {
        accept_on("127.0.0.1:0".parse::<SocketAddr>().unwrap())
    });
}

// tcp_accept.rs
#[test]
fn str_port_tuple() {
    rt_test(2, false, || accept_on(("127.0.0.1", 0)));
}

// tcp_accept.rs
#[test]
fn ip_port_tuple() {
    rt_test(2, false, || {
        accept_on(("127.0.0.1".parse::<IpAddr>().unwrap(), 0))
    });
}

// tcp_accept.rs (20 accepts pending on one listener instead of 50): one connection
// notifies every pending `accept`.
#[test]
fn accept_many() {
    const N: usize = 20;
    rt_test(2, false, || async {
        let listener = Arc::new(TcpListener::bind("127.0.0.1:0").await.unwrap());
        let addr = listener.local_addr().unwrap();
        let connected = Arc::new(AtomicBool::new(false));
        let (pending_tx, mut pending_rx) = mpsc::unbounded_channel();
        let (notified_tx, mut notified_rx) = mpsc::unbounded_channel();
        for _ in 0..N {
            let (listener, connected) = (listener.clone(), connected.clone());
            let (pending_tx, notified_tx) = (pending_tx.clone(), notified_tx.clone());
            gort::spawn(async move {
                let mut accept = std::pin::pin!(listener.accept());
                let mut polled = false;
                poll_fn(|cx| {
                    if !polled {
                        polled = true;
                        assert!(accept.as_mut().poll(cx).is_pending());
                        pending_tx.send(()).unwrap();
                        Poll::Pending
                    } else if connected.load(SeqCst) {
                        notified_tx.send(()).unwrap();
                        Poll::Ready(())
                    } else {
                        Poll::Pending
                    }
                })
                .await;
            });
        }
        for _ in 0..N {
            pending_rx.recv().await.unwrap();
        }
        connected.store(true, SeqCst);
        let _sock = TcpStream::connect(addr).await.unwrap();
        for _ in 0..N {
            notified_rx.recv().await.unwrap();
        }
    });
}

// tcp_echo.rs (256 round trips instead of 1,024)
#[test]
fn echo_server() {
    const BYTES: &[u8] = b"foo bar baz";
    const ITER: usize = 256;
    rt_test(2, false, || async {
        let (tx, rx) = oneshot::channel();
        let srv = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = srv.local_addr().unwrap();
        gort::spawn(async move {
            let mut stream = TcpStream::connect(addr).await.unwrap();
            for _ in 0..ITER {
                AsyncWriteExt::write_all(&mut stream, BYTES).await.unwrap();
                let mut buf = [0; BYTES.len()];
                AsyncReadExt::read_exact(&mut stream, &mut buf)
                    .await
                    .unwrap();
                assert_eq!(&buf[..], BYTES);
            }
            tx.send(()).unwrap();
        });
        let (stream, _) = srv.accept().await.unwrap();
        let (mut rd, mut wr) = stream.split();
        let n = copy(&mut rd, &mut wr).await.unwrap();
        assert_eq!(n, (ITER * BYTES.len()) as u64);
        rx.await.unwrap();
    });
}

// tcp_shutdown.rs
#[test]
fn shutdown() {
    rt_test(2, false, || async {
        let srv = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = srv.local_addr().unwrap();
        let handle = gort::spawn(async move {
            let mut stream = TcpStream::connect(addr).await.unwrap();
            AsyncWriteExt::shutdown(&mut stream).await.unwrap();
            let mut buf = [0u8; 1];
            assert_eq!(AsyncReadExt::read(&mut stream, &mut buf).await.unwrap(), 0);
        });
        let (mut stream, _) = srv.accept().await.unwrap();
        {
            let (mut rd, mut wr) = stream.split();
            assert_eq!(copy(&mut rd, &mut wr).await.unwrap(), 0);
        }
        AsyncWriteExt::shutdown(&mut stream).await.unwrap();
        handle.await.unwrap()
    });
}

// tcp_shutdown.rs
#[test]
fn shutdown_after_tcp_reset() {
    rt_test(2, false, || async {
        let srv = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = srv.local_addr().unwrap();
        let (connected_tx, connected_rx) = oneshot::channel();
        let (dropped_tx, dropped_rx) = oneshot::channel();
        let handle = gort::spawn(async move {
            let mut stream = TcpStream::connect(addr).await.unwrap();
            connected_tx.send(()).unwrap();
            dropped_rx.await.unwrap();
            match AsyncWriteExt::shutdown(&mut stream).await {
                Ok(()) => {}
                Err(e) if e.kind() == ErrorKind::ConnectionReset => {}
                Err(e) => panic!("unexpected error after reset: {e:?}"),
            }
        });
        let (stream, _) = srv.accept().await.unwrap();
        linger_zero(&stream); // Tokio's `set_zero_linger`: dropped, it sends a reset
        connected_rx.await.unwrap();
        drop(stream);
        dropped_tx.send(()).unwrap();
        handle.await.unwrap();
    });
}

// tcp_shutdown.rs
#[test]
fn shutdown_multiple_calls() {
    rt_test(2, false, || async {
        let srv = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = srv.local_addr().unwrap();
        let (connected_tx, connected_rx) = oneshot::channel();
        let handle = gort::spawn(async move {
            let mut stream = TcpStream::connect(addr).await.unwrap();
            connected_tx.send(()).unwrap();
            for _ in 0..3 {
                AsyncWriteExt::shutdown(&mut stream).await.unwrap();
            }
        });
        let (mut stream, _) = srv.accept().await.unwrap();
        connected_rx.await.unwrap();
        AsyncWriteExt::shutdown(&mut stream).await.unwrap();
        handle.await.unwrap();
    });
}

// tcp_into_split.rs (without its `peek`s: gort's net has Go's API, no peek)
#[test]
fn split() {
    const MSG: &[u8] = b"split";
    rt_test(2, false, || async {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (stream1, accepted) = tokio::join!(TcpStream::connect(addr), listener.accept());
        let (stream1, (mut stream2, _)) = (stream1.unwrap(), accepted.unwrap());
        let (mut read_half, write_half) = stream1.into_split();
        let ((), (), ()) = tokio::try_join! {
            async {
                assert_eq!(AsyncWriteExt::write(&mut stream2, MSG).await?, MSG.len());
                let mut read_buf = vec![0u8; 32];
                let n = AsyncReadExt::read(&mut stream2, &mut read_buf).await?;
                assert_eq!(&read_buf[..n], MSG);
                io::Result::Ok(())
            },
            async {
                assert_eq!(write_half.write(MSG).await?, MSG.len());
                Ok(())
            },
            async {
                let mut read_buf = [0u8; 32];
                let n = AsyncReadExt::read(&mut read_half, &mut read_buf[..]).await?;
                assert_eq!(&read_buf[..n], MSG);
                Ok(())
            },
        }
        .unwrap();
    });
}

// tcp_into_split.rs
#[test]
fn reunite() {
    rt_test(2, false, || async {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let handle = std::thread::spawn(move || {
            drop(listener.accept().unwrap());
            drop(listener.accept().unwrap());
        });
        let (read1, write1) = TcpStream::connect(addr).await.unwrap().into_split();
        let (_, write2) = TcpStream::connect(addr).await.unwrap().into_split();
        let read1 = match read1.reunite(write2) {
            Ok(_) => panic!("Reunite should not succeed"),
            Err(err) => err.0,
        };
        read1.reunite(write1).expect("Reunite should succeed");
        handle.join().unwrap();
    });
}

// tcp_into_split.rs: dropping the write half closes the stream's write side.
#[test]
fn drop_write() {
    const MSG: &[u8] = b"split";
    rt_test(2, false, || async {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let handle = std::thread::spawn(move || {
            let (mut stream, _) = listener.accept().unwrap();
            stream.write_all(MSG).unwrap();
            let mut read_buf = [0u8; 32];
            let res = match stream.read(&mut read_buf) {
                Ok(0) => Ok(()),
                Ok(len) => Err(io::Error::other(format!("Unexpected read: {len} bytes."))),
                Err(err) => Err(err),
            };
            drop(stream);
            res
        });
        let (read_half, write_half) = TcpStream::connect(addr).await.unwrap().into_split();
        let mut read_buf = [0u8; 32];
        let n = read_half.read(&mut read_buf[..]).await.unwrap();
        assert_eq!(&read_buf[..n], MSG);
        // Drop it while the read is in progress.
        std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(10));
            drop(write_half);
        });
        match read_half.read(&mut read_buf[..]).await {
            Ok(0) => {}
            Ok(len) => panic!("Unexpected read: {len} bytes."),
            Err(err) => panic!("Unexpected error: {err}."),
        }
        handle.join().unwrap().unwrap();
    });
}

async fn make_socketpair() -> (TcpStream, TcpStream) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (c1, c2) = tokio::join!(TcpStream::connect(addr), listener.accept());
    (c1.unwrap(), c2.unwrap().0)
}

/// Writes until the socket has been full for 10 ms; the bytes written.
async fn block_write(s: &mut TcpStream) -> usize {
    static BUF: [u8; 2048] = [0; 2048];
    let mut copied = 0;
    loop {
        tokio::select! {
            result = AsyncWriteExt::write(s, &BUF) => copied += result.expect("write error"),
            _ = gort::time::sleep(Duration::from_millis(10)) => break,
        }
    }
    copied
}

type Copier = gort::JoinHandle<io::Result<(u64, u64)>>;

/// Runs `cb` twice, with the streams handed to `copy_bidirectional` in both orders.
async fn symmetric<F, Fut>(mut cb: F)
where
    F: FnMut(Copier, TcpStream, TcpStream) -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    for flip in [false, true] {
        let (a, mut a1) = make_socketpair().await;
        let (b, mut b1) = make_socketpair().await;
        let handle = gort::spawn(async move {
            if flip {
                copy_bidirectional(&mut b1, &mut a1).await
            } else {
                copy_bidirectional(&mut a1, &mut b1).await
            }
        });
        if flip {
            cb(handle, b, a).await;
        } else {
            cb(handle, a, b).await;
        }
    }
}

// io_copy_bidirectional.rs
#[test]
fn test_basic_transfer() {
    rt_test(2, false, || {
        symmetric(|_handle, mut a, mut b| async move {
            AsyncWriteExt::write_all(&mut a, b"test").await.unwrap();
            let mut tmp = [0; 4];
            AsyncReadExt::read_exact(&mut b, &mut tmp).await.unwrap();
            assert_eq!(&tmp[..], b"test");
        })
    });
}

// io_copy_bidirectional.rs
#[test]
fn test_transfer_after_close() {
    rt_test(2, false, || {
        symmetric(|handle, mut a, mut b| async move {
            AsyncWriteExt::shutdown(&mut a).await.unwrap();
            AsyncReadExt::read_to_end(&mut b, &mut Vec::new())
                .await
                .unwrap();
            AsyncWriteExt::write_all(&mut b, b"quux").await.unwrap();
            let mut tmp = [0; 4];
            AsyncReadExt::read_exact(&mut a, &mut tmp).await.unwrap();
            assert_eq!(&tmp[..], b"quux");
            drop(b);
            assert_eq!(handle.await.unwrap().unwrap(), (0, 4));
        })
    });
}

// io_copy_bidirectional.rs
#[test]
fn blocking_one_side_does_not_block_other() {
    rt_test(2, false, || {
        symmetric(|handle, mut a, mut b| async move {
            block_write(&mut a).await;
            AsyncWriteExt::write_all(&mut b, b"quux").await.unwrap();
            let mut tmp = [0; 4];
            AsyncReadExt::read_exact(&mut a, &mut tmp).await.unwrap();
            assert_eq!(&tmp[..], b"quux");
            AsyncWriteExt::shutdown(&mut a).await.unwrap();
            let mut buf = Vec::new();
            AsyncReadExt::read_to_end(&mut b, &mut buf).await.unwrap();
            drop(b);
            assert_eq!(handle.await.unwrap().unwrap(), (buf.len() as u64, 4));
        })
    });
}
