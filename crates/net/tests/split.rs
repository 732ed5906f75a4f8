//! `TcpStream::into_split`: owned halves in different tasks, their deadlines, end of stream
//! when the write half is dropped, and (with the I/O features) the traits codecs need.

use gort::net::{OwnedReadHalf, OwnedWriteHalf, TcpListener, TcpStream};
use gort::time::Instant;
use std::io::ErrorKind;
use std::time::Duration;

fn run<F: std::future::Future>(f: F) -> F::Output {
    gort::Runtime::new().unwrap().block_on(f)
}

/// A connected pair: (client, server side).
async fn pair() -> (TcpStream, TcpStream) {
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let c = TcpStream::connect(l.local_addr().unwrap()).await.unwrap();
    let (s, _) = l.accept().await.unwrap();
    (c, s)
}

#[test]
fn halves_are_send_sync_debug_and_unpin() {
    fn check<T: Send + Sync + Unpin + std::fmt::Debug + 'static>() {}
    check::<OwnedReadHalf>();
    check::<OwnedWriteHalf>();
}

#[test]
fn halves_echo_from_two_tasks_and_dropping_the_writer_ends_the_stream() {
    run(async {
        let (c, s) = pair().await;
        let (reader, writer) = s.into_split();
        assert_eq!(reader.peer_addr().unwrap(), c.local_addr().unwrap());
        assert_eq!(writer.local_addr().unwrap(), c.peer_addr().unwrap());
        let (tx, rx) = gort::chan::bounded::<Vec<u8>>(4);
        let read_task = gort::spawn(async move {
            let mut buf = [0; 1024];
            loop {
                match reader.read(&mut buf).await.unwrap() {
                    0 => return reader,
                    n => tx.send(buf[..n].to_vec()).await.unwrap(),
                }
            }
        });
        let write_task = gort::spawn(async move {
            while let Some(chunk) = rx.recv().await {
                writer.write_all(&chunk).await.unwrap();
            }
            // `writer` drops here: the client reads end of stream.
        });
        c.write_all(b"ping").await.unwrap();
        let mut got = [0; 4];
        c.read_exact(&mut got).await.unwrap();
        assert_eq!(&got, b"ping");
        c.shutdown(std::net::Shutdown::Write).unwrap();
        let reader = read_task.await.unwrap(); // end of stream: the channel closes
        write_task.await.unwrap();
        assert_eq!(c.read(&mut got).await.unwrap(), 0);
        drop(reader);
    });
}

#[test]
fn each_half_keeps_its_own_deadline() {
    run(async {
        let (c, s) = pair().await;
        let (reader, writer) = s.into_split();
        reader
            .set_read_deadline(Some(Instant::now() + Duration::from_millis(20)))
            .unwrap();
        writer
            .set_write_deadline(Some(Instant::now() + Duration::from_secs(60)))
            .unwrap();
        let mut buf = [0; 8];
        let err = reader.read(&mut buf).await.unwrap_err();
        assert_eq!(err.kind(), ErrorKind::TimedOut);
        // The read deadline does not touch the write half.
        writer.write_all(b"ok").await.unwrap();
        c.read_exact(&mut buf[..2]).await.unwrap();
        assert_eq!(&buf[..2], b"ok");
        reader.set_read_deadline(None).unwrap();
        c.write_all(b"x").await.unwrap();
        reader.read_exact(&mut buf[..1]).await.unwrap();
    });
}

#[cfg(feature = "tokio-io")]
#[test]
fn tokio_traits_on_halves_in_spawned_tasks() {
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
    run(async {
        let (c, s) = pair().await;
        let (reader, mut writer) = s.into_split();
        // A line echo: each half lives in its own task, as codecs need.
        let (tx, rx) = gort::chan::unbounded::<String>();
        let read_task = gort::spawn(async move {
            let mut lines = BufReader::new(reader).lines();
            while let Some(line) = lines.next_line().await.unwrap() {
                tx.send(line).await.unwrap();
            }
        });
        let write_task = gort::spawn(async move {
            while let Some(line) = rx.recv().await {
                writer
                    .write_all(format!("{line}!\n").as_bytes())
                    .await
                    .unwrap();
            }
            writer.shutdown().await.unwrap();
        });
        let (cr, cw) = c.into_split();
        cw.write_all(b"a\nb\n").await.unwrap();
        drop(cw);
        let mut replies = BufReader::new(cr).lines();
        assert_eq!(replies.next_line().await.unwrap().as_deref(), Some("a!"));
        assert_eq!(replies.next_line().await.unwrap().as_deref(), Some("b!"));
        assert_eq!(replies.next_line().await.unwrap(), None);
        read_task.await.unwrap();
        write_task.await.unwrap();
    });
}

#[cfg(feature = "futures-io")]
#[test]
fn futures_io_traits_on_halves() {
    use futures::{AsyncReadExt, AsyncWriteExt};
    run(async {
        let (c, s) = pair().await;
        let (mut reader, mut writer) = s.into_split();
        let echo = gort::spawn(async move {
            let mut buf = Vec::new();
            reader.read_to_end(&mut buf).await.unwrap();
            writer.write_all(&buf).await.unwrap();
            writer.close().await.unwrap();
        });
        let (mut cr, mut cw) = c.into_split();
        cw.write_all(b"round trip").await.unwrap();
        cw.close().await.unwrap();
        let mut back = Vec::new();
        cr.read_to_end(&mut back).await.unwrap();
        assert_eq!(back, b"round trip");
        echo.await.unwrap();
    });
}
