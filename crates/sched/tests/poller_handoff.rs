//! The hand-off of the tasks a blocking poll readied (Go's `findrunnable` after
//! `netpoll(delay)`): the M that polled takes an idle P and runs what it readied itself, so an
//! idle server wakes no parked M per request.

use std::io::{Read, Write};
use std::net::TcpStream;

const MSG: usize = 64;
const WARM_UP: usize = 20;
const REQUESTS: u64 = 200;

/// One client (a plain thread, not a task) does sequential round trips with an echo server
/// on an otherwise idle runtime of 2 Ps: between requests every M is idle, one blocked in the
/// poller, the other parked. Each request readies one task; before the hand-off the poller M
/// queued it globally and woke the parked M for it (~1 wake-up per request).
#[test]
fn an_idle_server_wakes_no_parked_m_per_request() {
    let rt = gort::Builder::new().procs(2).build().unwrap();
    let listener = rt
        .block_on(gort::net::TcpListener::bind("127.0.0.1:0"))
        .unwrap();
    let addr = listener.local_addr().unwrap();
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
