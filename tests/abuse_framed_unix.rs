//! tokio-util's codecs over gort's Unix streams, cut off by timeouts and deadlines: a
//! `FramedWrite` send into a full socket given up by a `timeout` and flushed later, a
//! `FramedRead` whose read deadline passes mid-frame, and the two halves' codecs driven from
//! two runtimes. No byte may be lost or duplicated, nothing may hang.

mod support;

use bytes::Bytes;
use futures::{SinkExt, StreamExt};
use gort::net::UnixStream;
use gort::time::Instant;
use std::io::ErrorKind;
use std::time::Duration;
use support::within;
use tokio_util::codec::{FramedRead, FramedWrite, LengthDelimitedCodec};

fn frame(i: u32, len: usize) -> Bytes {
    let mut v = vec![(i % 251) as u8; len];
    v[..4].copy_from_slice(&i.to_le_bytes());
    Bytes::from(v)
}

/// Sends of 256 KiB frames into a peer that does not read, each given up by a `timeout`
/// once the socket is full; then the peer reads while the sink is flushed: every frame
/// comes whole and in order (the codec kept what the cancelled sends had not written).
#[test]
fn framed_sends_cut_off_by_timeouts_then_flushed_lose_nothing() {
    within(|| {
        gort::Runtime::new().unwrap().block_on(async {
            let (c, s) = UnixStream::pair().unwrap();
            let (_cr, cw) = c.into_split();
            let mut sink = FramedWrite::new(cw, LengthDelimitedCodec::new());
            let mut sent = 0u32;
            let mut cut = 0;
            while cut < 6 {
                // `feed` hands the frame to the codec once it has room; given up before
                // that, the frame was not taken (and is made again).
                let feed = sink.feed(frame(sent, 256 << 10));
                match gort::time::timeout(Duration::from_millis(20), feed).await {
                    Ok(r) => {
                        r.unwrap();
                        sent += 1;
                    }
                    Err(_) => {
                        cut += 1;
                        continue;
                    }
                }
                let flush = SinkExt::<Bytes>::flush(&mut sink);
                if gort::time::timeout(Duration::from_millis(20), flush)
                    .await
                    .is_err()
                {
                    cut += 1; // the codec keeps what the socket did not take
                }
            }
            let reader = gort::spawn(async move {
                let mut frames = FramedRead::new(s, LengthDelimitedCodec::new());
                let mut got = 0u32;
                while let Some(f) = frames.next().await {
                    let f = f.unwrap();
                    assert_eq!(f, frame(got, 256 << 10), "frame {got}");
                    got += 1;
                }
                got
            });
            SinkExt::<Bytes>::flush(&mut sink).await.unwrap();
            SinkExt::<Bytes>::close(&mut sink).await.unwrap(); // shuts the write half down: the reader's end
            drop(sink);
            assert_eq!(reader.await.unwrap(), sent);
        })
    });
}

/// A read deadline that passes while a `FramedRead` holds half a frame fails that read with
/// `TimedOut`; nothing read is lost: the codec holds the part of the frame after its length
/// (`into_parts`), and the stream reads on where it was once the deadline is cleared.
#[test]
fn a_read_deadline_passing_mid_frame_fails_with_timed_out_and_loses_nothing() {
    within(|| {
        gort::Runtime::new().unwrap().block_on(async {
            let (c, s) = UnixStream::pair().unwrap();
            let whole = {
                let mut v = 10u32.to_be_bytes().to_vec();
                v.extend_from_slice(b"0123456789");
                v
            };
            s.write_all(&whole[..7]).await.unwrap();
            c.set_read_deadline(Some(Instant::now() + Duration::from_millis(30)))
                .unwrap();
            let mut frames = FramedRead::new(c, LengthDelimitedCodec::new());
            let e = frames.next().await.unwrap().unwrap_err();
            assert_eq!(e.kind(), ErrorKind::TimedOut, "{e}");
            let parts = frames.into_parts();
            // The length prefix is in the decoder's state, the payload begun in its buffer.
            assert_eq!(&parts.read_buf[..], &whole[4..7], "the half frame is kept");
            parts.io.set_read_deadline(None).unwrap();
            s.write_all(&whole[7..]).await.unwrap();
            let mut rest = [0; 7];
            parts.io.read_exact(&mut rest).await.unwrap();
            assert_eq!(&rest, &whole[7..]);
        })
    });
}

/// The read half's `FramedRead` on runtime B, the write half's `FramedWrite` on runtime A,
/// echoing through a peer on A: 2,000 frames of mixed sizes each way, in order.
#[test]
fn codecs_over_halves_driven_from_two_runtimes() {
    within(|| {
        let a = gort::Runtime::new().unwrap();
        let b = gort::Runtime::new().unwrap();
        let (c, s) = a.block_on(async { UnixStream::pair().unwrap() });
        let (cr, cw) = c.into_split();
        let echo = a.spawn(async move {
            let (sr, sw) = s.into_split();
            let mut frames = FramedRead::new(sr, LengthDelimitedCodec::new());
            let mut out = FramedWrite::new(sw, LengthDelimitedCodec::new());
            while let Some(f) = frames.next().await {
                out.send(f.unwrap().freeze()).await.unwrap();
            }
        });
        let reader = b.spawn(async move {
            let mut frames = FramedRead::new(cr, LengthDelimitedCodec::new());
            let mut got = 0u32;
            while let Some(f) = frames.next().await {
                let f = f.unwrap();
                assert_eq!(f, frame(got, 4 + (got as usize * 97) % 70_000));
                got += 1;
            }
            got
        });
        a.block_on(async move {
            let mut out = FramedWrite::new(cw, LengthDelimitedCodec::new());
            for i in 0..2_000u32 {
                out.send(frame(i, 4 + (i as usize * 97) % 70_000))
                    .await
                    .unwrap();
            }
            SinkExt::<Bytes>::close(&mut out).await.unwrap();
        });
        a.block_on(echo).unwrap();
        assert_eq!(b.block_on(reader).unwrap(), 2_000);
    });
}
