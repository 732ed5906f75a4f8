//! `TcpStream::split`: borrowed halves driving both directions at once, from threads of a
//! scope and from one task, and dropping a half leaving the socket open.

use gort::net::{ReadHalf, TcpListener, TcpStream, WriteHalf};
use gort::time::Instant;
use std::io::ErrorKind;
use std::time::Duration;

/// A connected pair: (client, server side).
async fn pair() -> (TcpStream, TcpStream) {
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let c = TcpStream::connect(l.local_addr().unwrap()).await.unwrap();
    let (s, _) = l.accept().await.unwrap();
    (c, s)
}

/// More than the socket buffers hold: each writer blocks until the other side reads.
fn payload(seed: u8) -> Vec<u8> {
    (0..2_000_000u32).map(|i| (i % 251) as u8 ^ seed).collect()
}

async fn write_then_close(w: WriteHalf<'_>, data: &[u8]) {
    w.set_write_deadline(Some(Instant::now() + Duration::from_secs(60)))
        .unwrap();
    w.write_all(data).await.unwrap();
    w.close_write().unwrap();
}

async fn read_to_end(r: ReadHalf<'_>) -> Vec<u8> {
    r.set_read_deadline(Some(Instant::now() + Duration::from_secs(60)))
        .unwrap();
    let (mut got, mut buf) = (Vec::new(), vec![0; 64 * 1024]);
    loop {
        match r.read(&mut buf).await.unwrap() {
            0 => return got,
            n => got.extend_from_slice(&buf[..n]),
        }
    }
}

#[test]
fn halves_are_send_sync_debug_and_unpin() {
    fn check<T: Send + Sync + Unpin + std::fmt::Debug>() {}
    check::<ReadHalf<'static>>();
    check::<WriteHalf<'static>>();
}

/// Four threads at once, each in its own `block_on`, each with one borrowed half: both
/// streams carry 2 MB each way, which neither side's buffers hold, so every half must make
/// progress while the others do.
#[test]
fn borrowed_halves_move_data_both_ways_from_four_threads_at_once() {
    let rt = gort::Runtime::new().unwrap();
    let (c, s) = rt.block_on(pair());
    let (up, down) = (payload(0), payload(0x5a));
    let (cr, cw) = c.split();
    let (sr, sw) = s.split();
    let (got_up, got_down) = std::thread::scope(|scope| {
        let h = rt.handle();
        scope.spawn(|| h.block_on(write_then_close(cw, &up)));
        scope.spawn(|| h.block_on(write_then_close(sw, &down)));
        let got_up = scope.spawn(|| h.block_on(read_to_end(sr)));
        let got_down = scope.spawn(|| h.block_on(read_to_end(cr)));
        (got_up.join().unwrap(), got_down.join().unwrap())
    });
    assert!(got_up == up, "client to server: {} bytes", got_up.len());
    assert!(
        got_down == down,
        "server to client: {} bytes",
        got_down.len()
    );
}

/// One task, two futures at once: an echo through the server's halves while the client's
/// halves write and read.
#[test]
fn borrowed_halves_echo_within_one_task() {
    gort::Runtime::new().unwrap().block_on(async {
        let (c, s) = pair().await;
        let server = gort::spawn(async move {
            let (r, w) = s.split();
            let mut buf = [0; 4096];
            loop {
                match r.read(&mut buf).await.unwrap() {
                    0 => break w.close_write().unwrap(),
                    n => w.write_all(&buf[..n]).await.unwrap(),
                }
            }
        });
        let data = payload(7);
        let (r, w) = c.split();
        let (_, got) = futures::future::join(write_then_close(w, &data), read_to_end(r)).await;
        server.await.unwrap();
        assert!(got == data, "{} bytes", got.len());
    });
}

/// The stream owns the socket: dropping a half, the write half included, neither closes it
/// nor shuts a direction down (unlike `OwnedWriteHalf`).
#[test]
fn dropping_the_borrowed_halves_leaves_the_stream_open() {
    gort::Runtime::new().unwrap().block_on(async {
        let (c, s) = pair().await;
        {
            let (_r, w) = s.split();
            w.write_all(b"a").await.unwrap();
        } // both halves go out of scope here
        c.set_read_deadline(Some(Instant::now() + Duration::from_millis(100)))
            .unwrap();
        let mut buf = [0; 8];
        assert_eq!(c.read(&mut buf).await.unwrap(), 1);
        let err = c.read(&mut buf).await.unwrap_err();
        assert_eq!(err.kind(), ErrorKind::TimedOut, "no end of stream");
        s.write_all(b"b").await.unwrap();
        c.write_all(b"c").await.unwrap();
        c.set_read_deadline(None).unwrap();
        c.read_exact(&mut buf[..1]).await.unwrap();
        s.read_exact(&mut buf[1..2]).await.unwrap();
        assert_eq!(&buf[..2], b"bc");
    });
}

/// Each half reaches the stream's own deadlines and addresses.
#[test]
fn halves_share_the_streams_deadlines_and_addresses() {
    gort::Runtime::new().unwrap().block_on(async {
        let (c, s) = pair().await;
        let (r, w) = s.split();
        assert_eq!(r.peer_addr().unwrap(), c.local_addr().unwrap());
        assert_eq!(w.local_addr().unwrap(), c.peer_addr().unwrap());
        assert_eq!(r.local_addr().unwrap(), w.local_addr().unwrap());
        assert_eq!(w.peer_addr().unwrap(), r.peer_addr().unwrap());
        r.set_read_deadline(Some(Instant::now() + Duration::from_millis(20)))
            .unwrap();
        let mut buf = [0; 1];
        let err = r.read_exact(&mut buf).await.unwrap_err();
        assert_eq!(err.kind(), ErrorKind::TimedOut);
        // The deadline is the stream's: it applies to the stream itself too.
        assert_eq!(
            s.read(&mut buf).await.unwrap_err().kind(),
            ErrorKind::TimedOut
        );
    });
}
