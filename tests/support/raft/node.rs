//! One Raft node: a reader task (UDP with a read deadline, the per-link filter, delays by
//! `after_func`) feeding an inbox, and a main loop `select!`ing on the context, a pause
//! channel, the inbox, the election timer and the heartbeat ticker.

use super::tcp::{self, Dialer};
use super::{deliver, Letter, Stream, Transport};
use super::{Kind, Msg, Rng, Shared, Timing};
use gort::chan::{unbounded, Receiver, Sender};
use gort::context::Context;
use gort::net::{TcpListener, UdpSocket};
use gort::time::{Instant, Ticker, Timer};
use std::collections::HashMap;
use std::io::ErrorKind;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

/// The reader's read deadline: how often it looks at the context when nothing arrives.
const READ_DEADLINE: Duration = Duration::from_millis(100);
/// A send that cannot go out within this is dropped (a lost datagram).
const WRITE_DEADLINE: Duration = Duration::from_millis(100);

/// A running node: its tasks and the channel that pauses its main loop.
pub struct Node {
    pub tasks: gort::JoinSet<()>,
    pub pause: Sender<Duration>,
}

/// A node's socket: a UDP socket, or a TCP listener ([`tcp`](super::tcp)).
pub enum Socket {
    Udp(UdpSocket),
    Tcp(TcpListener),
}

impl Socket {
    /// Binds `addr` for `transport`.
    pub async fn bind(transport: Transport, addr: SocketAddr) -> std::io::Result<Socket> {
        Ok(match transport {
            Transport::Udp => Socket::Udp(UdpSocket::bind(addr).await?),
            Transport::Tcp => Socket::Tcp(TcpListener::bind(addr).await?),
        })
    }

    pub fn local_addr(&self) -> std::io::Result<SocketAddr> {
        match self {
            Socket::Udp(s) => s.local_addr(),
            Socket::Tcp(l) => l.local_addr(),
        }
    }
}

/// How a node sends: on its UDP socket, or on its connections to each peer.
enum Out {
    Udp(Arc<UdpSocket>),
    Tcp(Dialer),
}

/// Spawns node `id`'s receiving task and main loop on `rt` (the runtime its socket was made
/// in); they end when `ctx` is done.
pub fn start(
    sh: Arc<Shared>,
    id: usize,
    sock: Socket,
    ctx: Context,
    seed: u64,
    rt: &gort::Handle,
) -> Node {
    let (inbox_tx, inbox) = unbounded();
    let (pause, pauses) = unbounded();
    let mut tasks = gort::JoinSet::new();
    let out = match sock {
        Socket::Udp(sock) => {
            let sock = Arc::new(sock);
            let inbox_tx = Stream::new(inbox_tx);
            let read = reader(sh.clone(), id, sock.clone(), inbox_tx, ctx.clone());
            tasks.spawn_on(read, rt);
            Out::Udp(sock)
        }
        Socket::Tcp(ln) => {
            tasks.spawn_on(tcp::serve(sh.clone(), id, ln, inbox_tx, ctx.clone()), rt);
            Out::Tcp(Dialer::new(sh.net.len()))
        }
    };
    let node = Raft::new(sh, id, out, Rng::new(seed));
    tasks.spawn_on(node.run(inbox, pauses, ctx), rt);
    Node { tasks, pause }
}

/// Receives datagrams until the context is done (seen at the latest one read deadline later,
/// Go's idiom), and passes each through the link filter into the inbox.
async fn reader(sh: Arc<Shared>, me: usize, sock: Arc<UdpSocket>, mut inbox: Stream, ctx: Context) {
    let mut buf = [0u8; 64];
    while ctx.err().is_none() {
        sock.set_read_deadline(Some(Instant::now() + READ_DEADLINE))
            .unwrap();
        let n = match sock.recv_from(&mut buf).await {
            Ok((n, _)) => n,
            Err(e) if e.kind() == ErrorKind::TimedOut => continue,
            Err(e) => {
                let what = format!("node {me}: recv_from: {e}");
                sh.checks.lock().unwrap().violate(what);
                return;
            }
        };
        let Some(m) = Msg::decode(&buf[..n]) else {
            continue;
        };
        deliver(&sh, me, m, &mut inbox);
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Role {
    Follower,
    Candidate,
    Leader,
}

/// The election timer and what its value must be: each arming is recorded, so a value of an
/// earlier arming (a stale fire, which Go 1.23's `Reset` rules out) or an early one is seen.
struct Election {
    timer: Timer,
    /// When the current arming was made (read before `reset`) and its duration; `None` while
    /// stopped.
    armed: Option<(Instant, Duration)>,
}

impl Election {
    fn new() -> Election {
        Election {
            timer: Timer::new(Duration::MAX),
            armed: None,
        }
    }

    fn reset(&mut self, rng: &mut Rng, t: &Timing) {
        let spread = (t.election_max - t.election_min).as_micros() as u64;
        let d = t.election_min + Duration::from_micros(rng.below(spread));
        self.armed = Some((Instant::now(), d));
        self.timer.reset(d);
    }

    fn stop(&mut self) {
        self.timer.stop();
        self.armed = None;
    }

    /// Checks a value received from the timer: it belongs to the current arming (due no earlier
    /// than `armed + d`), and came no earlier than it was due.
    fn check_fire(&self, due: Instant) -> Result<(), String> {
        let now = Instant::now();
        let Some((at, d)) = self.armed else {
            return Err(format!(
                "election timer fired after stop (due {:?} ago)",
                now - due
            ));
        };
        if due < at + d {
            return Err(format!(
                "stale election timer value: due {:?} before the last reset's deadline",
                at + d - due
            ));
        }
        if now < at + d {
            return Err(format!("election timer fired {:?} early", at + d - now));
        }
        Ok(())
    }
}

/// A node's state (Raft's `currentTerm`, `votedFor`, role) and its timers.
struct Raft {
    sh: Arc<Shared>,
    me: usize,
    out: Out,
    rng: Rng,
    term: u64,
    voted_for: Option<usize>,
    role: Role,
    /// The votes granted this term, a bit per node.
    votes: u64,
    election: Election,
    heartbeat: Ticker,
    /// When the last valid heartbeat was handled (after which the timer was reset).
    last_heartbeat: Option<Instant>,
    /// The last letter received from each reader task.
    streams: HashMap<u64, u64>,
    /// When the heartbeat ticker was last `reset` (read before it); `None` while stopped.
    ticking_since: Option<Instant>,
}

impl Raft {
    fn new(sh: Arc<Shared>, me: usize, out: Out, rng: Rng) -> Raft {
        let (term, voted_for) = sh.storage.lock().unwrap()[me];
        let heartbeat = Ticker::new(sh.timing.heartbeat);
        heartbeat.stop(); // a follower sends none
        {
            let mut c = sh.checks.lock().unwrap();
            c.set_term(me, term);
            let v = &mut c.views[me];
            (v.alive, v.leader, v.paused, v.heard) = (true, false, false, None);
        }
        let election = Election::new();
        Raft {
            sh,
            me,
            out,
            rng,
            term,
            voted_for,
            role: Role::Follower,
            votes: 0,
            election,
            heartbeat,
            last_heartbeat: None,
            ticking_since: None,
            streams: HashMap::new(),
        }
    }

    async fn run(mut self, inbox: Receiver<Letter>, pauses: Receiver<Duration>, ctx: Context) {
        self.election.reset(&mut self.rng, &self.sh.timing);
        loop {
            gort::select! {
                _ = ctx.done().recv() => break,
                Some(d) = pauses.recv() => self.pause(d).await,
                Some(letter) = inbox.recv() => {
                    self.check_letter(letter);
                    self.handle(letter.m).await
                }
                Some(due) = self.election.timer.c().recv() => self.on_election_timeout(due).await,
                Some(due) = self.heartbeat.c().recv() => self.on_tick(due).await,
            }
        }
        self.sh.checks.lock().unwrap().views[self.me].alive = false;
    }

    /// Each reader's numbered letters come out of the inbox all, once, in order.
    fn check_letter(&mut self, l: Letter) {
        if l.seq == 0 {
            return;
        }
        let last = self.streams.insert(l.stream, l.seq).unwrap_or(0);
        let mut c = self.sh.checks.lock().unwrap();
        c.letters += 1;
        if l.seq != last + 1 {
            let (me, seq, stream) = (self.me, l.seq, l.stream);
            c.violate(format!(
                "node {me}: inbox letter {seq} of reader {stream} after {last}"
            ));
        }
    }

    /// A stall of the whole loop (a long GC pause, a stopped VM): no heartbeats go out and
    /// nothing is handled; the timers keep running.
    async fn pause(&mut self, d: Duration) {
        {
            let mut c = self.sh.checks.lock().unwrap();
            c.views[self.me].paused = true;
            c.views[self.me].pauses += 1;
        }
        gort::time::sleep(d).await;
        self.sh.checks.lock().unwrap().views[self.me].paused = false;
    }

    async fn on_election_timeout(&mut self, due: Instant) {
        let check = self.election.check_fire(due);
        {
            let mut c = self.sh.checks.lock().unwrap();
            c.fires += 1;
            if let Err(e) = check {
                c.violate(format!("node {}: {e}", self.me));
            }
            if self.role == Role::Leader {
                c.violate(format!(
                    "node {}: election timer fired while leader",
                    self.me
                ));
            }
            if matches!(self.last_heartbeat, Some(h) if self.election.armed.is_some_and(|(at, _)| h > at))
            {
                c.violate(format!(
                    "node {}: timer not reset after a heartbeat",
                    self.me
                ));
            }
            c.elections += 1;
        }
        // §5.2: increment currentTerm, vote for self, reset the election timer, send
        // RequestVote to every other server.
        self.role = Role::Candidate;
        self.set_term(self.term + 1, Some(self.me));
        self.votes = 1 << self.me;
        self.election.reset(&mut self.rng, &self.sh.timing);
        self.broadcast(Kind::Vote).await;
    }

    /// A tick: only while leader, and none from before the ticker's last `reset` (each tick's
    /// value is when it was due: one period or more after the reset).
    async fn on_tick(&mut self, due: Instant) {
        let me = self.me;
        let stale = self
            .ticking_since
            .map(|at| due < at + self.sh.timing.heartbeat);
        if self.role != Role::Leader || stale != Some(false) {
            let what = format!("node {me}: heartbeat tick after the ticker's stop or reset");
            self.sh.checks.lock().unwrap().violate(what);
            return;
        }
        self.broadcast(Kind::Append).await;
    }

    async fn handle(&mut self, m: Msg) {
        // §5.1: a higher term makes any node a follower of that term.
        if m.term > self.term {
            self.set_term(m.term, None);
            self.become_follower();
        }
        match m.kind {
            Kind::Vote => {
                let grant =
                    m.term == self.term && !matches!(self.voted_for, Some(v) if v != m.from);
                if grant {
                    self.set_term(self.term, Some(m.from));
                    self.election.reset(&mut self.rng, &self.sh.timing);
                }
                self.send(m.from, Kind::VoteReply, grant).await;
            }
            Kind::VoteReply => {
                if self.role == Role::Candidate && m.term == self.term && m.ok {
                    // Each peer answers a term's one RequestVote once: a second grant is a
                    // duplicated message (the network and `after_func` deliver at most once).
                    if self.votes & (1 << m.from) != 0 {
                        let what = format!(
                            "node {}: two votes of {} in term {}",
                            self.me, m.from, m.term
                        );
                        self.sh.checks.lock().unwrap().violate(what);
                    }
                    self.votes |= 1 << m.from;
                    if self.votes.count_ones() as usize > self.sh.net.len() / 2 {
                        self.become_leader().await;
                    }
                }
            }
            Kind::Append => {
                let ok = m.term == self.term;
                if ok {
                    self.on_heartbeat(m.from);
                }
                self.send(m.from, Kind::AppendReply, ok).await;
            }
            Kind::AppendReply => {}
        }
    }

    /// A heartbeat of the current term: its sender is the term's leader.
    fn on_heartbeat(&mut self, leader: usize) {
        let me = self.me;
        if self.role == Role::Leader {
            let what = format!(
                "node {me}: heartbeat from {leader} in its own term {}",
                self.term
            );
            self.sh.checks.lock().unwrap().violate(what);
            return;
        }
        self.role = Role::Follower;
        // The heartbeat's arrival, then the reset: a value of an arming made before this
        // instant must never be received.
        self.last_heartbeat = Some(Instant::now());
        self.election.reset(&mut self.rng, &self.sh.timing);
        let mut c = self.sh.checks.lock().unwrap();
        c.heartbeats += 1;
        c.resets += 1;
        c.views[me].heard = Some((self.term, leader));
    }

    async fn become_leader(&mut self) {
        self.role = Role::Leader;
        self.election.stop();
        self.ticking_since = Some(Instant::now());
        self.heartbeat.reset(self.sh.timing.heartbeat);
        self.sh
            .checks
            .lock()
            .unwrap()
            .became_leader(self.me, self.term);
        self.broadcast(Kind::Append).await;
    }

    fn become_follower(&mut self) {
        if self.role == Role::Leader {
            self.heartbeat.stop();
            self.ticking_since = None;
            self.election.reset(&mut self.rng, &self.sh.timing);
            self.sh.checks.lock().unwrap().views[self.me].leader = false;
        }
        self.role = Role::Follower;
    }

    /// Persists `currentTerm` and `votedFor` before anything is sent on them.
    fn set_term(&mut self, term: u64, voted_for: Option<usize>) {
        self.term = term;
        self.voted_for = voted_for;
        self.sh.storage.lock().unwrap()[self.me] = (term, voted_for);
        self.sh.checks.lock().unwrap().set_term(self.me, term);
    }

    async fn broadcast(&mut self, kind: Kind) {
        let me = self.me;
        for to in (0..self.sh.net.len()).filter(|&to| to != me) {
            self.send(to, kind, false).await;
        }
    }

    /// Sends one message with a write deadline; a failed send is a lost message.
    async fn send(&mut self, to: usize, kind: Kind, ok: bool) {
        let m = Msg {
            kind,
            from: self.me,
            term: self.term,
            ok,
        };
        let addr = self.sh.net.addrs[to];
        match &mut self.out {
            Out::Udp(sock) => {
                sock.set_write_deadline(Some(Instant::now() + WRITE_DEADLINE))
                    .unwrap();
                let _ = sock.send_to(&m.encode(), addr).await;
            }
            Out::Tcp(dialer) => dialer.send(to, addr, &m.encode()).await,
        }
    }
}
