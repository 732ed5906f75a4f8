//! Owned halves of a stream, [`TcpStream`] or [`UnixStream`] (tokio's `into_split`): a
//! reader task and a writer task each own one, with the `'static` I/O trait implementations
//! that codecs need. Generic over the [`Stream`]; `S` defaults to `TcpStream`.

use crate::stream::Stream;
use crate::{TcpStream, UnixStream};
use gort_time::Instant;
use std::io;
use std::net::Shutdown;
use std::sync::Arc;

impl TcpStream {
    /// Splits the stream into a read half and a write half that can move to different tasks
    /// (tokio's `into_split`). Both keep the socket open; it closes when both are dropped.
    /// Dropping the write half shuts the write direction down, so the peer reads end of
    /// stream once the writer is done, as with tokio.
    ///
    /// `TcpStream`'s methods take `&self`, so `Arc<TcpStream>` already serves tasks that call
    /// them; the halves are for what needs an owned reader or writer: with the `tokio-io` or
    /// `futures-io` feature, [`OwnedReadHalf`] implements `AsyncRead` and [`OwnedWriteHalf`]
    /// `AsyncWrite` (e.g. for tokio-util's `FramedRead` and `FramedWrite`).
    ///
    /// # Examples
    ///
    /// ```
    /// use gort::net::{TcpListener, TcpStream};
    /// use gort::time::Instant;
    /// use std::time::Duration;
    ///
    /// gort::Runtime::new().unwrap().block_on(async {
    ///     let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    ///     let addr = listener.local_addr().unwrap();
    ///     gort::spawn(async move {
    ///         let (conn, _) = listener.accept().await.unwrap();
    ///         let (reader, writer) = conn.into_split();
    ///         // The writer task ends after one line; dropping its half sends end of stream.
    ///         gort::spawn(async move { writer.write_all(b"hello\n").await.unwrap() });
    ///         reader.set_read_deadline(Some(Instant::now() + Duration::from_secs(5))).unwrap();
    ///         let _ = reader.read(&mut [0; 16]).await;
    ///     });
    ///     let conn = TcpStream::connect(addr).await.unwrap();
    ///     let mut got = Vec::new();
    ///     let mut buf = [0; 16];
    ///     loop {
    ///         match conn.read(&mut buf).await.unwrap() {
    ///             0 => break,
    ///             n => got.extend_from_slice(&buf[..n]),
    ///         }
    ///     }
    ///     assert_eq!(got, b"hello\n");
    /// });
    /// ```
    pub fn into_split(self) -> (OwnedReadHalf, OwnedWriteHalf) {
        into_split(self)
    }
}

impl UnixStream {
    /// Splits the stream into owned halves, as [`TcpStream::into_split`]: dropping the
    /// write half shuts writing down, [`OwnedReadHalf::reunite`] puts them back together.
    ///
    /// # Examples
    ///
    /// ```
    /// use gort::net::{OwnedReadHalf, OwnedWriteHalf, UnixStream};
    ///
    /// gort::Runtime::new().unwrap().block_on(async {
    ///     let (a, b) = UnixStream::pair().unwrap();
    ///     let (reader, writer): (OwnedReadHalf<UnixStream>, OwnedWriteHalf<UnixStream>) =
    ///         a.into_split();
    ///     gort::spawn(async move { writer.write_all(b"bye").await.unwrap() }).await.unwrap();
    ///     let mut buf = [0; 8];
    ///     assert_eq!(b.read(&mut buf).await.unwrap(), 3);
    ///     assert_eq!(b.read(&mut buf).await.unwrap(), 0); // the write half was dropped
    ///     b.write_all(b"ok").await.unwrap(); // the other direction stays open
    ///     assert_eq!(reader.read(&mut buf).await.unwrap(), 2);
    /// });
    /// ```
    pub fn into_split(self) -> (OwnedReadHalf<UnixStream>, OwnedWriteHalf<UnixStream>) {
        into_split(self)
    }
}

fn into_split<S: Stream>(stream: S) -> (OwnedReadHalf<S>, OwnedWriteHalf<S>) {
    let stream = Arc::new(stream);
    let read = OwnedReadHalf {
        stream: stream.clone(),
    };
    let write = OwnedWriteHalf {
        stream,
        shutdown_on_drop: true,
    };
    (read, write)
}

/// Puts two halves back together, or gives them back if they are of different streams.
fn reunite<S: Stream>(
    read: OwnedReadHalf<S>,
    mut write: OwnedWriteHalf<S>,
) -> Result<S, ReuniteError<S>> {
    if !Arc::ptr_eq(&read.stream, &write.stream) {
        return Err(ReuniteError(read, write));
    }
    write.shutdown_on_drop = false; // the stream lives on, writable
    drop(write);
    // The two halves held the only references: nothing else clones the `Arc`.
    let stream = Arc::try_unwrap(read.stream);
    Ok(stream.expect("gort: a stream's halves hold the only references to it"))
}

/// The error of [`OwnedReadHalf::reunite`] and [`OwnedWriteHalf::reunite`] given halves of
/// two different streams: it holds both, unchanged (tokio's `ReuniteError`).
///
/// # Examples
///
/// ```
/// use gort::net::{ReuniteError, TcpListener, TcpStream};
///
/// gort::Runtime::new().unwrap().block_on(async {
///     let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
///     let a = TcpStream::connect(listener.local_addr().unwrap()).await.unwrap();
///     let b = TcpStream::connect(listener.local_addr().unwrap()).await.unwrap();
///     let (a_read, _a_write) = a.into_split();
///     let (_b_read, b_write) = b.into_split();
///     let ReuniteError(a_read, b_write) = a_read.reunite(b_write).unwrap_err();
///     assert_ne!(a_read.local_addr().unwrap(), b_write.local_addr().unwrap());
/// });
/// ```
#[derive(Debug)]
pub struct ReuniteError<S: Stream = TcpStream>(pub OwnedReadHalf<S>, pub OwnedWriteHalf<S>);

impl<S: Stream> std::fmt::Display for ReuniteError<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("tried to reunite halves that are not from the same socket")
    }
}

impl<S: Stream> std::error::Error for ReuniteError<S> {}

/// The read half of a stream, from [`TcpStream::into_split`] or [`UnixStream::into_split`].
///
/// # Examples
///
/// ```
/// use gort::net::{OwnedReadHalf, TcpListener, TcpStream};
///
/// async fn first_byte(reader: OwnedReadHalf) -> std::io::Result<u8> {
///     let mut b = [0];
///     reader.read_exact(&mut b).await?;
///     Ok(b[0])
/// }
///
/// gort::Runtime::new().unwrap().block_on(async {
///     let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
///     let client = TcpStream::connect(listener.local_addr().unwrap()).await.unwrap();
///     let (conn, _) = listener.accept().await.unwrap();
///     let (reader, _writer) = conn.into_split();
///     let first = gort::spawn(first_byte(reader));
///     client.write_all(b"x").await.unwrap();
///     assert_eq!(first.await.unwrap().unwrap(), b'x');
/// });
/// ```
#[derive(Debug)]
pub struct OwnedReadHalf<S: Stream = TcpStream> {
    stream: Arc<S>,
}

impl<S: Stream> OwnedReadHalf<S> {
    read_half_methods!();

    /// Puts the stream back together from this half and `write`, its other half (tokio's
    /// `reunite`): the stream is as it was, deadlines and options included, and writable (the
    /// write half's drop does not shut it down).
    ///
    /// # Errors
    ///
    /// If `write` is a half of another stream: [`ReuniteError`] gives both halves back.
    ///
    /// # Examples
    ///
    /// ```
    /// use gort::net::{TcpListener, TcpStream};
    ///
    /// gort::Runtime::new().unwrap().block_on(async {
    ///     let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    ///     let client = TcpStream::connect(listener.local_addr().unwrap()).await.unwrap();
    ///     let (conn, _) = listener.accept().await.unwrap();
    ///     let (reader, writer) = conn.into_split();
    ///     // ... a reader task and a writer task end, each giving its half back ...
    ///     let conn = reader.reunite(writer).unwrap();
    ///     conn.write_all(b"still open").await.unwrap();
    ///     let mut buf = [0; 10];
    ///     client.read_exact(&mut buf).await.unwrap();
    ///     assert_eq!(&buf, b"still open");
    /// });
    /// ```
    pub fn reunite(self, write: OwnedWriteHalf<S>) -> Result<S, ReuniteError<S>> {
        reunite(self, write)
    }
}

/// The write half of a stream, from [`TcpStream::into_split`] or
/// [`UnixStream::into_split`]. Dropping it shuts the write direction down (the peer reads end of stream); the read half stays usable.
///
/// # Examples
///
/// ```
/// use gort::net::{TcpListener, TcpStream};
///
/// gort::Runtime::new().unwrap().block_on(async {
///     let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
///     let client = TcpStream::connect(listener.local_addr().unwrap()).await.unwrap();
///     let (conn, _) = listener.accept().await.unwrap();
///     let (_reader, writer) = conn.into_split();
///     gort::spawn(async move { writer.write_all(b"bye").await.unwrap() }).await.unwrap();
///     let mut buf = [0; 8];
///     assert_eq!(client.read(&mut buf).await.unwrap(), 3);
///     assert_eq!(client.read(&mut buf).await.unwrap(), 0); // the half was dropped
/// });
/// ```
#[derive(Debug)]
pub struct OwnedWriteHalf<S: Stream = TcpStream> {
    stream: Arc<S>,
    /// Cleared by `reunite`, whose stream must stay writable.
    shutdown_on_drop: bool,
}

impl<S: Stream> OwnedWriteHalf<S> {
    write_half_methods!();

    /// Shuts the write direction down now, while the half is still held (Go's
    /// `TCPConn.CloseWrite`): the peer reads end of stream, and the read half goes on reading
    /// what the peer still sends. A proxy copying one direction calls it when its source ends,
    /// as Go's proxies do. Later writes fail; dropping the half afterwards does nothing more.
    /// (Named after Go's method, it leaves tokio's `AsyncWriteExt::shutdown` callable on the
    /// half with the `tokio-io` feature: an inherent `shutdown` would hide it.)
    ///
    /// # Errors
    ///
    /// The OS's (`NotConnected` once the peer has reset the connection).
    ///
    /// # Examples
    ///
    /// ```
    /// use gort::net::{TcpListener, TcpStream};
    ///
    /// gort::Runtime::new().unwrap().block_on(async {
    ///     let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    ///     let client = TcpStream::connect(listener.local_addr().unwrap()).await.unwrap();
    ///     let (conn, _) = listener.accept().await.unwrap();
    ///     let (reader, writer) = conn.into_split();
    ///     writer.write_all(b"request").await.unwrap();
    ///     writer.close_write().unwrap(); // end of the request; the writer is still held
    ///     let mut buf = [0; 16];
    ///     assert_eq!(client.read(&mut buf).await.unwrap(), 7);
    ///     assert_eq!(client.read(&mut buf).await.unwrap(), 0);
    ///     client.write_all(b"reply").await.unwrap(); // the other direction stays open
    ///     assert_eq!(reader.read(&mut buf).await.unwrap(), 5);
    ///     assert!(writer.write_all(b"more").await.is_err());
    /// });
    /// ```
    pub fn close_write(&self) -> io::Result<()> {
        self.stream.conn().shutdown(Shutdown::Write)
    }

    /// As [`OwnedReadHalf::reunite`], from this side.
    ///
    /// # Errors
    ///
    /// If `read` is a half of another stream: [`ReuniteError`] gives both halves back.
    ///
    /// # Examples
    ///
    /// ```
    /// use gort::net::{TcpListener, TcpStream};
    ///
    /// gort::Runtime::new().unwrap().block_on(async {
    ///     let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    ///     let _client = TcpStream::connect(listener.local_addr().unwrap()).await.unwrap();
    ///     let (conn, peer) = listener.accept().await.unwrap();
    ///     let (reader, writer) = conn.into_split();
    ///     let conn = writer.reunite(reader).unwrap();
    ///     assert_eq!(conn.peer_addr().unwrap(), peer);
    /// });
    /// ```
    pub fn reunite(self, read: OwnedReadHalf<S>) -> Result<S, ReuniteError<S>> {
        reunite(read, self)
    }
}

impl<S: Stream> Drop for OwnedWriteHalf<S> {
    fn drop(&mut self) {
        if self.shutdown_on_drop {
            // The peer may have gone already (`NotConnected`): nothing is left to tell it.
            let _ = self.stream.conn().shutdown(Shutdown::Write);
        }
    }
}
