//! Network shapes N1, N2 and N4 on gort (procs = W): echo round trips over loopback TCP.

use std::sync::Arc;
use std::time::Duration;

use gort::net::{TcpListener, TcpStream};
use gort::time::Instant;

use crate::common::{ms, Figures, Latch, Meter, Params};
use crate::timer_gort::{go, run};

/// Message size of the echo shapes.
const MSG: usize = 64;

/// An echo server on a fresh loopback port: each connection echoes until its client closes;
/// with `deadline`, a read deadline 30 s ahead is set before every read (Go's idle timeout).
async fn echo_server(deadline: bool) -> std::net::SocketAddr {
    let l = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = l.local_addr().expect("local_addr");
    go(async move {
        while let Ok((c, _)) = l.accept().await {
            go(async move {
                let mut buf = [0u8; MSG];
                loop {
                    if deadline {
                        let d = Instant::now() + Duration::from_secs(30);
                        c.set_read_deadline(Some(d)).expect("deadline");
                    }
                    match c.read(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => {
                            if c.write_all(&buf[..n]).await.is_err() {
                                return;
                            }
                        }
                    }
                }
            });
        }
    });
    addr
}

/// One client: `rounds` round trips of a `MSG`-byte message.
async fn client(addr: std::net::SocketAddr, rounds: usize) {
    let c = TcpStream::connect(addr).await.expect("connect");
    let msg = [7u8; MSG];
    let mut buf = [0u8; MSG];
    for _ in 0..rounds {
        c.write_all(&msg).await.expect("write");
        c.read_exact(&mut buf).await.expect("read");
    }
}

/// N1: one connection, N = 100,000 round trips.
pub fn n1_echo_pingpong(p: &Params) -> Figures {
    let n = p.n(100_000);
    run(p, move || async move {
        let addr = echo_server(false).await;
        let m = Meter::start();
        client(addr, n).await;
        vec![("per_round_trip_ns", m.ns_per(n))]
    })
}

/// N2 / N4: C = 256 clients at once, 1,000 round trips each.
fn fanin(p: &Params, deadline: bool) -> Figures {
    let (conns, rounds) = (256, p.n(1_000));
    run(p, move || async move {
        let addr = echo_server(deadline).await;
        let done = Arc::new(Latch::new(conns));
        let m = Meter::start();
        for _ in 0..conns {
            let done = done.clone();
            go(async move {
                client(addr, rounds).await;
                done.arrive();
            });
        }
        done.wait().await;
        vec![
            ("per_round_trip_ns", m.ns_per(conns * rounds)),
            ("cpu_ms", ms(m.cpu())),
        ]
    })
}

/// N2: echo fan-in.
pub fn n2_echo_fanin(p: &Params) -> Figures {
    fanin(p, false)
}

/// N4: N2 with a read deadline 30 s ahead set before every server read.
pub fn n4_deadline_echo(p: &Params) -> Figures {
    fanin(p, true)
}
