//! Adversarial probes of the tokio-io and futures-io adapters on Unix and TCP streams and
//! their halves: gather writes of more slices than one `sendmsg` takes, zero-length reads,
//! writes after a shutdown, shutdowns and flushes twice.
//!
//! Run: `cargo test -p gort-net --features tokio-io,futures-io --test abuse_unix_io`
#![cfg(all(feature = "tokio-io", feature = "futures-io"))]

#[allow(dead_code)] // open_fds, serial
#[path = "support/watchdog.rs"]
mod watchdog;

#[allow(dead_code)] // not every helper is used by this binary
#[path = "support/tcp.rs"]
mod tcp;

use gort::net::UnixStream;
use std::io::{ErrorKind, IoSlice};
use std::pin::Pin;
use std::task::{Context, Poll};
use tcp::tcp_pair;
use watchdog::within;

fn run<F: std::future::Future>(f: F) -> F::Output {
    gort::Runtime::new().unwrap().block_on(f)
}

/// The slices of `data` past its first `done` bytes.
fn slices_after(data: &[Vec<u8>], mut done: usize) -> Vec<IoSlice<'_>> {
    let mut slices = Vec::new();
    for d in data {
        if done >= d.len() {
            done -= d.len();
            continue;
        }
        slices.push(IoSlice::new(&d[done..]));
        done = 0;
    }
    slices
}

/// Writes every byte of `data` with tokio's `write_vectored`, one slice per element, going
/// on past what each call took (tokio has no `write_all_vectored`).
async fn write_all_vectored<W: tokio::io::AsyncWrite + Unpin>(w: &mut W, data: &[Vec<u8>]) {
    let total: usize = data.iter().map(Vec::len).sum();
    let mut done = 0;
    while done < total {
        let n = tokio::io::AsyncWriteExt::write_vectored(w, &slices_after(data, done))
            .await
            .unwrap();
        assert!(n > 0, "a vectored write took nothing");
        done += n;
    }
}

/// 3,000 one-byte slices: more than one `sendmsg` takes (Linux's `UIO_MAXIOV`, 1,024).
fn many_slices() -> Vec<Vec<u8>> {
    (0..3000).map(|i| vec![(i % 251) as u8]).collect()
}

/// A gather write of more slices than one `sendmsg` takes sends the first 1,024 and returns
/// fewer bytes than the slices hold, with the send buffer far from full. The next write must
/// not wait for a write edge as after a short write into a full buffer: TCP sends none while
/// its buffer never filled, so the rest would never go (the peer, waiting for it, neither).
#[test]
fn a_gather_write_of_more_slices_than_sendmsg_takes_sends_them_all_over_tcp() {
    within(|| {
        run(async {
            let (c, s) = tcp_pair().await;
            let data = many_slices();
            let want: Vec<u8> = data.iter().flatten().copied().collect();
            let reader = gort::spawn(async move {
                let mut got = vec![0; 3000];
                s.read_exact(&mut got).await.unwrap();
                got
            });
            let (_r, mut w) = c.into_split();
            write_all_vectored(&mut w, &data).await;
            assert_eq!(reader.await.unwrap(), want);
        })
    });
}

/// The same on a Unix stream, through futures-io's trait on a borrowed stream.
#[test]
fn a_gather_write_of_more_slices_than_sendmsg_takes_sends_them_all_over_unix() {
    within(|| {
        run(async {
            let (c, s) = UnixStream::pair().unwrap();
            let data = many_slices();
            let want: Vec<u8> = data.iter().flatten().copied().collect();
            let reader = gort::spawn(async move {
                let mut got = vec![0; 3000];
                s.read_exact(&mut got).await.unwrap();
                got
            });
            let mut w = &c;
            let mut done = 0;
            while done < want.len() {
                let slices = slices_after(&data, done);
                done += futures::AsyncWriteExt::write_vectored(&mut w, &slices)
                    .await
                    .unwrap();
            }
            assert_eq!(reader.await.unwrap(), want);
        })
    });
}

/// A zero-length `ReadBuf` (tokio) or buffer (futures-io) reads nothing and returns at once
/// on a Unix stream and its halves, with data queued or not.
#[test]
fn reads_with_no_room_return_at_once_on_unix_streams_and_halves() {
    within(|| {
        run(async {
            let (mut c, s) = UnixStream::pair().unwrap();
            let mut empty = [0u8; 0];
            let mut rb = tokio::io::ReadBuf::new(&mut empty);
            let waker = futures::task::noop_waker();
            let mut cx = Context::from_waker(&waker);
            let r = tokio::io::AsyncRead::poll_read(Pin::new(&mut c), &mut cx, &mut rb);
            assert!(matches!(r, Poll::Ready(Ok(()))), "{r:?}");
            s.write_all(b"queued").await.unwrap();
            let n = futures::AsyncReadExt::read(&mut c, &mut []).await.unwrap();
            assert_eq!(n, 0);
            let (mut r, _w) = c.into_split();
            let n = tokio::io::AsyncReadExt::read(&mut r, &mut [])
                .await
                .unwrap();
            assert_eq!(n, 0);
            let mut got = [0; 6];
            tokio::io::AsyncReadExt::read_exact(&mut r, &mut got)
                .await
                .unwrap();
            assert_eq!(&got, b"queued", "the empty reads consumed nothing");
        })
    });
}

/// Shutting the write side down twice, and flushing before and after, succeed through both
/// traits; a write after the shutdown fails with `BrokenPipe` at once (no hang, no signal),
/// plain or gathered, and the peer reads everything written before it, then the end.
#[test]
fn writes_after_a_shutdown_fail_and_shutdowns_and_flushes_twice_succeed() {
    use tokio::io::AsyncWriteExt as T;
    within(|| {
        run(async {
            let (mut c, s) = UnixStream::pair().unwrap();
            T::write_all(&mut c, b"before").await.unwrap();
            T::flush(&mut c).await.unwrap();
            T::shutdown(&mut c).await.unwrap();
            T::shutdown(&mut c).await.unwrap();
            T::flush(&mut c).await.unwrap();
            futures::AsyncWriteExt::close(&mut c).await.unwrap();
            let e = T::write(&mut c, b"after").await.unwrap_err();
            assert_eq!(e.kind(), ErrorKind::BrokenPipe, "{e}");
            let e = T::write_vectored(&mut c, &[IoSlice::new(b"after")])
                .await
                .unwrap_err();
            assert_eq!(e.kind(), ErrorKind::BrokenPipe, "{e}");
            let e = futures::AsyncWriteExt::write(&mut c, b"after")
                .await
                .unwrap_err();
            assert_eq!(e.kind(), ErrorKind::BrokenPipe, "{e}");
            let mut got = Vec::new();
            let mut buf = [0; 64];
            loop {
                match s.read(&mut buf).await.unwrap() {
                    0 => break,
                    n => got.extend_from_slice(&buf[..n]),
                }
            }
            assert_eq!(got, b"before");
            // The read side of the shut-down stream still works.
            s.write_all(b"reply").await.unwrap();
            let mut got = [0; 5];
            tokio::io::AsyncReadExt::read_exact(&mut c, &mut got)
                .await
                .unwrap();
            assert_eq!(&got, b"reply");
        })
    });
}

/// An owned write half shut down through the trait, then dropped (whose drop shuts down
/// again), and a reunite after a trait shutdown: the stream is back, its write side stays
/// shut (the shutdown was the program's), its read side reads on.
#[test]
fn a_half_shut_down_through_the_trait_then_dropped_or_reunited() {
    within(|| {
        run(async {
            let (c, s) = UnixStream::pair().unwrap();
            let (r, mut w) = c.into_split();
            tokio::io::AsyncWriteExt::shutdown(&mut w).await.unwrap();
            let c = r.reunite(w).unwrap();
            let mut buf = [0; 8];
            assert_eq!(s.read(&mut buf).await.unwrap(), 0, "the peer sees the end");
            let e = c.write(b"x").await.unwrap_err();
            assert_eq!(e.kind(), ErrorKind::BrokenPipe, "{e}");
            s.write_all(b"still").await.unwrap();
            let (mut r, w) = c.into_split();
            drop(w); // a second shutdown of a shut-down side
            let mut got = [0; 5];
            tokio::io::AsyncReadExt::read_exact(&mut r, &mut got)
                .await
                .unwrap();
            assert_eq!(&got, b"still");
        })
    });
}

/// tokio's `copy_bidirectional` proxying between two Unix stream pairs, with a half-close
/// each way: the client's shutdown reaches the server as an end of stream, the server's
/// reply and its close come back, and the proxy returns the byte counts.
#[test]
fn copy_bidirectional_between_unix_streams_passes_half_closes() {
    within(|| {
        run(async {
            let (mut client, mut proxy_a) = UnixStream::pair().unwrap();
            let (mut proxy_b, server) = UnixStream::pair().unwrap();
            let proxy = gort::spawn(async move {
                tokio::io::copy_bidirectional(&mut proxy_a, &mut proxy_b).await
            });
            let request = vec![5u8; 300_000];
            let reply = vec![6u8; 200_000];
            let server = gort::spawn({
                let reply = reply.clone();
                async move {
                    let mut got = Vec::new();
                    let mut buf = [0; 8192];
                    while let n @ 1.. = server.read(&mut buf).await.unwrap() {
                        got.extend_from_slice(&buf[..n]);
                    }
                    server.write_all(&reply).await.unwrap();
                    got.len()
                } // dropped: closes
            });
            let writer = async {
                tokio::io::AsyncWriteExt::write_all(&mut client, &request)
                    .await
                    .unwrap();
                tokio::io::AsyncWriteExt::shutdown(&mut client)
                    .await
                    .unwrap();
            };
            writer.await;
            let mut got = Vec::new();
            tokio::io::AsyncReadExt::read_to_end(&mut client, &mut got)
                .await
                .unwrap();
            assert_eq!(got, reply);
            assert_eq!(server.await.unwrap(), request.len());
            let (up, down) = proxy.await.unwrap().unwrap();
            assert_eq!((up, down), (request.len() as u64, reply.len() as u64));
        })
    });
}
