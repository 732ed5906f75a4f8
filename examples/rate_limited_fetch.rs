//! A client that paces its calls to a server with one `gort::time::rate::Limiter` shared by
//! a pool of workers (Go's `lim.Wait(ctx)` before each request), each call bounded by its own
//! `context` deadline. Checks its own result: every request answered, and at no instant more
//! requests sent than the burst plus what the rate refilled since the start.
//!
//! `cargo run --release --example rate_limited_fetch`

use gort::context::{self, Context};
use gort::net::{TcpListener, TcpStream};
use gort::time::rate::{Limit, Limiter};
use gort::time::Instant;
use std::sync::{Arc, Mutex};
use std::time::Duration;

const RATE: f64 = 200.0; // requests per second
const BURST: u32 = 10;
const WORKERS: u64 = 8;
const REQUESTS: u64 = 160;

async fn read_exact(conn: &TcpStream, mut buf: &mut [u8]) -> std::io::Result<()> {
    while !buf.is_empty() {
        match conn.read(buf).await? {
            0 => return Err(std::io::ErrorKind::UnexpectedEof.into()),
            n => buf = &mut buf[n..],
        }
    }
    Ok(())
}

/// Echoes 8-byte requests, one connection per client.
async fn serve(listener: TcpListener) {
    loop {
        let (conn, _) = listener.accept().await.unwrap();
        gort::spawn(async move {
            let mut req = [0u8; 8];
            while read_exact(&conn, &mut req).await.is_ok() {
                conn.write_all(&req).await.unwrap();
            }
        });
    }
}

#[gort::main]
async fn main() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    gort::spawn(serve(listener));

    let limiter = Arc::new(Limiter::new(Limit::per_second(RATE), BURST));
    let sent_at = Arc::new(Mutex::new(Vec::new()));
    let start = Instant::now();
    let mut workers = gort::JoinSet::new();
    for w in 0..WORKERS {
        let (limiter, sent_at) = (limiter.clone(), sent_at.clone());
        workers.spawn(async move {
            let conn = TcpStream::connect(addr).await.unwrap();
            for i in (w..REQUESTS).step_by(WORKERS as usize) {
                let (ctx, _cancel) =
                    context::with_timeout(&Context::background(), Duration::from_secs(5));
                // Waits for a token, or fails at once if it would come after the deadline.
                limiter
                    .wait_ctx(&ctx, 1)
                    .await
                    .expect("a token before the deadline");
                sent_at.lock().unwrap().push(Instant::now());
                conn.write_all(&i.to_be_bytes()).await.unwrap();
                let mut reply = [0u8; 8];
                read_exact(&conn, &mut reply).await.unwrap();
                assert_eq!(u64::from_be_bytes(reply), i);
            }
        });
    }
    while let Some(r) = workers.join_next().await {
        r.unwrap();
    }
    let took = start.elapsed();

    let mut sent_at = std::mem::take(&mut *sent_at.lock().unwrap());
    sent_at.sort();
    assert_eq!(sent_at.len() as u64, REQUESTS);
    for (k, at) in sent_at.iter().enumerate() {
        let allowed = f64::from(BURST) + RATE * (*at - start).as_secs_f64();
        assert!((k + 1) as f64 <= allowed + 1e-6, "request {k} sent early");
    }
    let least = Duration::from_secs_f64((REQUESTS as f64 - f64::from(BURST)) / RATE);
    assert!(took >= least, "{took:?} < {least:?}");
    println!(
        "{REQUESTS} requests by {WORKERS} workers at {RATE}/s (burst {BURST}) in {took:?} (at least {least:?})"
    );
}
