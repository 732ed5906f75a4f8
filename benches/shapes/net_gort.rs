//! Network shapes N1-N5 (echo round trips over loopback TCP, idle connections whose reads
//! time out) and N6 (N2 over Unix sockets) on gort (procs = W).

use std::sync::Arc;
use std::time::Duration;

use gort::net::{TcpListener, TcpStream, UnixListener, UnixStream};
use gort::time::Instant;

use crate::common::{
    check, durations, fanin_clients, ms, Figures, Latch, Meter, Params, Samples, UnixPath,
};
use crate::timer_gort::{go, run};

/// Message size of the echo shapes.
const MSG: usize = 64;

/// Echoes on the connection `$c` (a TCP or Unix stream) until its client closes; with
/// `$deadline`, a read deadline 30 s ahead is set before every read (Go's idle timeout).
macro_rules! echo_conn {
    ($c:expr, $deadline:expr) => {{
        let c = $c;
        let mut buf = [0u8; MSG];
        loop {
            if $deadline {
                let d = Instant::now() + Duration::from_secs(30);
                c.set_read_deadline(Some(d)).expect("deadline");
            }
            match c.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    if c.write_all(&buf[..n]).await.is_err() {
                        break;
                    }
                }
            }
        }
    }};
}

/// `$rounds` round trips of a `MSG`-byte message on the connection `$c`.
macro_rules! round_trips {
    ($c:expr, $rounds:expr) => {{
        let c = $c;
        let msg = [7u8; MSG];
        let mut buf = [0u8; MSG];
        for _ in 0..$rounds {
            c.write_all(&msg).await.expect("write");
            c.read_exact(&mut buf).await.expect("read");
        }
    }};
}

/// An echo server on a fresh loopback port (see `echo_conn`).
async fn echo_server(deadline: bool) -> std::net::SocketAddr {
    let l = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = l.local_addr().expect("local_addr");
    go(async move {
        while let Ok((c, _)) = l.accept().await {
            go(async move { echo_conn!(c, deadline) });
        }
    });
    addr
}

/// One client: `rounds` round trips of a `MSG`-byte message.
async fn client(addr: std::net::SocketAddr, rounds: usize) {
    round_trips!(TcpStream::connect(addr).await.expect("connect"), rounds)
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
    let q = *p;
    run(p, move || async move {
        let addr = echo_server(deadline).await;
        fanin_clients(&q, go, move |rounds| client(addr, rounds)).await
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

/// Raises the soft open-file limit to the hard one (N5 needs ~18,100 fds).
pub fn raise_fd_limit() {
    // SAFETY: getrlimit/setrlimit on this process with a properly initialised struct.
    unsafe {
        let mut r = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut r) == 0 && r.rlim_cur < r.rlim_max {
            r.rlim_cur = r.rlim_max;
            libc::setrlimit(libc::RLIMIT_NOFILE, &r);
        }
    }
}

/// N5: C = 9,000 idle connections (quick: 900); each server-side read has a deadline
/// uniform in [100 ms, 1100 ms] and must end with a timeout.
pub fn n5_idle_deadlines(p: &Params) -> Figures {
    raise_fd_limit();
    let conns = p.n(9_000);
    let ds = durations(
        5,
        conns,
        Duration::from_millis(100),
        Duration::from_millis(1100),
    );
    run(p, move || async move {
        let l = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = l.local_addr().expect("local_addr");
        let mut clients = Vec::with_capacity(conns);
        let mut servers = Vec::with_capacity(conns);
        for _ in 0..conns {
            let c = gort::spawn(async move { TcpStream::connect(addr).await.expect("connect") });
            servers.push(l.accept().await.expect("accept").0);
            clients.push(c.await.expect("connect task"));
        }
        let samples = Arc::new(Samples::new(conns));
        let timed_out = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let done = Arc::new(Latch::new(conns));
        // The server sockets stay open until the measurement ends, as on Go's side: closing
        // 9,000 sockets is the kernel's work, not the deadlines'.
        let kept = Arc::new(std::sync::Mutex::new(Vec::with_capacity(conns)));
        let m = Meter::start();
        for (i, (s, d)) in servers.into_iter().zip(ds).enumerate() {
            let (samples, timed_out, done) = (samples.clone(), timed_out.clone(), done.clone());
            let kept = kept.clone();
            go(async move {
                let deadline = Instant::now() + d;
                s.set_read_deadline(Some(deadline)).expect("deadline");
                let r = s.read(&mut [0u8; 1]).await;
                let now = Instant::now();
                if matches!(&r, Err(e) if e.kind() == std::io::ErrorKind::TimedOut) {
                    timed_out.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                }
                samples.record(i, deadline.into(), now.into());
                kept.lock().expect("kept").push(s);
                done.arrive();
            });
        }
        done.wait().await;
        let cpu = m.cpu();
        drop(clients);
        drop(kept);
        let [p50, p99, max] = samples.percentiles_us();
        let count = timed_out.load(std::sync::atomic::Ordering::Relaxed);
        let mut f = vec![
            ("late_p50_us", p50),
            ("late_p99_us", p99),
            ("late_max_us", max),
            ("cpu_ms", ms(cpu)),
            ("timed_out", count as f64),
        ];
        check(&mut f, count == conns, || {
            format!("{count} of {conns} reads timed out")
        });
        f
    })
}

/// Open file descriptors of this process.
pub fn open_fds() -> usize {
    std::fs::read_dir("/proc/self/fd").map_or(0, |d| d.count())
}

/// N3: 20,000 times (quick: 2,000): connect, the server accepts, one 1-byte echo, both
/// sides close; 16 clients at once.
pub fn n3_accept_churn(p: &Params) -> Figures {
    let (clients, total) = (16, p.n(20_000));
    run(p, move || async move {
        let addr = echo_server(false).await;
        let fds0 = open_fds();
        let done = Arc::new(Latch::new(clients));
        let m = Meter::start();
        for k in 0..clients {
            let done = done.clone();
            go(async move {
                let mut b = [0u8; 1];
                for _ in 0..(total / clients + usize::from(k < total % clients)) {
                    let c = TcpStream::connect(addr).await.expect("connect");
                    c.write_all(&[1]).await.expect("write");
                    c.read_exact(&mut b).await.expect("read");
                }
                done.arrive();
            });
        }
        done.wait().await;
        let per = m.ns_per(total);
        // The server side closes when it reads the end of stream: give it a moment.
        let mut fds = open_fds();
        for _ in 0..100 {
            if fds <= fds0 {
                break;
            }
            gort::time::sleep(Duration::from_millis(10)).await;
            fds = open_fds();
        }
        let mut f = vec![
            ("per_conn_ns", per),
            ("fds_left", fds.saturating_sub(fds0) as f64),
        ];
        check(&mut f, fds <= fds0, || format!("{} fds left", fds - fds0));
        f
    })
}

/// N6: N2 over Unix stream sockets (a listener on a fresh path in the temporary directory).
pub fn n6_unix_fanin(p: &Params) -> Figures {
    let q = *p;
    run(p, move || async move {
        let path = Arc::new(UnixPath::fresh("gort"));
        let l = UnixListener::bind(&path.0).expect("bind");
        go(async move {
            while let Ok((c, _)) = l.accept().await {
                go(async move { echo_conn!(c, false) });
            }
        });
        fanin_clients(&q, go, move |rounds| {
            let path = path.clone();
            async move { round_trips!(UnixStream::connect(&path.0).await.expect("connect"), rounds) }
        })
        .await
    })
}
