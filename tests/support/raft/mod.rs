//! Raft leader election (the Raft paper's §5.2: terms, votes, heartbeats; no log) on gort,
//! shared by `examples/raft_election.rs` and `tests/raft_election.rs` (each includes this
//! module with `#[path]`, so the code a test runs is the code the example shows).
//!
//! - [`node`]: one node, a task set: a main loop that `select!`s on an election [`Timer`]
//!   (randomised, `reset` on every valid heartbeat), a heartbeat [`Ticker`] while leader, an
//!   inbox channel fed by a UDP reader task (read deadlines) or by [`tcp`]'s readers, a pause
//!   channel and a context's `done()`.
//! - [`scenario`]: a cluster and its faults (lossy and slow links, the leader partitioned
//!   away and healed, a follower partitioned away, nodes killed and restarted, the leader
//!   paused), then a shutdown that must end every task and close every socket.
//! - here: the messages, the per-link filter ([`Net`]) and the invariants ([`Checks`]).
//!
//! [`Timer`]: gort::time::Timer
//! [`Ticker`]: gort::time::Ticker
#![allow(dead_code)] // each includer uses some of it

pub mod node;
pub mod scenario;
pub mod tcp;

use gort::chan::Sender;
use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Duration;

/// A message's kind (Raft's two RPCs and their replies).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// RequestVote.
    Vote = 1,
    /// RequestVote's reply; `ok` is `voteGranted`.
    VoteReply = 2,
    /// AppendEntries without entries: a heartbeat.
    Append = 3,
    /// AppendEntries' reply; `ok` is `success`.
    AppendReply = 4,
}

/// One datagram: 1 byte kind, 1 byte sender, 1 byte ok, 8 bytes term (little endian).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Msg {
    pub kind: Kind,
    pub from: usize,
    pub term: u64,
    pub ok: bool,
}

impl Msg {
    pub const LEN: usize = 11;

    pub fn encode(&self) -> [u8; Msg::LEN] {
        let mut b = [0; Msg::LEN];
        b[0] = self.kind as u8;
        b[1] = self.from as u8;
        b[2] = self.ok as u8;
        b[3..].copy_from_slice(&self.term.to_le_bytes());
        b
    }

    /// `None` for anything that is not a well-formed message.
    pub fn decode(b: &[u8]) -> Option<Msg> {
        if b.len() != Msg::LEN || b[2] > 1 {
            return None;
        }
        let kind = match b[0] {
            1 => Kind::Vote,
            2 => Kind::VoteReply,
            3 => Kind::Append,
            4 => Kind::AppendReply,
            _ => return None,
        };
        let term = u64::from_le_bytes(b[3..].try_into().ok()?);
        Some(Msg {
            kind,
            from: b[1] as usize,
            term,
            ok: b[2] == 1,
        })
    }
}

/// splitmix64: a seeded generator for election timeouts and link faults (runs repeat by seed,
/// up to the scheduler's interleavings).
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (`n > 0`).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// What the per-link filter does with one message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fate {
    Deliver,
    Drop,
    Delay(Duration),
}

/// One directed link's faults.
#[derive(Clone, Copy, Debug, Default)]
struct Link {
    cut: bool,
    drop_pct: u64,
    delay_max_ms: u64,
}

/// The network between the nodes: their fixed addresses (a restarted node binds its own
/// again) and a filter per directed link, applied by the receiving node's reader.
#[derive(Debug)]
pub struct Net {
    pub addrs: Vec<SocketAddr>,
    links: Mutex<(Vec<Link>, Rng)>,
}

impl Net {
    pub fn new(addrs: Vec<SocketAddr>, seed: u64) -> Net {
        let n = addrs.len();
        Net {
            addrs,
            links: Mutex::new((vec![Link::default(); n * n], Rng::new(seed ^ 0x11e7))),
        }
    }

    pub fn len(&self) -> usize {
        self.addrs.len()
    }

    /// The fate of a message on the link `from -> to`.
    pub fn fate(&self, from: usize, to: usize) -> Fate {
        let n = self.len();
        let mut g = self.links.lock().unwrap();
        let (links, rng) = &mut *g;
        let link = links[from * n + to];
        if link.cut || (link.drop_pct > 0 && rng.below(100) < link.drop_pct) {
            Fate::Drop
        } else if link.delay_max_ms > 0 {
            Fate::Delay(Duration::from_millis(1 + rng.below(link.delay_max_ms)))
        } else {
            Fate::Deliver
        }
    }

    /// Cuts (or restores) every link to and from `node`.
    pub fn isolate(&self, node: usize, cut: bool) {
        let n = self.len();
        let mut g = self.links.lock().unwrap();
        for other in 0..n {
            g.0[node * n + other].cut = cut;
            g.0[other * n + node].cut = cut;
        }
    }

    /// Every link drops `drop_pct`% of its messages and delays the others by up to
    /// `delay_max_ms`.
    pub fn lossy(&self, drop_pct: u64, delay_max_ms: u64) {
        for link in self.links.lock().unwrap().0.iter_mut() {
            link.drop_pct = drop_pct;
            link.delay_max_ms = delay_max_ms;
        }
    }

    /// Every link delivers everything at once again.
    pub fn heal(&self) {
        for link in self.links.lock().unwrap().0.iter_mut() {
            *link = Link::default();
        }
    }
}

/// A message in a node's inbox, numbered by the reader task that put it there: each reader's
/// letters must come out of the inbox (a channel, received in a `select!`) all, once and in
/// order. A delayed letter (seq 0) is not numbered.
#[derive(Clone, Copy, Debug)]
pub struct Letter {
    pub m: Msg,
    pub stream: u64,
    pub seq: u64,
}

/// One reader task's side of the inbox.
pub struct Stream {
    tx: Sender<Letter>,
    id: u64,
    next: u64,
}

impl Stream {
    pub fn new(tx: Sender<Letter>) -> Stream {
        static IDS: AtomicU64 = AtomicU64::new(1);
        Stream {
            tx,
            id: IDS.fetch_add(1, Ordering::Relaxed),
            next: 1,
        }
    }
}

/// Passes a message received by `me` through its link's filter into `me`'s inbox.
pub fn deliver(sh: &Shared, me: usize, m: Msg, inbox: &mut Stream) {
    if m.from >= sh.net.len() {
        return;
    }
    match sh.net.fate(m.from, me) {
        Fate::Deliver => {
            let letter = Letter {
                m,
                stream: inbox.id,
                seq: inbox.next,
            };
            if inbox.tx.try_send(letter).is_ok() {
                inbox.next += 1;
            }
        }
        Fate::Drop => {}
        Fate::Delay(d) => {
            // Go's `time.AfterFunc`: fires on its own; a node killed meanwhile has no
            // receiver left and the message is lost, as it would be.
            let tx = inbox.tx.clone();
            let letter = Letter {
                m,
                stream: inbox.id,
                seq: 0,
            };
            drop(gort::time::after_func(d, move || {
                let _ = tx.try_send(letter);
            }));
        }
    }
}

/// How the nodes talk.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Transport {
    /// A datagram per message (`node`'s reader).
    Udp,
    /// A connection per peer and direction ([`tcp`]).
    Tcp,
}

/// What the checker sees of one node (updated by the node as it changes).
#[derive(Clone, Copy, Debug, Default)]
pub struct View {
    pub alive: bool,
    pub paused: bool,
    /// Pauses begun (a count: the checker may not see a short one while it lasts).
    pub pauses: u64,
    pub term: u64,
    pub leader: bool,
    /// The last heartbeat accepted: its term and its leader.
    pub heard: Option<(u64, usize)>,
}

/// The invariants, checked as the nodes act, and counters for the report.
#[derive(Debug, Default)]
pub struct Checks {
    pub views: Vec<View>,
    /// Election safety: the one leader of each term.
    pub leaders: HashMap<u64, usize>,
    pub violations: Vec<String>,
    pub elections: u64,
    pub heartbeats: u64,
    pub resets: u64,
    pub fires: u64,
    /// Numbered inbox letters checked for loss, duplication and order.
    pub letters: u64,
}

impl Checks {
    pub fn new(n: usize) -> Checks {
        Checks {
            views: vec![View::default(); n],
            ..Checks::default()
        }
    }

    pub fn violate(&mut self, what: String) {
        if self.violations.len() < 20 {
            self.violations.push(what);
        }
    }

    /// Terms never decrease, across restarts too (the term is persisted).
    pub fn set_term(&mut self, node: usize, term: u64) {
        let was = self.views[node].term;
        if term < was {
            self.violate(format!("node {node}: term went back from {was} to {term}"));
        }
        self.views[node].term = term;
    }

    /// Election safety: at most one leader per term.
    pub fn became_leader(&mut self, node: usize, term: u64) {
        if let Some(&other) = self.leaders.get(&term) {
            if other != node {
                self.violate(format!("term {term}: two leaders, {other} and {node}"));
            }
        }
        self.leaders.insert(term, node);
        self.views[node].leader = true;
    }

    pub fn highest_term(&self) -> u64 {
        self.views.iter().map(|v| v.term).max().unwrap_or(0)
    }
}

/// Raft's persistent state of each node (`currentTerm`, `votedFor`), which survives a kill.
pub type Storage = Mutex<Vec<(u64, Option<usize>)>>;

/// The cluster's timing.
#[derive(Clone, Copy, Debug)]
pub struct Timing {
    /// The leader's heartbeat period.
    pub heartbeat: Duration,
    /// Election timeouts are uniform in `election_min..election_max`.
    pub election_min: Duration,
    pub election_max: Duration,
}

impl Timing {
    /// The Raft paper's: heartbeats well within the shortest election timeout.
    pub const RAFT: Timing = Timing {
        heartbeat: Duration::from_millis(50),
        election_min: Duration::from_millis(150),
        election_max: Duration::from_millis(300),
    };

    /// Heartbeats as often as election timeouts: every `reset` races the timer's firing (a
    /// cluster that elects all the time, for the timers' sake, not Raft's).
    pub const RACING: Timing = Timing {
        heartbeat: Duration::from_millis(10),
        election_min: Duration::from_millis(9),
        election_max: Duration::from_millis(13),
    };
}

/// What every node and the controller share.
#[derive(Debug)]
pub struct Shared {
    pub transport: Transport,
    pub timing: Timing,
    pub net: Net,
    pub storage: Storage,
    pub checks: Mutex<Checks>,
}

/// Open file descriptors of this process.
pub fn fd_count() -> usize {
    std::fs::read_dir("/proc/self/fd").map_or(0, |d| d.count())
}

/// Open sockets of this process (the fds a cluster opens; a runtime's own, its epoll and
/// eventfd, are not sockets).
pub fn socket_count() -> usize {
    let Ok(dir) = std::fs::read_dir("/proc/self/fd") else {
        return 0;
    };
    dir.filter_map(|e| std::fs::read_link(e.ok()?.path()).ok())
        .filter(|target| target.to_string_lossy().starts_with("socket:"))
        .count()
}
