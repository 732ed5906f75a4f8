//! A Tokio program on gort: a framed key-value RPC server written against tokio-util's
//! `Framed` + `LengthDelimitedCodec`, tokio-util's `CancellationToken`, `tokio::sync`
//! (`RwLock`, `Semaphore`, `watch`) and `tokio::select!`, running on `gort::net` and
//! `gort::time` with no Tokio runtime (gort's `tokio-io` feature gives the sockets tokio's
//! `AsyncRead`/`AsyncWrite`).
//!
//! Each connection's loop races `Framed::next` against the shutdown token and a 1 ms
//! housekeeping tick, so reads are dropped mid-frame again and again (`Framed` keeps the
//! partial frame: the read is cancel-safe). Requests run in their own task under a
//! `Semaphore`; one kind of request panics in its handler and the client gets an error
//! answer; some clients vanish mid-frame. A `watch` channel carries the server's config (the
//! answer prefix), reloaded while clients run. The run ends with a `CancellationToken`
//! shutdown while idle clients are connected, and checks every answer, the panics caught
//! and that every connection task ended.
//!
//! `cargo run --release --example framed_rpc --features tokio-io`

use bytes::Bytes;
use futures::{SinkExt, StreamExt};
use gort::net::{TcpListener, TcpStream};
use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{watch, RwLock, Semaphore};
use tokio_util::codec::{Framed, LengthDelimitedCodec};
use tokio_util::sync::CancellationToken;

const CLIENTS: usize = 32;
const REQUESTS: usize = 150;
const VANISHING: usize = 8;
const IDLE: usize = 4;
/// Every client sends a `BOOM` (a request whose handler panics) once in this many requests.
const BOOM_EVERY: usize = 50;

#[derive(Default)]
struct Stats {
    conns_open: AtomicUsize,
    conns_done: AtomicUsize,
    panics: AtomicUsize,
}

struct Server {
    store: RwLock<HashMap<String, String>>,
    handlers: Semaphore,
    config: watch::Receiver<String>,
    token: CancellationToken,
    stats: Stats,
}

/// Answers one request: `SET k v`, `GET k`, or `BOOM` (a handler bug: it panics).
async fn handle(server: &Server, req: &str) -> String {
    let prefix = server.config.borrow().clone();
    let mut words = req.splitn(3, ' ');
    match (words.next(), words.next(), words.next()) {
        (Some("SET"), Some(k), Some(v)) => {
            server.store.write().await.insert(k.into(), v.into());
            format!("{prefix}OK")
        }
        (Some("GET"), Some(k), None) => match server.store.read().await.get(k) {
            Some(v) => format!("{prefix}{v}"),
            None => format!("{prefix}NIL"),
        },
        (Some("BOOM"), ..) => panic!("handler bug on {req:?}"),
        _ => format!("{prefix}ERR bad request"),
    }
}

async fn serve_conn(server: Arc<Server>, conn: TcpStream) {
    let mut framed = Framed::new(conn, LengthDelimitedCodec::new());
    loop {
        let frame = tokio::select! {
            f = framed.next() => f,
            _ = server.token.cancelled() => break,
            // Housekeeping: cancels the read above mid-frame; Framed keeps what it read.
            _ = gort::time::sleep(Duration::from_millis(1)) => continue,
        };
        let req = match frame {
            Some(Ok(req)) => req,
            Some(Err(_)) | None => break, // the client vanished (mid-frame or not)
        };
        let permit = server.handlers.acquire().await.expect("never closed");
        let (srv, text) = (server.clone(), String::from_utf8_lossy(&req).into_owned());
        let answer = match gort::spawn(async move { handle(&srv, &text).await }).await {
            Ok(answer) => answer,
            Err(e) if e.is_panic() => {
                server.stats.panics.fetch_add(1, SeqCst);
                format!("{}ERR internal", *server.config.borrow())
            }
            Err(e) => panic!("handler task: {e}"),
        };
        drop(permit);
        if framed.send(Bytes::from(answer)).await.is_err() {
            break;
        }
    }
    server.stats.conns_done.fetch_add(1, SeqCst);
}

async fn accept_loop(server: Arc<Server>, listener: TcpListener) {
    let mut conns = Vec::new();
    loop {
        tokio::select! {
            accepted = listener.accept() => {
                let (conn, _) = accepted.expect("accept");
                server.stats.conns_open.fetch_add(1, SeqCst);
                conns.push(gort::spawn(serve_conn(server.clone(), conn)));
            }
            _ = server.token.cancelled() => break,
        }
    }
    for c in conns {
        c.await.expect("connection task");
    }
}

/// Writes `body` as one length-delimited frame in two pieces with a pause between, so the
/// server's read is cut mid-frame by its housekeeping tick.
async fn send_split(conn: &TcpStream, body: &[u8], pause: bool) {
    let mut frame = (body.len() as u32).to_be_bytes().to_vec();
    frame.extend_from_slice(body);
    let cut = frame.len() / 2;
    conn.write_all(&frame[..cut]).await.expect("write");
    if pause {
        gort::time::sleep(Duration::from_millis(2)).await;
    }
    conn.write_all(&frame[cut..]).await.expect("write");
}

type Answers<'a> = tokio_util::codec::FramedRead<&'a TcpStream, LengthDelimitedCodec>;

/// The next answer, without the config prefix it carries.
async fn answer(answers: &mut Answers<'_>) -> String {
    let frame = answers.next().await.expect("answer").expect("frame");
    let text = String::from_utf8(frame.to_vec()).expect("utf-8");
    text.split_once('|').expect("prefixed").1.to_string()
}

async fn client(addr: SocketAddr, id: usize) {
    let conn = Arc::new(TcpStream::connect(addr).await.expect("connect"));
    conn.set_nodelay(true).expect("nodelay");
    let mut answers = tokio_util::codec::FramedRead::new(&*conn, LengthDelimitedCodec::new());
    for i in 0..REQUESTS {
        let key = format!("k{id}.{}", i % 10);
        let value = format!("v{id}.{i}");
        send_split(&conn, format!("SET {key} {value}").as_bytes(), i % 16 == 0).await;
        assert_eq!(answer(&mut answers).await, "OK");
        send_split(&conn, format!("GET {key}").as_bytes(), false).await;
        assert_eq!(answer(&mut answers).await, value, "client {id} request {i}");
        if i % BOOM_EVERY == 7 {
            send_split(&conn, b"BOOM", false).await;
            assert_eq!(answer(&mut answers).await, "ERR internal");
        }
    }
}

#[gort::main]
async fn main() {
    quiet_handler_panics();
    println!("{}", run().await);
}

/// The handlers' panics are expected: keeps them off stderr, and reports any other.
pub fn quiet_handler_panics() {
    let report = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let bug = info.payload().downcast_ref::<String>();
        if !bug.is_some_and(|m| m.starts_with("handler bug")) {
            report(info);
        }
    }));
}

/// The whole run: serves, drives the clients, shuts down, checks; returns the summary
/// (`tests/framed_rpc.rs` runs it on 1 and 4 Ps).
pub async fn run() -> String {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    let (config_tx, config) = watch::channel("v0|".to_string());
    let server = Arc::new(Server {
        store: RwLock::new(HashMap::new()),
        handlers: Semaphore::new(8),
        config,
        token: CancellationToken::new(),
        stats: Stats::default(),
    });
    let acceptor = gort::spawn(accept_loop(server.clone(), listener));

    // The config reloads on a gort ticker while clients run.
    let reloader = gort::spawn(async move {
        let mut tick = gort::time::interval(Duration::from_millis(5));
        for v in 1.. {
            tick.tick().await;
            if config_tx.send(format!("v{v}|")).is_err() {
                break;
            }
        }
    });
    let vanishing: Vec<_> = (0..VANISHING)
        .map(|_| {
            gort::spawn(async move {
                let conn = TcpStream::connect(addr).await.expect("connect");
                conn.write_all(&[0, 0, 0, 40, b'S', b'E'])
                    .await
                    .expect("write");
                gort::time::sleep(Duration::from_millis(3)).await;
                // Dropped here: the server's Framed sees the stream end mid-frame.
            })
        })
        .collect();
    let clients: Vec<_> = (0..CLIENTS)
        .map(|id| gort::spawn(client(addr, id)))
        .collect();
    for c in clients.into_iter().chain(vanishing) {
        c.await.expect("client");
    }
    let idle: Vec<_> = futures::future::join_all((0..IDLE).map(|_| TcpStream::connect(addr)))
        .await
        .into_iter()
        .map(|c| c.expect("connect"))
        .collect();
    while server.stats.conns_open.load(SeqCst) < CLIENTS + VANISHING + IDLE {
        gort::time::sleep(Duration::from_millis(1)).await;
    }

    server.token.cancel();
    acceptor.await.expect("acceptor");
    for conn in idle {
        let mut byte = [0u8; 1];
        assert_eq!(
            conn.read(&mut byte).await.expect("read"),
            0,
            "closed at shutdown"
        );
    }
    reloader.abort();
    let stats = &server.stats;
    let opened = stats.conns_open.load(SeqCst);
    assert_eq!(
        stats.conns_done.load(SeqCst),
        opened,
        "every connection task ended"
    );
    let panics = stats.panics.load(SeqCst);
    assert_eq!(
        panics,
        CLIENTS * (0..REQUESTS).filter(|i| i % BOOM_EVERY == 7).count(),
        "every handler panic caught"
    );
    format!(
        "framed_rpc: {CLIENTS} clients x {REQUESTS} SET+GET checked, {VANISHING} vanished \
         mid-frame, {panics} handler panics answered, {opened} connections closed by the token"
    )
}
