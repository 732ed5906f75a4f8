//! A tiny Redis-like key-value server over a line protocol (`SET k v`, `GET k`, `DEL k`,
//! `QUIT`), ported from the Go shape: one task per connection, an idle read deadline, a write
//! deadline that drops clients that stop reading, pipelining (many commands in one write,
//! answered in order), and a graceful shutdown through a `context` cancel and a `WaitGroup`.
//!
//! A load generator runs against it: pipelining clients that check every answer, clients
//! that vanish mid-request, clients that send without ever reading (the write deadline must
//! drop them), and idle clients (the read deadline must drop them).
//!
//! `cargo run --release --example kv_server`

use gort::context::{self, Context};
use gort::net::{TcpListener, TcpStream};
use gort::sync::WaitGroup;
use gort::time::Instant;
use std::collections::HashMap;
use std::io;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

const IDLE: Duration = Duration::from_millis(200);
const WRITE_TIMEOUT: Duration = Duration::from_millis(100);
const CLIENTS: usize = 32;
const ROUNDS: usize = 50;
const PIPELINE: usize = 16;

type Store = Arc<Mutex<HashMap<String, String>>>;

#[derive(Default)]
struct Counters {
    idle_drops: AtomicU64,
    write_drops: AtomicU64,
    eof: AtomicU64,
    resets: AtomicU64,
    commands: AtomicU64,
}

/// Reads lines from a stream with a read deadline before every read (Go's bufio.Scanner over
/// a net.Conn with SetReadDeadline).
struct Lines {
    buf: Vec<u8>,
}

impl Lines {
    async fn next(&mut self, s: &TcpStream) -> io::Result<Option<String>> {
        loop {
            if let Some(i) = self.buf.iter().position(|&b| b == b'\n') {
                let line: Vec<u8> = self.buf.drain(..=i).collect();
                return Ok(Some(String::from_utf8_lossy(&line[..i]).into_owned()));
            }
            s.set_read_deadline(Some(Instant::now() + IDLE))?;
            let mut chunk = [0u8; 4096];
            let n = s.read(&mut chunk).await?;
            if n == 0 {
                return Ok(None);
            }
            self.buf.extend_from_slice(&chunk[..n]);
        }
    }
}

fn execute(store: &Store, line: &str) -> Option<String> {
    let mut parts = line.splitn(3, ' ');
    let reply = match (parts.next(), parts.next(), parts.next()) {
        (Some("SET"), Some(k), Some(v)) => {
            store.lock().unwrap().insert(k.into(), v.into());
            "+OK".to_string()
        }
        (Some("GET"), Some(k), None) => match store.lock().unwrap().get(k) {
            Some(v) => format!("${v}"),
            None => "$-1".to_string(),
        },
        (Some("DEL"), Some(k), None) => {
            let n = store.lock().unwrap().remove(k).is_some() as u8;
            format!(":{n}")
        }
        (Some("QUIT"), None, None) => return None,
        _ => format!("-ERR bad command {line:?}"),
    };
    Some(reply)
}

async fn serve_conn(s: TcpStream, store: Store, counters: Arc<Counters>) {
    let mut lines = Lines { buf: Vec::new() };
    let mut out = String::new();
    loop {
        let line = match lines.next(&s).await {
            Ok(Some(l)) => l,
            Ok(None) => {
                counters.eof.fetch_add(1, Ordering::Relaxed);
                return;
            }
            Err(e) if e.kind() == io::ErrorKind::TimedOut => {
                counters.idle_drops.fetch_add(1, Ordering::Relaxed);
                return;
            }
            Err(_) => {
                counters.resets.fetch_add(1, Ordering::Relaxed);
                return;
            }
        };
        counters.commands.fetch_add(1, Ordering::Relaxed);
        let Some(reply) = execute(&store, &line) else {
            return;
        };
        out.push_str(&reply);
        out.push('\n');
        // Pipelining: answer everything already buffered in one write.
        if lines.buf.contains(&b'\n') && out.len() < 64 * 1024 {
            continue;
        }
        let _ = s.set_write_deadline(Some(Instant::now() + WRITE_TIMEOUT));
        if let Err(e) = s.write_all(out.as_bytes()).await {
            let c = match e.kind() {
                io::ErrorKind::TimedOut => &counters.write_drops,
                _ => &counters.resets,
            };
            c.fetch_add(1, Ordering::Relaxed);
            return;
        }
        out.clear();
    }
}

async fn serve(ln: TcpListener, ctx: Context, store: Store, counters: Arc<Counters>) -> usize {
    let wg = WaitGroup::new();
    let mut accepted = 0;
    loop {
        gort::select! {
            r = ln.accept() => {
                let (s, _) = r.expect("accept");
                accepted += 1;
                wg.add(1);
                let (wg, store, counters) = (wg.clone(), store.clone(), counters.clone());
                gort::spawn(async move {
                    serve_conn(s, store, counters).await;
                    wg.done();
                });
            },
            _ = ctx.done().recv() => break,
        }
    }
    drop(ln);
    wg.wait().await;
    accepted
}

/// Pipelines PIPELINE commands per round and checks every answer.
async fn good_client(addr: std::net::SocketAddr, id: usize) -> Result<(), String> {
    let s = TcpStream::connect(addr).await.map_err(|e| e.to_string())?;
    let mut lines = Lines { buf: Vec::new() };
    for r in 0..ROUNDS {
        let mut req = String::new();
        for i in 0..PIPELINE / 2 {
            req.push_str(&format!("SET c{id}k{i} v{r}-{i}\nGET c{id}k{i}\n"));
        }
        s.write_all(req.as_bytes())
            .await
            .map_err(|e| e.to_string())?;
        for i in 0..PIPELINE / 2 {
            let a = lines.next(&s).await.map_err(|e| format!("read: {e}"))?;
            let b = lines.next(&s).await.map_err(|e| format!("read: {e}"))?;
            let want = format!("$v{r}-{i}");
            if a.as_deref() != Some("+OK") || b.as_deref() != Some(want.as_str()) {
                return Err(format!("client {id} round {r}: {a:?} {b:?}, want {want}"));
            }
        }
    }
    s.write_all(b"DEL c0k0\nQUIT\n")
        .await
        .map_err(|e| e.to_string())?;
    Ok(())
}

/// Connects, sends half a command, and vanishes (or resets the connection).
async fn vanishing_client(addr: std::net::SocketAddr, step: usize) {
    let s = TcpStream::connect(addr).await.unwrap();
    let _ = match step % 4 {
        0 => s.write_all(b"SET half").await,
        1 => s.write_all(b"GET x\nGET").await,
        2 => s.shutdown(std::net::Shutdown::Write),
        _ => Ok(()),
    };
    if step % 2 == 0 {
        gort::time::sleep(Duration::from_millis(step as u64 % 7)).await;
    }
}

/// Floods GETs of a large value and never reads: the server's write deadline drops it.
async fn flooding_client(addr: std::net::SocketAddr) {
    let s = TcpStream::connect(addr).await.unwrap();
    let big = "x".repeat(60_000);
    s.write_all(format!("SET big {big}\n").as_bytes())
        .await
        .unwrap();
    let req = "GET big\n".repeat(64);
    for _ in 0..200 {
        s.set_write_deadline(Some(Instant::now() + Duration::from_millis(500)))
            .unwrap();
        if s.write_all(req.as_bytes()).await.is_err() {
            break;
        }
    }
    // Hold the connection open (unread) until the server gives up on it.
    let mut buf = [0u8; 1];
    gort::time::sleep(Duration::from_millis(500)).await;
    let _ = s.read(&mut buf).await;
}

#[gort::main]
async fn main() {
    let started = std::time::Instant::now();
    let ln = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = ln.local_addr().unwrap();
    let store: Store = Arc::default();
    let counters = Arc::new(Counters::default());
    let (ctx, cancel) = context::with_cancel(&Context::background());
    let server = gort::spawn(serve(ln, ctx, store.clone(), counters.clone()));

    let mut clients = Vec::new();
    for id in 0..CLIENTS {
        clients.push(gort::spawn(good_client(addr, id)));
    }
    let vanishing: Vec<_> = (0..64)
        .map(|i| gort::spawn(vanishing_client(addr, i)))
        .collect();
    let floods: Vec<_> = (0..4).map(|_| gort::spawn(flooding_client(addr))).collect();
    // An idle client: the read deadline must close it.
    let idle = TcpStream::connect(addr).await.unwrap();

    let mut failed = 0;
    for c in clients {
        if let Err(e) = c.await.unwrap() {
            eprintln!("{e}");
            failed += 1;
        }
    }
    for v in vanishing {
        v.await.unwrap();
    }
    for f in floods {
        f.await.unwrap();
    }
    let mut b = [0u8; 8];
    let idle_closed = matches!(idle.read(&mut b).await, Ok(0));

    cancel.cancel();
    let accepted = gort::time::timeout(Duration::from_secs(5), server)
        .await
        .expect("server drained")
        .unwrap();
    let c = &counters;
    let get = |a: &AtomicU64| a.load(Ordering::Relaxed);
    println!(
        "{accepted} connections, {} commands; eof {}, idle drops {}, write drops {}, resets {}; {:?}",
        get(&c.commands),
        get(&c.eof),
        get(&c.idle_drops),
        get(&c.write_drops),
        get(&c.resets),
        started.elapsed()
    );
    let want_accepted = CLIENTS + 64 + 4 + 1;
    if failed > 0 || !idle_closed || accepted != want_accepted || get(&c.write_drops) != 4 {
        eprintln!(
            "FAILED: {failed} clients failed, idle closed {idle_closed}, accepted {accepted}"
        );
        std::process::exit(1);
    }
}
