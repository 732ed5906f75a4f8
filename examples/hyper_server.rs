//! An HTTP/1 server with hyper on gort: hyper's connection state machine over
//! `gort::net::TcpStream` through hyper-util's `TokioIo` (gort's `tokio-io` feature gives the
//! stream tokio's `AsyncRead`/`AsyncWrite`), one `gort::spawn`ed task per connection, no Tokio
//! runtime anywhere. Two timeouts, both on gort's per-P timers:
//! - idle (Go's `SetReadDeadline` before every read): each time bytes arrive the read
//!   deadline moves `idle` ahead (one timer reset, no allocation), so a client silent that
//!   long is dropped;
//! - header read (Go's `http.Server.ReadHeaderTimeout`): hyper's own timer, given to hyper as
//!   [`GortTimer`], an implementation of `hyper::rt::Timer` on `gort::time`.
//!
//! Run: `cargo run --example hyper_server --features tokio-io [-- 127.0.0.1:3000]`, then
//! `curl http://127.0.0.1:3000/`. `tests/hyper.rs` runs this file's [`serve`] against real
//! clients.

#[path = "../tests/support/hyper_rt.rs"]
mod hyper_rt;

pub use hyper_rt::GortTimer;

use gort::net::{TcpListener, TcpStream};
use gort::time::Instant;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use std::convert::Infallible;
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// The body `GET /` answers with.
pub const HELLO: &str = "hello from gort\n";

/// How long a connection may wait for the client.
#[derive(Clone, Copy, Debug)]
pub struct Timeouts {
    /// Silence (no byte received) after which a connection is dropped.
    pub idle: Duration,
    /// Time a request's head may take to arrive in full (hyper's `header_read_timeout`).
    pub header_read: Duration,
}

impl Default for Timeouts {
    fn default() -> Self {
        Timeouts {
            idle: Duration::from_secs(60),
            header_read: Duration::from_secs(10),
        }
    }
}

/// Accepts connections until the listener fails, serving each in its own task.
pub async fn serve(listener: TcpListener, timeouts: Timeouts) -> io::Result<()> {
    loop {
        let (conn, _) = listener.accept().await?;
        gort::spawn(serve_connection(conn, timeouts));
    }
}

/// Serves one connection's requests (keep-alive included) until the client closes it, stays
/// idle too long, or sends something hyper rejects.
async fn serve_connection(conn: TcpStream, timeouts: Timeouts) {
    let io = IdleConn::new(&conn, timeouts.idle);
    let served = http1::Builder::new()
        .timer(GortTimer)
        .header_read_timeout(timeouts.header_read)
        .serve_connection(TokioIo::new(io), service_fn(answer))
        .await;
    if let Err(e) = served {
        // A timed-out or misbehaving client is the client's problem: log it, drop it.
        eprintln!("hyper_server: connection from {:?}: {e}", conn.peer_addr());
    }
}

/// The service: `GET /` says hello, everything else is not found.
async fn answer(req: Request<Incoming>) -> Result<Response<Full<&'static [u8]>>, Infallible> {
    let (status, body) = match (req.method(), req.uri().path()) {
        (&Method::GET, "/") => (StatusCode::OK, HELLO),
        _ => (StatusCode::NOT_FOUND, "not found\n"),
    };
    let mut response = Response::new(Full::new(body.as_bytes()));
    *response.status_mut() = status;
    Ok(response)
}

/// A connection whose read deadline moves `idle` ahead whenever bytes arrive, the way a Go
/// server calls `SetReadDeadline` before each read: a read that waits longer fails with
/// `TimedOut`, which ends the connection.
struct IdleConn<'a> {
    conn: &'a TcpStream,
    idle: Duration,
}

impl<'a> IdleConn<'a> {
    fn new(conn: &'a TcpStream, idle: Duration) -> Self {
        // Arming fails only on a socket that is already closed; its first read reports that.
        let _ = conn.set_read_deadline(Some(Instant::now() + idle));
        IdleConn { conn, idle }
    }
}

impl AsyncRead for IdleConn<'_> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let read = Pin::new(&mut self.conn).poll_read(cx, buf);
        if matches!(read, Poll::Ready(Ok(()))) && buf.filled().len() > before {
            self.conn
                .set_read_deadline(Some(Instant::now() + self.idle))?;
        }
        read
    }
}

impl AsyncWrite for IdleConn<'_> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.conn).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.conn).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.conn).poll_shutdown(cx)
    }
}

#[gort::main]
async fn main() {
    let addr = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "127.0.0.1:3000".to_string());
    let listener = TcpListener::bind(addr).await.unwrap();
    println!(
        "hyper on gort: listening on http://{}/",
        listener.local_addr().unwrap()
    );
    serve(listener, Timeouts::default()).await.unwrap();
}
