//! WebSockets on gort: the server of `examples/ws_chat.rs` (tokio-tungstenite over
//! `gort::net`, a reader and a writer task per connection, pings on a `Ticker`, a read
//! timeout) under messages of 0 B to 1 MiB, 1,000 concurrent connections and broadcasts on 1
//! and 4 Ps, and hostile peers: silent ones, half frames that stall, peers that vanish
//! without a close frame, messages over the size limit, runtimes dropped with live
//! connections, reads dropped mid-frame; clients on a Tokio runtime, gort clients of a Tokio
//! server, async-tungstenite over futures-io (its own split, a reader and a writer task on
//! each end), and Go's read deadline seen through tungstenite.

mod support;
#[path = "../examples/ws_chat.rs"]
#[allow(dead_code)] // the example's `main` is not used here
mod ws_chat;

use futures::{SinkExt, StreamExt};
use gort::net::{TcpListener, TcpStream};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use support::within;
use tokio_tungstenite::tungstenite::{Error as WsError, Message};
use ws_chat::{connect, echo_sizes, next_data, payload, serve, End, Stats, WsConfig, WELCOME};

const SIZES: &[usize] = &[0, 1, 125, 126, 127, 65_535, 65_536, 65_537, 1 << 20];

/// A runtime of `procs` Ps serving WebSockets on a loopback port.
fn start(procs: usize, cfg: WsConfig) -> (gort::Runtime, SocketAddr, Arc<Stats>) {
    let rt = gort::Builder::new().procs(procs).build().unwrap();
    let listener = rt.block_on(TcpListener::bind("127.0.0.1:0")).unwrap();
    let addr = listener.local_addr().unwrap();
    let stats = Arc::new(Stats::default());
    drop(rt.spawn(serve(listener, cfg, stats.clone())));
    (rt, addr, stats)
}

/// Short timers, so that a silent peer is found out in well under a second.
fn quick() -> WsConfig {
    WsConfig {
        ping_interval: Duration::from_millis(50),
        read_timeout: Duration::from_millis(300),
        write_timeout: Duration::from_millis(300),
        ..WsConfig::default()
    }
}

/// Waits until `n` connections have ended, for at most `bound`; panics with the stats if not.
async fn ended(stats: &Stats, n: usize, bound: Duration) {
    let done = stats.wait_for(bound, |s| s.ended_total() >= n).await;
    assert!(
        done,
        "{n} connections not ended within {bound:?}: {stats:?}"
    );
}

fn echo_sizes_on(procs: usize) {
    within(move || {
        let (rt, addr, stats) = start(procs, WsConfig::default());
        rt.block_on(async move {
            echo_sizes(addr, SIZES, 0).await;
            ended(&stats, 1, Duration::from_secs(5)).await;
            assert_eq!(stats.ended(End::Closed), 1, "{stats:?}");
        });
    });
}

#[test]
fn echo_zero_to_one_mib_one_p() {
    echo_sizes_on(1);
}

#[test]
fn echo_zero_to_one_mib_four_ps() {
    echo_sizes_on(4);
}

/// 1,000 connections open at once (a `WaitGroup` holds each until all have connected), each
/// echoing binary messages while the server pings every one of them.
fn thousand_connections_on(procs: usize) {
    const CONNS: usize = 1_000;
    within(move || {
        // The clients read nothing (so answer no ping) until all have connected.
        let cfg = WsConfig {
            ping_interval: Duration::from_millis(250),
            read_timeout: Duration::from_secs(20),
            ..WsConfig::default()
        };
        let (rt, addr, stats) = start(procs, cfg);
        rt.block_on(async move {
            let joined = gort::sync::WaitGroup::new();
            joined.add(CONNS as isize);
            let mut clients = gort::JoinSet::new();
            for i in 0..CONNS {
                let joined = joined.clone();
                clients.spawn(async move {
                    let mut ws = connect(addr).await;
                    joined.done();
                    joined.wait().await;
                    for k in 0..3 {
                        let msg = payload((i * 37 + k * 1000) % 4096, i + k, false);
                        ws.send(msg.clone()).await.unwrap();
                        assert_eq!(next_data(&mut ws).await, Some(msg), "conn {i} msg {k}");
                    }
                    ws.close(None).await.unwrap();
                    while ws.next().await.is_some() {}
                });
            }
            while let Some(r) = clients.join_next().await {
                r.unwrap();
            }
            ended(&stats, CONNS, Duration::from_secs(5)).await;
            assert_eq!(stats.ended(End::Closed), CONNS, "{stats:?}");
        });
    });
}

#[test]
fn thousand_connections_one_p() {
    thousand_connections_on(1);
}

#[test]
fn thousand_connections_four_ps() {
    thousand_connections_on(4);
}

fn broadcast_on(procs: usize) {
    const CLIENTS: usize = 20;
    within(move || {
        let (rt, addr, stats) = start(procs, WsConfig::default());
        rt.block_on(async move {
            let joined = gort::sync::WaitGroup::new();
            joined.add(CLIENTS as isize);
            let mut clients = gort::JoinSet::new();
            for i in 0..CLIENTS {
                clients.spawn(ws_chat::chat_client(i, addr, joined.clone(), CLIENTS, 25));
            }
            while let Some(r) = clients.join_next().await {
                r.unwrap();
            }
            ended(&stats, CLIENTS, Duration::from_secs(5)).await;
            assert_eq!(stats.ended(End::Closed), CLIENTS, "{stats:?}");
        });
    });
}

#[test]
fn broadcast_every_line_once_one_p() {
    broadcast_on(1);
}

#[test]
fn broadcast_every_line_once_four_ps() {
    broadcast_on(4);
}

/// A client that says nothing but reads (so tungstenite answers each ping with a pong) stays
/// connected across many read timeouts, and still echoes afterwards.
#[test]
fn pings_keep_a_reading_client_alive() {
    within(|| {
        let cfg = quick();
        let (rt, addr, stats) = start(2, cfg.clone());
        rt.block_on(async move {
            let mut ws = connect(addr).await;
            let idle = gort::time::timeout(cfg.read_timeout * 4, next_data(&mut ws)).await;
            assert!(idle.is_err(), "data or an end while idle: {idle:?}");
            assert_eq!(stats.ended_total(), 0, "{stats:?}");
            let msg = payload(10, 0, false);
            ws.send(msg.clone()).await.unwrap();
            assert_eq!(next_data(&mut ws).await, Some(msg));
        });
    });
}

/// A client that stops reading answers no ping: its server task ends on the read timeout,
/// within a bound, and the client then sees the server's close or the end of the stream.
#[test]
fn silent_peer_is_dropped_by_the_read_timeout() {
    within(|| {
        let cfg = quick();
        let (rt, addr, stats) = start(2, cfg.clone());
        rt.block_on(async move {
            let mut ws = connect(addr).await;
            let start = gort::time::Instant::now();
            ended(&stats, 1, cfg.read_timeout * 10).await;
            assert!(
                start.elapsed() >= cfg.read_timeout / 2,
                "{:?}",
                start.elapsed()
            );
            assert_eq!(stats.ended(End::TimedOut), 1, "{stats:?}");
            let end = gort::time::timeout(Duration::from_secs(5), next_data(&mut ws)).await;
            assert_eq!(end, Ok(None), "the client was not let go");
        });
    });
}

/// The raw connection under a WebSocket whose handshake is done.
async fn raw_after_handshake(addr: SocketAddr) -> TcpStream {
    connect(addr).await.into_inner()
}

/// Peers that send part of a frame and stall: one byte of a header, a whole header and part
/// of the (masked) payload, and a 64-bit length cut short. The read timeout ends each server
/// task within the bound: never a hang.
fn half_frame_on(procs: usize) {
    within(move || {
        let cfg = quick();
        let (rt, addr, stats) = start(procs, cfg.clone());
        rt.block_on(async move {
            let halves: [&[u8]; 3] = [
                &[0x82],
                &[0x82, 0x80 | 100, 1, 2, 3, 4, 9, 9, 9, 9, 9],
                &[0x82, 0x80 | 127, 0, 0, 0, 0],
            ];
            let mut raws = Vec::new();
            for half in halves {
                let raw = raw_after_handshake(addr).await;
                raw.write_all(half).await.unwrap();
                raws.push(raw);
            }
            ended(&stats, halves.len(), cfg.read_timeout * 10).await;
            assert_eq!(stats.ended(End::TimedOut), halves.len(), "{stats:?}");
            // The server closed each connection: the stalled peers read to the end.
            for raw in raws {
                let mut buf = vec![0; 1024];
                while raw.read(&mut buf).await.map_or(0, |n| n) > 0 {}
            }
        });
    });
}

#[test]
fn half_frame_that_stalls_ends_within_bound_one_p() {
    half_frame_on(1);
}

#[test]
fn half_frame_that_stalls_ends_within_bound_four_ps() {
    half_frame_on(4);
}

/// Peers that vanish without a close frame, mid-conversation and mid-frame: their server
/// tasks end at once (an end of stream, no read timeout needed).
#[test]
fn vanished_peers_end_at_once() {
    within(|| {
        let cfg = WsConfig {
            read_timeout: Duration::from_secs(20),
            ..WsConfig::default()
        };
        let (rt, addr, stats) = start(2, cfg);
        rt.block_on(async move {
            let mut ws = connect(addr).await;
            let msg = payload(1000, 1, false);
            ws.send(msg.clone()).await.unwrap();
            assert_eq!(next_data(&mut ws).await, Some(msg));
            drop(ws);
            let raw = raw_after_handshake(addr).await;
            raw.write_all(&[0x82, 0x80 | 100, 1, 2, 3, 4, 9])
                .await
                .unwrap();
            drop(raw);
            drop(connect(addr).await);
            ended(&stats, 3, Duration::from_secs(5)).await;
            assert_eq!(stats.ended(End::Broken), 3, "{stats:?}");
        });
    });
}

/// A peer that sends and never reads: the server's echoes fill the socket, the writer's
/// write timeout fires, and the reader, finding the writer gone, ends the connection; the
/// peer's sends then fail instead of blocking for good.
fn stops_reading_on(procs: usize) {
    within(move || {
        let cfg = quick();
        let (rt, addr, stats) = start(procs, cfg.clone());
        rt.block_on(async move {
            let mut ws = connect(addr).await;
            let start = gort::time::Instant::now();
            let mut sent = 0;
            while ws.send(payload(256 << 10, sent, false)).await.is_ok() {
                sent += 1;
                assert!(
                    start.elapsed() < Duration::from_secs(10),
                    "never dropped: {stats:?}"
                );
            }
            ended(&stats, 1, Duration::from_secs(5)).await;
            assert_eq!(stats.ended(End::WriteTimedOut), 1, "{stats:?}");
            assert!(sent > 4, "dropped after {sent} messages");
        });
    });
}

#[test]
fn peer_that_stops_reading_is_dropped_by_the_write_timeout_one_p() {
    stops_reading_on(1);
}

#[test]
fn peer_that_stops_reading_is_dropped_by_the_write_timeout_four_ps() {
    stops_reading_on(4);
}

/// A message over tungstenite's size limit ends its peer (and only it); one at the limit is
/// echoed.
#[test]
fn oversized_message_ends_the_peer() {
    within(|| {
        let cfg = WsConfig {
            max_message: 64 << 10,
            ..WsConfig::default()
        };
        let (rt, addr, stats) = start(2, cfg.clone());
        rt.block_on(async move {
            let mut good = connect(addr).await;
            let mut big = connect(addr).await;
            let at_limit = payload(cfg.max_message, 2, false);
            good.send(at_limit.clone()).await.unwrap();
            assert_eq!(next_data(&mut good).await, Some(at_limit));
            let _ = big.send(payload(1 << 20, 3, false)).await;
            ended(&stats, 1, Duration::from_secs(5)).await;
            assert_eq!(stats.ended(End::TooLarge), 1, "{stats:?}");
            let end = gort::time::timeout(Duration::from_secs(5), next_data(&mut big)).await;
            assert_eq!(end, Ok(None), "the oversized peer was not let go");
            let msg = payload(100, 4, false);
            good.send(msg.clone()).await.unwrap();
            assert_eq!(next_data(&mut good).await, Some(msg));
        });
    });
}

/// The server's runtime dropped while 100 clients (on another gort runtime) are connected
/// and being pinged, 10 of which have sent 4 MiB they do not read the echo of (their
/// server writers block in a write): the drop returns, and every client sees its end.
#[test]
fn server_runtime_dropped_with_live_connections() {
    within(|| {
        // Timeouts that never end a connection here, however slow the machine.
        let cfg = WsConfig {
            ping_interval: Duration::from_millis(50),
            read_timeout: Duration::from_secs(60),
            write_timeout: Duration::from_secs(60),
            ..WsConfig::default()
        };
        let (server_rt, addr, stats) = start(4, cfg);
        let clients_rt = gort::Builder::new().procs(2).build().unwrap();
        let (up_tx, up_rx) = std::sync::mpsc::channel();
        let clients: Vec<_> = (0..100)
            .map(|i| {
                let up_tx = up_tx.clone();
                clients_rt.spawn(async move {
                    let mut ws = connect(addr).await;
                    if i < 10 {
                        for k in 0..4 {
                            ws.send(payload(1 << 20, k, false)).await.unwrap();
                        }
                        up_tx.send(()).unwrap();
                        while next_data(&mut ws).await.is_some() {} // the echoes, then the end
                        return None;
                    }
                    let msg = payload(100, 5, false);
                    ws.send(msg.clone()).await.unwrap();
                    assert_eq!(next_data(&mut ws).await, Some(msg));
                    up_tx.send(()).unwrap();
                    next_data(&mut ws).await // pings only, until the end
                })
            })
            .collect();
        for _ in 0..100 {
            let up = up_rx.recv_timeout(Duration::from_secs(10));
            assert!(up.is_ok(), "a client did not get going: {stats:?}");
        }
        drop(server_rt);
        clients_rt.block_on(async move {
            for c in clients {
                let end = gort::time::timeout(Duration::from_secs(5), c).await;
                assert_eq!(end.expect("a client never saw its end").unwrap(), None);
            }
        });
    });
}

/// The clients' runtime dropped mid-conversation: the server lets every connection go.
#[test]
fn client_runtime_dropped_with_live_connections() {
    within(|| {
        let (server_rt, addr, stats) = start(2, quick());
        let clients_rt = gort::Builder::new().procs(2).build().unwrap();
        for _ in 0..100 {
            drop(clients_rt.spawn(async move {
                let mut ws = connect(addr).await;
                loop {
                    let msg = payload(4000, 6, false);
                    ws.send(msg.clone()).await.unwrap();
                    assert_eq!(next_data(&mut ws).await, Some(msg));
                }
            }));
        }
        server_rt.block_on(stats.wait_for(Duration::from_secs(5), |s| {
            s.accepted.load(std::sync::atomic::Ordering::SeqCst) == 100
        }));
        drop(clients_rt);
        server_rt.block_on(ended(&stats, 100, Duration::from_secs(5)));
    });
}

/// Clients on a Tokio runtime (tokio::net, tokio-tungstenite) talk to the gort server:
/// echoes of 0 B to 1 MiB and 100 connections at once.
#[test]
fn tokio_runtime_clients_interop() {
    within(|| {
        let (_rt, addr, stats) = start(2, WsConfig::default());
        let tokio_rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        tokio_rt.block_on(async move {
            let mut tasks = Vec::new();
            for i in 0..100 {
                tasks.push(tokio::spawn(async move {
                    let stream = tokio::net::TcpStream::connect(addr).await.unwrap();
                    let url = format!("ws://{addr}/");
                    let (mut ws, _) = tokio_tungstenite::client_async(url, stream).await.unwrap();
                    assert_eq!(next_data(&mut ws).await, Some(Message::text(WELCOME)));
                    let sizes = if i == 0 { SIZES } else { &SIZES[..4] };
                    for &len in sizes {
                        let msg = payload(len, i, false);
                        ws.send(msg.clone()).await.unwrap();
                        assert_eq!(next_data(&mut ws).await, Some(msg));
                    }
                    ws.close(None).await.unwrap();
                    while ws.next().await.is_some() {}
                }));
            }
            for t in tasks {
                t.await.unwrap();
            }
        });
        _rt.block_on(ended(&stats, 100, Duration::from_secs(5)));
        assert_eq!(stats.ended(End::Closed), 100, "{stats:?}");
    });
}

/// async-tungstenite over futures-io's traits (gort's `futures-io` feature, no runtime
/// feature of its own): a client of the gort server, and a server of its own answering a
/// tokio-tungstenite client.
#[test]
fn async_tungstenite_over_futures_io() {
    within(|| {
        let (rt, addr, stats) = start(2, WsConfig::default());
        rt.block_on(async move {
            let stream = TcpStream::connect(addr).await.unwrap();
            let (mut ws, _) = async_tungstenite::client_async(format!("ws://{addr}/"), stream)
                .await
                .unwrap();
            let welcome = ws.next().await.unwrap().unwrap();
            assert_eq!(welcome.into_text().unwrap().as_str(), WELCOME);
            for &len in SIZES {
                let msg = async_tungstenite::tungstenite::Message::binary(vec![7u8; len]);
                ws.send(msg.clone()).await.unwrap();
                let echo = loop {
                    match ws.next().await.unwrap().unwrap() {
                        m if m.is_binary() => break m,
                        _ => {}
                    }
                };
                assert_eq!(echo, msg, "{len} B");
            }
            ws.close(None).await.unwrap();
            ended(&stats, 1, Duration::from_secs(5)).await;

            let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
            let own = listener.local_addr().unwrap();
            let server = gort::spawn(async move {
                let (stream, _) = listener.accept().await.unwrap();
                let mut ws = async_tungstenite::accept_async(stream).await.unwrap();
                ws.send(async_tungstenite::tungstenite::Message::text(WELCOME))
                    .await
                    .unwrap();
                while let Some(Ok(m)) = ws.next().await {
                    if m.is_binary() || m.is_text() {
                        ws.send(m).await.unwrap();
                    }
                }
            });
            echo_sizes(own, SIZES, 8).await;
            server.await.unwrap();
        });
    });
}

/// Go's read deadline on the socket under a WebSocket: a read past it fails with `TimedOut`
/// through tungstenite, within the bound. As with Go's gorilla/websocket ("after a read has
/// timed out, the websocket connection state is corrupt"), the error is terminal:
/// tokio-tungstenite's stream ends after any error (its `poll_next` fuses; the same under
/// Tokio), so the client can only close, and the server sees that close.
#[test]
fn read_deadline_through_tungstenite() {
    within(|| {
        let cfg = WsConfig {
            ping_interval: Duration::from_secs(60),
            ..WsConfig::default()
        };
        let (rt, addr, stats) = start(2, cfg);
        rt.block_on(async move {
            let mut ws = connect(addr).await;
            let deadline = gort::time::Instant::now() + Duration::from_millis(100);
            ws.get_ref().set_read_deadline(Some(deadline)).unwrap();
            let start = gort::time::Instant::now();
            match ws.next().await {
                Some(Err(WsError::Io(e))) if e.kind() == std::io::ErrorKind::TimedOut => {}
                other => panic!("not a timeout: {other:?}"),
            }
            assert!(start.elapsed() < Duration::from_secs(5));
            assert!(
                ws.next().await.is_none(),
                "the stream goes on after an error"
            );
            ws.get_ref().set_read_deadline(None).unwrap();
            ws.close(None).await.unwrap();
            ended(&stats, 1, Duration::from_secs(5)).await;
            assert_eq!(stats.ended(End::Closed), 1, "{stats:?}");
        });
    });
}

/// Reads dropped mid-frame lose nothing: the client polls `next` under a zero timeout (one
/// poll, then the read is dropped), again and again, while the server echoes messages up to
/// 1 MiB (tungstenite keeps the partial frame; gort's read is cancel-safe), so every echo
/// arrives whole across many dropped reads.
#[test]
fn reads_dropped_mid_frame_lose_nothing() {
    within(|| {
        let (rt, addr, _stats) = start(2, WsConfig::default());
        rt.block_on(async move {
            let mut ws = connect(addr).await;
            let mut dropped = 0;
            for (k, &len) in SIZES.iter().enumerate() {
                let msg = payload(len, k, false);
                ws.send(msg.clone()).await.unwrap();
                let echo = loop {
                    match gort::time::timeout(Duration::ZERO, next_data(&mut ws)).await {
                        Ok(m) => break m,
                        Err(_) => dropped += 1,
                    }
                    gort::yield_now().await;
                };
                assert_eq!(echo, Some(msg), "{len} B");
            }
            assert!(dropped > 0, "no read was ever dropped");
        });
    });
}

/// The other way round: a gort client (tokio-tungstenite over gort::net) against a server
/// on a Tokio runtime, with messages of 0 B to 1 MiB and 100 connections.
#[test]
fn gort_clients_of_a_tokio_server() {
    within(|| {
        let tokio_rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        let addr = tokio_rt.block_on(async {
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            let addr = listener.local_addr().unwrap();
            tokio::spawn(async move {
                while let Ok((stream, _)) = listener.accept().await {
                    tokio::spawn(async move {
                        let mut ws = tokio_tungstenite::accept_async(stream).await.unwrap();
                        ws.send(Message::text(WELCOME)).await.unwrap();
                        while let Some(Ok(m)) = ws.next().await {
                            if m.is_binary() || m.is_text() {
                                ws.send(m).await.unwrap();
                            }
                        }
                    });
                }
            });
            addr
        });
        let rt = gort::Builder::new().procs(2).build().unwrap();
        rt.block_on(async move {
            let conns: Vec<_> = (0..100)
                .map(|i| {
                    let sizes = if i == 0 { SIZES } else { &SIZES[..4] };
                    gort::spawn(echo_sizes(addr, sizes, i))
                })
                .collect();
            for c in conns {
                c.await.unwrap();
            }
        });
    });
}

/// async-tungstenite's own split (`WebSocketSender` / `WebSocketReceiver`, a shared mutex)
/// over futures-io on gort: on both ends a writer task sends while a reader task receives,
/// at once, 200 messages of up to 64 KiB each way (the sockets fill both ways), on 1 and 4
/// Ps; every message arrives, in order.
fn async_tungstenite_split_on(procs: usize) {
    use async_tungstenite::tungstenite::Message as AMessage;
    const N: usize = 200;
    fn msg(k: usize) -> AMessage {
        AMessage::binary(vec![k as u8; (k * 331) % (64 << 10)])
    }
    async fn both_ways(
        ws: async_tungstenite::WebSocketStream<TcpStream>,
    ) -> async_tungstenite::WebSocketStream<TcpStream> {
        let (mut tx, mut rx) = ws.split();
        let writer = gort::spawn(async move {
            for k in 0..N {
                tx.send(msg(k)).await.unwrap();
            }
            tx
        });
        let mut k = 0;
        while k < N {
            match rx.next().await.unwrap().unwrap() {
                m if m.is_binary() => {
                    assert_eq!(m, msg(k), "message {k}");
                    k += 1;
                }
                _ => {}
            }
        }
        let tx = writer.await.unwrap();
        async_tungstenite::WebSocketStream::reunite(tx, rx).unwrap()
    }
    within(move || {
        let rt = gort::Builder::new().procs(procs).build().unwrap();
        rt.block_on(async move {
            let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
            let addr = listener.local_addr().unwrap();
            let server = gort::spawn(async move {
                let (stream, _) = listener.accept().await.unwrap();
                let ws = async_tungstenite::accept_async(stream).await.unwrap();
                let mut ws = both_ways(ws).await;
                assert!(ws.next().await.unwrap().unwrap().is_close());
            });
            let stream = TcpStream::connect(addr).await.unwrap();
            let (ws, _) = async_tungstenite::client_async(format!("ws://{addr}/"), stream)
                .await
                .unwrap();
            let mut ws = both_ways(ws).await;
            ws.close(None).await.unwrap();
            server.await.unwrap();
        });
    });
}

#[test]
fn async_tungstenite_split_both_ways_one_p() {
    async_tungstenite_split_on(1);
}

#[test]
fn async_tungstenite_split_both_ways_four_ps() {
    async_tungstenite_split_on(4);
}
