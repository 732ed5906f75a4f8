//! Tokio's `tests/io_copy.rs` and `tests/io_split.rs`, ported onto gort's `TcpStream` through
//! the `tokio-io` adapters (`tokio::io::{copy, copy_buf, split}`): each test keeps its Tokio
//! name and a comment naming its file, and runs under a watchdog on a runtime of 2 Ps. Tokio's
//! mock reader/writer is a real socket pair here.
//!
//! Skipped: `retry_on_io_interrupted` (a `tokio_test::io` mock injecting `Interrupted`; no
//! socket returns it to a non-blocking read) and `copy_buf_is_cooperative` over a byte slice
//! (Tokio's budget is Tokio's runtime's: under gort a copy between in-memory buffers never
//! yields; ported instead with a gort socket as the reader, whose reads spend gort's budget).

#[path = "support/mock_task.rs"]
mod mock_task;
mod support;

use gort::net::{TcpListener, TcpStream};
use mock_task::rt_test;
use std::io::Write;
use tokio::io::{self, AsyncReadExt, AsyncWriteExt};

async fn make_socketpair() -> (TcpStream, TcpStream) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (c1, c2) = tokio::join!(TcpStream::connect(addr), listener.accept());
    (c1.unwrap(), c2.unwrap().0)
}

/// Shuts the writing end `w` down and reads all its peer `r` got, to the end of stream.
async fn shut_and_read(mut w: TcpStream, mut r: TcpStream) -> Vec<u8> {
    AsyncWriteExt::shutdown(&mut w).await.unwrap();
    let mut got = Vec::new();
    AsyncReadExt::read_to_end(&mut r, &mut got).await.unwrap();
    got
}

// io_copy.rs (`copy`: all of a stream, to its end, into a writer)
#[test]
fn copy() {
    rt_test(2, false, || async {
        let (mut a, mut b) = make_socketpair().await;
        let data: Vec<u8> = (0..1 << 20).map(|i| (i % 251) as u8).collect();
        let expected = data.clone();
        let writer = gort::spawn(async move {
            AsyncWriteExt::write_all(&mut a, &data).await.unwrap();
            AsyncWriteExt::shutdown(&mut a).await.unwrap();
        });
        let mut out = Vec::new();
        let n = io::copy(&mut b, &mut out).await.unwrap();
        writer.await.unwrap();
        assert_eq!(n as usize, expected.len());
        assert!(out == expected, "bytes differ");
    });
}

// io_copy.rs (`proxy`: `take(1024)` of a socket with 512 bytes waiting and 512 more to come,
// copied into another socket)
#[test]
fn proxy() {
    rt_test(2, false, || async {
        let (mut src_w, src_r) = make_socketpair().await;
        let (mut dst_w, dst_r) = make_socketpair().await;
        AsyncWriteExt::write_all(&mut src_w, &[0x42; 512])
            .await
            .unwrap();
        let more = gort::spawn(async move {
            gort::time::sleep(std::time::Duration::from_millis(5)).await;
            AsyncWriteExt::write_all(&mut src_w, &[0x43; 1024])
                .await
                .unwrap();
            src_w
        });
        let mut rd = src_r.take(1024);
        let n = io::copy(&mut rd, &mut dst_w).await.unwrap();
        assert_eq!(n, 1024);
        let got = shut_and_read(dst_w, dst_r).await;
        assert_eq!(got.len(), 1024);
        assert!(got[..512].iter().all(|&b| b == 0x42));
        assert!(got[512..].iter().all(|&b| b == 0x43));
        drop(more.await.unwrap());
    });
}

// io_copy.rs (`proxy_buf`: as `proxy`, through a `BufReader` and `copy_buf`)
#[test]
fn proxy_buf() {
    rt_test(2, false, || async {
        let (mut src_w, src_r) = make_socketpair().await;
        let (mut dst_w, dst_r) = make_socketpair().await;
        AsyncWriteExt::write_all(&mut src_w, &[0x42; 2048])
            .await
            .unwrap();
        let mut rd = io::BufReader::new(src_r).take(1024);
        let n = io::copy_buf(&mut rd, &mut dst_w).await.unwrap();
        assert_eq!(n, 1024);
        let got = shut_and_read(dst_w, dst_r).await;
        assert_eq!(got, vec![0x42; 1024]);
    });
}

// io_copy.rs (`copy_is_cooperative`, with a gort socket that always has data as the reader:
// its reads spend gort's budget, so the endless copy lets the other arm run)
#[test]
fn copy_is_cooperative() {
    rt_test(1, false, || async {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let s = stop.clone();
        let feeder = std::thread::spawn(move || {
            let mut c = std::net::TcpStream::connect(addr).unwrap();
            let buf = [7u8; 64 * 1024];
            while !s.load(std::sync::atomic::Ordering::SeqCst) {
                if c.write_all(&buf).is_err() {
                    break;
                }
            }
        });
        let (mut reader, _) = listener.accept().await.unwrap();
        // Let the socket's buffer fill, so reads are ready for a while.
        gort::time::sleep(std::time::Duration::from_millis(20)).await;
        gort::select! {
            biased;
            _ = async {
                loop {
                    let _ = io::copy(&mut reader, &mut io::sink()).await;
                }
            } => {},
            _ = gort::task::yield_now() => {}
        }
        stop.store(true, std::sync::atomic::Ordering::SeqCst);
        drop(reader);
        feeder.join().unwrap();
    });
}

// io_split.rs (`split_stream_id`, `unsplit_ok`, `method_delegation` on a socket)
#[test]
fn split_stream_id() {
    rt_test(2, false, || async {
        let (a, b) = make_socketpair().await;
        let (r1, w1) = io::split(a);
        let (r2, w2) = io::split(b);
        assert!(r1.is_pair_of(&w1));
        assert!(!r1.is_pair_of(&w2));
        assert!(r2.is_pair_of(&w2));
        assert!(!r2.is_pair_of(&w1));
        // unsplit_ok
        let a = r1.unsplit(w1);
        let b = r2.unsplit(w2);
        assert_eq!(a.local_addr().unwrap(), b.peer_addr().unwrap());
    });
}

// io_split.rs
#[test]
fn unsplit_err1() {
    rt_test(2, false, || async {
        let (a, b) = make_socketpair().await;
        let (r, _w) = io::split(a);
        let (_r, w) = io::split(b);
        let res = std::panic::AssertUnwindSafe(async move { r.unsplit(w) });
        let caught = futures::FutureExt::catch_unwind(res).await;
        assert!(
            caught.is_err(),
            "unsplit of halves of two streams did not panic"
        );
    });
}

// io_split.rs
#[test]
fn method_delegation() {
    rt_test(2, false, || async {
        let (a, b) = make_socketpair().await;
        let (mut r, mut w) = io::split(a);
        let (mut br, mut bw) = io::split(b);
        bw.write_all(b"z").await.unwrap();
        let mut buf = [0; 1];
        assert_eq!(1, r.read(&mut buf).await.unwrap());
        assert_eq!(b'z', buf[0]);
        assert_eq!(1, w.write(b"x").await.unwrap());
        let n = w
            .write_vectored(&[std::io::IoSlice::new(b"yy")])
            .await
            .unwrap();
        assert!(n >= 1);
        w.write_all(&b"yy"[n..]).await.unwrap();
        assert!(w.flush().await.is_ok());
        assert!(w.shutdown().await.is_ok());
        let mut got = Vec::new();
        br.read_to_end(&mut got).await.unwrap();
        assert_eq!(got, b"xyy");
    });
}
