//! An echo server with Go's idle timeouts: each connection's read deadline is pushed
//! `IDLE` ahead before every read (one timer re-arm, no allocation), so a client that stays
//! silent that long is dropped. A client in the same program shows both outcomes.
//!
//! Run: `cargo run --release --example echo_idle`

use gort::net::{TcpListener, TcpStream};
use gort::time::Instant;
use std::io::ErrorKind;
use std::time::Duration;

const IDLE: Duration = Duration::from_millis(200);

/// Echoes until the peer closes or stays idle for `IDLE`.
async fn serve(conn: TcpStream) -> std::io::Result<u64> {
    let mut buf = [0; 4096];
    let mut echoed = 0;
    loop {
        conn.set_read_deadline(Some(Instant::now() + IDLE))?;
        match conn.read(&mut buf).await {
            Ok(0) => return Ok(echoed),
            Ok(n) => {
                conn.write_all(&buf[..n]).await?;
                echoed += n as u64;
            }
            Err(e) if e.kind() == ErrorKind::TimedOut => {
                println!("server: {} idle for {IDLE:?}, dropped", conn.peer_addr()?);
                return Ok(echoed);
            }
            Err(e) => return Err(e),
        }
    }
}

#[gort::main]
async fn main() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    println!("echo server on {addr}, idle timeout {IDLE:?}");
    gort::spawn(async move {
        loop {
            let (conn, _) = listener.accept().await.unwrap();
            gort::spawn(async move {
                let echoed = serve(conn).await.unwrap();
                println!("server: connection done after {echoed} bytes");
            });
        }
    });

    // A chatty client: a message every 50 ms, well inside the idle timeout.
    let client = TcpStream::connect(addr).await.unwrap();
    let mut reply = [0; 5];
    for _ in 0..5 {
        client.write_all(b"hello").await.unwrap();
        client.read_exact(&mut reply).await.unwrap();
        gort::time::sleep(Duration::from_millis(50)).await;
    }
    println!("client: 5 echoes received");

    // Then silence: the server drops it after IDLE, and the client reads end of stream.
    let t0 = Instant::now();
    let n = client.read(&mut reply).await.unwrap();
    assert_eq!(n, 0);
    println!(
        "client: dropped by the server after {:?} of silence",
        t0.elapsed()
    );
}
