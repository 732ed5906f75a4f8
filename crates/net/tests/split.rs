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

/// Reads until `conn`'s read deadline, `wait` from now: what arrived, and whether the
/// stream ended.
async fn read_for(conn: &TcpStream, wait: Duration) -> (Vec<u8>, bool) {
    conn.set_read_deadline(Some(Instant::now() + wait)).unwrap();
    let (mut got, mut buf) = (Vec::new(), [0; 64]);
    loop {
        match conn.read(&mut buf).await {
            Ok(0) => return (got, true),
            Ok(n) => got.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == ErrorKind::TimedOut => return (got, false),
            Err(e) => panic!("{e}"),
        }
    }
}

#[test]
fn reunited_halves_are_the_stream_again_still_writable() {
    run(async {
        let (c, s) = pair().await;
        let (reader, writer) = s.into_split();
        writer.write_all(b"a").await.unwrap();
        let s = reader.reunite(writer).unwrap();
        // The write half's drop inside `reunite` did not shut the stream down.
        let (got, ended) = read_for(&c, Duration::from_millis(100)).await;
        assert_eq!((got.as_slice(), ended), (&b"a"[..], false));
        s.write_all(b"b").await.unwrap();
        c.write_all(b"c").await.unwrap();
        let mut buf = [0; 1];
        s.read_exact(&mut buf).await.unwrap();
        assert_eq!(&buf, b"c");
        // From the write side too; dropping the stream then ends it for the peer.
        let (reader, writer) = s.into_split();
        let s = writer.reunite(reader).unwrap();
        drop(s);
        let (got, ended) = read_for(&c, Duration::from_secs(10)).await;
        assert_eq!((got.as_slice(), ended), (&b"b"[..], true));
    });
}

#[test]
fn halves_of_different_streams_come_back_in_the_error_and_still_work() {
    run(async {
        let (c1, s1) = pair().await;
        let (c2, s2) = pair().await;
        let (r1, w1) = s1.into_split();
        let (r2, w2) = s2.into_split();
        let err = r1.reunite(w2).unwrap_err();
        assert_eq!(
            err.to_string(),
            "tried to reunite halves that are not from the same socket"
        );
        let boxed: Box<dyn std::error::Error + Send + Sync> = Box::new(err);
        let err = *boxed.downcast::<gort::net::ReuniteError>().unwrap();
        let gort::net::ReuniteError(r1, w2) = err;
        // Both halves are as they were: r1 reads stream 1, w2 writes stream 2.
        c1.write_all(b"1").await.unwrap();
        let mut buf = [0; 1];
        r1.read_exact(&mut buf).await.unwrap();
        assert_eq!(&buf, b"1");
        w2.write_all(b"2").await.unwrap();
        c2.read_exact(&mut buf).await.unwrap();
        assert_eq!(&buf, b"2");
        // And from the write side: the error holds (read half, write half) as well.
        let gort::net::ReuniteError(r2, w1) = w1.reunite(r2).unwrap_err();
        assert_eq!(r2.local_addr().unwrap(), c2.peer_addr().unwrap());
        assert_eq!(w1.local_addr().unwrap(), c1.peer_addr().unwrap());
        let (s1, s2) = (r1.reunite(w1).unwrap(), w2.reunite(r2).unwrap());
        assert_eq!(s1.peer_addr().unwrap(), c1.local_addr().unwrap());
        assert_eq!(s2.peer_addr().unwrap(), c2.local_addr().unwrap());
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

/// Go's `CloseWrite` on a held write half: the peer sees end of stream while the half lives,
/// and the read half keeps reading the peer's answer.
#[test]
fn shutting_the_write_half_down_ends_the_peers_stream_while_the_half_is_held() {
    run(async {
        let (c, s) = pair().await;
        let (reader, writer) = s.into_split();
        writer.write_all(b"last words").await.unwrap();
        writer.close_write().unwrap();
        let mut got = Vec::new();
        let mut buf = [0; 64];
        c.set_read_deadline(Some(Instant::now() + Duration::from_secs(10)))
            .unwrap();
        loop {
            match c.read(&mut buf).await.unwrap() {
                0 => break,
                n => got.extend_from_slice(&buf[..n]),
            }
        }
        assert_eq!(got, b"last words");
        c.write_all(b"answer").await.unwrap();
        let mut answer = [0; 6];
        reader.read_exact(&mut answer).await.unwrap();
        assert_eq!(&answer, b"answer");
        let err = writer.write_all(b"too late").await.unwrap_err();
        assert_eq!(err.kind(), ErrorKind::BrokenPipe);
        drop(writer); // a second shutdown on drop: nothing to report
        drop(reader);
    });
}
