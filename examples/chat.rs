//! A broadcast chat server written as in Go, with its load generator in the same program.
//!
//! Server: an accept loop and a hub task, both leaving on a `context` cancel; per connection
//! a reader task and a writer task sharing one `Arc<TcpStream>`, the reader dropping clients
//! idle for `IDLE` (a read deadline set before every read). Clients: each waits until all
//! have joined, says `MSGS` lines, and checks that it receives every line of every client
//! exactly once before the server drops it for idling.
//!
//! Run: `cargo run --release --example chat`

use gort::chan::{bounded, unbounded, Receiver, Sender};
use gort::context::{self, Context};
use gort::net::{TcpListener, TcpStream};
use gort::sync::WaitGroup;
use gort::time::Instant;
use std::collections::{HashMap, HashSet};
use std::io::ErrorKind;
use std::sync::Arc;
use std::time::Duration;

const CLIENTS: usize = 50;
const MSGS: usize = 4;
const IDLE: Duration = Duration::from_secs(1);

enum Event {
    Join(u64, Sender<Arc<str>>),
    Leave(u64),
    Say(Arc<str>),
}

/// Owns the set of clients: forwards every line to every client's writer.
async fn hub(ctx: Context, events: Receiver<Event>) {
    let mut clients: HashMap<u64, Sender<Arc<str>>> = HashMap::new();
    loop {
        gort::select! {
            ev = events.recv() => match ev {
                Some(Event::Join(id, tx)) => { clients.insert(id, tx); }
                Some(Event::Leave(id)) => { clients.remove(&id); }
                Some(Event::Say(line)) => {
                    for tx in clients.values() {
                        // A client too slow to take CLIENTS * MSGS lines is not waited for.
                        let _ = tx.try_send(line.clone());
                    }
                }
                None => return,
            },
            _ = ctx.done().recv() => return, // dropping `clients` ends every writer
        }
    }
}

/// Reads lines until the client closes or idles, then leaves the hub.
async fn reader(id: u64, conn: Arc<TcpStream>, events: Sender<Event>) {
    let (mut buf, mut pending) = (vec![0; 4096], Vec::new());
    loop {
        conn.set_read_deadline(Some(Instant::now() + IDLE)).unwrap();
        match conn.read(&mut buf).await {
            Ok(0) => break,
            Ok(n) => pending.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == ErrorKind::TimedOut => break, // idle: drop the client
            Err(e) => panic!("read: {e}"),
        }
        while let Some(line) = take_line(&mut pending) {
            let _ = events.send(Event::Say(line.into())).await;
        }
    }
    let _ = events.send(Event::Leave(id)).await;
}

/// Writes what the hub sends until the hub lets go of this client.
async fn writer(conn: Arc<TcpStream>, lines: Receiver<Arc<str>>) {
    let _ = conn.write_all(b"welcome\n").await;
    while let Some(line) = lines.recv().await {
        if conn.write_all(line.as_bytes()).await.is_err() {
            break;
        }
    }
    let _ = conn.shutdown(std::net::Shutdown::Both);
}

async fn serve(ctx: Context, listener: TcpListener) {
    let (events_tx, events_rx) = unbounded();
    let hub = gort::spawn(hub(ctx.clone(), events_rx));
    let mut conns = gort::JoinSet::new();
    for id in 0.. {
        gort::select! {
            res = listener.accept() => {
                let conn = Arc::new(res.unwrap().0);
                let (tx, rx) = bounded(CLIENTS * MSGS);
                events_tx.send(Event::Join(id, tx)).await.unwrap();
                conns.spawn(writer(conn.clone(), rx));
                conns.spawn(reader(id, conn, events_tx.clone()));
            },
            _ = ctx.done().recv() => break,
        }
    }
    hub.await.unwrap();
    conns.shutdown().await; // connections still open when the server stops
}

/// Joins, says its lines once everyone has joined, and returns every line it received.
async fn client(i: usize, addr: std::net::SocketAddr, joined: WaitGroup) -> HashSet<String> {
    let conn = TcpStream::connect(addr).await.unwrap();
    let (mut buf, mut pending, mut seen) = (vec![0; 4096], Vec::new(), HashSet::new());
    let mut welcomed = false;
    loop {
        match conn.read(&mut buf).await.unwrap() {
            0 => return seen, // the server dropped us for idling
            n => pending.extend_from_slice(&buf[..n]),
        }
        while let Some(line) = take_line(&mut pending) {
            if welcomed {
                assert!(seen.insert(line.clone()), "{line:?} arrived twice");
                continue;
            }
            assert_eq!(line, "welcome\n");
            welcomed = true;
            joined.done();
            joined.wait().await;
            for k in 0..MSGS {
                conn.write_all(format!("client {i} says {k}\n").as_bytes())
                    .await
                    .unwrap();
            }
        }
    }
}

fn take_line(pending: &mut Vec<u8>) -> Option<String> {
    let end = pending.iter().position(|&b| b == b'\n')?;
    Some(String::from_utf8(pending.drain(..=end).collect()).unwrap())
}

#[gort::main]
async fn main() {
    let (ctx, cancel) = context::with_cancel(&Context::background());
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let server = gort::spawn(serve(ctx, listener));
    let joined = WaitGroup::new();
    joined.add(CLIENTS as isize);
    let mut clients = gort::JoinSet::new();
    for i in 0..CLIENTS {
        clients.spawn(client(i, addr, joined.clone()));
    }
    while let Some(seen) = clients.join_next().await {
        assert_eq!(seen.unwrap().len(), CLIENTS * MSGS, "a line was lost");
    }
    println!(
        "{CLIENTS} clients each received all {} lines exactly once",
        CLIENTS * MSGS
    );
    cancel.cancel();
    server.await.unwrap();
    println!("server stopped");
}
