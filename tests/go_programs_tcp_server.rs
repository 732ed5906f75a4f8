//! A TCP server written the Go way, on gort: an accept loop per listener, a task per
//! connection with a read deadline before every read (the idle timeout) and a write deadline
//! before every write, and a graceful shutdown on a `context` cancel: as Go's
//! `http.Server.Shutdown`, the listeners are unblocked (Go 1.21's
//! `context.AfterFunc(ctx, func() { ln.SetDeadline(time.Now()) })`), idle connections are
//! ended the same way (their read deadline set in the past), busy ones finish their request,
//! and a `WaitGroup` counts the connections.
//!
//! The clients are hostile: they stall (the idle deadline ends them), vanish mid-request,
//! reset the connection while the server writes a large reply, stop reading (the write
//! deadline ends them), or make the handler panic. Checked: each ends with the error kind a
//! Go programmer expects, well-behaved clients never see a truncated reply, the shutdown
//! returns promptly, no task and no fd is left. Also: the runtime dropped mid-flight under
//! live connections. Run on 1 and 4 Ps.

mod support;

use std::io::{ErrorKind, Read, Write};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering::SeqCst};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use gort::context::{self, Context};
use gort::net::{TcpListener, TcpStream};
use gort::sync::WaitGroup;
use support::{linger_zero, open_fds, rt, wait_tasks, within};

/// The tests of this file count the process's fds: one at a time.
static SERIAL: Mutex<()> = Mutex::new(());

/// How each connection ended, as the server saw it.
#[derive(Default, Debug)]
struct Stats {
    requests: AtomicU64,
    eof: AtomicU64,
    idle_timeout: AtomicU64,
    write_timeout: AtomicU64,
    reset: AtomicU64,
    shutdown: AtomicU64,
    accept_retries: AtomicU64,
}

struct Server {
    idle: Duration,
    write_timeout: Duration,
    conns: WaitGroup,
    stats: Stats,
}

/// Go's `Server.Serve(ln)`: returns once `ctx` is done.
async fn serve(srv: Arc<Server>, ctx: Context, ln: TcpListener) {
    let ln = Arc::new(ln);
    let unblock = ln.clone();
    let _stop = context::after_func(&ctx, move || {
        unblock
            .set_deadline(Some(gort::time::Instant::now()))
            .unwrap();
    })
    .drop_guard();
    loop {
        match ln.accept().await {
            Ok((conn, _)) => {
                // Go 1.25: s.wg.Go(func() { s.handle(ctx, conn) }); done on a panic too.
                let (srv2, ctx) = (srv.clone(), ctx.clone());
                srv.conns.go(async move { handle(&srv2, &ctx, conn).await });
            }
            Err(_) if ctx.err().is_some() => return,
            Err(e) => {
                // Go's accept loop: back off on temporary errors (EMFILE and the like).
                assert_ne!(e.kind(), ErrorKind::TimedOut, "no deadline was set");
                srv.stats.accept_retries.fetch_add(1, SeqCst);
                gort::time::sleep(Duration::from_millis(5)).await;
            }
        }
    }
}

/// One connection: a line protocol. `ECHO text` answers `text`; `BIG n` answers n bytes
/// and a newline; `PANIC` makes the handler panic.
async fn handle(srv: &Server, ctx: &Context, conn: TcpStream) {
    let conn = Arc::new(conn);
    let unblock = conn.clone();
    // Shutdown ends an idle read at once (Go's closeIdleConns).
    // Go: `stop := context.AfterFunc(...); defer stop()`, which a panic runs too.
    let _stop = context::after_func(ctx, move || {
        let _ = unblock.set_read_deadline(Some(gort::time::Instant::now()));
    })
    .drop_guard();
    let end = serve_conn(srv, ctx, &conn).await;
    let counter = match end {
        End::Eof => &srv.stats.eof,
        End::Idle => &srv.stats.idle_timeout,
        End::WriteTimeout => &srv.stats.write_timeout,
        End::Reset => &srv.stats.reset,
        End::Shutdown => &srv.stats.shutdown,
    };
    counter.fetch_add(1, SeqCst);
}

enum End {
    Eof,
    Idle,
    WriteTimeout,
    Reset,
    Shutdown,
}

async fn serve_conn(srv: &Server, ctx: &Context, conn: &TcpStream) -> End {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        // A whole line yet?
        if let Some(pos) = buf.iter().position(|&b| b == b'\n') {
            let line: Vec<u8> = buf.drain(..=pos).collect();
            let line = String::from_utf8_lossy(&line[..pos]).into_owned();
            srv.stats.requests.fetch_add(1, SeqCst);
            let reply = if let Some(text) = line.strip_prefix("ECHO ") {
                format!("{text}\n").into_bytes()
            } else if let Some(n) = line.strip_prefix("BIG ") {
                let mut v = vec![b'x'; n.parse().unwrap()];
                v.push(b'\n');
                v
            } else if line == "PANIC" {
                panic!("handler panicked on request");
            } else {
                b"ERR unknown\n".to_vec()
            };
            let deadline = gort::time::Instant::now() + srv.write_timeout;
            conn.set_write_deadline(Some(deadline)).unwrap();
            match conn.write_all(&reply).await {
                Ok(()) => continue,
                Err(e) if e.kind() == ErrorKind::TimedOut => return End::WriteTimeout,
                Err(e) => return reset_or_panic(e),
            }
        }
        // Deadline first, then the shutdown check: a cancel after the check moves the
        // deadline to the past after ours, so the read below still ends at once.
        let deadline = gort::time::Instant::now() + srv.idle;
        conn.set_read_deadline(Some(deadline)).unwrap();
        if ctx.err().is_some() {
            return End::Shutdown;
        }
        match conn.read(&mut chunk).await {
            Ok(0) => return End::Eof,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
            Err(e) if e.kind() == ErrorKind::TimedOut => {
                return if ctx.err().is_some() {
                    End::Shutdown
                } else {
                    End::Idle
                };
            }
            Err(e) => return reset_or_panic(e),
        }
    }
}

fn reset_or_panic(e: std::io::Error) -> End {
    match e.kind() {
        ErrorKind::ConnectionReset | ErrorKind::BrokenPipe => End::Reset,
        _ => panic!("unexpected error kind: {e:?}"),
    }
}

/// Reads one line (the reply) from a client connection; `None` on EOF before any byte.
async fn read_line(conn: &TcpStream) -> std::io::Result<Option<Vec<u8>>> {
    let mut line = Vec::new();
    let mut b = [0u8; 1];
    loop {
        match conn.read(&mut b).await? {
            0 if line.is_empty() => return Ok(None),
            0 => return Err(ErrorKind::UnexpectedEof.into()),
            _ if b[0] == b'\n' => return Ok(Some(line)),
            _ => line.push(b[0]),
        }
    }
}

/// A well-behaved client: `n` echo requests, each reply checked; stops quietly if the
/// server shut the connection between two requests. Returns the replies received.
async fn good_client(addr: SocketAddr, id: usize, n: usize, pause: Duration) -> usize {
    let conn = TcpStream::connect(addr).await.unwrap();
    for i in 0..n {
        let msg = format!("client {id} request {i}");
        if conn
            .write_all(format!("ECHO {msg}\n").as_bytes())
            .await
            .is_err()
        {
            return i; // the server shut down
        }
        match read_line(&conn).await {
            Ok(Some(reply)) => assert_eq!(reply, msg.as_bytes(), "a wrong or truncated reply"),
            Ok(None) => return i,
            Err(e) if e.kind() == ErrorKind::ConnectionReset => return i,
            Err(e) => panic!("client {id}: {e:?}"),
        }
        gort::time::sleep(pause).await;
    }
    n
}

struct Running {
    srv: Arc<Server>,
    cancel: context::CancelFn,
    addrs: Vec<SocketAddr>,
    serving: Vec<gort::JoinHandle<()>>,
}

/// Starts the server on `listeners` loopback listeners.
async fn start(listeners: usize, idle: Duration, write_timeout: Duration) -> Running {
    let srv = Arc::new(Server {
        idle,
        write_timeout,
        conns: WaitGroup::new(),
        stats: Stats::default(),
    });
    let (ctx, cancel) = context::with_cancel(&Context::background());
    let mut addrs = Vec::new();
    let mut serving = Vec::new();
    for _ in 0..listeners {
        let ln = TcpListener::bind("127.0.0.1:0").await.unwrap();
        addrs.push(ln.local_addr().unwrap());
        serving.push(gort::spawn(serve(srv.clone(), ctx.clone(), ln)));
    }
    Running {
        srv,
        cancel,
        addrs,
        serving,
    }
}

impl Running {
    /// Go's `Shutdown(ctx)`: cancel, wait for the accept loops, then for the connections;
    /// fails if that takes longer than `limit`.
    async fn shutdown(self, limit: Duration) -> Arc<Server> {
        self.cancel.cancel();
        let wait = async {
            for h in self.serving {
                h.await.unwrap();
            }
            self.srv.conns.wait().await;
        };
        gort::time::timeout(limit, wait)
            .await
            .expect("graceful shutdown hung");
        self.srv
    }
}

/// Every kind of client at once, then a graceful shutdown while well-behaved clients are
/// still mid-session: each hostile client ends the way it should, nobody sees a truncated
/// reply, every task and fd is gone afterwards.
#[test]
fn hostile_clients_and_graceful_shutdown() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    for procs in [1, 4] {
        within(move || {
            let rt = rt(procs);
            let base_tasks = rt.metrics().tasks_alive;
            let base_fds = open_fds();
            let stats = rt.block_on(async {
                let idle = Duration::from_millis(500);
                let run = start(2, idle, Duration::from_secs(1)).await;
                let addrs = run.addrs.clone();
                let mut clients = Vec::new();
                // Resetters first, alone: ask for 4 MiB, read a little, reset mid-write.
                // (A reset that comes after the 1 s write deadline, on a machine loaded enough
                // to delay it that long, is a write timeout: right too, hence the sum below.)
                for id in 0..10 {
                    let addr = addrs[id % 2];
                    clients.push(gort::spawn(async move {
                        let conn = TcpStream::connect(addr).await.unwrap();
                        conn.write_all(b"BIG 4194304\n").await.unwrap();
                        let mut b = [0u8; 1000];
                        conn.read_exact(&mut b).await.unwrap();
                        linger_zero(&conn);
                    }));
                }
                for c in clients.drain(..) {
                    c.await.unwrap();
                }
                // Finishers: done well before the shutdown.
                for id in 0..40 {
                    let addr = addrs[id % 2];
                    clients.push(gort::spawn(async move {
                        assert_eq!(good_client(addr, id, 20, Duration::ZERO).await, 20);
                    }));
                }
                // Stallers: connect and say nothing; the idle deadline ends them.
                for id in 0..10 {
                    let addr = addrs[id % 2];
                    clients.push(gort::spawn(async move {
                        let conn = TcpStream::connect(addr).await.unwrap();
                        let mut b = [0u8; 1];
                        assert_eq!(conn.read(&mut b).await.unwrap(), 0);
                    }));
                }
                // Vanishers: half a request, then gone.
                for id in 0..10 {
                    let addr = addrs[id % 2];
                    clients.push(gort::spawn(async move {
                        let conn = TcpStream::connect(addr).await.unwrap();
                        conn.write_all(b"ECHO half a requ").await.unwrap();
                    }));
                }
                // Non-readers: ask for 32 MiB (more than loopback's socket buffers hold) and
                // never read; the write deadline ends them.
                let mut non_readers = Vec::new();
                for id in 0..5 {
                    let addr = addrs[id % 2];
                    let conn = TcpStream::connect(addr).await.unwrap();
                    conn.write_all(b"BIG 33554432\n").await.unwrap();
                    non_readers.push(conn);
                }
                // Panickers: the handler panics; the client sees the connection closed.
                for id in 0..5 {
                    let addr = addrs[id % 2];
                    clients.push(gort::spawn(async move {
                        let conn = TcpStream::connect(addr).await.unwrap();
                        conn.write_all(b"PANIC\n").await.unwrap();
                        let mut b = [0u8; 1];
                        let r = conn.read(&mut b).await;
                        assert!(matches!(r, Ok(0)) || r.is_err(), "{r:?}");
                    }));
                }
                for c in clients.drain(..) {
                    c.await.unwrap();
                }
                // The non-readers' writes end by their deadline first: the shutdown, as Go's,
                // waits for a connection busy writing, and this one measures idle ones.
                let st = &run.srv.stats;
                while st.reset.load(SeqCst) + st.write_timeout.load(SeqCst) < 15 {
                    gort::time::sleep(Duration::from_millis(5)).await;
                }
                // Long sessions still going when the shutdown comes.
                let mut long = Vec::new();
                for id in 100..120 {
                    let addr = addrs[id % 2];
                    long.push(gort::spawn(async move {
                        good_client(addr, id, 1000, Duration::from_millis(2)).await
                    }));
                }
                // Idle-but-open connections, ended by the shutdown, not by the idle timeout.
                let mut idle_open = Vec::new();
                for id in 0..10 {
                    idle_open.push(TcpStream::connect(addrs[id % 2]).await.unwrap());
                }
                gort::time::sleep(Duration::from_millis(60)).await;
                let started = Instant::now();
                let srv = run.shutdown(Duration::from_secs(5)).await;
                assert!(
                    started.elapsed() < idle,
                    "shutdown waited for idle timeouts"
                );
                for h in long {
                    let n = h.await.unwrap();
                    assert!(n > 0 && n < 1000, "{n}");
                }
                drop((non_readers, idle_open));
                srv
            });
            let s = &stats.stats;
            println!("procs {procs}: {s:?}");
            assert_eq!(s.idle_timeout.load(SeqCst), 10, "stallers");
            let (resets, write_timeouts) = (s.reset.load(SeqCst), s.write_timeout.load(SeqCst));
            assert_eq!(resets + write_timeouts, 15, "resetters and non-readers");
            assert!(write_timeouts >= 5, "non-readers");
            assert!(resets >= 5, "resetters");
            assert!(s.eof.load(SeqCst) >= 50, "finishers and vanishers");
            assert!(
                s.shutdown.load(SeqCst) >= 10,
                "idle and long sessions at shutdown"
            );
            assert_eq!(s.accept_retries.load(SeqCst), 0);
            assert_eq!(stats.conns.count(), 0);
            drop(stats);
            wait_tasks(&rt, base_tasks);
            drop(rt);
            let fds = open_fds();
            assert!(
                fds <= base_fds,
                "fds: {base_fds} before, {fds} after: leaked"
            );
        });
    }
}

/// The runtime dropped under live connections: clients on plain threads blocked in reads
/// and writes see the connection end (EOF or reset), nothing hangs, every fd is closed.
#[test]
fn runtime_dropped_under_live_connections() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    for procs in [1, 4] {
        within(move || {
            let base_fds = open_fds();
            let rt = rt(procs);
            let (addrs, _keep) = rt.block_on(async {
                let run = start(2, Duration::from_secs(30), Duration::from_secs(30)).await;
                (run.addrs.clone(), run)
            });
            let mut threads = Vec::new();
            for i in 0..20 {
                let addr = addrs[i % 2];
                threads.push(std::thread::spawn(move || {
                    let mut c = std::net::TcpStream::connect(addr).unwrap();
                    c.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
                    if i % 2 == 0 {
                        // A big reply it reads slowly: the server is mid-write at the drop.
                        c.write_all(b"BIG 16777216\n").unwrap();
                    } else {
                        c.write_all(b"ECHO hi\n").unwrap();
                    }
                    let mut total = 0;
                    let mut b = [0u8; 65536];
                    loop {
                        match c.read(&mut b) {
                            Ok(0) => return total,
                            Ok(n) => total += n,
                            Err(e) => {
                                assert_eq!(e.kind(), ErrorKind::ConnectionReset, "{e:?}");
                                return total;
                            }
                        }
                        std::thread::sleep(Duration::from_millis(1));
                    }
                }));
            }
            std::thread::sleep(Duration::from_millis(100));
            support::drop_within(rt, Duration::from_secs(10), "runtime drop hung");
            for t in threads {
                let got = t.join().unwrap();
                assert!(got < 16777217, "{got}");
            }
            drop(_keep);
            let fds = open_fds();
            assert!(
                fds <= base_fds,
                "fds: {base_fds} before, {fds} after: leaked"
            );
        });
    }
}

/// A listener with a backlog of 0 that nobody accepts from: most dials to it hang in
/// SYN_SENT until they are given up.
fn full_listener() -> std::net::TcpListener {
    use std::os::fd::FromRawFd;
    // SAFETY: plain socket calls on a socket this function owns; `addr` outlives `bind`; the
    // fd is handed to the std listener, which closes it.
    unsafe {
        let fd = libc::socket(libc::AF_INET, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0);
        assert!(fd >= 0);
        let mut addr: libc::sockaddr_in = std::mem::zeroed();
        addr.sin_family = libc::AF_INET as libc::sa_family_t;
        addr.sin_addr.s_addr = u32::from_ne_bytes([127, 0, 0, 1]);
        let len = std::mem::size_of_val(&addr) as libc::socklen_t;
        assert_eq!(
            libc::bind(fd, (&addr as *const libc::sockaddr_in).cast(), len),
            0
        );
        assert_eq!(libc::listen(fd, 0), 0);
        std::net::TcpListener::from_raw_fd(fd)
    }
}

/// Go's `Dialer.DialContext` against a server that never accepts: a `select!` on the dial
/// and a per-dial context with a 20 ms deadline, and a parent context canceled while 50
/// more dials wait. Every dial ends (connected, or with the context's error), and no fd is
/// left once the connections are dropped.
#[test]
fn dial_context_against_a_full_backlog() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    for procs in [1, 4] {
        within(move || {
            let rt = rt(procs);
            let base_fds = open_fds();
            let listener = full_listener();
            let addr = listener.local_addr().unwrap();
            rt.block_on(async {
                let dial = |ctx: Context| async move {
                    gort::select! {
                        c = TcpStream::connect(addr) => c.map_err(|e| e.to_string()),
                        _ = ctx.done().recv() => Err(ctx.err().unwrap().to_string()),
                    }
                };
                let (mut connected, mut expired) = (Vec::new(), 0);
                for _ in 0..50 {
                    let (ctx, cancel) =
                        context::with_timeout(&Context::background(), Duration::from_millis(20));
                    let _cancel = cancel.drop_guard();
                    match dial(ctx).await {
                        Ok(c) => connected.push(c),
                        Err(e) => {
                            assert_eq!(e, "context deadline exceeded");
                            expired += 1;
                        }
                    }
                }
                assert!(expired > 0, "every dial connected: the backlog is not full");
                let (parent, cancel) = context::with_cancel(&Context::background());
                let dials: Vec<_> = (0..50).map(|_| gort::spawn(dial(parent.clone()))).collect();
                gort::time::sleep(Duration::from_millis(10)).await;
                cancel.cancel();
                for d in dials {
                    match d.await.unwrap() {
                        Ok(c) => connected.push(c),
                        Err(e) => assert_eq!(e, "context canceled"),
                    }
                }
            });
            drop((rt, listener));
            let fds = open_fds();
            assert!(
                fds <= base_fds,
                "fds: {base_fds} before, {fds} after: leaked"
            );
        });
    }
}
