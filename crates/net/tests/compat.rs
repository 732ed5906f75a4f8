//! The ecosystem's I/O traits on real sockets: a server echoing with tokio's `io::copy`
//! over `&TcpStream` halves, a client using futures-io's extension traits, and deadlines
//! still applying through the traits.
//!
//! Run: `cargo test -p gort-net --features tokio-io,futures-io --test compat`
#![cfg(all(feature = "tokio-io", feature = "futures-io"))]

#[allow(dead_code)] // not every helper is used by this binary
#[path = "support/watchdog.rs"]
mod watchdog;

#[allow(dead_code)] // not every helper is used by this binary
#[path = "support/tcp.rs"]
mod tcp;

use gort::net::{ReadHalf, TcpListener, TcpStream, WriteHalf};
use gort::time::Instant;
use std::io::ErrorKind;
use std::sync::Arc;
use std::time::Duration;

#[test]
fn tokio_copy_echoes_to_a_futures_io_client() {
    gort::Runtime::new().unwrap().block_on(async {
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = l.local_addr().unwrap();
        let server = gort::spawn(async move {
            let (s, _) = l.accept().await.unwrap();
            let s = Arc::new(s);
            let (mut r, mut w) = (&*s, &*s);
            let n = tokio::io::copy(&mut r, &mut w).await.unwrap();
            tokio::io::AsyncWriteExt::shutdown(&mut w).await.unwrap();
            n
        });
        let c = Arc::new(TcpStream::connect(addr).await.unwrap());
        let data: Vec<u8> = (0..200_000).map(|i| (i % 241) as u8).collect();
        // Write in one task while this one reads: the echo must not fill both directions.
        let writer = {
            let (c, data) = (c.clone(), data.clone());
            gort::spawn(async move {
                let mut w = &*c;
                futures::AsyncWriteExt::write_all(&mut w, &data)
                    .await
                    .unwrap();
                futures::AsyncWriteExt::close(&mut w).await.unwrap();
            })
        };
        let mut got = Vec::new();
        futures::AsyncReadExt::read_to_end(&mut &*c, &mut got)
            .await
            .unwrap();
        writer.await.unwrap();
        assert!(got == data);
        assert_eq!(server.await.unwrap(), data.len() as u64);
    });
}

#[test]
fn deadlines_apply_through_the_traits() {
    gort::Runtime::new().unwrap().block_on(async {
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = l.local_addr().unwrap();
        let c = gort::spawn(async move { TcpStream::connect(addr).await.unwrap() });
        let (_s, _) = l.accept().await.unwrap();
        let mut c = c.await.unwrap();
        let deadline = Instant::now() + Duration::from_millis(20);
        c.set_read_deadline(Some(deadline)).unwrap();
        let mut buf = [0; 8];
        let err = tokio::io::AsyncReadExt::read(&mut c, &mut buf)
            .await
            .unwrap_err();
        assert_eq!(err.kind(), ErrorKind::TimedOut);
        assert!(Instant::now() >= deadline);
    });
}

/// A vectored write is one `sendmsg` taking every slice (tokio's `TcpStream`: a `writev`), not a write
/// of the first slice only: hyper asks `is_write_vectored` to queue a response's head and
/// body without copying them together.
#[test]
fn vectored_writes_take_every_slice_at_once() {
    use std::io::IoSlice;
    gort::Runtime::new().unwrap().block_on(async {
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let c = TcpStream::connect(l.local_addr().unwrap()).await.unwrap();
        let (s, _) = l.accept().await.unwrap();
        let (r, mut w) = c.into_split();
        assert!(tokio::io::AsyncWrite::is_write_vectored(&w));
        let slices = [
            IoSlice::new(b"head "),
            IoSlice::new(b""),
            IoSlice::new(b"body"),
        ];
        let n = tokio::io::AsyncWriteExt::write_vectored(&mut w, &slices)
            .await
            .unwrap();
        assert_eq!(n, 9);
        let slices = [IoSlice::new(b" and"), IoSlice::new(b" more")];
        let n = futures::AsyncWriteExt::write_vectored(&mut w, &slices)
            .await
            .unwrap();
        assert_eq!(n, 9);
        let c = r.reunite(w).unwrap();
        let mut s_ref = &s;
        let n = futures::AsyncWriteExt::write_vectored(&mut s_ref, &slices)
            .await
            .unwrap();
        assert_eq!(n, 9);
        assert!(tokio::io::AsyncWrite::is_write_vectored(&c));
        let mut got = [0; 18];
        s.read_exact(&mut got).await.unwrap();
        assert_eq!(&got, b"head body and more");
        c.read_exact(&mut got[..9]).await.unwrap();
        assert_eq!(&got[..9], b" and more");
    });
}

/// A read with no room returns at once through both traits, as `TcpStream::read` does (a
/// stream `recv` of 0 bytes would wait for data).
#[test]
fn reads_with_no_room_return_at_once() {
    gort::Runtime::new().unwrap().block_on(async {
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let mut c = TcpStream::connect(l.local_addr().unwrap()).await.unwrap();
        let (_s, _) = l.accept().await.unwrap();
        let n = tokio::io::AsyncReadExt::read(&mut c, &mut [])
            .await
            .unwrap();
        assert_eq!(n, 0);
        let n = futures::AsyncReadExt::read(&mut c, &mut []).await.unwrap();
        assert_eq!(n, 0);
    });
}

/// tokio's `AsyncRead` reads straight into the caller's uninitialized room (as tokio's
/// `TcpStream` does) instead of zeroing all of it first: hyper and tokio-util hand over the
/// whole spare capacity of their read buffer (8 KiB to 400 KiB for hyper) for every read, so
/// zeroing it cost a memset of that size per read however few bytes came.
#[test]
fn tokio_reads_initialize_only_the_bytes_received() {
    use std::mem::MaybeUninit;
    gort::Runtime::new().unwrap().block_on(async {
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let mut c = TcpStream::connect(l.local_addr().unwrap()).await.unwrap();
        let (s, _) = l.accept().await.unwrap();
        s.write_all(b"hello").await.unwrap();
        let mut room = vec![MaybeUninit::<u8>::uninit(); 256 * 1024];
        let mut buf = tokio::io::ReadBuf::uninit(&mut room);
        std::future::poll_fn(|cx| {
            tokio::io::AsyncRead::poll_read(std::pin::Pin::new(&mut c), cx, &mut buf)
        })
        .await
        .unwrap();
        assert_eq!(buf.filled(), b"hello");
        assert_eq!(
            buf.initialized().len(),
            5,
            "the rest of the room was zeroed"
        );
        // An owned read half, and end of stream, the same way.
        let (mut r, _w) = c.into_split();
        drop(s);
        let mut buf = tokio::io::ReadBuf::uninit(&mut room);
        std::future::poll_fn(|cx| {
            tokio::io::AsyncRead::poll_read(std::pin::Pin::new(&mut r), cx, &mut buf)
        })
        .await
        .unwrap();
        assert_eq!(buf.filled().len(), 0);
        assert_eq!(buf.initialized().len(), 0);
    });
}

/// The borrowed halves of `TcpStream::split` through both trait families at once: a server
/// echoing with tokio's `io::copy` from its read half to its write half, and a client whose
/// halves write and read concurrently with futures' extension traits, in one task.
#[test]
fn borrowed_halves_echo_through_tokio_copy_to_futures_io_halves() {
    use futures::{AsyncReadExt, AsyncWriteExt};
    gort::Runtime::new().unwrap().block_on(async {
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = l.local_addr().unwrap();
        let server = gort::spawn(async move {
            let (s, _) = l.accept().await.unwrap();
            // The path form: `s.split()` here would be `AsyncReadExt::split` (next test).
            let (mut r, mut w) = TcpStream::split(&s);
            let n = tokio::io::copy(&mut r, &mut w).await.unwrap();
            tokio::io::AsyncWriteExt::shutdown(&mut w).await.unwrap();
            n
        });
        let c = TcpStream::connect(addr).await.unwrap();
        let data: Vec<u8> = (0..1_000_000).map(|i| (i % 239) as u8).collect();
        let (mut r, mut w): (ReadHalf<'_>, WriteHalf<'_>) = TcpStream::split(&c);
        let send = async {
            w.write_all(&data).await.unwrap();
            w.close().await.unwrap();
        };
        let mut got = Vec::new();
        let recv = r.read_to_end(&mut got);
        let (_, n) = futures::future::join(send, recv).await;
        assert_eq!(n.unwrap(), data.len());
        assert!(got == data);
        assert_eq!(server.await.unwrap(), data.len() as u64);
    });
}

/// The caveat `TcpStream::split`'s docs give: with futures' `AsyncReadExt` in scope, Rust
/// resolves `split()` on an owned stream to the trait's by-value `split`, before the inherent
/// by-reference one.
#[test]
fn an_owned_streams_split_with_futures_ext_in_scope_is_the_traits() {
    use futures::AsyncReadExt;
    gort::Runtime::new().unwrap().block_on(async {
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let c = TcpStream::connect(l.local_addr().unwrap()).await.unwrap();
        let (s, _) = l.accept().await.unwrap();
        // On a `&TcpStream` the inherent `split(&self)` comes first.
        let by_ref = &s;
        let _inherent: (ReadHalf<'_>, WriteHalf<'_>) = by_ref.split();
        let _traits: (
            futures::io::ReadHalf<TcpStream>,
            futures::io::WriteHalf<TcpStream>,
        ) = c.split();
    });
}

/// Tokio's `shutdown_after_tcp_reset` through both adapters: after the peer reset the
/// connection, tokio's `shutdown` and futures' `close` both succeed (tokio#4665: the
/// `NotConnected` that `shutdown(2)` gives there is no error to a program closing its side),
/// so the same program does not fail through one adapter and pass through the other.
#[test]
fn closing_after_the_peers_reset_succeeds_through_both_adapters() {
    watchdog::within(|| {
        gort::Runtime::new().unwrap().block_on(async {
            for adapter in ["tokio", "futures"] {
                let (mut c, s) = tcp::tcp_pair().await;
                tcp::linger_zero(&s);
                drop(s); // a reset
                         // Wait until the reset has arrived: a read sees it.
                let mut buf = [0; 8];
                let _ = c.read(&mut buf).await;
                let closed = match adapter {
                    "tokio" => tokio::io::AsyncWriteExt::shutdown(&mut c).await,
                    _ => futures::AsyncWriteExt::close(&mut c).await,
                };
                match closed {
                    Ok(()) => {}
                    Err(e) if e.kind() == ErrorKind::ConnectionReset => {}
                    Err(e) => panic!("{adapter}: closing after a reset: {e:?}"),
                }
            }
        })
    });
}
