//! A TCP proxy as a Go program writes one, checked by a load generator through it.
//!
//! - Each accepted connection dials the upstream with a connect timeout
//!   (`gort::time::timeout` around `TcpStream::connect`: Go's `net.DialTimeout`).
//! - Bytes are copied both ways by two tasks; each moves its read deadline before every read
//!   (an idle connection is dropped) and, when its source ends, half-closes its destination
//!   (`OwnedWriteHalf::close_write`, Go's `CloseWrite`), so each side reads end of stream.
//! - A `SIGTERM` (`gort::signal::notify`) cancels the server's `context`: the accept loop stops,
//!   every copy in flight ends, and a `WaitGroup` waits for the connections to finish.
//!
//! The load generator sends 200 connections' worth of distinct bytes through the proxy to an
//! echo server and checks every byte comes back intact, then sends the proxy a `SIGTERM` with
//! idle connections still open, and checks that they are all closed and no descriptor leaked.
//!
//! Run: `cargo run --release --example proxy`.

use gort::context::{self, Context};
use gort::net::{OwnedReadHalf, OwnedWriteHalf, TcpListener, TcpStream};
use gort::signal::{self, Signal};
use gort::sync::WaitGroup;
use gort::time::Instant;
use std::io;
use std::net::SocketAddr;
use std::time::Duration;

const DIAL_TIMEOUT: Duration = Duration::from_secs(2);
const IDLE_TIMEOUT: Duration = Duration::from_secs(10);
const CLIENTS: u64 = 200;

/// Copies `src` to `dst` until `src` ends (then half-closes `dst`), stays idle too long, or
/// the context is cancelled. Returns the bytes copied.
async fn pipe(ctx: Context, src: OwnedReadHalf, dst: OwnedWriteHalf) -> io::Result<u64> {
    let mut buf = vec![0; 32 * 1024];
    let mut copied = 0;
    loop {
        src.set_read_deadline(Some(Instant::now() + IDLE_TIMEOUT))?;
        let n = gort::select! {
            n = src.read(&mut buf) => n?,
            _ = ctx.done().recv() => return Err(io::ErrorKind::Interrupted.into()),
        };
        if n == 0 {
            dst.close_write()?;
            return Ok(copied);
        }
        dst.write_all(&buf[..n]).await?;
        copied += n as u64;
    }
}

/// Proxies one client to `upstream` until both directions are done.
async fn proxy_conn(ctx: Context, client: TcpStream, upstream: SocketAddr) {
    let up = match gort::time::timeout(DIAL_TIMEOUT, TcpStream::connect(upstream)).await {
        Ok(Ok(up)) => up,
        Ok(Err(e)) => return eprintln!("proxy: dial {upstream}: {e}"),
        Err(_) => return eprintln!("proxy: dial {upstream}: timed out"),
    };
    let (client_r, client_w) = client.into_split();
    let (up_r, up_w) = up.into_split();
    let to_upstream = gort::spawn(pipe(ctx.clone(), client_r, up_w));
    let _ = pipe(ctx, up_r, client_w).await;
    let _ = to_upstream.await;
}

/// Accepts until `ctx` is cancelled, then waits for the connections in flight.
async fn serve(ctx: Context, listener: TcpListener, upstream: SocketAddr) {
    let conns = WaitGroup::new();
    loop {
        let client = gort::select! {
            accepted = listener.accept() => match accepted {
                Ok((client, _)) => client,
                Err(e) => {
                    // Go's servers back off on accept errors (e.g. out of descriptors).
                    eprintln!("proxy: accept: {e}");
                    gort::time::sleep(Duration::from_millis(5)).await;
                    continue;
                }
            },
            _ = ctx.done().recv() => break,
        };
        conns.add(1);
        let (ctx, conns) = (ctx.clone(), conns.clone());
        gort::spawn(async move {
            proxy_conn(ctx, client, upstream).await;
            conns.done();
        });
    }
    drop(listener);
    conns.wait().await;
}

/// The upstream: echoes each connection, half-closing when its client does.
async fn echo_server(listener: TcpListener) {
    while let Ok((conn, _)) = listener.accept().await {
        gort::spawn(async move {
            let mut buf = vec![0; 16 * 1024];
            while let Ok(n @ 1..) = conn.read(&mut buf).await {
                if conn.write_all(&buf[..n]).await.is_err() {
                    return;
                }
            }
            let _ = conn.shutdown(std::net::Shutdown::Write);
        });
    }
}

/// Distinct pseudo-random bytes for client `id` (xorshift).
fn payload(id: u64) -> Vec<u8> {
    let len = 1_000 + (id as usize * 7_919) % 100_000;
    let mut x = (id + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

/// Sends its payload through the proxy while reading the echo; checks it byte for byte.
async fn client(proxy: SocketAddr, id: u64) -> usize {
    let data = payload(id);
    let (reader, writer) = TcpStream::connect(proxy).await.unwrap().into_split();
    let sent = data.clone();
    let sender = gort::spawn(async move {
        for chunk in sent.chunks(4_096) {
            writer.write_all(chunk).await.unwrap();
        }
        writer.close_write().unwrap();
    });
    let mut echoed = Vec::with_capacity(data.len());
    let mut buf = vec![0; 8_192];
    loop {
        reader
            .set_read_deadline(Some(Instant::now() + Duration::from_secs(10)))
            .unwrap();
        match reader.read(&mut buf).await.unwrap() {
            0 => break,
            n => echoed.extend_from_slice(&buf[..n]),
        }
    }
    sender.await.unwrap();
    assert!(
        echoed == data,
        "client {id}: the echo differs from what was sent"
    );
    data.len()
}

fn open_fds() -> usize {
    std::fs::read_dir("/proc/self/fd").map_or(0, |d| d.count())
}

#[gort::main]
async fn main() {
    let fds_before = open_fds();
    let upstream = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let upstream_addr = upstream.local_addr().unwrap();
    let echo = gort::spawn(echo_server(upstream));

    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let proxy_addr = listener.local_addr().unwrap();
    let (ctx, cancel) = context::with_cancel(&Context::background());
    let signals = signal::notify(&[Signal::TERMINATE, Signal::INTERRUPT]).unwrap();
    gort::spawn(async move {
        if let Some(sig) = signals.recv().await {
            println!("proxy: {sig:?}: shutting down");
            cancel.cancel();
        }
    });
    let server = gort::spawn(serve(ctx, listener, upstream_addr));

    let start = std::time::Instant::now();
    let mut clients = gort::JoinSet::new();
    for id in 0..CLIENTS {
        clients.spawn(client(proxy_addr, id));
    }
    let bytes: usize = clients.join_all().await.into_iter().sum();
    println!(
        "{CLIENTS} clients: {bytes} bytes each way, intact, in {:?}",
        start.elapsed()
    );

    // Idle clients are still connected when the signal comes: shutting down closes them.
    let mut idle = Vec::new();
    for _ in 0..10 {
        idle.push(TcpStream::connect(proxy_addr).await.unwrap());
    }
    gort::time::sleep(Duration::from_millis(20)).await; // let the proxy accept them
                                                        // SAFETY: sends SIGTERM to this process, which `signal::notify` handles.
    unsafe { libc::kill(libc::getpid(), libc::SIGTERM) };
    gort::time::timeout(Duration::from_secs(5), server)
        .await
        .expect("the proxy did not shut down")
        .unwrap();
    for conn in &idle {
        assert_eq!(
            conn.read(&mut [0; 8]).await.unwrap(),
            0,
            "an idle client stayed open"
        );
    }
    drop(idle);
    echo.abort();
    let _ = echo.await;
    // The echo server's tasks and the signal subscription close theirs as they see the end.
    let settle = Instant::now() + Duration::from_secs(5);
    while open_fds() != fds_before && Instant::now() < settle {
        gort::time::sleep(Duration::from_millis(5)).await;
    }
    assert_eq!(open_fds(), fds_before, "a descriptor leaked");
    println!("shut down: every connection closed, no descriptor left open");
}
