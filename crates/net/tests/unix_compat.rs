//! tokio's and futures-io's I/O traits on Unix streams: a `pair()` whose one end echoes with
//! tokio's `io::copy` over its owned halves, whose other end is driven through futures-io
//! on its borrowed halves; a deadline still applies through the traits.
//!
//! Run: `cargo test -p gort-net --features tokio-io,futures-io --test unix_compat`
#![cfg(all(feature = "tokio-io", feature = "futures-io"))]

use gort::net::UnixStream;
use gort::time::Instant;
use std::io::ErrorKind;
use std::time::Duration;

#[test]
fn tokio_copy_over_owned_halves_echoes_to_futures_io_borrowed_halves() {
    gort::Runtime::new().unwrap().block_on(async {
        let (server, client) = UnixStream::pair().unwrap();
        let echo = gort::spawn(async move {
            let (mut r, mut w) = server.into_split();
            let n = tokio::io::copy(&mut r, &mut w).await.unwrap();
            tokio::io::AsyncWriteExt::shutdown(&mut w).await.unwrap();
            n
        });
        let data: Vec<u8> = (0..300_000).map(|i| (i % 239) as u8).collect();
        let (mut r, mut w) = UnixStream::split(&client);
        let write = async {
            futures::AsyncWriteExt::write_all(&mut w, &data)
                .await
                .unwrap();
            futures::AsyncWriteExt::close(&mut w).await.unwrap();
        };
        let mut got = Vec::new();
        let read = futures::AsyncReadExt::read_to_end(&mut r, &mut got);
        let ((), read) = futures::join!(write, read);
        let echoed = echo.await.unwrap();
        assert!(got == data, "the echo differs");
        assert!(read.unwrap() == data.len() && echoed == data.len() as u64);
    });
}

#[test]
fn a_read_deadline_applies_through_tokios_read() {
    gort::Runtime::new().unwrap().block_on(async {
        let (mut a, _b) = UnixStream::pair().unwrap();
        let deadline = Instant::now() + Duration::from_millis(20);
        a.set_read_deadline(Some(deadline)).unwrap();
        let mut buf = Vec::with_capacity(64);
        let err = tokio::io::AsyncReadExt::read_buf(&mut a, &mut buf)
            .await
            .unwrap_err();
        assert_eq!(err.kind(), ErrorKind::TimedOut);
        assert!(Instant::now() >= deadline);
    });
}
