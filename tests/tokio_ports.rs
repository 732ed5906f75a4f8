//! Tokio programs ported to gort unchanged but for the runtime: tokio-util's codecs and
//! `CancellationToken`, `tokio::sync`, `tokio::io`'s utilities, `tokio::select!` and
//! `futures::select!`, over `gort::net` and `gort::time` (no Tokio runtime anywhere). Each
//! runs on 1 and on 4 Ps, with the hostile twists a Tokio program meets: reads dropped
//! mid-frame by a `select!` of either flavour, peers that vanish mid-frame, panics in tasks,
//! a runtime dropped mid-flight. `tokio_services.rs` has the services (hyper's client,
//! `watch`, tower-style loops).

#[path = "support/ports.rs"]
mod ports;
mod support;

use bytes::Bytes;
use futures::{SinkExt, StreamExt};
use gort::net::{TcpListener, TcpStream};
use ports::{listener, run, PATIENCE};
use std::io::ErrorKind;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt};
use tokio_util::codec::{Framed, LengthDelimitedCodec, LinesCodec};
use tokio_util::sync::CancellationToken;

// ---------------------------------------------------------------------------------------
// 1. A framed RPC server: LengthDelimitedCodec, a CancellationToken shutdown, and a per-
//    connection loop whose `select!` drops `Framed::next` mid-frame every millisecond.

/// Serves one connection: answers each frame with the frame reversed. `tokio_flavour` picks
/// `tokio::select!` or `futures::select!`; both race the read against a 1 ms sleep, so a
/// read is dropped half-way through a frame over and over (Framed keeps the partial frame).
async fn rpc_conn(conn: TcpStream, token: CancellationToken, tokio_flavour: bool) {
    let mut framed = Framed::new(conn, LengthDelimitedCodec::new());
    loop {
        let frame = if tokio_flavour {
            tokio::select! {
                f = framed.next() => f,
                _ = token.cancelled() => return,
                _ = gort::time::sleep(Duration::from_millis(1)) => continue,
            }
        } else {
            use futures::FutureExt;
            futures::select! {
                f = framed.next().fuse() => f,
                _ = token.cancelled().fuse() => return,
                _ = gort::time::sleep(Duration::from_millis(1)).fuse() => continue,
            }
        };
        match frame {
            Some(Ok(req)) => {
                let mut resp = req.to_vec();
                resp.reverse();
                if framed.send(Bytes::from(resp)).await.is_err() {
                    return;
                }
            }
            Some(Err(_)) | None => return,
        }
    }
}

async fn rpc_server(l: TcpListener, token: CancellationToken, served: Arc<AtomicUsize>) {
    let mut conns = Vec::new();
    loop {
        tokio::select! {
            accepted = l.accept() => {
                let (conn, _) = accepted.unwrap();
                let n = served.fetch_add(1, SeqCst);
                conns.push(gort::spawn(rpc_conn(conn, token.clone(), n % 2 == 0)));
            }
            _ = token.cancelled() => break,
        }
    }
    for c in conns {
        c.await.unwrap();
    }
}

/// One client: `reqs` requests, each frame written in two pieces with a pause between, so
/// the server's read is cut mid-frame by its 1 ms sleep.
async fn rpc_client(addr: SocketAddr, id: usize, reqs: usize) {
    let conn = TcpStream::connect(addr).await.unwrap();
    conn.set_nodelay(true).unwrap();
    let (rd, wr) = conn.into_split();
    let mut rd = tokio_util::codec::FramedRead::new(rd, LengthDelimitedCodec::new());
    for i in 0..reqs {
        let body = format!("client {id} request {i} {}", "x".repeat(i % 50));
        let mut frame = (body.len() as u32).to_be_bytes().to_vec();
        frame.extend_from_slice(body.as_bytes());
        let cut = frame.len() / 2;
        wr.write_all(&frame[..cut]).await.unwrap();
        if i % 8 == 0 {
            gort::time::sleep(Duration::from_millis(2)).await;
        } else {
            gort::yield_now().await;
        }
        wr.write_all(&frame[cut..]).await.unwrap();
        let resp = rd.next().await.expect("server closed early").unwrap();
        let mut want = body.into_bytes();
        want.reverse();
        assert_eq!(&resp[..], &want[..], "client {id} request {i}");
    }
}

fn framed_rpc(procs: usize) {
    run(procs, || async move {
        let (l, addr) = listener().await;
        let token = CancellationToken::new();
        let served = Arc::new(AtomicUsize::new(0));
        let server = gort::spawn(rpc_server(l, token.clone(), served.clone()));
        let clients: Vec<_> = (0..24)
            .map(|id| gort::spawn(rpc_client(addr, id, 100)))
            .collect();
        for c in clients {
            c.await.unwrap();
        }
        // Idle connections, then the shutdown: every connection task sees the token.
        let idle: Vec<_> = futures::future::join_all((0..4).map(|_| TcpStream::connect(addr)))
            .await
            .into_iter()
            .map(Result::unwrap)
            .collect();
        gort::time::sleep(Duration::from_millis(20)).await;
        token.cancel();
        server.await.unwrap();
        assert_eq!(served.load(SeqCst), 28);
        for conn in idle {
            let mut buf = [0u8; 1];
            assert_eq!(conn.read(&mut buf).await.unwrap(), 0, "closed at shutdown");
        }
    });
}

#[test]
fn framed_rpc_one_p() {
    framed_rpc(1);
}

#[test]
fn framed_rpc_four_ps() {
    framed_rpc(4);
}

// ---------------------------------------------------------------------------------------
// 2. Peers that vanish: half a frame then a close, and a reset.

#[test]
fn peer_vanishing_mid_frame() {
    for procs in [1, 4] {
        run(procs, || async move {
            let (l, addr) = listener().await;
            let server = gort::spawn(async move {
                let mut kinds = Vec::new();
                for _ in 0..2 {
                    let (conn, _) = l.accept().await.unwrap();
                    let mut framed = Framed::new(conn, LengthDelimitedCodec::new());
                    let first = framed.next().await;
                    kinds.push(first.map(|r| r.map(|b| b.len()).map_err(|e| e.kind())));
                    assert!(
                        framed.next().await.is_none(),
                        "a stream ends after its error"
                    );
                }
                kinds
            });
            // Half a frame, then a clean close: tokio-util's "bytes remaining on stream".
            let c = TcpStream::connect(addr).await.unwrap();
            c.write_all(&[0, 0, 0, 10, b'h', b'a']).await.unwrap();
            drop(c);
            // Half a frame, then a reset (SO_LINGER 0): the error a Tokio program sees.
            let c = std::net::TcpStream::connect(addr).unwrap();
            std::io::Write::write_all(&mut (&c), &[0, 0, 0, 10, b'h']).unwrap();
            support::linger_zero(&c);
            gort::time::sleep(Duration::from_millis(20)).await;
            drop(c);
            let kinds = server.await.unwrap();
            assert_eq!(kinds[0], Some(Err(ErrorKind::Other)), "{kinds:?}");
            assert_eq!(kinds[1], Some(Err(ErrorKind::ConnectionReset)), "{kinds:?}");
        });
    }
}

// ---------------------------------------------------------------------------------------
// 3. tokio::io's utilities: a proxy with copy_bidirectional, a client with split, BufWriter
//    and BufReader::lines, an echo server with LinesCodec.

#[test]
fn proxy_with_copy_bidirectional_and_lines() {
    for procs in [1, 4] {
        run(procs, || async move {
            let (backend, backend_addr) = listener().await;
            let (front, front_addr) = listener().await;
            gort::spawn(async move {
                while let Ok((conn, _)) = backend.accept().await {
                    gort::spawn(async move {
                        let mut lines = Framed::new(conn, LinesCodec::new());
                        while let Some(Ok(line)) = lines.next().await {
                            lines.send(line.to_uppercase()).await.unwrap();
                        }
                        // The client's half-close came through the proxy: answer, close.
                        lines.send("bye").await.unwrap();
                    });
                }
            });
            gort::spawn(async move {
                while let Ok((mut client, _)) = front.accept().await {
                    gort::spawn(async move {
                        let mut server = TcpStream::connect(backend_addr).await.unwrap();
                        let (up, down) = tokio::io::copy_bidirectional(&mut client, &mut server)
                            .await
                            .unwrap();
                        assert!(up > 0 && down > 0);
                    });
                }
            });
            let clients: Vec<_> = (0..16)
                .map(|id| {
                    gort::spawn(async move {
                        let conn = TcpStream::connect(front_addr).await.unwrap();
                        let (rd, wr) = tokio::io::split(conn);
                        let writer = gort::spawn(async move {
                            let mut wr = tokio::io::BufWriter::new(wr);
                            for i in 0..200 {
                                wr.write_all(format!("c{id} line {i}\n").as_bytes())
                                    .await
                                    .unwrap();
                            }
                            wr.flush().await.unwrap();
                            wr.shutdown().await.unwrap();
                        });
                        let mut lines = tokio::io::BufReader::new(rd).lines();
                        for i in 0..200 {
                            let line = lines.next_line().await.unwrap().unwrap();
                            assert_eq!(line, format!("C{id} LINE {i}"));
                        }
                        assert_eq!(lines.next_line().await.unwrap().as_deref(), Some("bye"));
                        assert_eq!(lines.next_line().await.unwrap(), None);
                        writer.await.unwrap();
                    })
                })
                .collect();
            for c in clients {
                c.await.unwrap();
            }
        });
    }
}

// ---------------------------------------------------------------------------------------
// 4. Panics in tasks: tokio::sync's guards, permits and senders are released by the unwind.

#[test]
fn panics_release_tokio_sync_state() {
    for procs in [1, 4] {
        run(procs, || async move {
            let m = Arc::new(tokio::sync::Mutex::new(0));
            let sem = Arc::new(tokio::sync::Semaphore::new(1));
            let (tx, rx) = tokio::sync::oneshot::channel::<()>();
            let (mtx, mut mrx) = tokio::sync::mpsc::channel::<u32>(1);
            let (m2, sem2) = (m.clone(), sem.clone());
            let bad = gort::spawn(async move {
                let _guard = m2.lock().await;
                let _permit = sem2.acquire().await.unwrap();
                let _tx = tx;
                let _mtx = mtx;
                gort::time::sleep(Duration::from_millis(5)).await;
                panic!("a task panics holding a lock, a permit and two senders");
            });
            assert!(bad.await.unwrap_err().is_panic());
            *m.lock().await += 1;
            drop(sem.acquire().await.unwrap());
            assert!(rx.await.is_err(), "the sender was dropped by the unwind");
            assert_eq!(mrx.recv().await, None);
        });
    }
}

// ---------------------------------------------------------------------------------------
// 5. A runtime dropped mid-flight: its tasks' futures are dropped, so what they held (a
//    oneshot sender, an mpsc sender, a socket) is released for the code outside it.

#[test]
fn runtime_dropped_mid_flight_releases_what_tasks_held() {
    for procs in [1, 4] {
        let rt = gort::Builder::new().procs(procs).build().unwrap();
        let (otx, orx) = tokio::sync::oneshot::channel::<()>();
        let (mtx, mut mrx) = tokio::sync::mpsc::channel::<()>(1);
        let notify = Arc::new(tokio::sync::Notify::new());
        let std_listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = std_listener.local_addr().unwrap();
        let n = notify.clone();
        rt.spawn(async move {
            let _otx = otx;
            n.notified().await; // never notified
        });
        rt.spawn(async move {
            let _mtx = mtx;
            gort::time::sleep(Duration::from_secs(3600)).await;
        });
        let (tx_ready, rx_ready) = std::sync::mpsc::channel();
        rt.spawn(async move {
            let conn = TcpStream::connect(addr).await.unwrap();
            let mut framed = Framed::new(conn, LengthDelimitedCodec::new());
            tx_ready.send(()).unwrap();
            let _ = framed.next().await; // the peer never writes
        });
        let (mut peer, _) = std_listener.accept().unwrap();
        rx_ready.recv_timeout(PATIENCE).unwrap();
        drop(rt);
        assert!(orx.blocking_recv().is_err());
        assert_eq!(mrx.blocking_recv(), None);
        peer.set_read_timeout(Some(PATIENCE)).unwrap();
        let mut buf = [0u8; 1];
        assert_eq!(std::io::Read::read(&mut peer, &mut buf).unwrap(), 0);
    }
}

// ---------------------------------------------------------------------------------------
// 6. tokio::sync's blocking forms: in a gort task they would block the P (Tokio's panic
//    guard only knows Tokio's runtime), so a ported program calls them in spawn_blocking,
//    where they work against tasks even on one P.

#[test]
fn tokio_blocking_forms_in_spawn_blocking_on_one_p() {
    run(1, || async move {
        let (tx, mut rx) = tokio::sync::mpsc::channel::<u32>(1);
        let m = Arc::new(tokio::sync::Mutex::new(0u32));
        let guard = m.clone().lock_owned().await;
        let m2 = m.clone();
        let blocking = gort::spawn_blocking(move || {
            let got = rx.blocking_recv();
            *m2.blocking_lock() += 1; // waits for the task below to drop its guard
            got
        });
        gort::time::sleep(Duration::from_millis(5)).await;
        tx.send(7).await.unwrap();
        gort::time::sleep(Duration::from_millis(5)).await;
        drop(guard);
        assert_eq!(blocking.await.unwrap(), Some(7));
        assert_eq!(*m.lock().await, 1);
    });
}
