//! Request latency under closed-loop keep-alive load: a hyper HTTP/1 server and N hyper
//! clients in one process (each a task and its connection's task), each client sending `GET /`
//! requests back to back on its own connection and timing each (the first, which includes the
//! connection's accept, is left out). Percentiles for gort, or for Tokio with `tokio` as the
//! first argument, on 2 Ps / worker threads.
//!
//! The diagnostic behind the keep-alive tail (design/ARCHITECTURE.md, "A P's ring";
//! PERFORMANCE-LOG.md, "Rings of 1,024"): at 1,000 clients gort
//! serves about twice the requests a second of Tokio and Go. With rings of 256 (Go's), 1-2 %
//! of its requests waited ~100 ms in the global queue (~1,000 tasks deep, both rings full,
//! printed for gort); rings of 1,024 keep them in the rings. `tailprobe.go` is Go's side.
//!
//! ```sh
//! cargo run --release --example tailprobe -- gort 1000     # 1,000 clients, 40 requests each
//! cargo run --release --example tailprobe -- tokio 1000
//! ```

use http_body_util::Full;
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use std::convert::Infallible;
use std::sync::atomic::{AtomicBool, Ordering::SeqCst};
use std::sync::Arc;
use std::time::{Duration, Instant};

const WORKERS: usize = 2;
const REQUESTS: usize = 40;

async fn hello(_: Request<Incoming>) -> Result<Response<Full<&'static [u8]>>, Infallible> {
    Ok(Response::new(Full::new(b"hello\n")))
}

/// One client: `REQUESTS` requests on one kept-alive connection, each timed.
async fn client(
    mut send: hyper::client::conn::http1::SendRequest<Full<&'static [u8]>>,
) -> Vec<Duration> {
    let mut latencies = Vec::with_capacity(REQUESTS);
    for i in 0..REQUESTS {
        let start = Instant::now();
        send.ready().await.unwrap();
        let req = Request::get("/")
            .header("host", "probe")
            .body(Full::new(&b""[..]))
            .unwrap();
        let resp = send.send_request(req).await.unwrap();
        http_body_util::BodyExt::collect(resp.into_body())
            .await
            .unwrap();
        if i > 0 {
            latencies.push(start.elapsed());
        }
    }
    latencies
}

fn report(runtime: &str, clients: usize, mut lat: Vec<Duration>, wall: Duration) {
    lat.sort_unstable();
    let at = |q: f64| lat[((lat.len() - 1) as f64 * q) as usize].as_micros();
    println!(
        "{runtime:5} clients={clients}: {:.0} req/s; latency µs p50 {} p90 {} p99 {} p99.9 {} max {}",
        lat.len() as f64 / wall.as_secs_f64(),
        at(0.5),
        at(0.9),
        at(0.99),
        at(0.999),
        at(1.0)
    );
}

fn on_gort(clients: usize) {
    use gort::net::{TcpListener, TcpStream};
    let rt = gort::Builder::new().procs(WORKERS).build().unwrap();
    let queues = watch_queues(rt.handle().clone());
    rt.block_on(async move {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        gort::spawn(async move {
            while let Ok((conn, _)) = listener.accept().await {
                let served =
                    http1::Builder::new().serve_connection(TokioIo::new(conn), service_fn(hello));
                gort::spawn(served);
            }
        });
        let start = Instant::now();
        let mut set = gort::JoinSet::new();
        for _ in 0..clients {
            set.spawn(async move {
                let conn = TcpStream::connect(addr).await.unwrap();
                let (send, conn) = hyper::client::conn::http1::handshake(TokioIo::new(conn))
                    .await
                    .unwrap();
                gort::spawn(conn);
                client(send).await
            });
        }
        let lat = set.join_all().await.into_iter().flatten().collect();
        report("gort", clients, lat, start.elapsed());
    });
    queues.0.store(true, SeqCst);
    queues.1.join().unwrap();
}

/// Samples the global queue's depth and the deepest local ring every 100 µs from a plain
/// thread until the flag it returns is set, then prints their maxima.
fn watch_queues(handle: gort::Handle) -> (Arc<AtomicBool>, std::thread::JoinHandle<()>) {
    let stop = Arc::new(AtomicBool::new(false));
    let done = stop.clone();
    let watcher = std::thread::spawn(move || {
        let (mut global, mut local) = (0, 0);
        while !done.load(SeqCst) {
            global = global.max(handle.global_queue_depth());
            let ring = handle.proc_metrics().iter().map(|p| p.local_queue).max();
            local = local.max(ring.unwrap_or(0));
            std::thread::sleep(Duration::from_micros(100));
        }
        println!("      deepest queues seen: global {global}, one P's ring {local}");
    });
    (stop, watcher)
}

fn on_tokio(clients: usize) {
    use tokio::net::{TcpListener, TcpStream};
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(WORKERS)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async move {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            while let Ok((conn, _)) = listener.accept().await {
                conn.set_nodelay(true).unwrap(); // as gort and Go do
                let served =
                    http1::Builder::new().serve_connection(TokioIo::new(conn), service_fn(hello));
                tokio::spawn(served);
            }
        });
        let start = Instant::now();
        let mut set = tokio::task::JoinSet::new();
        for _ in 0..clients {
            set.spawn(async move {
                let conn = TcpStream::connect(addr).await.unwrap();
                conn.set_nodelay(true).unwrap();
                let (send, conn) = hyper::client::conn::http1::handshake(TokioIo::new(conn))
                    .await
                    .unwrap();
                tokio::spawn(conn);
                client(send).await
            });
        }
        let lat = set.join_all().await.into_iter().flatten().collect();
        report("tokio", clients, lat, start.elapsed());
    });
}

fn main() {
    let mut args = std::env::args().skip(1);
    let runtime = args.next().unwrap_or_else(|| "gort".into());
    let clients = args.next().map_or(1000, |s| {
        s.parse().expect("usage: tailprobe [gort|tokio] [CLIENTS]")
    });
    match runtime.as_str() {
        "gort" => on_gort(clients),
        "tokio" => on_tokio(clients),
        _ => panic!("usage: tailprobe [gort|tokio] [CLIENTS]"),
    }
}
