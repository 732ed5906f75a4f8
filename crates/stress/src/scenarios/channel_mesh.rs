//! channel-mesh: many clients send requests to a pool of servers over a bounded MPMC queue and
//! wait for replies with `select!` against a timeout (or `time::timeout`); servers wait for
//! work with an idle timeout and sometimes answer late.

use super::{join_all, Ctx};
use crate::rng::Rng;
use gort::chan::{Receiver, Sender};
use std::pin::pin;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::time::Duration;

/// One line for `--list`.
pub const ABOUT: &str = "clients and servers ping-pong over bounded/unbounded channels with select! and \
    timeouts: a timer armed and cancelled per wait (T6-like), wake-ups from channels vs timers, late replies";

struct Req {
    client: usize,
    seq: u64,
}

enum Ev {
    Reply(Option<u64>),
    Timeout,
}

#[derive(Default)]
struct ClientStats {
    sent: u64,
    got: u64,
    late: u64,
    timeouts: u64,
}

/// Runs channel-mesh.
pub fn run(ctx: &Arc<Ctx>) {
    let rt = ctx.runtime();
    let procs = ctx.cfg.procs;
    let active = ctx.part(0.75);
    let clients = procs * 32;
    let servers = procs * 2;
    ctx.note(format!(
        "clients={clients} servers={servers} queue=bounded(16) active={active:?}"
    ));
    let c = ctx.clone();
    rt.block_on(async move {
        let ctx = c;
        let (req_tx, req_rx) = gort::chan::bounded::<Req>(16);
        let (reply_txs, reply_rxs): (Vec<Sender<u64>>, Vec<Receiver<u64>>) =
            (0..clients).map(|_| gort::chan::unbounded::<u64>()).unzip();
        let reply_txs = Arc::new(reply_txs);
        let server_tasks: Vec<_> = (0..servers)
            .map(|w| gort::spawn(serve(ctx.clone(), w, req_rx.clone(), reply_txs.clone())))
            .collect();
        drop(req_rx);
        let client_tasks: Vec<_> = reply_rxs
            .into_iter()
            .enumerate()
            .map(|(i, rx)| gort::spawn(client(ctx.clone(), i, active, req_tx.clone(), rx)))
            .collect();
        let stats = join_all(&ctx, "client", client_tasks).await;
        req_tx.close();
        let served: u64 = join_all(&ctx, "server", server_tasks)
            .await
            .into_iter()
            .sum();
        let sent: u64 = stats.iter().map(|s| s.sent).sum();
        let got: u64 = stats.iter().map(|s| s.got).sum();
        ctx.violations.check(served == sent, || {
            format!("servers served {served} requests, clients sent {sent}")
        });
        ctx.violations.check(got == sent, || {
            format!("clients got {got} replies for {sent} requests")
        });
        ctx.note(format!(
            "requests={sent} late_replies={} client_timeouts={}",
            stats.iter().map(|s| s.late).sum::<u64>(),
            stats.iter().map(|s| s.timeouts).sum::<u64>()
        ));
    });
    ctx.finish_runtime(rt);
}

/// Client `id`: until `active` has passed, sends one request at a time and waits for its reply
/// against a timeout (abandoning it on a timeout: its reply comes late); then collects every
/// reply still owed.
async fn client(
    ctx: Arc<Ctx>,
    id: usize,
    active: Duration,
    tx: Sender<Req>,
    rx: Receiver<u64>,
) -> ClientStats {
    let mut rng = ctx.rng(id as u64);
    let end = ctx.epoch + active;
    let mut st = ClientStats::default();
    let mut seen: Vec<bool> = vec![false]; // seen[seq]; seq 0 is never sent
    while std::time::Instant::now() < end {
        let seq = st.sent + 1;
        let req = Req { client: id, seq };
        if !send_request(&tx, req).await {
            ctx.violation(format!("client {id}: request queue closed early"));
            return st;
        }
        st.sent = seq;
        seen.push(false);
        ctx.counts.ops.fetch_add(1, Relaxed);
        // Sometimes a non-blocking look first (select! with a default branch).
        if rng.chance(20) && peek_reply(&ctx, id, &mut st, &mut seen, &rx, seq).await {
            continue;
        }
        if !await_reply(&ctx, id, &mut rng, &mut st, &mut seen, &rx, seq).await {
            return st;
        }
    }
    collect_owed(&ctx, id, &mut st, &mut seen, &rx).await;
    st
}

/// Sends without blocking if the bounded queue has room, else waits for room. False if the
/// queue is closed.
async fn send_request(tx: &Sender<Req>, req: Req) -> bool {
    match tx.try_send(req) {
        Ok(()) => true,
        Err(gort::chan::TrySendError::Full(req)) => tx.send(req).await.is_ok(),
        Err(_) => false,
    }
}

/// A non-blocking look for a reply (select! with a default branch), booking any that is
/// there. True if it was the reply to request `seq`.
async fn peek_reply(
    ctx: &Ctx,
    id: usize,
    st: &mut ClientStats,
    seen: &mut [bool],
    rx: &Receiver<u64>,
    seq: u64,
) -> bool {
    let r = gort::select! {
        r = rx.recv() => r,
        default => None,
    };
    if let Some(s) = r {
        on_reply(ctx, id, st, seen, s, seq);
        return s == seq;
    }
    false
}

/// Waits for the reply to request `seq`, booking older late replies on the way, until it
/// comes or a wait times out (the request is then abandoned). False if the reply channel
/// closed (a violation).
async fn await_reply(
    ctx: &Ctx,
    id: usize,
    rng: &mut Rng,
    st: &mut ClientStats,
    seen: &mut [bool],
    rx: &Receiver<u64>,
    seq: u64,
) -> bool {
    loop {
        let ev = wait_once(ctx, rng, rx).await;
        ctx.counts.started.fetch_add(1, Relaxed);
        match ev {
            Ev::Reply(Some(s)) => {
                ctx.counts.stopped.fetch_add(1, Relaxed);
                on_reply(ctx, id, st, seen, s, seq);
                if s == seq {
                    return true;
                }
            }
            Ev::Reply(None) => {
                ctx.violation(format!("client {id}: reply channel closed"));
                return false;
            }
            Ev::Timeout => {
                ctx.counts.fired.fetch_add(1, Relaxed);
                st.timeouts += 1;
                return true;
            }
        }
    }
}

/// One wait of 1-10 ms for a reply, half the time as `select!` against a sleep and half the
/// time through `time::timeout`; a timeout's lateness is recorded.
async fn wait_once(ctx: &Ctx, rng: &mut Rng, rx: &Receiver<u64>) -> Ev {
    let wait = rng.duration(Duration::from_millis(1), Duration::from_millis(10));
    if rng.chance(50) {
        let mut s = pin!(gort::time::sleep(wait));
        let due = ctx.ns(s.deadline());
        let ev = gort::select! {
            r = rx.recv() => Ev::Reply(r),
            _ = s.as_mut() => Ev::Timeout,
        };
        if matches!(ev, Ev::Timeout) {
            ctx.record_lateness(due, ctx.now_ns(), "select timeout");
        }
        ev
    } else {
        let due = ctx.now_ns() + wait.as_nanos() as u64;
        match gort::time::timeout(wait, rx.recv()).await {
            Ok(r) => Ev::Reply(r),
            Err(_) => {
                ctx.record_lateness(due, ctx.now_ns(), "timeout()");
                Ev::Timeout
            }
        }
    }
}

/// Every request gets exactly one reply, late or not: collects those still owed, giving up
/// (a violation) after 5 s without one.
async fn collect_owed(
    ctx: &Ctx,
    id: usize,
    st: &mut ClientStats,
    seen: &mut [bool],
    rx: &Receiver<u64>,
) {
    while st.got < st.sent {
        match gort::time::timeout(Duration::from_secs(5), rx.recv()).await {
            Ok(Some(s)) => on_reply(ctx, id, st, seen, s, u64::MAX),
            _ => {
                ctx.violation(format!(
                    "client {id}: {} replies never arrived",
                    st.sent - st.got
                ));
                break;
            }
        }
    }
}

/// Books one reply: it must answer a request that was sent and not answered yet.
fn on_reply(ctx: &Ctx, id: usize, st: &mut ClientStats, seen: &mut [bool], seq: u64, current: u64) {
    if seq == 0 || seq > st.sent {
        ctx.violation(format!("client {id}: reply {seq} for a request never sent"));
    } else if seen[seq as usize] {
        ctx.violation(format!("client {id}: reply {seq} delivered twice"));
    } else {
        seen[seq as usize] = true;
        st.got += 1;
        if seq < current {
            st.late += 1;
        }
    }
}

async fn serve(ctx: Arc<Ctx>, w: usize, rx: Receiver<Req>, replies: Arc<Vec<Sender<u64>>>) -> u64 {
    let mut rng = ctx.rng(10_000 + w as u64);
    let mut served = 0;
    loop {
        let mut idle = pin!(gort::time::sleep(Duration::from_millis(20)));
        let due = ctx.ns(idle.deadline());
        let r = gort::select! {
            r = rx.recv() => Some(r),
            _ = idle.as_mut() => None,
        };
        let req = match r {
            Some(Some(req)) => req,
            Some(None) => return served, // queue closed and drained
            None => {
                ctx.record_lateness(due, ctx.now_ns(), "server idle timeout");
                continue;
            }
        };
        match rng.below(100) {
            0..=79 => {}
            80..=94 => gort::yield_now().await,
            _ => gort::time::sleep(rng.duration(Duration::ZERO, Duration::from_millis(20))).await,
        }
        if replies[req.client].send(req.seq).await.is_err() {
            ctx.violation(format!(
                "server {w}: reply channel of client {} closed",
                req.client
            ));
        }
        served += 1;
        ctx.counts.ops.fetch_add(1, Relaxed);
    }
}
