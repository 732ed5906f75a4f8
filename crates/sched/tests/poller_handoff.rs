//! The hand-off of the tasks a blocking poll readied (Go's `findrunnable` after
//! `netpoll(delay)`): the M that polled takes an idle P and runs what it readied itself, so an
//! idle server wakes no parked M per request.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::SeqCst};
use std::sync::Arc;
use std::time::{Duration, Instant};

const MSG: usize = 64;
const WARM_UP: usize = 20;
const REQUESTS: u64 = 200;

/// A runtime of 2 Ps and a loopback listener registered with it, and its address.
fn two_ps_and_a_listener() -> (gort::Runtime, gort::net::TcpListener, std::net::SocketAddr) {
    let rt = gort::Builder::new().procs(2).build().unwrap();
    let listener = rt
        .block_on(gort::net::TcpListener::bind("127.0.0.1:0"))
        .unwrap();
    let addr = listener.local_addr().unwrap();
    (rt, listener, addr)
}

/// One client (a plain thread, not a task) does sequential round trips with an echo server
/// on an otherwise idle runtime of 2 Ps: between requests every M is idle, one blocked in the
/// poller, the other parked. Each request readies one task; before the hand-off the poller M
/// queued it globally and woke the parked M for it (~1 wake-up per request).
#[test]
fn an_idle_server_wakes_no_parked_m_per_request() {
    let (rt, listener, addr) = two_ps_and_a_listener();
    rt.spawn(async move {
        let (conn, _) = listener.accept().await.unwrap();
        let mut buf = [0u8; MSG];
        while let Ok(n) = conn.read(&mut buf).await {
            if n == 0 || conn.write_all(&buf[..n]).await.is_err() {
                return;
            }
        }
    });
    let mut client = TcpStream::connect(addr).unwrap();
    client.set_nodelay(true).unwrap();
    let mut round_trip = |i: usize| {
        let msg = [i as u8; MSG];
        client.write_all(&msg).unwrap();
        let mut back = [0u8; MSG];
        client.read_exact(&mut back).unwrap();
        assert_eq!(back, msg);
    };
    for i in 0..WARM_UP {
        round_trip(i);
    }
    let before = rt.metrics();
    for i in 0..REQUESTS as usize {
        round_trip(i);
    }
    let after = rt.metrics();
    let woken = after.ms_woken - before.ms_woken;
    // Generous: a parked M's backstop look-around or a stray timer may cost a few.
    assert!(
        woken < REQUESTS / 10,
        "{woken} parked Ms woken for {REQUESTS} requests (poller wake-ups: {})",
        after.poller_wakeups - before.poller_wakeups
    );
}

/// The runtime's worker threads (Ms) alive now, by their default names.
fn ms_alive() -> usize {
    std::fs::read_dir("/proc/self/task")
        .unwrap()
        .filter_map(|t| std::fs::read_to_string(t.ok()?.path().join("comm")).ok())
        .filter(|name| name.starts_with("gort-m"))
        .count()
}

/// Spins until `n` tasks have arrived (each on its own M), or 10 s passed.
fn meet(arrived: &AtomicUsize, n: usize) {
    arrived.fetch_add(1, SeqCst);
    let deadline = Instant::now() + Duration::from_secs(10);
    while arrived.load(SeqCst) < n && Instant::now() < deadline {
        std::hint::spin_loop();
    }
}

/// A task made runnable while one P is busy and the other's M blocks in the poller (a task
/// waits on a socket): `wakep` passes its spinner to that M, which takes the idle P and runs
/// the task. Handing the P to a parked M (or a new thread) instead woke a third M while the
/// poller M came back to no idle P (N6's Ms taking turns on the CPUs).
#[test]
fn a_wakep_with_an_m_in_the_poller_wakes_that_m() {
    let (rt, listener, addr) = two_ps_and_a_listener();
    // A task waiting on a socket, so that an idle M blocks in the poller with no deadline.
    rt.spawn(async move {
        let _ = listener.accept().await;
    });
    // Two tasks running at once: both Ms are up; the other's, once its task ends, goes idle
    // into the poller while this one keeps its P busy.
    let arrived = Arc::new(AtomicUsize::new(0));
    let other = arrived.clone();
    rt.spawn(async move { meet(&other, 2) });
    let (ran, counts) = rt
        .block_on(rt.spawn(async move {
            meet(&arrived, 2);
            std::thread::sleep(Duration::from_millis(100));
            let before = (
                gort::runtime::Handle::current().metrics().ms_woken,
                ms_alive(),
            );
            let ran = Arc::new(AtomicBool::new(false));
            let flag = ran.clone();
            // The first fills `runnext`; the second pushes it to the ring, stealable: `wakep`.
            drop(gort::spawn(async move { flag.store(true, SeqCst) }));
            drop(gort::spawn(async {}));
            let deadline = Instant::now() + Duration::from_secs(10);
            while !ran.load(SeqCst) && Instant::now() < deadline {
                std::hint::spin_loop();
            }
            let after = (
                gort::runtime::Handle::current().metrics().ms_woken,
                ms_alive(),
            );
            (ran.load(SeqCst), (before, after))
        }))
        .unwrap();
    assert!(ran, "the task never ran while its P was busy");
    let ((woken0, ms0), (woken1, ms1)) = counts;
    assert_eq!(woken1 - woken0, 0, "a parked M was woken");
    assert_eq!(ms1, ms0, "a new M was started ({ms0} -> {ms1})");
    drop(TcpStream::connect(addr));
}
