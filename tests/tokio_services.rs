//! Tokio services ported to gort, on 1 and on 4 Ps (the servers and hostile twists are in
//! `tokio_ports.rs`): a crawler on hyper's client with `buffer_unordered` and a `Semaphore`,
//! abandoned mid-flight; a `watch` config reload on gort timers with a lagging `broadcast`
//! listener; gort's `select!` over `tokio::sync` futures; a tower-style service loop with
//! tokio-util's `PollSemaphore` and `PollSender` and an async-trait-style handler.

#[path = "support/ports.rs"]
mod ports;

use bytes::Bytes;
use futures::{SinkExt, StreamExt};
use gort::net::{TcpListener, TcpStream};
use ports::{listener, run, PATIENCE};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

// ---------------------------------------------------------------------------------------
// 1. A bounded-concurrency crawler: hyper's HTTP/1 client over loopback, buffer_unordered
//    and a Semaphore capping the connections in flight, against a hyper server on gort.

async fn http_server(l: TcpListener) {
    use hyper::{service::service_fn, Request, Response};
    use hyper_util::rt::TokioIo;
    while let Ok((conn, _)) = l.accept().await {
        gort::spawn(async move {
            let service = service_fn(|req: Request<hyper::body::Incoming>| async move {
                let n: u64 = req.uri().path()[1..].parse().unwrap_or(0);
                // Some pages take a while, so the crawler's permits are really held.
                gort::time::sleep(Duration::from_millis(n % 3)).await;
                let body = http_body_util::Full::new(Bytes::from(format!("page {n}")));
                Ok::<_, std::convert::Infallible>(Response::new(body))
            });
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(conn), service)
                .await;
        });
    }
}

async fn fetch(addr: SocketAddr, page: u64) -> String {
    use http_body_util::BodyExt;
    let conn = TcpStream::connect(addr).await.unwrap();
    let (mut sender, connection) =
        hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(conn))
            .await
            .unwrap();
    gort::spawn(connection);
    let req = hyper::Request::get(format!("/{page}"))
        .header("host", "loopback")
        .body(http_body_util::Empty::<Bytes>::new())
        .unwrap();
    let resp = sender.send_request(req).await.unwrap();
    assert_eq!(resp.status(), 200);
    let body = resp.into_body().collect().await.unwrap().to_bytes();
    String::from_utf8(body.to_vec()).unwrap()
}

#[test]
fn crawler_with_buffer_unordered_and_semaphore() {
    for procs in [1, 4] {
        run(procs, || async move {
            let (l, addr) = listener().await;
            gort::spawn(http_server(l));
            let permits = Arc::new(tokio::sync::Semaphore::new(4));
            let (inflight, peak) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
            let pages: Vec<String> = futures::stream::iter(0..300u64)
                .map(|page| {
                    let (permits, inflight, peak) =
                        (permits.clone(), inflight.clone(), peak.clone());
                    async move {
                        let _permit = permits.acquire().await.unwrap();
                        let now = inflight.fetch_add(1, SeqCst) + 1;
                        peak.fetch_max(now, SeqCst);
                        let body = fetch(addr, page).await;
                        inflight.fetch_sub(1, SeqCst);
                        body
                    }
                })
                .buffer_unordered(16)
                .collect()
                .await;
            assert_eq!(pages.len(), 300);
            let mut got: Vec<u64> = pages
                .iter()
                .map(|p| p.strip_prefix("page ").unwrap().parse().unwrap())
                .collect();
            got.sort_unstable();
            assert_eq!(got, (0..300).collect::<Vec<_>>());
            let peak = peak.load(SeqCst);
            assert!((1..=4).contains(&peak), "peak {peak}");

            // The crawl abandoned mid-flight: a `select!` drops the stream, and with it the
            // fetches in flight (their hyper connections, their permits) after 20 pages.
            let crawl = futures::stream::iter(0..300u64)
                .map(|page| {
                    let permits = permits.clone();
                    async move {
                        let _permit = permits.acquire().await.unwrap();
                        fetch(addr, page).await
                    }
                })
                .buffer_unordered(16);
            let mut crawl = Box::pin(crawl);
            let mut done = 0;
            while done < 20 {
                tokio::select! {
                    page = crawl.next() => {
                        page.unwrap();
                        done += 1;
                    }
                    _ = gort::time::sleep(PATIENCE) => panic!("the crawl stalled"),
                }
            }
            drop(crawl);
            assert_eq!(permits.available_permits(), 4, "every permit came back");
            assert_eq!(fetch(addr, 7).await, "page 7", "the server still serves");
        });
    }
}

// ---------------------------------------------------------------------------------------
// 2. A config-reload service: a watch channel fed by a gort Ticker, workers that select on
//    `changed()` and a gort timer, and a broadcast of events with a slow, lagging listener.

#[test]
fn watch_config_reload_with_gort_timers() {
    const VERSIONS: u64 = 40;
    for procs in [1, 4] {
        run(procs, || async move {
            let (cfg_tx, cfg_rx) = tokio::sync::watch::channel(0u64);
            let (ev_tx, _) = tokio::sync::broadcast::channel::<u64>(4);
            let token = CancellationToken::new();
            let workers: Vec<_> = (0..8)
                .map(|w| {
                    let (mut rx, token) = (cfg_rx.clone(), token.clone());
                    gort::spawn(async move {
                        let (mut last, mut timeouts) = (0u64, 0u32);
                        loop {
                            tokio::select! {
                                changed = rx.changed() => {
                                    if changed.is_err() { break; }
                                    let v = *rx.borrow_and_update();
                                    assert!(v > last, "worker {w}: {v} after {last}");
                                    last = v;
                                }
                                _ = gort::time::sleep(Duration::from_micros(300)) => timeouts += 1,
                                _ = token.cancelled() => break,
                            }
                        }
                        let _ = timeouts;
                        last
                    })
                })
                .collect();
            let mut slow = ev_tx.subscribe();
            let listener = gort::spawn(async move {
                let (mut seen, mut lagged) = (0u64, 0u64);
                loop {
                    match slow.recv().await {
                        Ok(_) => seen += 1,
                        Err(tokio::sync::broadcast::error::RecvError::Lagged(n)) => lagged += n,
                        Err(tokio::sync::broadcast::error::RecvError::Closed) => break,
                    }
                    gort::time::sleep(Duration::from_millis(3)).await;
                }
                (seen, lagged)
            });
            let mut ticker = gort::time::interval(Duration::from_millis(1));
            for v in 1..=VERSIONS {
                ticker.tick().await;
                cfg_tx.send(v).unwrap();
                let _ = ev_tx.send(v);
            }
            drop(ev_tx);
            let (seen, lagged) = listener.await.unwrap();
            assert_eq!(seen + lagged, VERSIONS, "seen {seen} lagged {lagged}");
            drop(cfg_tx); // workers see the final version, then the close
            for w in workers {
                assert_eq!(w.await.unwrap(), VERSIONS);
            }
            drop(token);
        });
    }
}

// ---------------------------------------------------------------------------------------
// 3. gort's own `select!` over tokio::sync futures: a consumer races a Tokio mpsc receive,
//    a Notify and a gort timer, dropping the losers on every round; nothing is lost and no
//    wake goes missing.

#[test]
fn gort_select_over_tokio_sync_loses_nothing() {
    const PRODUCERS: u64 = 8;
    const EACH: u64 = 2_000;
    for procs in [1, 4] {
        run(procs, || async move {
            let (tx, mut rx) = tokio::sync::mpsc::channel::<u64>(4);
            let notify = Arc::new(tokio::sync::Notify::new());
            for p in 0..PRODUCERS {
                let (tx, notify) = (tx.clone(), notify.clone());
                gort::spawn(async move {
                    for i in 0..EACH {
                        tx.send(p * EACH + i).await.unwrap();
                        if i % 100 == 0 {
                            notify.notify_one();
                        }
                    }
                });
            }
            drop(tx);
            let (mut sum, mut count, mut notified) = (0u64, 0u64, 0u64);
            loop {
                gort::select! {
                    v = rx.recv() => match v {
                        Some(v) => {
                            sum += v;
                            count += 1;
                        }
                        None => break,
                    },
                    _ = notify.notified() => notified += 1,
                    _ = gort::time::sleep(Duration::from_micros(50)) => {}
                }
            }
            let n = PRODUCERS * EACH;
            assert_eq!((count, sum), (n, n * (n - 1) / 2));
            assert!(notified > 0);
        });
    }
}

// ---------------------------------------------------------------------------------------
// 4. A tower-style service loop: `poll_ready` on tokio-util's `PollSemaphore` for
//    backpressure, `call` spawned on gort, a handler behind an async-trait-style object
//    (`Pin<Box<dyn Future + Send>>`), and answers through tokio-util's `PollSender` (a Tokio
//    mpsc sender as a `Sink`).

type BoxFuture<'a, T> = std::pin::Pin<Box<dyn std::future::Future<Output = T> + Send + 'a>>;

/// What `#[async_trait]` expands an `async fn handle(&self, req: u64) -> u64` to.
trait Handler: Send + Sync {
    fn handle(&self, req: u64) -> BoxFuture<'_, u64>;
}

struct Squarer;

impl Handler for Squarer {
    fn handle(&self, req: u64) -> BoxFuture<'_, u64> {
        Box::pin(async move {
            gort::time::sleep(Duration::from_micros(req % 200)).await;
            req * req
        })
    }
}

struct Limited {
    permits: tokio_util::sync::PollSemaphore,
    permit: Option<tokio::sync::OwnedSemaphorePermit>,
    handler: Arc<dyn Handler>,
    inflight: Arc<AtomicUsize>,
    peak: Arc<AtomicUsize>,
}

impl tower_service::Service<u64> for Limited {
    type Response = u64;
    type Error = std::convert::Infallible;
    type Future = BoxFuture<'static, Result<u64, Self::Error>>;

    fn poll_ready(
        &mut self,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Result<(), Self::Error>> {
        if self.permit.is_none() {
            let permit = std::task::ready!(self.permits.poll_acquire(cx));
            self.permit = Some(permit.expect("never closed"));
        }
        std::task::Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: u64) -> Self::Future {
        let permit = self.permit.take().expect("poll_ready first");
        let (handler, inflight, peak) = (
            self.handler.clone(),
            self.inflight.clone(),
            self.peak.clone(),
        );
        Box::pin(async move {
            let now = inflight.fetch_add(1, SeqCst) + 1;
            peak.fetch_max(now, SeqCst);
            let resp = handler.handle(req).await;
            inflight.fetch_sub(1, SeqCst);
            drop(permit);
            Ok(resp)
        })
    }
}

#[test]
fn tower_style_service_loop() {
    use tower_service::Service;
    const REQS: u64 = 2_000;
    const LIMIT: usize = 6;
    for procs in [1, 4] {
        run(procs, || async move {
            let peak = Arc::new(AtomicUsize::new(0));
            let mut svc = Limited {
                permits: tokio_util::sync::PollSemaphore::new(Arc::new(
                    tokio::sync::Semaphore::new(LIMIT),
                )),
                permit: None,
                handler: Arc::new(Squarer),
                inflight: Arc::new(AtomicUsize::new(0)),
                peak: peak.clone(),
            };
            let (tx, mut rx) = tokio::sync::mpsc::channel::<(u64, u64)>(8);
            let collector = gort::spawn(async move {
                let mut got = vec![0u64; REQS as usize];
                while let Some((req, resp)) = rx.recv().await {
                    got[req as usize] = resp;
                }
                got
            });
            for req in 0..REQS {
                std::future::poll_fn(|cx| svc.poll_ready(cx)).await.unwrap();
                let call = svc.call(req);
                let mut sink = tokio_util::sync::PollSender::new(tx.clone());
                gort::spawn(async move {
                    let resp = call.await.unwrap();
                    sink.send((req, resp)).await.unwrap();
                });
            }
            drop(tx);
            let got = collector.await.unwrap();
            assert!(got.iter().enumerate().all(|(i, &r)| r == (i * i) as u64));
            let peak = peak.load(SeqCst);
            assert!((1..=LIMIT).contains(&peak), "peak {peak}");
        });
    }
}
