//! Borrowed halves of a stream, [`TcpStream`] or [`UnixStream`] (tokio's `split`): a read
//! half and a write half that borrow the stream, for code that drives both directions at
//! once without moving them to `'static` tasks. The streams' methods take `&self`, so the
//! halves are plain references. Generic over the [`Stream`]; `S` defaults to `TcpStream`.

use crate::stream::Stream;
use crate::{TcpStream, UnixStream};
use gort_time::Instant;
use std::io;
use std::net::Shutdown;

impl TcpStream {
    /// Splits the stream into a read half and a write half that borrow it (tokio's `split`),
    /// for two futures run at once, or two threads of a scope. For halves that move to
    /// separate tasks, use [`into_split`](TcpStream::into_split).
    ///
    /// Dropping a half does nothing to the socket (the stream still owns it); to end the
    /// peer's stream while reading on, call [`WriteHalf::close_write`]. With the `tokio-io`
    /// or `futures-io` feature, [`ReadHalf`] implements `AsyncRead` and [`WriteHalf`]
    /// `AsyncWrite`.
    ///
    /// With futures' `AsyncReadExt` in scope, `stream.split()` on an owned stream resolves to
    /// that trait's `split(self)` (Rust picks a by-value trait method before a by-reference
    /// inherent one); write `TcpStream::split(&stream)` there. On a `&TcpStream` the
    /// inherent method wins.
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
    ///     gort::spawn(async move {
    ///         // An echo: one half reads while the other writes what was read.
    ///         let (reader, writer) = conn.split();
    ///         let mut buf = [0; 64];
    ///         while let Ok(n @ 1..) = reader.read(&mut buf).await {
    ///             writer.write_all(&buf[..n]).await.unwrap();
    ///         }
    ///     });
    ///     client.write_all(b"ping").await.unwrap();
    ///     let mut got = [0; 4];
    ///     client.read_exact(&mut got).await.unwrap();
    ///     assert_eq!(&got, b"ping");
    /// });
    /// ```
    pub fn split(&self) -> (ReadHalf<'_>, WriteHalf<'_>) {
        (ReadHalf { stream: self }, WriteHalf { stream: self })
    }
}

impl UnixStream {
    /// Splits the stream into halves that borrow it, as [`TcpStream::split`] (the same note
    /// on futures' `AsyncReadExt::split` applies: write `UnixStream::split(&stream)` there).
    ///
    /// # Examples
    ///
    /// ```
    /// use gort::net::UnixStream;
    ///
    /// gort::Runtime::new().unwrap().block_on(async {
    ///     let (client, server) = UnixStream::pair().unwrap();
    ///     gort::spawn(async move {
    ///         let (reader, writer) = server.split();
    ///         let mut buf = [0; 64];
    ///         while let Ok(n @ 1..) = reader.read(&mut buf).await {
    ///             writer.write_all(&buf[..n]).await.unwrap();
    ///         }
    ///     });
    ///     client.write_all(b"ping").await.unwrap();
    ///     let mut got = [0; 4];
    ///     client.read_exact(&mut got).await.unwrap();
    ///     assert_eq!(&got, b"ping");
    /// });
    /// ```
    pub fn split(&self) -> (ReadHalf<'_, UnixStream>, WriteHalf<'_, UnixStream>) {
        (ReadHalf { stream: self }, WriteHalf { stream: self })
    }
}

/// The read half of a stream, from [`TcpStream::split`] or [`UnixStream::split`].
///
/// # Examples
///
/// ```
/// use gort::net::{ReadHalf, TcpListener, TcpStream};
///
/// async fn first_byte(reader: ReadHalf<'_>) -> std::io::Result<u8> {
///     let mut b = [0];
///     reader.read_exact(&mut b).await?;
///     Ok(b[0])
/// }
///
/// gort::Runtime::new().unwrap().block_on(async {
///     let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
///     let client = TcpStream::connect(listener.local_addr().unwrap()).await.unwrap();
///     let (conn, _) = listener.accept().await.unwrap();
///     client.write_all(b"x").await.unwrap();
///     let (reader, _writer) = conn.split();
///     assert_eq!(first_byte(reader).await.unwrap(), b'x');
/// });
/// ```
#[derive(Debug)]
pub struct ReadHalf<'a, S: Stream = TcpStream> {
    stream: &'a S,
}

impl<S: Stream> ReadHalf<'_, S> {
    read_half_methods!();
}

/// The write half of a stream, from [`TcpStream::split`] or [`UnixStream::split`]. Dropping
/// it does nothing to the socket (tokio's borrowed `WriteHalf` neither); [`close_write`](WriteHalf::close_write)
/// ends the peer's stream.
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
///     let (_reader, writer) = conn.split();
///     writer.write_all(b"hi").await.unwrap();
///     drop(writer); // the stream stays open and writable
///     conn.write_all(b"!").await.unwrap();
///     let mut buf = [0; 3];
///     client.read_exact(&mut buf).await.unwrap();
///     assert_eq!(&buf, b"hi!");
/// });
/// ```
#[derive(Debug)]
pub struct WriteHalf<'a, S: Stream = TcpStream> {
    stream: &'a S,
}

impl<S: Stream> WriteHalf<'_, S> {
    write_half_methods!();

    /// Shuts the write direction down (Go's `TCPConn.CloseWrite`, as
    /// [`OwnedWriteHalf::close_write`](crate::OwnedWriteHalf::close_write)): the peer reads
    /// end of stream, the read half reads on, later writes fail. Not named `shutdown`, so
    /// that tokio's `AsyncWriteExt::shutdown` stays callable on the half with the `tokio-io`
    /// feature.
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
    ///     let (reader, writer) = conn.split();
    ///     writer.write_all(b"request").await.unwrap();
    ///     writer.close_write().unwrap();
    ///     let mut buf = [0; 16];
    ///     assert_eq!(client.read(&mut buf).await.unwrap(), 7);
    ///     assert_eq!(client.read(&mut buf).await.unwrap(), 0);
    ///     client.write_all(b"reply").await.unwrap();
    ///     assert_eq!(reader.read(&mut buf).await.unwrap(), 5);
    /// });
    /// ```
    pub fn close_write(&self) -> io::Result<()> {
        self.stream.conn().shutdown(Shutdown::Write)
    }
}
