//! hyper on gort, answered by real clients: the server of `examples/hyper_server.rs` (the
//! file itself, so the example is what is tested) runs in a gort runtime on 127.0.0.1:0;
//! the clients are other processes (curl, else Python's `http.client`) and plain std sockets
//! on ordinary threads, never gort tasks. Builds without features: the root package's
//! dev-dependency on gort-net enables `tokio-io` for tests.

#[path = "../examples/hyper_server.rs"]
#[allow(dead_code)] // the example's `main` is not used here
mod hyper_server;

use gort::net::TcpListener;
use hyper_server::{serve, Timeouts, HELLO};
use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::Command;
use std::time::{Duration, Instant};

/// Generous: the machine is loaded, and only a hang should fail a test.
const PATIENCE: Duration = Duration::from_secs(60);

/// A runtime serving hyper on a loopback port; dropping it shuts the server down.
struct Server {
    addr: SocketAddr,
    _rt: gort::Runtime,
}

fn start(timeouts: Timeouts) -> Server {
    let rt = gort::Builder::new().procs(2).build().unwrap();
    let listener = rt.block_on(TcpListener::bind("127.0.0.1:0")).unwrap();
    let addr = listener.local_addr().unwrap();
    drop(rt.spawn(serve(listener, timeouts)));
    Server { addr, _rt: rt }
}

/// One `GET path` over a fresh std socket, written by hand; returns the whole response.
fn raw_get(addr: SocketAddr, path: &str) -> String {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(PATIENCE)).unwrap();
    let req = format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
    s.write_all(req.as_bytes()).unwrap();
    let mut response = String::new();
    s.read_to_string(&mut response).unwrap();
    response
}

fn assert_hello(response: &str) {
    assert!(response.starts_with("HTTP/1.1 200 OK\r\n"), "{response:?}");
    assert!(
        response.ends_with(&format!("\r\n\r\n{HELLO}")),
        "{response:?}"
    );
}

fn have(tool: &str) -> bool {
    Command::new("sh")
        .args(["-c", &format!("command -v {tool}")])
        .output()
        .is_ok_and(|out| out.status.success())
}

/// Runs a client process; returns (status code, body) from its stdout "STATUS\nBODY".
fn run_client(cmd: &mut Command) -> (u16, String) {
    let out = cmd.output().unwrap();
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert!(
        out.status.success(),
        "{cmd:?}: {}\n{stdout}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    let (status, body) = stdout.split_once('\n').expect("STATUS\\nBODY");
    (status.trim().parse().unwrap(), body.to_string())
}

#[test]
fn a_real_client_gets_hello() {
    let server = start(Timeouts::default());
    let url = format!("http://{}/", server.addr);
    if have("curl") {
        eprintln!("client: curl");
        let out = Command::new("curl")
            .args([
                "--silent",
                "--show-error",
                "--noproxy",
                "*",
                "--max-time",
                "60",
            ])
            .args(["--include", &url])
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
        assert_hello(&String::from_utf8(out.stdout).unwrap());
    } else if have("python3") {
        eprintln!("client: python3 http.client");
        let script = "import http.client, sys\n\
            c = http.client.HTTPConnection(sys.argv[1], int(sys.argv[2]), timeout=60)\n\
            c.request('GET', '/')\n\
            r = c.getresponse()\n\
            print(r.status)\n\
            sys.stdout.write(r.read().decode())\n";
        let (status, body) = run_client(Command::new("python3").args([
            "-c",
            script,
            &server.addr.ip().to_string(),
            &server.addr.port().to_string(),
        ]));
        assert_eq!((status, body.as_str()), (200, HELLO));
    } else {
        eprintln!("client: neither curl nor python3 here; a hand-written std::net request");
    }
    // Always, whatever else ran: the hand-written request over a std socket.
    assert_hello(&raw_get(server.addr, "/"));
    let not_found = raw_get(server.addr, "/nothing");
    assert!(not_found.starts_with("HTTP/1.1 404 "), "{not_found:?}");
}

#[test]
fn fifty_concurrent_clients_are_all_answered() {
    let server = start(Timeouts::default());
    let addr = server.addr;
    let clients: Vec<_> = (0..50)
        .map(|_| std::thread::spawn(move || raw_get(addr, "/")))
        .collect();
    for client in clients {
        assert_hello(&client.join().unwrap());
    }
}

#[test]
fn keep_alive_serves_several_requests_on_one_connection() {
    let server = start(Timeouts::default());
    let mut s = TcpStream::connect(server.addr).unwrap();
    s.set_read_timeout(Some(PATIENCE)).unwrap();
    for _ in 0..3 {
        s.write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
        let response = read_response(&mut s);
        assert_hello(&response);
    }
}

/// Reads one response whose body is `HELLO` (its length is known, the connection stays open).
fn read_response(s: &mut TcpStream) -> String {
    let mut response = Vec::new();
    let mut byte = [0; 1];
    while !response.ends_with(HELLO.as_bytes()) {
        let n = s.read(&mut byte).unwrap();
        assert_eq!(
            n,
            1,
            "closed after {:?}",
            String::from_utf8_lossy(&response)
        );
        response.push(byte[0]);
    }
    String::from_utf8(response).unwrap()
}

/// Waits for the server to close `s`; returns how long that took from `since`.
fn closed_by_server(mut s: TcpStream, since: Instant) -> Duration {
    s.set_read_timeout(Some(PATIENCE)).unwrap();
    let mut sink = Vec::new();
    match s.read_to_end(&mut sink) {
        Ok(_) => {}
        Err(e) if e.kind() == ErrorKind::ConnectionReset => {}
        Err(e) => panic!("the server did not close the connection: {e}"),
    }
    since.elapsed()
}

#[test]
fn a_silent_client_is_dropped_after_the_idle_timeout() {
    // Guards the read deadline (set_read_deadline moved on every read): without it hyper
    // waits for a first request forever, and read_to_end hits PATIENCE.
    let idle = Duration::from_millis(300);
    let server = start(Timeouts {
        idle,
        header_read: PATIENCE * 2,
    });
    let t0 = Instant::now();
    let s = TcpStream::connect(server.addr).unwrap();
    let waited = closed_by_server(s, t0);
    assert!(waited >= idle, "dropped early, after {waited:?}");
}

#[test]
fn a_trickled_request_head_is_cut_by_hyper_s_timer_on_gort() {
    // Guards GortTimer: bytes arriving every 20 ms keep pushing the idle deadline, so only
    // hyper's header-read timer (a gort sleep) can end this connection.
    let header_read = Duration::from_millis(300);
    let server = start(Timeouts {
        idle: PATIENCE * 2,
        header_read,
    });
    let t0 = Instant::now();
    let s = TcpStream::connect(server.addr).unwrap();
    let writer = s.try_clone().unwrap();
    let trickle = std::thread::spawn(move || {
        let mut writer = writer;
        writer.write_all(b"GET / HTTP/1.1\r\n").unwrap();
        while t0.elapsed() < PATIENCE {
            if writer.write_all(b"X-Slow: 1\r\n").is_err() {
                return; // closed by the server
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    });
    let waited = closed_by_server(s, t0);
    assert!(waited >= header_read, "cut early, after {waited:?}");
    trickle.join().unwrap();
}

#[test]
fn an_active_client_outlives_the_idle_timeout() {
    // Guards the deadline's move on every read: with only the first deadline, this
    // connection would be dropped `idle` after it opened, in the middle of its requests.
    // Failing needs a stall longer than `idle` between two requests.
    let idle = Duration::from_secs(3);
    let server = start(Timeouts {
        idle,
        header_read: PATIENCE,
    });
    let t0 = Instant::now();
    let mut s = TcpStream::connect(server.addr).unwrap();
    s.set_read_timeout(Some(PATIENCE)).unwrap();
    let mut served = 0;
    while t0.elapsed() < idle + idle / 3 {
        s.write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
        assert_hello(&read_response(&mut s));
        served += 1;
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(served > 1);
}
