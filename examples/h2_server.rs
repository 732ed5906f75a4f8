//! An HTTP/2 server and client with hyper on gort, checking its own result: hyper's
//! `server::conn::http2` and `client::conn::http2` over `gort::net::TcpStream` through
//! hyper-util's `TokioIo`, with hyper's connection and per-stream tasks spawned by
//! [`GortExec`] (`gort::spawn`) and its keep-alive pings timed by [`GortTimer`]
//! (`gort::time`). One connection carries many streams at once; a stream's handler that
//! panics is that stream's loss only (the client sees the stream reset); a handler that never
//! answers is cut by a `gort::time::timeout` (504), at the server's limit or at the deadline
//! the client sends in a header (the way gRPC propagates deadlines in `grpc-timeout`).
//!
//! The check: 1,000 concurrent echo streams on one connection (bodies 0 B..16 KiB), a few
//! 1 MiB echoes (flow control), a panicking and a stuck handler, all verified byte for byte.
//! Run: `cargo run --release --example h2_server --features tokio-io`. `tests/hyper_h2.rs`
//! runs this file's [`serve`], [`connect`] and [`check`] against hostile peers and curl.

#[path = "../tests/support/hyper_rt.rs"]
mod hyper_rt;

pub use hyper_rt::{GortExec, GortTimer};

use bytes::Bytes;
use gort::net::{TcpListener, TcpStream};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::client::conn::http2::SendRequest;
use hyper::service::service_fn;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use std::convert::Infallible;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// The body `GET /` answers with.
pub const HELLO: &str = "hello from gort over h2\n";

/// The server's and client's HTTP/2 settings.
#[derive(Clone, Copy, Debug)]
pub struct H2Config {
    /// Silence after which a PING is sent (hyper's `keep_alive_interval`).
    pub ping_interval: Duration,
    /// How long an unanswered PING may stay so before the connection is closed.
    pub ping_timeout: Duration,
    /// Time a handler may take before the stream is answered 504; a request may ask for
    /// less with a [`TIMEOUT_HEADER`] (as gRPC clients send their deadline in `grpc-timeout`).
    pub handler_timeout: Duration,
    /// Streams one connection may carry at once (the server's SETTINGS).
    pub max_streams: u32,
    /// How long one write may stay blocked on a peer that does not read (Go's
    /// `SetWriteDeadline` before each write). hyper's keep-alive cannot end such a connection
    /// by itself: on the ping timeout it queues a GOAWAY, which never flushes.
    pub write_timeout: Duration,
}

impl Default for H2Config {
    fn default() -> Self {
        H2Config {
            ping_interval: Duration::from_secs(10),
            ping_timeout: Duration::from_secs(5),
            handler_timeout: Duration::from_secs(10),
            max_streams: 1_000,
            write_timeout: Duration::from_secs(10),
        }
    }
}

/// Accepts connections until the listener fails, serving each in its own task.
pub async fn serve(listener: TcpListener, cfg: H2Config) -> io::Result<()> {
    loop {
        let (conn, _) = listener.accept().await?;
        drop(gort::spawn(async move {
            // A misbehaving or vanished client is the client's problem: drop it.
            let _ = serve_connection(conn, cfg).await;
        }));
    }
}

/// Serves one connection's streams until the client goes away, stops answering pings, or
/// breaks the protocol (that error is returned).
pub async fn serve_connection(conn: TcpStream, cfg: H2Config) -> Result<(), hyper::Error> {
    let _ = conn.set_nodelay(true);
    hyper::server::conn::http2::Builder::new(GortExec)
        .timer(GortTimer)
        .keep_alive_interval(cfg.ping_interval)
        .keep_alive_timeout(cfg.ping_timeout)
        .max_concurrent_streams(cfg.max_streams)
        .serve_connection(
            TokioIo::new(WriteDeadline::new(conn, cfg.write_timeout)),
            service_fn(move |req| answer(req, cfg.handler_timeout)),
        )
        .await
}

/// A connection whose writes fail with `TimedOut` once one has been blocked for `limit`: each
/// write that starts after a finished one moves the socket's write deadline `limit` ahead
/// (one timer reset, no allocation); a write still pending keeps the deadline it started with.
struct WriteDeadline {
    conn: TcpStream,
    limit: Duration,
    /// The last write returned `Pending`: the next call continues it.
    blocked: bool,
}

impl WriteDeadline {
    fn new(conn: TcpStream, limit: Duration) -> Self {
        WriteDeadline {
            conn,
            limit,
            blocked: false,
        }
    }

    /// Arms the deadline for a write that starts now, unless one is already waiting.
    fn arm(&mut self) -> io::Result<()> {
        if !self.blocked {
            let deadline = gort::time::Instant::now() + self.limit;
            self.conn.set_write_deadline(Some(deadline))?;
        }
        Ok(())
    }

    fn track<T>(&mut self, polled: Poll<io::Result<T>>) -> Poll<io::Result<T>> {
        self.blocked = polled.is_pending();
        polled
    }
}

impl AsyncRead for WriteDeadline {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.conn).poll_read(cx, buf)
    }
}

impl AsyncWrite for WriteDeadline {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        self.arm()?;
        let polled = Pin::new(&mut self.conn).poll_write(cx, buf);
        self.track(polled)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        self.arm()?;
        let polled = Pin::new(&mut self.conn).poll_write_vectored(cx, bufs);
        self.track(polled)
    }

    fn is_write_vectored(&self) -> bool {
        self.conn.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.conn).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.conn).poll_shutdown(cx)
    }
}

/// The request header that shortens its handler's time limit, in milliseconds.
pub const TIMEOUT_HEADER: &str = "x-timeout-ms";

/// One stream: the route, cut with a 504 at `limit` or at the client's shorter deadline.
async fn answer(
    req: Request<Incoming>,
    limit: Duration,
) -> Result<Response<Full<Bytes>>, Infallible> {
    let asked = req
        .headers()
        .get(TIMEOUT_HEADER)
        .and_then(|v| v.to_str().ok()?.parse().ok())
        .map(Duration::from_millis);
    let limit = asked.map_or(limit, |asked| asked.min(limit));
    let response = match gort::time::timeout(limit, route(req)).await {
        Ok(response) => response,
        Err(_) => reply(
            StatusCode::GATEWAY_TIMEOUT,
            Bytes::from_static(b"too slow\n"),
        ),
    };
    Ok(response)
}

/// `GET /` hello, `POST /echo` the body back, `GET /bytes/N` N pattern bytes, `GET /panic`
/// panics, `GET /never` never answers; anything else 404.
async fn route(req: Request<Incoming>) -> Response<Full<Bytes>> {
    let path = req.uri().path().to_string();
    match (req.method(), path.as_str()) {
        (&Method::GET, "/") => reply(StatusCode::OK, Bytes::from_static(HELLO.as_bytes())),
        (&Method::POST, "/echo") => match req.into_body().collect().await {
            Ok(body) => reply(StatusCode::OK, body.to_bytes()),
            Err(e) => reply(StatusCode::BAD_REQUEST, Bytes::from(e.to_string())),
        },
        (&Method::GET, "/panic") => panic!("handler panics on purpose"),
        (&Method::GET, "/never") => std::future::pending().await,
        (&Method::GET, p) if p.starts_with("/bytes/") => match p["/bytes/".len()..].parse() {
            Ok(n) => reply(StatusCode::OK, pattern(n)),
            Err(_) => reply(StatusCode::BAD_REQUEST, Bytes::new()),
        },
        _ => reply(StatusCode::NOT_FOUND, Bytes::from_static(b"not found\n")),
    }
}

fn reply(status: StatusCode, body: Bytes) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(body));
    *response.status_mut() = status;
    response
}

/// `n` bytes of a pattern that catches reordered or lost chunks (byte `i` is `i % 251`).
pub fn pattern(n: usize) -> Bytes {
    (0..n).map(|i| (i % 251) as u8).collect::<Vec<u8>>().into()
}

/// A client connection: its request sender and its connection task (which ends with the
/// connection, with hyper's error if it failed).
pub type Client = (
    SendRequest<Full<Bytes>>,
    gort::JoinHandle<Result<(), hyper::Error>>,
);

/// Dials `addr` and does the HTTP/2 handshake, pinging the server after `ping_interval` of
/// silence even when no stream is open.
pub async fn connect(addr: SocketAddr, cfg: H2Config) -> io::Result<Client> {
    let stream = TcpStream::connect(addr).await?;
    let _ = stream.set_nodelay(true);
    let (sender, conn) = hyper::client::conn::http2::Builder::new(GortExec)
        .timer(GortTimer)
        .keep_alive_interval(cfg.ping_interval)
        .keep_alive_timeout(cfg.ping_timeout)
        .keep_alive_while_idle(true)
        .handshake(TokioIo::new(stream))
        .await
        .map_err(io::Error::other)?;
    Ok((sender, gort::spawn(conn)))
}

/// A request to `addr` (HTTP/2 wants the scheme and authority in the URI).
pub fn request(addr: SocketAddr, method: Method, path: &str, body: Bytes) -> Request<Full<Bytes>> {
    Request::builder()
        .method(method)
        .uri(format!("http://{addr}{path}"))
        .body(Full::new(body))
        .unwrap()
}

/// Sends one request and reads the whole response.
pub async fn fetch(
    sender: &SendRequest<Full<Bytes>>,
    req: Request<Full<Bytes>>,
) -> Result<(StatusCode, Bytes), hyper::Error> {
    let mut sender = sender.clone();
    let response = sender.send_request(req).await?;
    let status = response.status();
    let body = response.into_body().collect().await?.to_bytes();
    Ok((status, body))
}

/// The size of echo stream `i` in [`check`]: 0 B to 16 KiB, a few odd sizes.
pub fn echo_size(i: usize) -> usize {
    [0, 1, 17, 1_000, 4_096, 16_384, 16_385, 9_999][i % 8]
}

/// What [`check`] saw.
#[derive(Debug, Default)]
pub struct Summary {
    /// Echo streams answered byte for byte.
    pub echoed: usize,
    /// 1 MiB echoes answered byte for byte.
    pub large: usize,
}

/// Runs `streams` concurrent echoes on one connection, `large` concurrent 1 MiB echoes, a
/// panicking and a stuck handler; panics on any wrong answer.
pub async fn check(addr: SocketAddr, cfg: H2Config, streams: usize, large: usize) -> Summary {
    let (sender, conn) = connect(addr, cfg).await.unwrap();
    let mut tasks = Vec::new();
    for i in 0..streams + large {
        let sender = sender.clone();
        tasks.push(gort::spawn(async move {
            let body = pattern(if i < streams { echo_size(i) } else { 1 << 20 });
            let req = request(addr, Method::POST, "/echo", body.clone());
            let (status, got) = fetch(&sender, req).await.unwrap();
            assert_eq!(status, StatusCode::OK, "stream {i}");
            assert!(
                got == body,
                "stream {i}: {} bytes back of {}",
                got.len(),
                body.len()
            );
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    let panicked = fetch(&sender, request(addr, Method::GET, "/panic", Bytes::new())).await;
    assert!(
        panicked.is_err(),
        "a panicking handler's stream: {panicked:?}"
    );
    let mut never = request(addr, Method::GET, "/never", Bytes::new());
    never
        .headers_mut()
        .insert(TIMEOUT_HEADER, "100".parse().unwrap());
    let stuck = fetch(&sender, never).await;
    assert_eq!(stuck.unwrap().0, StatusCode::GATEWAY_TIMEOUT);
    let (status, hello) = fetch(&sender, request(addr, Method::GET, "/", Bytes::new()))
        .await
        .unwrap();
    assert_eq!((status, &hello[..]), (StatusCode::OK, HELLO.as_bytes()));
    drop(sender);
    conn.await.unwrap().unwrap();
    Summary {
        echoed: streams,
        large,
    }
}

#[gort::main]
async fn main() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let cfg = H2Config::default();
    drop(gort::spawn(serve(listener, cfg)));
    let started = std::time::Instant::now();
    let summary = check(addr, cfg, 1_000, 8).await;
    println!(
        "h2 on gort: {} concurrent echo streams and {} x 1 MiB on one connection, a panicking \
         and a stuck handler, in {:?}: ok",
        summary.echoed,
        summary.large,
        started.elapsed()
    );
}
