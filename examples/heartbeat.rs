//! A heartbeat failure detector, as a Go service would write it: peers on loopback UDP, each
//! sending a heartbeat to every other peer on a `Ticker`, and each suspecting a peer it has
//! not heard from for `SUSPECT_AFTER` (a receive loop with a read deadline, so a silent
//! network still lets the detector run its checks).
//!
//! Some peers die during the run: one returns (its socket closes), one panics inside its task
//! (the runtime must survive it and its socket must close with it), one goes silent but keeps
//! its socket. Every live peer must suspect each dead one within a bound, and end the run
//! suspecting no live one (a suspicion is withdrawn when the peer is heard again).
//!
//! `cargo run --release --example heartbeat`

use gort::net::UdpSocket;
use gort::time::{Instant, Ticker};
use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

const PEERS: usize = 8;
const BEAT: Duration = Duration::from_millis(10);
const SUSPECT_AFTER: Duration = Duration::from_millis(150);
const RUN: Duration = Duration::from_millis(1200);

/// Suspicions of live peers, withdrawn when they were heard again.
static FALSE_SUSPICIONS: AtomicU64 = AtomicU64::new(0);

#[derive(Clone, Copy, PartialEq, Debug)]
enum Fate {
    Live,
    Exit,
    Panic,
    Silent,
}

fn fate(id: usize) -> Fate {
    match id {
        5 => Fate::Exit,
        6 => Fate::Panic,
        7 => Fate::Silent,
        _ => Fate::Live,
    }
}

/// What a peer reports: when it first suspected each other peer (relative to the start).
type Suspicions = HashMap<usize, Duration>;

async fn peer(
    id: usize,
    sock: UdpSocket,
    addrs: Arc<Vec<SocketAddr>>,
    start: Instant,
    out: Arc<Mutex<Vec<Suspicions>>>,
) {
    let die_at = start + Duration::from_millis(400);
    let end = start + RUN;
    let ticker = Ticker::new(BEAT);
    let mut last_seen: Vec<Instant> = vec![start; PEERS];
    let mut suspected: Suspicions = HashMap::new();
    let mut buf = [0u8; 64];
    loop {
        let now = Instant::now();
        if now >= end {
            break;
        }
        if now >= die_at {
            match fate(id) {
                Fate::Exit => return,
                Fate::Panic => panic!("peer {id} crashes (on purpose)"),
                _ => {}
            }
        }
        // Wait for a heartbeat or the next tick, whichever first.
        gort::select! {
            _ = ticker.c().recv() => {
                if fate(id) == Fate::Silent && now >= die_at {
                    continue;
                }
                let msg = (id as u32).to_le_bytes();
                for (p, addr) in addrs.iter().enumerate() {
                    if p != id {
                        // A dead peer's port refuses: on loopback that may come back as an
                        // error on a later call; a detector ignores it.
                        let _ = sock.send_to(&msg, *addr).await;
                    }
                }
                for (p, seen) in last_seen.iter().enumerate() {
                    if p != id && now.duration_since(*seen) > SUSPECT_AFTER {
                        suspected.entry(p).or_insert(now - start);
                    }
                }
            },
            r = recv(&sock, &mut buf) => if let Some(from) = r {
                last_seen[from] = Instant::now();
                // Heard again: a suspicion of a live peer (a stall of this machine longer
                // than SUSPECT_AFTER) is withdrawn, as a detector does.
                if suspected.remove(&from).is_some() {
                    FALSE_SUSPICIONS.fetch_add(1, Ordering::Relaxed);
                }
            },
        }
    }
    out.lock().unwrap()[id] = suspected;
}

async fn recv(sock: &UdpSocket, buf: &mut [u8]) -> Option<usize> {
    sock.set_read_deadline(Some(Instant::now() + BEAT * 2))
        .unwrap();
    match sock.recv_from(buf).await {
        Ok((4, _)) => Some(u32::from_le_bytes(buf[..4].try_into().unwrap()) as usize),
        _ => None,
    }
}

#[gort::main]
async fn main() {
    let mut socks = Vec::new();
    for _ in 0..PEERS {
        socks.push(UdpSocket::bind("127.0.0.1:0").await.unwrap());
    }
    let addrs: Arc<Vec<_>> = Arc::new(socks.iter().map(|s| s.local_addr().unwrap()).collect());
    let out = Arc::new(Mutex::new(vec![Suspicions::new(); PEERS]));
    let start = Instant::now();
    let tasks: Vec<_> = socks
        .into_iter()
        .enumerate()
        .map(|(id, s)| gort::spawn(peer(id, s, addrs.clone(), start, out.clone())))
        .collect();
    let mut failed = false;
    for (id, t) in tasks.into_iter().enumerate() {
        let r = t.await;
        let want_panic = fate(id) == Fate::Panic;
        if r.is_err() != want_panic {
            eprintln!("peer {id}: {r:?}");
            failed = true;
        }
    }
    let out = out.lock().unwrap();
    let withdrawn = FALSE_SUSPICIONS.load(Ordering::Relaxed);
    println!("{withdrawn} suspicions of live peers withdrawn");
    for id in (0..PEERS).filter(|&id| fate(id) == Fate::Live) {
        let mut dead: Vec<_> = out[id].keys().copied().collect();
        dead.sort_unstable();
        let latest = out[id].values().max().copied().unwrap_or_default();
        println!("peer {id} suspects {dead:?}, the last at {latest:?}");
        // Death at 400 ms; suspicion after 150 ms of silence, one beat of slack, and a
        // generous margin for a loaded machine.
        if dead != [5, 6, 7] || latest > Duration::from_millis(900) {
            failed = true;
        }
    }
    if failed {
        eprintln!("FAILED");
        std::process::exit(1);
    }
}
