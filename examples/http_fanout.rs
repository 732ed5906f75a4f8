//! An HTTP client fan-out with hyper-util's pooled `Client` on gort: 600 requests through a
//! pool of 32 workers to a local hyper server that answers some requests too late and some
//! with 503, each request under a `context` deadline, retried with a doubling backoff.
//!
//! The `Client` needs two things from the runtime, both a few lines here: an executor for its
//! connection tasks ([`GortExec`], `gort::spawn`) and a connector ([`Dialer`], a
//! `tower_service::Service<Uri>`) that dials a `gort::net::TcpStream` under a connect
//! timeout. hyper-util's own `HttpConnector` and `TokioExecutor` need Tokio's runtime. Kept-alive
//! connections are reused from the pool; a request abandoned at its deadline takes its
//! connection with it, so the program prints how many it dialed. It checks every answer.
//!
//! Run: `cargo run --release --example http_fanout --features tokio-io`

#[path = "../tests/support/hyper_rt.rs"]
mod hyper_rt;

use bytes::Bytes;
use gort::context::{self, Context};
use gort::net::{TcpListener, TcpStream};
use http_body_util::{BodyExt, Empty, Full};
use hyper::body::Incoming;
use hyper::{Request, Response, StatusCode, Uri};
use hyper_rt::GortExec;
use hyper_util::client::legacy::connect::{Connected, Connection};
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioIo;
use std::convert::Infallible;
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context as TaskContext, Poll};
use std::time::Duration;

const REQUESTS: u64 = 600;
const WORKERS: usize = 32;
const DEADLINE: Duration = Duration::from_millis(100);
const CONNECT_TIMEOUT: Duration = Duration::from_millis(500);
const ATTEMPTS: u32 = 6;

/// The server: request `/N` answers `echo N`; on its first attempt (header `x-attempt: 0`)
/// every seventh id is answered after the client's deadline, and every fifth request before
/// the third attempt gets a 503.
async fn answer(req: Request<Incoming>) -> Result<Response<Full<Bytes>>, Infallible> {
    static SEEN: AtomicUsize = AtomicUsize::new(0);
    let n = SEEN.fetch_add(1, Ordering::Relaxed);
    let id: u64 = req.uri().path()[1..].parse().unwrap_or(0);
    let attempt: u32 = req.headers()["x-attempt"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    if id % 7 == 3 && attempt == 0 {
        gort::time::sleep(3 * DEADLINE).await;
    }
    let mut response = Response::new(Full::new(Bytes::from(format!("echo {id}"))));
    if n % 5 == 4 && attempt < 3 {
        *response.status_mut() = StatusCode::SERVICE_UNAVAILABLE;
    }
    Ok(response)
}

async fn serve(listener: TcpListener, stop: Context) {
    loop {
        gort::select! {
            accepted = listener.accept() => {
                let (conn, _) = accepted.unwrap();
                gort::spawn(async move {
                    let service = hyper::service::service_fn(answer);
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(TokioIo::new(conn), service)
                        .await;
                });
            }
            _ = stop.done().recv() => return,
        }
    }
}

/// A dialed connection, as the pool wants it (a foreign trait needs a local type).
struct Conn(TokioIo<TcpStream>);

impl Connection for Conn {
    fn connected(&self) -> Connected {
        Connected::new()
    }
}

impl hyper::rt::Read for Conn {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut TaskContext<'_>,
        buf: hyper::rt::ReadBufCursor<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.0).poll_read(cx, buf)
    }
}

impl hyper::rt::Write for Conn {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut TaskContext<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.0).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut TaskContext<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.0).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut TaskContext<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.0).poll_shutdown(cx)
    }
}

/// The connector: dials the URI's host and port with a timeout (Go's `net.Dialer.Timeout`).
#[derive(Clone, Debug, Default)]
struct Dialer {
    dials: Arc<AtomicUsize>,
}

impl tower_service::Service<Uri> for Dialer {
    type Response = Conn;
    type Error = io::Error;
    type Future = Pin<Box<dyn Future<Output = io::Result<Conn>> + Send>>;

    fn poll_ready(&mut self, _: &mut TaskContext<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, uri: Uri) -> Self::Future {
        self.dials.fetch_add(1, Ordering::Relaxed);
        Box::pin(async move {
            let host = uri.host().unwrap_or("localhost").to_string();
            let port = uri.port_u16().unwrap_or(80);
            let dial = TcpStream::connect((host, port));
            let conn = gort::time::timeout(CONNECT_TIMEOUT, dial)
                .await
                .map_err(|_| io::Error::new(io::ErrorKind::TimedOut, "connect timeout"))??;
            conn.set_nodelay(true)?;
            Ok(Conn(TokioIo::new(conn)))
        })
    }
}

type HttpClient = Client<Dialer, Empty<Bytes>>;

/// One attempt, abandoned when `parent` is done or [`DEADLINE`] passes.
async fn get(
    client: &HttpClient,
    parent: &Context,
    uri: Uri,
    attempt: u32,
) -> Result<String, String> {
    let (ctx, cancel) = context::with_timeout(parent, DEADLINE);
    let _cancel = cancel.drop_guard();
    let request = async {
        let req = Request::get(uri)
            .header("x-attempt", attempt)
            .body(Empty::new());
        let response = client
            .request(req.unwrap())
            .await
            .map_err(|e| e.to_string())?;
        let status = response.status();
        let body = response
            .into_body()
            .collect()
            .await
            .map_err(|e| e.to_string())?;
        match status {
            StatusCode::OK => Ok(String::from_utf8_lossy(&body.to_bytes()).into_owned()),
            _ => Err(format!("status {status}")),
        }
    };
    gort::select! {
        res = request => res,
        _ = ctx.done().recv() => Err(ctx.err().unwrap().to_string()),
    }
}

/// [`get`] until it succeeds, [`ATTEMPTS`] times at most, with a doubling pause between.
async fn get_with_retries(client: &HttpClient, ctx: &Context, uri: Uri) -> Result<String, String> {
    let mut pause = Duration::from_millis(5);
    let mut last = String::new();
    for attempt in 0..ATTEMPTS {
        match get(client, ctx, uri.clone(), attempt).await {
            Ok(body) => return Ok(body),
            Err(e) => last = e,
        }
        gort::time::after(pause).recv().await;
        pause *= 2;
    }
    Err(last)
}

#[gort::main]
async fn main() {
    let started = std::time::Instant::now();
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (stop, stop_server) = context::with_cancel(&Context::background());
    let server = gort::spawn(serve(listener, stop));

    let dialer = Dialer::default();
    let client: HttpClient = Client::builder(GortExec).build(dialer.clone());
    let (jobs, queue) = gort::chan::bounded::<u64>(WORKERS);
    let (results, answers) = gort::chan::bounded::<(u64, Result<String, String>)>(WORKERS);
    let ctx = Context::background();
    for _ in 0..WORKERS {
        let (queue, results, client, ctx) =
            (queue.clone(), results.clone(), client.clone(), ctx.clone());
        gort::spawn(async move {
            while let Some(id) = queue.recv().await {
                let uri: Uri = format!("http://{addr}/{id}").parse().unwrap();
                let answer = get_with_retries(&client, &ctx, uri).await;
                results.send((id, answer)).await.unwrap();
            }
        });
    }
    drop(results);
    gort::spawn(async move {
        for id in 0..REQUESTS {
            jobs.send(id).await.unwrap();
        }
    });
    let mut ok = 0;
    while let Some((id, answer)) = answers.recv().await {
        assert_eq!(answer, Ok(format!("echo {id}")), "request {id}");
        ok += 1;
    }
    assert_eq!(ok, REQUESTS);
    stop_server.cancel();
    server.await.unwrap();
    let dials = dialer.dials.load(Ordering::Relaxed);
    println!(
        "{ok} requests answered over {dials} connections in {:?}",
        started.elapsed()
    );
}
