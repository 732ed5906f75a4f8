//! hyper on gort under hostile and careless peers: 1,000 pipelined requests on one
//! connection, 2,000 keep-alive clients that vanish (some with a reset), slowloris clients
//! that send half a request head and stall, clients that abort in the middle of a body, a
//! server runtime dropped with connections in flight, and hyper's client on gort against
//! servers that reset. Each must end in answers or errors, never a hang (a watchdog fails a
//! case after 60 s), and the fds of every connection must be closed afterwards (counted in
//! `/proc/self/fd`; the cases run one at a time, since all count one process's fds).
//!
//! The server is `examples/hyper_server.rs`'s `serve` (the file itself), or, where a case
//! needs a body read, the same hyper connection over `TokioIo<gort::net::TcpStream>` with a
//! service that collects the body. Clients are std sockets on plain threads, except hyper's
//! own client, which runs in a gort task.

#[path = "../examples/hyper_server.rs"]
#[allow(dead_code)] // the example's `main` is not used here
mod hyper_server;
mod support;

use bytes::Bytes;
use gort::net::TcpListener;
use http_body_util::{BodyExt, Empty, Full};
use hyper::body::Incoming;
use hyper::{Request, Response};
use hyper_server::{serve, Timeouts, HELLO};
use hyper_util::rt::TokioIo;
use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::{mpsc, Mutex};
use std::time::{Duration, Instant};
use support::{linger_zero, open_fds};

/// Generous: the machine is loaded; only a hang should fail a case.
const PATIENCE: Duration = Duration::from_secs(60);

/// One case at a time: fd counts are process-wide.
static SERIAL: Mutex<()> = Mutex::new(());

/// Runs `f` on its own thread, one case at a time, failing if it runs past [`PATIENCE`].
fn case(f: impl FnOnce() + Send + 'static) {
    let _turn = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let (tx, rx) = mpsc::channel();
    let t = std::thread::spawn(move || {
        f();
        let _ = tx.send(());
    });
    if let Err(mpsc::RecvTimeoutError::Timeout) = rx.recv_timeout(PATIENCE) {
        panic!("still running after {PATIENCE:?}: hung");
    }
    if let Err(p) = t.join() {
        std::panic::resume_unwind(p);
    }
}

/// The CPU time this process has used (user and system), in clock ticks (100 a second).
fn cpu_ticks() -> u64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap();
    // The fields after the command name (which may hold spaces) in parentheses.
    let fields: Vec<&str> = stat
        .rsplit(')')
        .next()
        .unwrap()
        .split_whitespace()
        .collect();
    fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap()
}

/// Waits (up to [`PATIENCE`]) for the fd count to fall back to `baseline`: the server closes
/// a connection when its task sees the end, a moment after the client's close.
fn assert_fds_back_to(baseline: usize, what: &str) {
    let t0 = Instant::now();
    while open_fds() > baseline {
        assert!(
            t0.elapsed() < PATIENCE,
            "{what}: {} fds open, {baseline} before",
            open_fds()
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// A runtime serving on a loopback port; dropping it shuts the server down.
struct Server {
    addr: SocketAddr,
    rt: gort::Runtime,
}

/// `examples/hyper_server.rs`'s server.
fn start(timeouts: Timeouts) -> Server {
    let rt = gort::Builder::new().procs(2).build().unwrap();
    let listener = rt.block_on(TcpListener::bind("127.0.0.1:0")).unwrap();
    let addr = listener.local_addr().unwrap();
    drop(rt.spawn(serve(listener, timeouts)));
    Server { addr, rt }
}

/// Answers every request with the length of its body, read in full.
async fn body_length(req: Request<Incoming>) -> Result<Response<Full<Bytes>>, hyper::Error> {
    let body = req.into_body().collect().await?.to_bytes();
    Ok(Response::new(Full::new(Bytes::from(
        body.len().to_string(),
    ))))
}

/// A server whose service reads each request's body ([`body_length`]).
fn start_body_reader() -> Server {
    let rt = gort::Builder::new().procs(2).build().unwrap();
    let listener = rt.block_on(TcpListener::bind("127.0.0.1:0")).unwrap();
    let addr = listener.local_addr().unwrap();
    drop(rt.spawn(async move {
        loop {
            let (conn, _) = listener.accept().await.unwrap();
            gort::spawn(async move {
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(conn), hyper::service::service_fn(body_length))
                    .await;
            });
        }
    }));
    Server { addr, rt }
}

fn connect(addr: SocketAddr) -> TcpStream {
    let s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(PATIENCE)).unwrap();
    s
}

/// Reads one response whose body is `HELLO` (its length is known, the connection stays open).
fn read_hello(s: &mut TcpStream) {
    let mut response = Vec::new();
    let mut chunk = [0; 256];
    while !response.ends_with(HELLO.as_bytes()) {
        let n = s.read(&mut chunk).unwrap();
        assert!(
            n > 0,
            "closed after {:?}",
            String::from_utf8_lossy(&response)
        );
        response.extend_from_slice(&chunk[..n]);
    }
    assert!(response.starts_with(b"HTTP/1.1 200 OK\r\n"));
}

/// 1,000 requests written back to back before any answer is read (pipelining), alternating
/// two paths, the last asking to close: 1,000 answers come back, in order.
#[test]
fn a_thousand_pipelined_requests_are_answered_in_order() {
    case(|| {
        let server = start(Timeouts::default());
        let mut s = connect(server.addr);
        let mut requests = String::new();
        for i in 0..1000 {
            let path = if i % 2 == 0 { "/" } else { "/nothing" };
            let close = if i == 999 {
                "Connection: close\r\n"
            } else {
                ""
            };
            requests.push_str(&format!("GET {path} HTTP/1.1\r\nHost: x\r\n{close}\r\n"));
        }
        let mut writer = s.try_clone().unwrap();
        let w = std::thread::spawn(move || writer.write_all(requests.as_bytes()).unwrap());
        let mut all = String::new();
        s.read_to_string(&mut all).unwrap();
        w.join().unwrap();
        let statuses: Vec<&str> = all.split("HTTP/1.1 ").skip(1).map(|r| &r[..3]).collect();
        assert_eq!(statuses.len(), 1000, "{} answers", statuses.len());
        for (i, status) in statuses.iter().enumerate() {
            assert_eq!(
                *status,
                if i % 2 == 0 { "200" } else { "404" },
                "answer {i}"
            );
        }
    });
}

/// 2,000 clients each get an answer on a keep-alive connection, then vanish without a word
/// (every fourth with a reset): the server's side of every connection is closed, and the
/// process is back to the fds it had before.
#[test]
fn two_thousand_keep_alive_clients_that_vanish_leave_no_fd() {
    case(|| {
        let server = start(Timeouts::default());
        let baseline = open_fds();
        let mut clients = Vec::new();
        for i in 0..2000 {
            let mut s = connect(server.addr);
            s.write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
            if i % 4 == 0 {
                linger_zero(&s);
            }
            clients.push(s);
        }
        for s in &mut clients {
            read_hello(s);
        }
        assert!(open_fds() >= baseline + 4000, "{} fds", open_fds());
        drop(clients);
        assert_fds_back_to(baseline, "after 2,000 clients vanished");
        // Still serving.
        let mut s = connect(server.addr);
        s.write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
        read_hello(&mut s);
    });
}

/// Slowloris: 200 clients send half a request head and stall. With no deadline (hyper's
/// header timer off, no idle deadline) they hold their connections, as with any server
/// that sets none, but other clients are still served; with the idle deadline each is
/// dropped after it and its fd closed.
#[test]
fn slowloris_clients_hold_nothing_but_their_connections() {
    case(|| {
        for timeouts in [
            Timeouts {
                idle: PATIENCE * 10,
                header_read: PATIENCE * 10,
            },
            Timeouts {
                idle: Duration::from_millis(300),
                header_read: PATIENCE * 10,
            },
        ] {
            let server = start(timeouts);
            let baseline = open_fds();
            let stalled: Vec<TcpStream> = (0..200)
                .map(|_| {
                    let mut s = connect(server.addr);
                    s.write_all(b"GET / HTTP/1.1\r\nHost: x\r\nX-Half: ")
                        .unwrap();
                    s
                })
                .collect();
            let mut s = connect(server.addr);
            s.write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
            read_hello(&mut s);
            drop(s);
            // Stalled connections cost no CPU: nothing polls them until bytes or a timer
            // come (a spin would take a core's 100 ticks a second; this allows half).
            let cpu0 = cpu_ticks();
            std::thread::sleep(Duration::from_secs(1));
            let spent = cpu_ticks() - cpu0;
            assert!(spent < 50, "{spent} ticks of CPU in 1 s of stalled clients");
            if timeouts.idle < PATIENCE {
                for mut s in stalled {
                    let mut sink = Vec::new();
                    match s.read_to_end(&mut sink) {
                        Ok(_) => {}
                        Err(e) if e.kind() == ErrorKind::ConnectionReset => {}
                        Err(e) => panic!("a stalled client was not dropped: {e}"),
                    }
                }
            } else {
                drop(stalled);
            }
            assert_fds_back_to(baseline, "after the slowloris clients");
        }
    });
}

/// Clients that announce a body and go away in its middle, with a FIN or a reset, while the
/// service reads the body: the service's read fails, the connection ends, its fd is closed,
/// and a client that sends its whole body is answered with its length.
#[test]
fn clients_that_abort_in_the_middle_of_a_body() {
    case(|| {
        let server = start_body_reader();
        let baseline = open_fds();
        for i in 0..100 {
            let mut s = connect(server.addr);
            s.write_all(b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 100000\r\n\r\n")
                .unwrap();
            s.write_all(&[b'x'; 1000]).unwrap();
            if i % 2 == 0 {
                linger_zero(&s);
            }
            drop(s);
        }
        // A chunked body cut mid-chunk.
        let mut s = connect(server.addr);
        s.write_all(b"POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n10\r\nabc")
            .unwrap();
        drop(s);
        assert_fds_back_to(baseline, "after the aborted bodies");
        let mut s = connect(server.addr);
        s.write_all(
            b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nConnection: close\r\n\r\nhello",
        )
        .unwrap();
        let mut all = String::new();
        s.read_to_string(&mut all).unwrap();
        assert!(all.starts_with("HTTP/1.1 200 OK\r\n"), "{all:?}");
        assert!(all.ends_with("\r\n\r\n5"), "{all:?}");
    });
}

/// The server's runtime is dropped with connections in every state: idle keep-alive, half a
/// head sent, a body half sent. Every client sees its connection end (end of stream or a
/// reset) instead of waiting, and every fd, the runtime's own included, is closed.
#[test]
fn a_server_dropped_with_connections_in_flight() {
    case(|| {
        let baseline = open_fds();
        let server = start(Timeouts::default());
        let mut clients = Vec::new();
        for i in 0..150 {
            let mut s = connect(server.addr);
            match i % 3 {
                0 => {
                    s.write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
                    read_hello(&mut s);
                }
                1 => s.write_all(b"GET / HTTP/1.1\r\nHo").unwrap(),
                _ => s
                    .write_all(b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 9999\r\n\r\nab")
                    .unwrap(),
            }
            clients.push(s);
        }
        // Wait until the server holds every connection (accepted, its task started).
        std::thread::sleep(Duration::from_millis(100));
        drop(server.rt);
        for mut s in clients {
            let mut sink = Vec::new();
            match s.read_to_end(&mut sink) {
                Ok(_) => {}
                Err(e) if e.kind() == ErrorKind::ConnectionReset => {}
                Err(e) => panic!("a client was left hanging: {e}"),
            }
        }
        assert_fds_back_to(baseline, "after the server's runtime was dropped");
    });
}

/// How the server of [`hyper_client_against`] treats the request it accepts.
#[derive(Clone, Copy, Debug)]
enum Misbehaviour {
    /// Resets the connection as soon as it is accepted.
    ResetAtOnce,
    /// Reads the request head, then resets.
    ResetAfterHead,
    /// Sends half a response head, then resets.
    ResetMidHead,
    /// Sends a head announcing 1,000 body bytes, 10 of them, then closes.
    CloseMidBody,
}

/// hyper's client on gort sends `GET /` to a std server that misbehaves as `how`: the
/// request or its body fails with an error, and the connection task ends, in time.
fn hyper_client_against(how: Misbehaviour) {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let server = std::thread::spawn(move || {
        let (mut s, _) = listener.accept().unwrap();
        s.set_read_timeout(Some(PATIENCE)).unwrap();
        let read_head = |s: &mut std::net::TcpStream| {
            let mut head = Vec::new();
            let mut b = [0; 1];
            while !head.ends_with(b"\r\n\r\n") && s.read(&mut b).unwrap() == 1 {
                head.push(b[0]);
            }
        };
        match how {
            Misbehaviour::ResetAtOnce => linger_zero(&s),
            Misbehaviour::ResetAfterHead => {
                read_head(&mut s);
                linger_zero(&s);
            }
            Misbehaviour::ResetMidHead => {
                read_head(&mut s);
                s.write_all(b"HTTP/1.1 200 OK\r\nContent-Le").unwrap();
                std::thread::sleep(Duration::from_millis(20));
                linger_zero(&s);
            }
            Misbehaviour::CloseMidBody => {
                read_head(&mut s);
                s.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n0123456789")
                    .unwrap();
                std::thread::sleep(Duration::from_millis(20));
            }
        }
    });
    let rt = gort::Builder::new().procs(2).build().unwrap();
    let outcome = rt.block_on(async move {
        // A reset that comes before the connect sees the handshake done fails the connect
        // (its `SO_ERROR`), as in Go and Tokio.
        let conn = match gort::net::TcpStream::connect(addr).await {
            Ok(conn) => conn,
            Err(e) => return Err(format!("connect: {e}")),
        };
        let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(conn))
            .await
            .unwrap();
        let driver = gort::spawn(connection);
        let req = Request::builder()
            .uri("/")
            .header("host", "x")
            .body(Empty::<Bytes>::new())
            .unwrap();
        let outcome = match sender.send_request(req).await {
            Err(e) => Err(format!("request: {e}")),
            Ok(resp) => match resp.into_body().collect().await {
                Err(e) => Err(format!("body: {e}")),
                Ok(body) => Ok(body.to_bytes().len()),
            },
        };
        // The connection task ends too (with the error, or at the close).
        let _ = driver.await.unwrap();
        outcome
    });
    server.join().unwrap();
    assert!(outcome.is_err(), "{how:?}: {outcome:?}");
}

#[test]
fn hyper_s_client_on_gort_against_servers_that_reset() {
    case(|| {
        let baseline = open_fds();
        for how in [
            Misbehaviour::ResetAtOnce,
            Misbehaviour::ResetAfterHead,
            Misbehaviour::ResetMidHead,
            Misbehaviour::CloseMidBody,
        ] {
            hyper_client_against(how);
        }
        assert_fds_back_to(baseline, "after the hyper clients");
    });
}
