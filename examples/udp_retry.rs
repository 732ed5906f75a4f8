//! UDP request/response with a deadline per attempt and retries, against a server that drops
//! every third request and answers every fifth one too late.
//!
//! Two server tasks share one socket (as two goroutines would); each client task sends on its
//! own connected socket, waits for its answer until a read deadline, skips stale answers to
//! earlier requests, and sends again when the deadline passes. The program checks that every
//! request got its answer, and stops the servers with a `context` cancel.
//!
//! Run: `cargo run --release --example udp_retry`

use gort::context::{self, Context};
use gort::net::UdpSocket;
use gort::time::Instant;
use std::io::ErrorKind;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

const CLIENTS: u64 = 20;
const REQUESTS: u64 = 10;
const ATTEMPT: Duration = Duration::from_millis(50);
const MAX_ATTEMPTS: u32 = 20;

async fn server(ctx: Context, socket: Arc<UdpSocket>, received: Arc<AtomicU64>) {
    let mut buf = [0; 1500];
    loop {
        let (n, from) = gort::select! {
            res = socket.recv_from(&mut buf) => res.unwrap(),
            _ = ctx.done().recv() => return,
        };
        let k = received.fetch_add(1, Ordering::Relaxed);
        if k % 3 == 0 {
            continue; // lost
        }
        let answer = [b"re:".as_slice(), &buf[..n]].concat();
        if k % 5 == 0 {
            let socket = socket.clone();
            gort::spawn(async move {
                gort::time::sleep(2 * ATTEMPT).await; // too late for this attempt
                let _ = socket.send_to(&answer, from).await;
            });
        } else {
            socket.send_to(&answer, from).await.unwrap();
        }
    }
}

/// Sends `id` until its answer comes back; returns how many attempts it took.
async fn request(socket: &UdpSocket, id: u64) -> u32 {
    let (question, answer) = (id.to_string(), format!("re:{id}"));
    let mut buf = [0; 1500];
    for attempt in 1..=MAX_ATTEMPTS {
        socket.send(question.as_bytes()).await.unwrap();
        socket
            .set_read_deadline(Some(Instant::now() + ATTEMPT))
            .unwrap();
        loop {
            match socket.recv(&mut buf).await {
                Ok(n) if buf[..n] == *answer.as_bytes() => return attempt,
                Ok(_) => continue, // a late answer to an earlier request
                Err(e) if e.kind() == ErrorKind::TimedOut => break, // send again
                Err(e) => panic!("recv: {e}"),
            }
        }
    }
    panic!("request {id}: no answer after {MAX_ATTEMPTS} attempts");
}

#[gort::main]
async fn main() {
    let (ctx, cancel) = context::with_cancel(&Context::background());
    let socket = Arc::new(UdpSocket::bind("127.0.0.1:0").await.unwrap());
    let addr = socket.local_addr().unwrap();
    let received = Arc::new(AtomicU64::new(0));
    let servers: Vec<_> = (0..2)
        .map(|_| gort::spawn(server(ctx.clone(), socket.clone(), received.clone())))
        .collect();

    let mut clients = gort::JoinSet::new();
    for c in 0..CLIENTS {
        clients.spawn(async move {
            let socket = UdpSocket::bind("127.0.0.1:0").await.unwrap();
            socket.connect(addr).await.unwrap();
            let mut attempts = 0;
            for r in 0..REQUESTS {
                attempts += request(&socket, c * 1000 + r).await;
            }
            attempts
        });
    }
    let mut attempts = 0;
    while let Some(res) = clients.join_next().await {
        attempts += res.unwrap();
    }
    cancel.cancel();
    for s in servers {
        s.await.unwrap();
    }
    let requests = CLIENTS * REQUESTS;
    println!(
        "{requests} requests answered in {attempts} attempts ({} datagrams reached the server)",
        received.load(Ordering::Relaxed)
    );
    assert!(
        u64::from(attempts) > requests,
        "the server was meant to lose some"
    );
}
