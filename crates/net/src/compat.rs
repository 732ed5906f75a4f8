//! The ecosystem's I/O traits for [`TcpStream`] and `&TcpStream`: tokio's
//! `AsyncRead`/`AsyncWrite` (feature `tokio-io`) and futures-io's (feature `futures-io`), so
//! that crates built on them (codecs, HTTP, WebSocket libraries) run on gort. Both are thin
//! poll-based views of [`TcpStream::read`] and [`TcpStream::write`], with the same deadlines
//! and cancel safety; flushing is a no-op (writes go straight to the socket) and closing
//! shuts the write half down.

use crate::io::Dir;
use crate::TcpStream;
use std::io::{self, Read, Write};
use std::net::Shutdown;
use std::task::{Context, Poll};

impl TcpStream {
    fn poll_read_some(&self, cx: &mut Context<'_>, buf: &mut [u8]) -> Poll<io::Result<usize>> {
        self.io().poll_op(Dir::Read, cx, &mut |mut s| s.read(buf))
    }

    fn poll_write_some(&self, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        self.io().poll_op(Dir::Write, cx, &mut |mut s| s.write(buf))
    }
}

#[cfg(feature = "tokio-io")]
mod tokio_io {
    use super::*;
    use std::pin::Pin;
    use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

    fn poll_read(
        s: &TcpStream,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let n = match s.poll_read_some(cx, buf.initialize_unfilled()) {
            Poll::Ready(Ok(n)) => n,
            Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
            Poll::Pending => return Poll::Pending,
        };
        buf.advance(n);
        Poll::Ready(Ok(()))
    }

    macro_rules! impl_tokio {
        ($t:ty) => {
            impl AsyncRead for $t {
                fn poll_read(
                    self: Pin<&mut Self>,
                    cx: &mut Context<'_>,
                    buf: &mut ReadBuf<'_>,
                ) -> Poll<io::Result<()>> {
                    poll_read(&self, cx, buf)
                }
            }

            impl AsyncWrite for $t {
                fn poll_write(
                    self: Pin<&mut Self>,
                    cx: &mut Context<'_>,
                    buf: &[u8],
                ) -> Poll<io::Result<usize>> {
                    self.poll_write_some(cx, buf)
                }

                fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
                    Poll::Ready(Ok(()))
                }

                fn poll_shutdown(
                    self: Pin<&mut Self>,
                    _: &mut Context<'_>,
                ) -> Poll<io::Result<()>> {
                    Poll::Ready(self.shutdown(Shutdown::Write))
                }
            }
        };
    }

    impl_tokio!(TcpStream);
    impl_tokio!(&TcpStream);
}

#[cfg(feature = "futures-io")]
mod futures_io_impls {
    use super::*;
    use futures_io::{AsyncRead, AsyncWrite};
    use std::pin::Pin;

    macro_rules! impl_futures {
        ($t:ty) => {
            impl AsyncRead for $t {
                fn poll_read(
                    self: Pin<&mut Self>,
                    cx: &mut Context<'_>,
                    buf: &mut [u8],
                ) -> Poll<io::Result<usize>> {
                    self.poll_read_some(cx, buf)
                }
            }

            impl AsyncWrite for $t {
                fn poll_write(
                    self: Pin<&mut Self>,
                    cx: &mut Context<'_>,
                    buf: &[u8],
                ) -> Poll<io::Result<usize>> {
                    self.poll_write_some(cx, buf)
                }

                fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
                    Poll::Ready(Ok(()))
                }

                fn poll_close(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
                    Poll::Ready(self.shutdown(Shutdown::Write))
                }
            }
        };
    }

    impl_futures!(TcpStream);
    impl_futures!(&TcpStream);
}
