//! net-deadlines: loopback TCP connections whose read deadlines are set before every read,
//! moved earlier and later and cleared by a second task while the read is blocked, and
//! expired, while the peer streams a known byte sequence in bursts with pauses longer than
//! the deadlines. Invariants: no byte lost or duplicated (the sequence arrives intact), no
//! read times out before the earliest deadline in effect during it, expired reads return
//! within the lateness bound (measured for reads whose deadline nobody moved), and the
//! process's sockets, pipes and anonymous-inode fds (epoll, eventfd, timerfd) are back to
//! their baseline once the sockets and the runtime are dropped.

use super::Ctx;
use gort::net::{TcpListener, TcpStream};
use gort::time::Instant;
use std::io::ErrorKind;
use std::net::Shutdown;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// One line for `--list`.
pub const ABOUT: &str = "loopback TCP reads under deadlines set per read, moved earlier/later and cleared \
    while blocked, and expired, while data flows: no byte lost or duplicated, no early timeout, fds back to baseline";

/// The byte at offset `i` of every connection's stream.
fn byte_at(i: u64) -> u8 {
    (i.wrapping_mul(2_654_435_761) >> 13) as u8
}

/// One connection's reading side, shared by its reader and its deadline mover.
struct Conn {
    stream: TcpStream,
    /// The earliest deadline (ns since the ctx epoch) in effect since the current read
    /// started; taken with the deadline it records, so that it never misses one.
    floor: Mutex<u64>,
    /// Moves made by the mover (a read whose deadline moved measures no lateness).
    moves: AtomicU64,
    done: AtomicBool,
}

impl Conn {
    /// Sets the read deadline `d` ahead (`None`: clears it), keeping `floor`: for the reader
    /// at the start of a read (`reset_floor`), else for the mover, which counts the move.
    /// Returns the deadline and the moves counted so far, both under the floor's lock, so a
    /// read that times out at a moved deadline always sees the move.
    fn set(&self, ctx: &Ctx, d: Option<Duration>, reset_floor: bool) -> (Option<u64>, u64) {
        let mut floor = self.floor.lock().unwrap_or_else(|e| e.into_inner());
        if reset_floor {
            *floor = u64::MAX;
        } else {
            self.moves.fetch_add(1, Relaxed);
        }
        let moves = self.moves.load(Relaxed);
        let deadline = d.map(|d| Instant::now() + d);
        let due = deadline.map(|t| ctx.ns(t));
        if let Some(due) = due {
            *floor = (*floor).min(due);
        }
        if let Err(e) = self.stream.set_read_deadline(deadline) {
            ctx.violation(format!("set_read_deadline failed: {e}"));
        }
        (due, moves)
    }

    fn floor(&self) -> u64 {
        *self.floor.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// Runs net-deadlines.
pub fn run(ctx: &Arc<Ctx>) {
    let fds_before = open_fds();
    let rt = ctx.runtime();
    let conns = ctx.scaled(16.0, 16, 64);
    let active = ctx.part(0.7);
    rt.block_on(async {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("local_addr");
        let mut tasks = Vec::new();
        for i in 0..conns {
            let client = gort::spawn(async move { TcpStream::connect(addr).await });
            let (server, _) = listener.accept().await.expect("accept");
            let client = client.await.expect("join").expect("connect");
            let conn = Arc::new(Conn {
                stream: client,
                floor: Mutex::new(u64::MAX),
                moves: AtomicU64::new(0),
                done: AtomicBool::new(false),
            });
            tasks.push(gort::spawn(write_stream(ctx.clone(), server, i, active)));
            tasks.push(gort::spawn(move_deadlines(ctx.clone(), conn.clone(), i)));
            tasks.push(gort::spawn(read_stream(ctx.clone(), conn, i)));
        }
        for t in tasks {
            if let Err(e) = t.await {
                ctx.violation(format!("a net-deadlines task failed: {e}"));
            }
        }
    });
    ctx.finish_runtime(rt);
    let fds_after = open_fds();
    ctx.violations
        .check(fds_after.len() <= fds_before.len(), || {
            let new: Vec<&String> = fds_after
                .iter()
                .filter(|f| !fds_before.contains(f))
                .collect();
            format!(
                "fds not back to baseline: {} before, {} after (new: {new:?})",
                fds_before.len(),
                fds_after.len()
            )
        });
    ctx.note(format!("{conns} connections"));
}

/// The server side: the stream in bursts, with pauses that outlast the readers' deadlines.
async fn write_stream(ctx: Arc<Ctx>, s: TcpStream, i: u64, active: Duration) {
    let mut rng = ctx.rng(3 * i);
    let end = std::time::Instant::now() + active;
    let mut offset = 0u64;
    let mut buf = Vec::new();
    while std::time::Instant::now() < end {
        let n = rng.range(1..8_192);
        buf.clear();
        buf.extend((offset..offset + n).map(byte_at));
        if let Err(e) = s.write_all(&buf).await {
            ctx.violation(format!("conn {i}: write failed: {e}"));
            return;
        }
        offset += n;
        ctx.counts.ops.fetch_add(1, Relaxed);
        let pause = if rng.chance(20) {
            rng.duration(Duration::from_millis(3), Duration::from_millis(12))
        } else {
            rng.duration(Duration::ZERO, Duration::from_micros(500))
        };
        gort::time::sleep(pause).await;
    }
    // The total, then the end of the stream.
    let _ = s.write_all(&offset.to_le_bytes()).await;
    let _ = s.shutdown(Shutdown::Write);
    let _ = s.read(&mut [0; 1]).await; // keep the socket until the reader is done
}

/// Moves the read deadline while reads are blocked: later, earlier, cleared.
async fn move_deadlines(ctx: Arc<Ctx>, c: Arc<Conn>, i: u64) {
    let mut rng = ctx.rng(3 * i + 1);
    while !c.done.load(Relaxed) {
        gort::time::sleep(rng.duration(Duration::from_micros(300), Duration::from_millis(4))).await;
        if c.done.load(Relaxed) {
            break;
        }
        let d = match rng.index(3) {
            0 => Some(rng.duration(Duration::from_millis(2), Duration::from_millis(8))),
            1 => Some(rng.duration(Duration::from_micros(200), Duration::from_millis(1))),
            _ => None,
        };
        // Counted under the floor's lock with the move: a read that times out at the moved
        // deadline must see the move, or it would measure its lateness against its own,
        // later deadline (false "observed before it was due" reports; the earliest-deadline
        // invariant held).
        c.set(&ctx, d, false);
        ctx.counts.reset.fetch_add(1, Relaxed);
    }
}

/// The client side: a deadline before every read (sometimes already passed), checking the
/// sequence and every timeout.
async fn read_stream(ctx: Arc<Ctx>, c: Arc<Conn>, i: u64) {
    let mut rng = ctx.rng(3 * i + 2);
    let mut got: Vec<u8> = Vec::new();
    let mut offset = 0u64;
    let mut buf = vec![0; 4096];
    loop {
        let d = if rng.chance(5) {
            Duration::ZERO
        } else {
            rng.duration(Duration::from_micros(500), Duration::from_millis(6))
        };
        let (due, moves) = c.set(&ctx, Some(d), true);
        ctx.counts.started.fetch_add(1, Relaxed);
        match c.stream.read(&mut buf).await {
            Ok(0) => break,
            Ok(n) => {
                got.extend_from_slice(&buf[..n]);
                // Check all but the last 8 bytes (they may be the writer's total).
                let check = got.len().saturating_sub(8);
                let bad = (0..check).find(|&j| got[j] != byte_at(offset + j as u64));
                if let Some(j) = bad {
                    let at = offset + j as u64;
                    ctx.violation(format!("conn {i}: byte {at} lost or duplicated"));
                    c.done.store(true, Relaxed);
                    return;
                }
                offset += check as u64;
                got.drain(..check);
            }
            Err(e) if e.kind() == ErrorKind::TimedOut => {
                let seen = ctx.now_ns();
                let floor = c.floor();
                ctx.counts.fired.fetch_add(1, Relaxed);
                if seen < floor {
                    ctx.violation(format!(
                        "conn {i}: read timed out {} ns before its earliest deadline",
                        floor - seen
                    ));
                }
                let unmoved = c.moves.load(Relaxed) == moves && d > Duration::ZERO;
                if let Some(due) = due.filter(|_| unmoved) {
                    ctx.record_lateness(due, seen, "net read deadline");
                }
            }
            Err(e) => {
                ctx.violation(format!("conn {i}: read failed: {e}"));
                break;
            }
        }
    }
    c.done.store(true, Relaxed);
    finish(&ctx, &c, got, offset, i);
}

/// At end of stream: what is left is the writer's total, which must match what was read.
fn finish(ctx: &Ctx, c: &Conn, rest: Vec<u8>, offset: u64, i: u64) {
    let _ = c.stream.set_read_deadline(None);
    match <[u8; 8]>::try_from(rest.as_slice()) {
        Ok(total) => ctx
            .violations
            .check(u64::from_le_bytes(total) == offset, || {
                format!(
                    "conn {i}: read {offset} bytes, the writer sent {}",
                    u64::from_le_bytes(total)
                )
            }),
        Err(_) => ctx.violation(format!(
            "conn {i}: stream ended with {} stray bytes",
            rest.len()
        )),
    }
}

/// The process's open sockets, pipes and anonymous-inode fds (epoll, eventfd, timerfd), as
/// "fd -> target": what a runtime and its connections open. Files are left out: the suite's
/// RSS sampler has `/proc/self/status` open for a moment every 20 ms, which a plain count
/// of `/proc/self/fd` saw now and then as one fd too many.
fn open_fds() -> Vec<String> {
    let Ok(dir) = std::fs::read_dir("/proc/self/fd") else {
        return Vec::new();
    };
    dir.filter_map(|e| {
        let e = e.ok()?;
        let target = std::fs::read_link(e.path()).ok()?;
        let target = target.to_string_lossy();
        ["socket:", "pipe:", "anon_inode:"]
            .iter()
            .any(|kind| target.starts_with(kind))
            .then(|| format!("{} -> {target}", e.file_name().to_string_lossy()))
    })
    .collect()
}
