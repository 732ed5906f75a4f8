//! A cluster of Raft nodes on loopback UDP and its fault schedule. Every check is clock-free
//! but for one liveness watchdog ([`LIVENESS`]): after each fault heals, some leader must be
//! elected and followed by every reachable node within it.

use super::node::Socket;
use super::node::{self, Node};
use super::Transport;
use super::{Checks, Net, Rng, Shared, Timing};
use gort::context::{self, CancelFn, Context};
use std::io::ErrorKind;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Generous: an election takes a few hundred milliseconds; this only catches a cluster that
/// never settles (or a task that never ends at shutdown).
pub const LIVENESS: Duration = Duration::from_secs(5);

/// What a run did, for the report.
#[derive(Debug, Default)]
pub struct Report {
    /// One line per step: the leader and term the cluster settled on.
    pub steps: Vec<String>,
    pub elections: u64,
    pub leaders: usize,
    pub heartbeats: u64,
    pub fires: u64,
    pub letters: u64,
    pub highest_term: u64,
}

struct Cluster {
    sh: Arc<Shared>,
    nodes: Vec<Option<Node>>,
    /// The runtime of a node that runs in one of its own.
    apart: Vec<Option<gort::Runtime>>,
    ctx: Context,
    cancel: CancelFn,
    seed: u64,
    restarts: u64,
    steps: Vec<String>,
}

/// Runs the whole schedule on `n` nodes; `Err` names the first broken invariant. The caller
/// counts fds around it (several runs may share a process).
pub async fn run(n: usize, seed: u64, transport: Transport) -> Result<Report, String> {
    let mut cl = Cluster::new(n, seed, Timing::RAFT, transport).await?;
    let schedule = faults(&mut cl).await;
    cl.finish(schedule).await
}

/// Runs `n` nodes on [`Timing::RACING`] for `d` (with a few lost and late messages), then
/// shuts them down: only the invariants are checked, not liveness (such a cluster elects all
/// the time).
pub async fn churn(n: usize, seed: u64, d: Duration) -> Result<Report, String> {
    let cl = Cluster::new(n, seed, Timing::RACING, Transport::Udp).await?;
    cl.sh.net.lossy(5, 3);
    gort::time::sleep(d).await;
    cl.finish(Ok(())).await
}

/// Kills and restarts random nodes `rounds` times in quick succession (a node at most
/// `max_down` ms down, every fifth restart in a runtime of its own, dropped at its next kill),
/// then waits for the cluster to settle: kills land in the middle of reads, writes, dials,
/// accepts and timer waits.
pub async fn kill_storm(
    n: usize,
    seed: u64,
    transport: Transport,
    rounds: u64,
) -> Result<Report, String> {
    let mut cl = Cluster::new(n, seed, Timing::RAFT, transport).await?;
    let storm = async {
        let mut rng = Rng::new(seed ^ 0x5707);
        for round in 0..rounds {
            let id = rng.below(n as u64) as usize;
            cl.kill(id).await?;
            gort::time::sleep(Duration::from_millis(rng.below(30))).await;
            if round % 5 == 4 {
                cl.restart_apart(id).await?;
            } else {
                cl.restart(id).await?;
            }
            gort::time::sleep(Duration::from_millis(rng.below(30))).await;
        }
        let all: Vec<usize> = (0..n).collect();
        cl.settled(&all, 0, "the storm").await.map(drop)
    };
    let storm = storm.await;
    cl.finish(storm).await
}

/// The fault schedule; after each fault, the cluster must settle again.
async fn faults(cl: &mut Cluster) -> Result<(), String> {
    let n = cl.nodes.len();
    let all: Vec<usize> = (0..n).collect();
    cl.settled(&all, 0, "first election").await?;

    // Lossy, slow links: 30% dropped, the rest delayed up to 120 ms (reordered, some of an
    // earlier term by the time they arrive).
    cl.sh.net.lossy(30, 120);
    gort::time::sleep(Duration::from_millis(800)).await;
    cl.sh.net.heal();
    let (l, t) = cl.settled(&all, 0, "lossy links healed").await?;

    // The leader partitioned away: the rest elect a new one in a later term; once healed,
    // the old leader steps down when it hears of that term.
    cl.sh.net.isolate(l, true);
    let rest: Vec<usize> = all.iter().copied().filter(|&i| i != l).collect();
    let (_, t2) = cl.settled(&rest, t, "leader partitioned away").await?;
    cl.sh.net.isolate(l, false);
    let (l, t) = cl
        .settled(&all, t2 - 1, "leader's partition healed")
        .await?;

    // A follower partitioned away campaigns alone, its term rising; healed, it deposes the
    // leader (no pre-vote) and the cluster elects again.
    let f = (l + 1) % n;
    cl.sh.net.isolate(f, true);
    gort::time::sleep(2 * cl.sh.timing.election_max).await;
    cl.sh.net.isolate(f, false);
    let (l, t) = cl
        .settled(&all, t - 1, "follower's partition healed")
        .await?;

    // The leader killed (its tasks aborted, its socket closed), then restarted on its address
    // with its persisted term and vote.
    cl.kill(l).await?;
    let rest: Vec<usize> = all.iter().copied().filter(|&i| i != l).collect();
    let (_, t) = cl.settled(&rest, t, "leader killed").await?;
    cl.restart(l).await?;
    let (l, t) = cl.settled(&all, t - 1, "old leader restarted").await?;

    // A follower killed and restarted at once.
    let f = (l + 1) % n;
    cl.kill(f).await?;
    cl.restart(f).await?;
    let (l, t) = cl.settled(&all, t - 1, "follower restarted").await?;

    // A follower restarted in a runtime of its own (a new process), that runtime dropped with
    // the node's tasks, socket, timers and delayed messages in it (a crash), and the node
    // restarted in the cluster's runtime.
    let f = (l + 2) % n;
    cl.kill(f).await?;
    cl.restart_apart(f).await?;
    let (_, t) = cl
        .settled(&all, t - 1, "follower restarted in its own runtime")
        .await?;
    cl.sh.net.lossy(0, 60); // delayed messages pending in its runtime's timers
    gort::time::sleep(Duration::from_millis(100)).await;
    cl.kill(f).await?;
    cl.sh.net.heal();
    let rest: Vec<usize> = all.iter().copied().filter(|&i| i != f).collect();
    cl.settled(&rest, t - 1, "its runtime dropped").await?;
    cl.restart(f).await?;
    let (l, _) = cl
        .settled(&all, t - 1, "restarted in the cluster's runtime")
        .await?;

    // The leader's loop stalls past every election timeout: the others elect a new leader;
    // when the stall ends the old one hears of the new term and follows.
    let pauses = cl.sh.checks.lock().unwrap().views[l].pauses;
    let stall = 4 * cl.sh.timing.election_max;
    let _ = cl.nodes[l].as_ref().unwrap().pause.try_send(stall);
    cl.wait(
        |c| (c.views[l].pauses > pauses).then_some(()),
        "the leader to pause",
    )
    .await?;
    cl.settled(&all, 0, "leader's pause ended").await?;
    Ok(())
}

impl Cluster {
    /// Shuts the cluster down, then reports, or names what failed: the schedule, an
    /// invariant, or a task that did not end.
    async fn finish(mut self, schedule: Result<(), String>) -> Result<Report, String> {
        let down = self.shutdown().await;
        let c = self.sh.checks.lock().unwrap();
        let report = Report {
            steps: std::mem::take(&mut self.steps),
            elections: c.elections,
            leaders: c.leaders.len(),
            heartbeats: c.heartbeats,
            fires: c.fires,
            letters: c.letters,
            highest_term: c.highest_term(),
        };
        if !c.violations.is_empty() {
            let steps = &report.steps;
            return Err(format!("violations: {:?} (steps {steps:?})", c.violations));
        }
        schedule
            .and(down)
            .map_err(|e| format!("{e} (steps {:?})", report.steps))?;
        Ok(report)
    }

    async fn new(
        n: usize,
        seed: u64,
        timing: Timing,
        transport: Transport,
    ) -> Result<Cluster, String> {
        let mut socks = Vec::new();
        let any = SocketAddr::from(([127, 0, 0, 1], 0));
        for _ in 0..n {
            let sock = Socket::bind(transport, any).await;
            socks.push(sock.map_err(|e| format!("bind: {e}"))?);
        }
        let addrs = socks.iter().map(|s| s.local_addr().unwrap()).collect();
        let sh = Arc::new(Shared {
            transport,
            timing,
            net: Net::new(addrs, seed),
            storage: Mutex::new(vec![(0, None); n]),
            checks: Mutex::new(Checks::new(n)),
        });
        let (ctx, cancel) = context::with_cancel(&Context::background());
        let nodes = socks
            .into_iter()
            .enumerate()
            .map(|(id, s)| {
                let rt = gort::Handle::current();
                Some(node::start(
                    sh.clone(),
                    id,
                    s,
                    ctx.clone(),
                    seed ^ id as u64,
                    &rt,
                ))
            })
            .collect();
        Ok(Cluster {
            sh,
            nodes,
            apart: (0..n).map(|_| None).collect(),
            ctx,
            cancel,
            seed,
            restarts: 0,
            steps: Vec::new(),
        })
    }

    /// Kills `id`: aborts its tasks and waits for them to end (none may panic).
    async fn kill(&mut self, id: usize) -> Result<(), String> {
        let mut node = self.nodes[id].take().expect("kill a live node");
        match self.apart[id].take() {
            // Dropping a runtime waits for its shutdown: not on this task's thread.
            Some(rt) => gort::spawn_blocking(move || drop(rt)).await.unwrap(),
            None => node.tasks.abort_all(),
        }
        let join = async {
            while let Some(r) = node.tasks.join_next().await {
                if let Err(e) = r {
                    if !e.is_cancelled() {
                        return Err(format!("node {id}: a task failed: {e}"));
                    }
                }
            }
            Ok(())
        };
        gort::time::timeout(LIVENESS, join)
            .await
            .map_err(|_| format!("node {id}: tasks still running {LIVENESS:?} after its kill"))??;
        let mut c = self.sh.checks.lock().unwrap();
        let v = &mut c.views[id];
        (v.alive, v.leader, v.paused) = (false, false, false);
        Ok(())
    }

    /// Restarts `id` on its own address. Its old socket closed with its tasks, so the bind
    /// must succeed; it is retried briefly only for the port's release by the OS.
    async fn restart(&mut self, id: usize) -> Result<(), String> {
        let addr = self.sh.net.addrs[id];
        let mut tries = 0;
        let sock = loop {
            match Socket::bind(self.sh.transport, addr).await {
                Ok(s) => break s,
                Err(e) if e.kind() == ErrorKind::AddrInUse && tries < 100 => tries += 1,
                Err(e) => return Err(format!("node {id}: rebind {addr}: {e} (a leaked socket?)")),
            }
            gort::time::sleep(Duration::from_millis(20)).await;
        };
        self.spawn(id, sock, &gort::Handle::current());
        Ok(())
    }

    /// Restarts `id` in a runtime of its own (one P), its socket made there.
    async fn restart_apart(&mut self, id: usize) -> Result<(), String> {
        let rt = gort::Builder::new()
            .procs(1)
            .build()
            .map_err(|e| format!("runtime: {e}"))?;
        let addr = self.sh.net.addrs[id];
        let transport = self.sh.transport;
        let bind = rt.handle().spawn(Socket::bind(transport, addr));
        let sock = bind.await.unwrap();
        let sock = sock.map_err(|e| format!("node {id}: rebind {addr} in its runtime: {e}"))?;
        self.spawn(id, sock, rt.handle());
        self.apart[id] = Some(rt);
        Ok(())
    }

    /// Starts incarnation `restarts` of node `id` on `rt`.
    fn spawn(&mut self, id: usize, sock: Socket, rt: &gort::Handle) {
        self.restarts += 1;
        let seed = self.seed ^ (self.restarts << 32) ^ id as u64;
        let ctx = self.ctx.clone();
        self.nodes[id] = Some(node::start(self.sh.clone(), id, sock, ctx, seed, rt));
    }

    /// Waits (up to [`LIVENESS`]) until `f` finds what it looks for in the checks.
    async fn wait<T>(&self, f: impl Fn(&Checks) -> Option<T>, what: &str) -> Result<T, String> {
        let give_up = gort::time::Instant::now() + LIVENESS;
        loop {
            if let Some(found) = f(&self.sh.checks.lock().unwrap()) {
                return Ok(found);
            }
            if gort::time::Instant::now() > give_up {
                return Err(format!("liveness: waited {LIVENESS:?} for {what}"));
            }
            gort::time::sleep(Duration::from_millis(10)).await;
        }
    }

    /// Waits until the nodes of `among` settle on one leader in a term later than `after`
    /// (see [`settled_on`]); returns it and its term.
    async fn settled(
        &mut self,
        among: &[usize],
        after: u64,
        step: &str,
    ) -> Result<(usize, u64), String> {
        let what = format!("a leader after: {step}");
        let (l, term) = self.wait(|c| settled_on(c, among, after), &what).await?;
        self.steps.push(format!("{step}: leader {l}, term {term}"));
        Ok((l, term))
    }

    /// Cancels the cluster's context: every task must end within [`LIVENESS`].
    async fn shutdown(&mut self) -> Result<(), String> {
        self.cancel.cancel();
        for (id, node) in self.nodes.iter_mut().enumerate() {
            let Some(node) = node.as_mut() else { continue };
            let drain = async {
                while let Some(r) = node.tasks.join_next().await {
                    r.map_err(|e| format!("node {id}: a task failed: {e}"))?;
                }
                Ok::<(), String>(())
            };
            gort::time::timeout(LIVENESS, drain).await.map_err(|_| {
                format!("node {id}: tasks still running {LIVENESS:?} after shutdown")
            })??;
        }
        self.nodes.clear();
        Ok(())
    }
}

/// The leader `among` has settled on, if any: the one leader of the highest term among them,
/// later than `after`, with every node of `among` alive, unpaused, in that term, and (but
/// the leader) having accepted its heartbeat.
fn settled_on(c: &Checks, among: &[usize], after: u64) -> Option<(usize, u64)> {
    let term = among.iter().map(|&i| c.views[i].term).max()?;
    let mut leaders = among
        .iter()
        .copied()
        .filter(|&i| c.views[i].leader && c.views[i].term == term);
    let l = leaders.next()?;
    let follows = |i: usize| {
        let v = c.views[i];
        v.alive && !v.paused && v.term == term && (i == l || v.heard == Some((term, l)))
    };
    (term > after && leaders.next().is_none() && among.iter().all(|&i| follows(i)))
        .then_some((l, term))
}
