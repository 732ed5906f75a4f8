//! A WebSocket chat server and its clients on gort, with tokio-tungstenite over
//! `gort::net::TcpStream` (gort's `tokio-io` feature) and no Tokio runtime.
//!
//! Server: an accept loop; per connection the WebSocket is split (`StreamExt::split`) into a
//! reader task and a writer task. The writer takes what to send from a `gort::chan` channel
//! (its own echoes and the hub's broadcasts) and sends a ping on every tick of a
//! `gort::time::Ticker`, each send under a write timeout; the reader ends a peer that sends
//! nothing (not even the pong its ping asks for) within the read timeout, with
//! `gort::time::timeout` around each read (tungstenite keeps a partial frame across the
//! dropped read). Text messages go to every client (chat), binary ones back to their sender
//! (echo), and tungstenite's message size limit ends a peer that sends a larger one.
//!
//! The run: `CLIENTS` clients join, each says `MSGS` lines and checks that it receives every
//! line of every client exactly once; one client echoes binary messages of 0 B to 1 MiB;
//! a client that goes silent is dropped by the read timeout, one that sends a message over
//! the limit is dropped at once, one vanishes without a close frame; at the end every
//! connection task has ended and each ended the way it should.
//!
//! `cargo run --release --example ws_chat --features tokio-io`

use futures::{SinkExt, StreamExt};
use gort::chan::{bounded, Sender};
use gort::net::{TcpListener, TcpStream};
use std::collections::{HashMap, HashSet};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering::SeqCst};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;
use tokio_tungstenite::tungstenite::{Error as WsError, Message};
use tokio_tungstenite::WebSocketStream;

const CLIENTS: usize = 50;
/// The server's first message on every connection, sent once the client has joined the hub.
pub const WELCOME: &str = "welcome";
const MSGS: usize = 20;

/// The server's limits and timers.
#[derive(Clone, Debug)]
pub struct WsConfig {
    /// A ping this often (the peer's pong keeps its reader alive).
    pub ping_interval: Duration,
    /// A peer that sends nothing for this long is dropped.
    pub read_timeout: Duration,
    /// A send (a message or a ping) that takes longer drops the peer.
    pub write_timeout: Duration,
    /// Tungstenite's `max_message_size` and `max_frame_size`.
    pub max_message: usize,
    /// Messages queued for one peer's writer.
    pub queue: usize,
}

impl Default for WsConfig {
    fn default() -> Self {
        WsConfig {
            ping_interval: Duration::from_millis(200),
            read_timeout: Duration::from_secs(2),
            write_timeout: Duration::from_secs(2),
            max_message: 2 << 20,
            queue: 1024,
        }
    }
}

impl WsConfig {
    /// Tungstenite's configuration: the size limits.
    pub fn tungstenite(&self) -> WebSocketConfig {
        WebSocketConfig::default()
            .max_message_size(Some(self.max_message))
            .max_frame_size(Some(self.max_message))
    }
}

/// How a connection ended, counted by [`Stats`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum End {
    /// The handshake failed.
    Handshake,
    /// The peer sent a close frame.
    Closed,
    /// The peer sent nothing within the read timeout.
    TimedOut,
    /// A send to the peer took longer than the write timeout (it stopped reading).
    WriteTimedOut,
    /// The peer sent a message over the size limit.
    TooLarge,
    /// The connection broke (a reset, or an end of stream without a close frame).
    Broken,
}

/// What the server counts: connections accepted and how each ended.
#[derive(Default, Debug)]
pub struct Stats {
    pub accepted: AtomicUsize,
    ends: Mutex<Vec<End>>,
}

impl Stats {
    /// How many connections ended as `end`.
    pub fn ended(&self, end: End) -> usize {
        self.ends
            .lock()
            .unwrap()
            .iter()
            .filter(|&&e| e == end)
            .count()
    }

    /// How many connection tasks have ended (reader and writer both).
    pub fn ended_total(&self) -> usize {
        self.ends.lock().unwrap().len()
    }

    /// Waits (polling) until `pred` holds, for at most `bound`; whether it did.
    pub async fn wait_for(&self, bound: Duration, pred: impl Fn(&Stats) -> bool) -> bool {
        let start = gort::time::Instant::now();
        while !pred(self) {
            if start.elapsed() > bound {
                return false;
            }
            gort::time::sleep(Duration::from_millis(5)).await;
        }
        true
    }
}

/// The writers of the connected clients, for text broadcasts.
#[derive(Default)]
struct Hub {
    clients: Mutex<HashMap<u64, Sender<Message>>>,
}

impl Hub {
    /// Queues `msg` for every client, the lock released first. A client whose writer has
    /// ended is skipped; a full queue waits (its writer's write timeout bounds the wait).
    async fn broadcast(&self, msg: Message) {
        let writers: Vec<_> = self.clients.lock().unwrap().values().cloned().collect();
        for w in writers {
            let _ = w.send(msg.clone()).await;
        }
    }
}

/// Accepts connections until the listener fails, each served by [`serve_conn`].
pub async fn serve(listener: TcpListener, cfg: WsConfig, stats: Arc<Stats>) {
    let hub = Arc::new(Hub::default());
    let ids = AtomicU64::new(0);
    while let Ok((stream, _)) = listener.accept().await {
        stats.accepted.fetch_add(1, SeqCst);
        let id = ids.fetch_add(1, SeqCst);
        let (cfg, stats, hub) = (cfg.clone(), stats.clone(), hub.clone());
        drop(gort::spawn(async move {
            let end = serve_conn(id, stream, &cfg, &hub).await;
            stats.ends.lock().unwrap().push(end);
        }));
    }
}

/// Serves one connection: the handshake, then a reader (this task) and a writer task.
async fn serve_conn(id: u64, stream: TcpStream, cfg: &WsConfig, hub: &Hub) -> End {
    let accept = tokio_tungstenite::accept_async_with_config(stream, Some(cfg.tungstenite()));
    let ws = match gort::time::timeout(cfg.read_timeout, accept).await {
        Ok(Ok(ws)) => ws,
        _ => return End::Handshake,
    };
    let (sink, mut source) = ws.split();
    let (tx, rx) = bounded::<Message>(cfg.queue);
    // Joined: the welcome tells the client that it gets every broadcast from now on.
    tx.try_send(Message::text(WELCOME)).unwrap();
    hub.clients.lock().unwrap().insert(id, tx.clone());
    let writer = gort::spawn(write_loop(sink, rx, cfg.clone()));
    // `None`: the writer has ended (and says how).
    let end = loop {
        let msg = match gort::time::timeout(cfg.read_timeout, source.next()).await {
            Err(_) => break Some(End::TimedOut),
            Ok(None) => break Some(End::Broken),
            Ok(Some(Err(WsError::Capacity(_)))) => break Some(End::TooLarge),
            Ok(Some(Err(_))) => break Some(End::Broken),
            Ok(Some(Ok(msg))) => msg,
        };
        match msg {
            Message::Text(_) => hub.broadcast(msg).await,
            Message::Binary(_) => {
                if tx.send(msg).await.is_err() {
                    break None;
                }
            }
            // A pong (or a ping, answered by tungstenite) only proves the peer alive.
            Message::Ping(_) | Message::Pong(_) | Message::Frame(_) => {}
            Message::Close(_) => break Some(End::Closed),
        }
    };
    // The writer ends once every sender is gone: this task's and the hub's.
    hub.clients.lock().unwrap().remove(&id);
    drop(tx);
    let wrote = writer.await.unwrap_or(End::Broken);
    end.unwrap_or(wrote)
}

/// Sends what the channel brings and a ping on every tick, until the channel closes (then a
/// close frame: `Closed`) or a send fails (`Broken`) or takes longer than the write timeout
/// (`WriteTimedOut`); dropping the channel's receiver then tells the reader.
async fn write_loop(
    mut sink: futures::stream::SplitSink<WebSocketStream<TcpStream>, Message>,
    rx: gort::chan::Receiver<Message>,
    cfg: WsConfig,
) -> End {
    let ticker = gort::time::Ticker::new(cfg.ping_interval);
    loop {
        let msg = gort::select! {
            m = rx.recv() => match m {
                Some(m) => m,
                None => break,
            },
            _ = ticker.c().recv() => Message::Ping(Default::default()),
        };
        match gort::time::timeout(cfg.write_timeout, sink.send(msg)).await {
            Ok(Ok(())) => {}
            Ok(Err(_)) => return End::Broken,
            Err(_) => return End::WriteTimedOut, // the peer stopped reading
        }
    }
    let _ = gort::time::timeout(cfg.write_timeout, sink.close()).await;
    End::Closed
}

/// A gort WebSocket client connected to `addr`, past the server's welcome.
pub async fn connect(addr: SocketAddr) -> WebSocketStream<TcpStream> {
    let stream = TcpStream::connect(addr).await.unwrap();
    let url = format!("ws://{addr}/");
    let (mut ws, _) = tokio_tungstenite::client_async(url, stream).await.unwrap();
    assert_eq!(next_data(&mut ws).await, Some(Message::text(WELCOME)));
    ws
}

/// The next text or binary message (pings are answered by tungstenite as it reads).
pub async fn next_data<S>(ws: &mut S) -> Option<Message>
where
    S: futures::Stream<Item = Result<Message, WsError>> + Unpin,
{
    loop {
        match ws.next().await? {
            Ok(m @ (Message::Text(_) | Message::Binary(_))) => return Some(m),
            Ok(Message::Close(_)) | Err(_) => return None,
            Ok(_) => {}
        }
    }
}

/// A message of `len` bytes, different for each `seed`: text of ASCII letters, or binary.
pub fn payload(len: usize, seed: usize, text: bool) -> Message {
    let bytes: Vec<u8> = (0..len).map(|i| b'a' + ((i + seed) % 26) as u8).collect();
    if text {
        Message::text(String::from_utf8(bytes).unwrap())
    } else {
        Message::binary(bytes)
    }
}

/// Sends binary and text messages of each size in `sizes` and checks each echo (text comes
/// back as a broadcast, which on a server with no other client is an echo); then closes.
pub async fn echo_sizes(addr: SocketAddr, sizes: &[usize], seed: usize) {
    let mut ws = connect(addr).await;
    for (k, &len) in sizes.iter().enumerate() {
        for text in [false, true] {
            let msg = payload(len, seed + k, text);
            ws.send(msg.clone()).await.unwrap();
            assert_eq!(next_data(&mut ws).await, Some(msg), "echo of {len} B");
        }
    }
    ws.close(None).await.unwrap();
}

/// One chat client: waits until all `total` have joined, says `msgs` lines, and returns
/// once it has every line of every client, each exactly once.
pub async fn chat_client(
    i: usize,
    addr: SocketAddr,
    joined: gort::sync::WaitGroup,
    total: usize,
    msgs: usize,
) {
    let ws = connect(addr).await;
    let (mut sink, mut source) = ws.split();
    joined.done();
    joined.wait().await;
    let say = gort::spawn(async move {
        for k in 0..msgs {
            sink.send(Message::text(format!("client {i} says {k}")))
                .await
                .unwrap();
        }
        sink
    });
    let mut seen = HashSet::new();
    while seen.len() < total * msgs {
        match next_data(&mut source).await {
            Some(Message::Text(line)) => assert!(seen.insert(line.to_string()), "{line} twice"),
            other => panic!("client {i}: {other:?} after {} lines", seen.len()),
        }
    }
    let mut ws = say.await.unwrap().reunite(source).unwrap();
    ws.close(None).await.unwrap();
    while ws.next().await.is_some() {} // the server's close frame, then the end
}

#[gort::main]
async fn main() {
    let cfg = WsConfig {
        read_timeout: Duration::from_millis(500),
        max_message: 2 << 20,
        ..WsConfig::default()
    };
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let stats = Arc::new(Stats::default());
    drop(gort::spawn(serve(listener, cfg.clone(), stats.clone())));

    // Chat: every client gets every line exactly once.
    let joined = gort::sync::WaitGroup::new();
    joined.add(CLIENTS as isize);
    let mut clients = gort::JoinSet::new();
    for i in 0..CLIENTS {
        clients.spawn(chat_client(i, addr, joined.clone(), CLIENTS, MSGS));
    }
    while let Some(r) = clients.join_next().await {
        r.unwrap();
    }
    println!(
        "{CLIENTS} clients each received all {} lines once",
        CLIENTS * MSGS
    );

    // Echo from 0 B to 1 MiB, text and binary.
    echo_sizes(addr, &[0, 1, 125, 126, 65_535, 65_536, 1 << 20], 7).await;
    println!("echoed 0 B .. 1 MiB");

    // A client that goes silent (it stops reading, so it answers no ping), one that sends
    // more than the limit, and one that vanishes without a close frame.
    let silent = connect(addr).await;
    let mut big = connect(addr).await;
    let _ = big.send(payload(cfg.max_message + 1, 0, false)).await;
    drop(connect(addr).await);
    let bound = cfg.read_timeout * 4;
    let all = CLIENTS + 4;
    assert!(
        stats.wait_for(bound, |s| s.ended_total() == all).await,
        "connections still open: {stats:?}"
    );
    assert_eq!(stats.ended(End::Closed), CLIENTS + 1, "{stats:?}");
    assert_eq!(stats.ended(End::TimedOut), 1, "{stats:?}");
    assert_eq!(stats.ended(End::TooLarge), 1, "{stats:?}");
    assert_eq!(stats.ended(End::Broken), 1, "{stats:?}");
    drop((silent, big));
    println!("silent, oversized and vanished peers dropped; all {all} connection tasks ended");
}
