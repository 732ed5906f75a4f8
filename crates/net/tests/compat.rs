//! The ecosystem's I/O traits on real sockets: a server echoing with tokio's `io::copy`
//! over `&TcpStream` halves, a client using futures-io's extension traits, and deadlines
//! still applying through the traits.
//!
//! Run: `cargo test -p gort-net --features tokio-io,futures-io --test compat`
#![cfg(all(feature = "tokio-io", feature = "futures-io"))]

use gort::net::{TcpListener, TcpStream};
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
