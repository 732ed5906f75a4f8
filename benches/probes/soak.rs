//! A long-running server's mixed workload on one runtime, watched for growth: TCP connections
//! opened and closed with a read deadline moved before every read, UDP request/response with
//! timeouts, `after_func`s started/stopped/reset, channel `Timer`s and `Ticker`s created and
//! dropped, `select!` against `time::after`, a `context::with_timeout` per request (canceled
//! early, expiring, or with its cancel forgotten), `ErrGroup`s, `spawn_blocking`, tasks that
//! panic, and `set_procs` changes from a thread outside the runtime.
//!
//! Every 0.5 s it samples the process's RSS (`/proc/self/statm`), its live heap bytes (a
//! counting global allocator), open fds (`/proc/self/fd`), threads (`/proc/self/task`, by name
//! at the end) and the runtime's `Metrics` (timers in the heaps, stopped ones awaiting
//! removal, tasks alive). After the warm-up (the first third of the run) it prints
//! each series' least-squares slope per minute, and checks that the last quarter's maxima stay
//! within a generous bound of the first post-warm-up quarter's: it exits 1 if any grew past it.
//!
//! A probe rather than a stress scenario: it measures the whole process (its fds, threads and
//! RSS), which the stress suite shares among scenarios and its own samplers, and its point is
//! a run of minutes, where the suite's default run is a minute for all fifteen scenarios.
//!
//! ```sh
//! cargo run --release --example soak                           # 6 s, a CI-sized check
//! cargo run --release --example soak -- --duration 240 --procs 4  # 4 minutes on 4 Ps
//! ```

use gort::context::{self, Context};
use gort::net::{TcpListener, TcpStream, UdpSocket};
use gort::sync::ErrGroup;
use gort::time::{after, after_func, Instant, Ticker, Timer};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use std::time::Duration;

/// Counts live heap bytes (`counting::BYTES`): RSS also moves with the allocator's arenas
/// and fragmentation, the live bytes only with what the program holds.
#[path = "../../crates/time/tests/support/counting.rs"]
mod counting;

const HOUR: Duration = Duration::from_secs(3600);
const SAMPLE: Duration = Duration::from_millis(500);
const PANIC_MSG: &str = "soak: injected panic";

/// A small xorshift generator: the workload's choices, per task.
struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n.max(1)
    }
    fn ms(&mut self, lo: u64, hi: u64) -> Duration {
        Duration::from_micros(lo * 1000 + self.below((hi - lo) * 1000 + 1))
    }
}

/// Operations done, per kind, to show the load was steady.
#[derive(Default)]
struct Ops {
    tcp_conns: AtomicU64,
    tcp_timeouts: AtomicU64,
    udp_reqs: AtomicU64,
    udp_timeouts: AtomicU64,
    timer_ops: AtomicU64,
    ctx_reqs: AtomicU64,
    groups: AtomicU64,
    blocking: AtomicU64,
    panics: AtomicU64,
}

/// Accepts connections and serves each with an idle read deadline set before every read, one
/// task per connection in the server's one `ErrGroup` (Go's `g.Go(func() { serve(conn) })`),
/// which lives as long as the server.
async fn tcp_server(listener: TcpListener) {
    let conns = ErrGroup::<std::io::Error>::new();
    loop {
        let Ok((conn, _)) = listener.accept().await else {
            continue;
        };
        conns.spawn(async move {
            let mut buf = [0u8; 512];
            loop {
                let _ = conn.set_read_deadline(Some(Instant::now() + Duration::from_millis(200)));
                match conn.read(&mut buf).await {
                    Ok(0) | Err(_) => return Ok(()),
                    Ok(n) => {
                        let _ = conn
                            .set_write_deadline(Some(Instant::now() + Duration::from_millis(200)));
                        if conn.write_all(&buf[..n]).await.is_err() {
                            return Ok(());
                        }
                    }
                }
            }
        });
    }
}

/// Connects, exchanges a few requests under a read deadline moved before each read, and
/// closes (one connection in eight is dropped mid-request).
async fn tcp_client(addr: std::net::SocketAddr, stop: Arc<AtomicBool>, ops: Arc<Ops>, seed: u64) {
    let mut rng = Rng::new(seed);
    let req = [7u8; 64];
    while !stop.load(Relaxed) {
        let Ok(conn) = TcpStream::connect(addr).await else {
            continue;
        };
        ops.tcp_conns.fetch_add(1, Relaxed);
        for _ in 0..1 + rng.below(16) {
            if conn.write_all(&req).await.is_err() {
                break;
            }
            if rng.below(8) == 0 {
                break; // drop mid-request: the server sees a reset or EOF
            }
            let mut got = [0u8; 64];
            let _ = conn.set_read_deadline(Some(Instant::now() + rng.ms(1, 50)));
            if let Err(e) = conn.read_exact(&mut got).await {
                if e.kind() == std::io::ErrorKind::TimedOut {
                    ops.tcp_timeouts.fetch_add(1, Relaxed);
                }
                break;
            }
            gort::time::sleep(rng.ms(0, 3)).await;
        }
    }
}

/// Answers datagrams, dropping one in eight (its client times out).
async fn udp_server(sock: UdpSocket, stop: Arc<AtomicBool>) {
    let mut rng = Rng::new(99);
    let mut buf = [0u8; 256];
    while !stop.load(Relaxed) {
        let _ = sock.set_read_deadline(Some(Instant::now() + Duration::from_millis(100)));
        if let Ok((n, from)) = sock.recv_from(&mut buf).await {
            if rng.below(8) != 0 {
                let _ = sock.send_to(&buf[..n], from).await;
            }
        }
    }
}

/// A request/response client with a read timeout per request; a new socket every 16 requests.
async fn udp_client(server: std::net::SocketAddr, stop: Arc<AtomicBool>, ops: Arc<Ops>, seed: u64) {
    let mut rng = Rng::new(seed);
    while !stop.load(Relaxed) {
        let Ok(sock) = UdpSocket::bind("127.0.0.1:0").await else {
            continue;
        };
        if sock.connect(server).await.is_err() {
            continue;
        }
        for _ in 0..16 {
            let _ = sock.send(b"ping").await;
            let _ = sock.set_read_deadline(Some(Instant::now() + rng.ms(2, 20)));
            let mut buf = [0u8; 16];
            ops.udp_reqs.fetch_add(1, Relaxed);
            if let Err(e) = sock.recv(&mut buf).await {
                if e.kind() == std::io::ErrorKind::TimedOut {
                    ops.udp_timeouts.fetch_add(1, Relaxed);
                }
            }
        }
    }
}

/// `after_func`s started, stopped and reset; channel `Timer`s and `Ticker`s created, read
/// from or not, and dropped; `select!` against `time::after`.
async fn timer_churn(stop: Arc<AtomicBool>, ops: Arc<Ops>, seed: u64) {
    let mut rng = Rng::new(seed);
    let fired = Arc::new(AtomicU64::new(0));
    let (tx, rx) = gort::chan::bounded::<u64>(1);
    while !stop.load(Relaxed) {
        let f = fired.clone();
        let af = after_func(rng.ms(0, 30), move || {
            f.fetch_add(1, Relaxed);
        });
        match rng.below(3) {
            0 => {
                af.stop();
            }
            1 => {
                af.reset(rng.ms(0, 60));
            }
            _ => {} // dropped: it still fires
        }
        // Timers armed an hour ahead and let go of: stopped (an `after_func`) or dropped (a
        // channel `Timer`, an `after`'s receiver), each must leave the heaps.
        let far = after_func(HOUR, || {});
        if rng.below(2) == 0 {
            far.stop();
        } else {
            far.reset(rng.ms(0, 5));
        }
        drop(Timer::new(HOUR));
        let timer = Timer::new(rng.ms(0, 20));
        if rng.below(2) == 0 {
            timer.reset(rng.ms(1, 30));
        }
        if rng.below(4) == 0 {
            let _ = timer.c().recv().await;
        }
        drop(timer);
        if rng.below(8) == 0 {
            let ticker = Ticker::new(rng.ms(1, 5));
            for _ in 0..rng.below(3) {
                let _ = ticker.c().recv().await;
            }
            match rng.below(3) {
                0 => ticker.reset(rng.ms(1, 10)),
                1 => ticker.reset(HOUR),
                _ => {}
            }
        }
        // A wait on a channel against a timeout (shape T6): a short one on an empty channel,
        // an hour's on a ready one (the timer is dropped with its receiver).
        let ready = rng.below(4) == 0;
        if ready {
            let _ = tx.try_send(1);
        }
        let timeout = after(if ready { HOUR } else { rng.ms(0, 3) });
        gort::select! {
            _ = rx.recv() => {},
            _ = timeout.recv() => {},
        }
        ops.timer_ops.fetch_add(1, Relaxed);
    }
}

/// A request under a `context::with_timeout`: canceled when its work is done first, or
/// expiring first; one in four in an `ErrGroup` of sub-requests, one of which may fail.
async fn ctx_requests(server: Context, stop: Arc<AtomicBool>, ops: Arc<Ops>, seed: u64) {
    let mut rng = Rng::new(seed);
    while !stop.load(Relaxed) {
        let (ctx, cancel) = context::with_timeout(&server, rng.ms(1, 10));
        if rng.below(4) == 0 {
            let (group, gctx) = ErrGroup::<&'static str>::with_context(&ctx);
            for i in 0..1 + rng.below(4) {
                let (c, work, fails) = (gctx.clone(), rng.ms(0, 12), rng.below(6) == 0);
                group.spawn(async move {
                    let sleep = gort::time::sleep(work);
                    gort::select! {
                        _ = sleep => if fails && i == 0 { Err("sub-request failed") } else { Ok(()) },
                        _ = c.done().recv() => Err("canceled"),
                    }
                });
            }
            let _ = group.wait().await;
            ops.groups.fetch_add(1, Relaxed);
        } else {
            let sleep = gort::time::sleep(rng.ms(0, 12));
            gort::select! {
                _ = sleep => {},
                _ = ctx.done().recv() => {},
            }
        }
        if rng.below(8) == 0 {
            drop(cancel); // a forgotten cancel: the deadline alone must unregister the child
        } else {
            cancel.cancel();
        }
        ops.ctx_reqs.fetch_add(1, Relaxed);
    }
}

/// `spawn_blocking` work, and tasks that panic (plainly, or holding a pending timer).
async fn blocking_and_panics(stop: Arc<AtomicBool>, ops: Arc<Ops>, seed: u64) {
    let mut rng = Rng::new(seed);
    while !stop.load(Relaxed) {
        let d = rng.ms(0, 2);
        let _ = gort::spawn_blocking(move || std::thread::sleep(d)).await;
        ops.blocking.fetch_add(1, Relaxed);
        if rng.below(4) == 0 {
            let hold = rng.below(2) == 0;
            let j = gort::spawn(async move {
                let _t = hold.then(|| Timer::new(Duration::from_secs(3600)));
                gort::time::sleep(Duration::from_micros(100)).await;
                panic!("{PANIC_MSG}");
            });
            assert!(j.await.unwrap_err().is_panic());
            ops.panics.fetch_add(1, Relaxed);
        }
        gort::time::sleep(rng.ms(0, 5)).await;
    }
}

/// Runs the workload until `stop`, with `conc` clients of each kind.
async fn workload(stop: Arc<AtomicBool>, ops: Arc<Ops>, conc: u64) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let tcp_addr = listener.local_addr().unwrap();
    let acceptor = gort::spawn(tcp_server(listener));
    let udp = UdpSocket::bind("127.0.0.1:0").await.unwrap();
    let udp_addr = udp.local_addr().unwrap();
    let (server_ctx, server_cancel) = context::with_cancel(&Context::background());
    let mut tasks = vec![gort::spawn(udp_server(udp, stop.clone()))];
    for i in 0..conc {
        let (s, o) = (stop.clone(), ops.clone());
        tasks.push(gort::spawn(tcp_client(
            tcp_addr,
            s.clone(),
            o.clone(),
            10 + i,
        )));
        tasks.push(gort::spawn(udp_client(
            udp_addr,
            s.clone(),
            o.clone(),
            20 + i,
        )));
        tasks.push(gort::spawn(timer_churn(s.clone(), o.clone(), 30 + i)));
        tasks.push(gort::spawn(ctx_requests(
            server_ctx.clone(),
            s.clone(),
            o.clone(),
            40 + i,
        )));
        tasks.push(gort::spawn(blocking_and_panics(s, o, 50 + i)));
    }
    for t in tasks {
        t.await.unwrap();
    }
    server_cancel.cancel();
    acceptor.abort();
    let _ = acceptor.await;
}

/// One sample of the process and the runtime.
#[derive(Clone, Copy, Debug)]
struct Sample {
    t: f64,
    rss_kib: f64,
    heap_kib: f64,
    fds: f64,
    threads: f64,
    timers: f64,
    deleted: f64,
    tasks: f64,
}

/// A sampled series: its name and how to read it from a sample.
type Series = (&'static str, fn(&Sample) -> f64);

const SERIES: [Series; 7] = [
    ("rss_kib", |s| s.rss_kib),
    ("heap_kib", |s| s.heap_kib),
    ("fds", |s| s.fds),
    ("threads", |s| s.threads),
    ("timers_pending", |s| s.timers),
    ("timers_deleted", |s| s.deleted),
    ("tasks_alive", |s| s.tasks),
];

fn count_dir(path: &str) -> f64 {
    std::fs::read_dir(path).map(|d| d.count()).unwrap_or(0) as f64
}

fn sample(rt: &gort::Runtime, t: f64) -> Sample {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap_or_default();
    let pages: f64 = statm
        .split_whitespace()
        .nth(1)
        .and_then(|v| v.parse().ok())
        .unwrap_or(0.0);
    let m = rt.metrics();
    Sample {
        t,
        rss_kib: pages * 4.0,
        heap_kib: counting::BYTES.load(Relaxed) as f64 / 1024.0,
        fds: count_dir("/proc/self/fd"),
        threads: count_dir("/proc/self/task"),
        timers: m.timers_pending as f64,
        deleted: m.timers_deleted as f64,
        tasks: m.tasks_alive as f64,
    }
}

/// The process's threads, counted by name (`/proc/self/task/*/comm`).
fn thread_names() -> String {
    let mut names = std::collections::BTreeMap::<String, usize>::new();
    for task in std::fs::read_dir("/proc/self/task")
        .into_iter()
        .flatten()
        .flatten()
    {
        let comm = std::fs::read_to_string(task.path().join("comm")).unwrap_or_default();
        *names.entry(comm.trim().to_string()).or_default() += 1;
    }
    names
        .iter()
        .map(|(n, c)| format!("{n} x{c}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Least-squares slope of `f` over `samples`, per minute.
fn slope(samples: &[Sample], f: fn(&Sample) -> f64) -> f64 {
    let n = samples.len() as f64;
    let (mt, mv) = samples
        .iter()
        .fold((0.0, 0.0), |(a, b), s| (a + s.t / n, b + f(s) / n));
    let (num, den) = samples.iter().fold((0.0, 0.0), |(num, den), s| {
        (
            num + (s.t - mt) * (f(s) - mv),
            den + (s.t - mt) * (s.t - mt),
        )
    });
    if den == 0.0 {
        0.0
    } else {
        num / den * 60.0
    }
}

/// The allowed late maximum for a series whose early maximum is `early`: generous, so a
/// steady process never fails, while a leak of one entry per request does within minutes.
fn bound(name: &str, early: f64) -> f64 {
    match name {
        "rss_kib" | "heap_kib" => early * 1.25 + 16.0 * 1024.0,
        "fds" => early + 32.0,
        "threads" => early + 16.0,
        _ => early * 2.0 + 2_000.0,
    }
}

fn main() {
    let mut args = std::env::args().skip(1);
    let (mut secs, mut procs, mut conc) = (6.0f64, 2usize, 8u64);
    while let Some(a) = args.next() {
        let v = args.next().unwrap_or_default();
        match a.as_str() {
            "--duration" => secs = v.parse().expect("--duration SECONDS"),
            "--procs" => procs = v.parse().expect("--procs N"),
            "--conc" => conc = v.parse().expect("--conc N"),
            _ => panic!("usage: soak [--duration SECONDS] [--procs N] [--conc N]"),
        }
    }
    let quiet = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        if !info.to_string().contains(PANIC_MSG) {
            quiet(info);
        }
    }));
    let rt = gort::Builder::new().procs(procs).build().unwrap();
    let (stop, ops) = (Arc::new(AtomicBool::new(false)), Arc::new(Ops::default()));
    let start = std::time::Instant::now();
    let mut samples = Vec::new();
    std::thread::scope(|s| {
        let runner = s.spawn(|| rt.block_on(workload(stop.clone(), ops.clone(), conc)));
        let mut rng = Rng::new(7);
        let mut next = SAMPLE;
        while start.elapsed().as_secs_f64() < secs {
            // set_procs changes between samples: 1..=2*procs, back to `procs` half the time.
            std::thread::sleep(rng.ms(20, 200).min(next.saturating_sub(start.elapsed())));
            let n = if rng.below(2) == 0 {
                procs
            } else {
                1 + rng.below(2 * procs as u64) as usize
            };
            rt.set_procs(n);
            if start.elapsed() >= next {
                let smp = sample(&rt, start.elapsed().as_secs_f64());
                println!(
                    "t {:6.1}s rss {:7.0} KiB heap {:7.0} KiB fds {:3} threads {:3} timers {:6} \
                     deleted {:6} tasks {:5}",
                    smp.t,
                    smp.rss_kib,
                    smp.heap_kib,
                    smp.fds,
                    smp.threads,
                    smp.timers,
                    smp.deleted,
                    smp.tasks
                );
                samples.push(smp);
                next += SAMPLE;
            }
        }
        stop.store(true, Relaxed);
        rt.set_procs(procs);
        runner.join().unwrap();
    });
    let o = &ops;
    println!(
        "ops: tcp conns {} (timeouts {}), udp reqs {} (timeouts {}), timer loops {}, ctx reqs {} \
         (groups {}), blocking {}, panics {}",
        o.tcp_conns.load(Relaxed),
        o.tcp_timeouts.load(Relaxed),
        o.udp_reqs.load(Relaxed),
        o.udp_timeouts.load(Relaxed),
        o.timer_ops.load(Relaxed),
        o.ctx_reqs.load(Relaxed),
        o.groups.load(Relaxed),
        o.blocking.load(Relaxed),
        o.panics.load(Relaxed)
    );
    println!("threads by name: {}", thread_names());
    std::process::exit(if verdict(&samples) { 0 } else { 1 });
}

/// Prints slopes after the warm-up and checks the late quarter against the early one.
fn verdict(samples: &[Sample]) -> bool {
    if samples.len() < 6 {
        println!("soak: too short to judge ({} samples)", samples.len());
        return true;
    }
    let steady = &samples[samples.len() / 3..];
    let q = (steady.len() / 4).max(1);
    let (early, late) = (&steady[..q], &steady[steady.len() - q..]);
    let max = |w: &[Sample], f: fn(&Sample) -> f64| w.iter().map(f).fold(0.0, f64::max);
    let mut ok = true;
    for (name, f) in SERIES {
        let (e, l) = (max(early, f), max(late, f));
        let grew = l > bound(name, e);
        ok &= !grew;
        println!(
            "{name:15} slope {:+10.1}/min  early max {e:9.0}  late max {l:9.0}  bound {:9.0}{}",
            slope(steady, f),
            bound(name, e),
            if grew { "  GREW" } else { "" }
        );
    }
    println!("{}", if ok { "soak: flat" } else { "soak: GREW" });
    ok
}
