//! The ecosystem's I/O traits for [`TcpStream`], [`UnixStream`], `&` each and their halves
//! (owned and borrowed): tokio's
//! `AsyncRead`/`AsyncWrite` (feature `tokio-io`) and futures-io's (feature `futures-io`), so
//! that crates built on them (codecs, HTTP, WebSocket libraries) run on gort. Both are thin
//! poll-based views of [`TcpStream::read`] and [`TcpStream::write`], with the same deadlines
//! and cancel safety; flushing is a no-op (writes go straight to the socket) and closing
//! shuts the write half down. Vectored writes are one `sendmsg` (tokio's `TcpStream`: a `writev`), so
//! hyper queues a response's head and body without copying them into one buffer; tokio reads
//! go into the caller's uninitialized room without zeroing it first.

use crate::stream::Stream;
use crate::{OwnedReadHalf, OwnedWriteHalf, ReadHalf, TcpStream, UnixStream, WriteHalf};
use std::io::{self, IoSlice};
use std::net::Shutdown;
use std::task::{Context, Poll};

/// Calls `$read!` for every type that reads (the streams, `&` each, the read halves) and
/// `$write!` for every type that writes; a generic half comes with its parameter's name.
macro_rules! for_each_stream_type {
    ($read:ident, $write:ident) => {
        $read!(TcpStream);
        $write!(TcpStream);
        $read!(&TcpStream);
        $write!(&TcpStream);
        $read!(UnixStream);
        $write!(UnixStream);
        $read!(&UnixStream);
        $write!(&UnixStream);
        $read!(OwnedReadHalf<S>, S);
        $write!(OwnedWriteHalf<S>, S);
        $read!(ReadHalf<'_, S>, S);
        $write!(WriteHalf<'_, S>, S);
    };
}

/// Tokio's `poll_shutdown` and futures-io's `poll_close`: `NotConnected` is success (a
/// peer's reset may have closed the connection already; tokio#4665), so that a program's
/// `shutdown().await`, `close().await` and `copy_bidirectional` do not fail on a reset peer
/// here when they do not under Tokio, through either adapter (Tokio's
/// `shutdown_after_tcp_reset`, `tests/tokio_tcp.rs`; `tests/compat.rs`). gort's own
/// [`TcpStream::shutdown`] reports it, as Go's `CloseWrite` does.
#[cfg(any(feature = "tokio-io", feature = "futures-io"))]
fn shut_write<S: crate::stream::StreamSource>(conn: &crate::stream::Conn<S>) -> io::Result<()> {
    match conn.shutdown(Shutdown::Write) {
        Err(e) if e.kind() == io::ErrorKind::NotConnected => Ok(()),
        other => other,
    }
}

#[cfg(feature = "tokio-io")]
mod tokio_io {
    use super::*;
    use crate::io::Dir;
    use crate::stream::{Conn, StreamSource};
    use std::pin::Pin;
    use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

    /// Reads into the unfilled part of `buf` as it is, initialized or not (tokio's
    /// `TcpStream` does the same): hyper and tokio-util offer their whole spare capacity, up
    /// to hundreds of KiB, for each read, and zeroing it first would cost a memset of that
    /// size per read. `read(2)` gets a raw pointer, never a `&mut [u8]` over uninitialized
    /// bytes, and only the bytes it wrote are marked initialized.
    fn poll_read<S: StreamSource>(
        s: &Conn<S>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        // SAFETY: the pointer and length come from the unfilled part, which stays borrowed
        // (through `buf`) and unmoved until the read returns; nothing reads those bytes here.
        let room = unsafe { buf.unfilled_mut() };
        let (ptr, len) = (room.as_mut_ptr().cast::<libc::c_void>(), room.len());
        let short_empties = S::SHORT_READ_EMPTIES;
        let read = s
            .io()
            .poll_transfer(Dir::Read, cx, len, short_empties, &mut |sock| {
                // SAFETY: `ptr` is valid for writes of `len` bytes (above); `read` writes at most
                // `len` bytes there and reads none.
                match unsafe { libc::read(sock.as_raw_fd(), ptr, len) } {
                    -1 => Err(io::Error::last_os_error()),
                    n => Ok(n as usize),
                }
            });
        let n = match read {
            Poll::Ready(Ok(n)) => n,
            Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
            Poll::Pending => return Poll::Pending,
        };
        // SAFETY: `read` wrote `n` bytes at the start of the unfilled part.
        unsafe { buf.assume_init(n) };
        buf.advance(n);
        Poll::Ready(Ok(()))
    }

    macro_rules! impl_tokio_read {
        ($t:ty $(, $s:ident)?) => {
            impl$(<$s: Stream>)? AsyncRead for $t {
                fn poll_read(
                    self: Pin<&mut Self>,
                    cx: &mut Context<'_>,
                    buf: &mut ReadBuf<'_>,
                ) -> Poll<io::Result<()>> {
                    poll_read(self.conn(), cx, buf)
                }
            }
        };
    }

    macro_rules! impl_tokio_write {
        ($t:ty $(, $s:ident)?) => {
            impl$(<$s: Stream>)? AsyncWrite for $t {
                fn poll_write(
                    self: Pin<&mut Self>,
                    cx: &mut Context<'_>,
                    buf: &[u8],
                ) -> Poll<io::Result<usize>> {
                    self.conn().poll_write_some(cx, buf)
                }

                fn poll_write_vectored(
                    self: Pin<&mut Self>,
                    cx: &mut Context<'_>,
                    bufs: &[IoSlice<'_>],
                ) -> Poll<io::Result<usize>> {
                    self.conn().poll_write_slices(cx, bufs)
                }

                fn is_write_vectored(&self) -> bool {
                    true
                }

                fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
                    Poll::Ready(Ok(()))
                }

                fn poll_shutdown(
                    self: Pin<&mut Self>,
                    _: &mut Context<'_>,
                ) -> Poll<io::Result<()>> {
                    Poll::Ready(shut_write(self.conn()))
                }
            }
        };
    }

    for_each_stream_type!(impl_tokio_read, impl_tokio_write);
}

#[cfg(feature = "futures-io")]
mod futures_io_impls {
    use super::*;
    use futures_io::{AsyncRead, AsyncWrite};
    use std::pin::Pin;

    macro_rules! impl_futures_read {
        ($t:ty $(, $s:ident)?) => {
            impl$(<$s: Stream>)? AsyncRead for $t {
                fn poll_read(
                    self: Pin<&mut Self>,
                    cx: &mut Context<'_>,
                    buf: &mut [u8],
                ) -> Poll<io::Result<usize>> {
                    self.conn().poll_read_some(cx, buf)
                }
            }
        };
    }

    macro_rules! impl_futures_write {
        ($t:ty $(, $s:ident)?) => {
            impl$(<$s: Stream>)? AsyncWrite for $t {
                fn poll_write(
                    self: Pin<&mut Self>,
                    cx: &mut Context<'_>,
                    buf: &[u8],
                ) -> Poll<io::Result<usize>> {
                    self.conn().poll_write_some(cx, buf)
                }

                fn poll_write_vectored(
                    self: Pin<&mut Self>,
                    cx: &mut Context<'_>,
                    bufs: &[IoSlice<'_>],
                ) -> Poll<io::Result<usize>> {
                    self.conn().poll_write_slices(cx, bufs)
                }

                fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
                    Poll::Ready(Ok(()))
                }

                fn poll_close(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
                    Poll::Ready(shut_write(self.conn()))
                }
            }
        };
    }

    for_each_stream_type!(impl_futures_read, impl_futures_write);
}
