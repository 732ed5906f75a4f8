//! Raft leader election (the Raft paper's §5.2) on gort, as a Go program on hashicorp/raft's
//! or etcd/raft's loop would do it: each node a main loop `select!`ing on a randomised
//! election `Timer` (`reset` on every heartbeat), a heartbeat `Ticker` while leader, an inbox
//! channel fed by a UDP reader task with read deadlines (or, on TCP, an accept loop and a
//! reader task per connection, and cached dialled connections with write deadlines), and a
//! `context` for shutdown.
//!
//! Clusters of 3 and 5 nodes on UDP and of 5 on TCP go through lossy and slow links, the
//! leader partitioned away and healed, a follower partitioned away, the leader killed and
//! restarted, a follower killed and restarted, a follower restarted in a runtime of its own
//! and that runtime dropped, and the leader's loop stalled past every election timeout.
//! Checked: at most one leader per term, terms never decrease, no election timer value from
//! before its last `reset` (or early, or after `stop`), no heartbeat tick from before the
//! ticker's last `stop` or `reset`, no inbox message lost, duplicated or reordered between a
//! reader task and the main loop's `select!`, a leader followed by all within 5 s after each
//! fault heals, every task ended at shutdown, no fd left open. The code is
//! `tests/support/raft/` (shared with `tests/raft_election.rs`).
//!
//! `cargo run --release --example raft_election [-- SEED]`

#[path = "../tests/support/raft/mod.rs"]
mod raft;

use raft::Transport::{Tcp, Udp};

#[gort::main]
async fn main() {
    let seed = std::env::args()
        .nth(1)
        .map_or(1, |s| s.parse().expect("SEED: a number"));
    let fds = raft::fd_count();
    let mut failed = false;
    for (n, transport) in [(3, Udp), (5, Udp), (5, Tcp)] {
        match raft::scenario::run(n, seed, transport).await {
            Ok(r) => {
                println!("{n} nodes on {transport:?}, seed {seed}:");
                for step in &r.steps {
                    println!("  {step}");
                }
                println!(
                    "  {} elections, {} leaders, highest term {}, {} heartbeats, {} timer fires, \
                     {} inbox letters checked",
                    r.elections, r.leaders, r.highest_term, r.heartbeats, r.fires, r.letters
                );
            }
            Err(e) => {
                eprintln!("{n} nodes on {transport:?}, seed {seed}: FAILED: {e}");
                failed = true;
            }
        }
    }
    // More fds than before is a leak (fewer: one of the runtime's starting threads had a file
    // open for a moment when they were first counted).
    let left = raft::fd_count();
    if left > fds {
        eprintln!("{fds} fds open before the clusters, {left} after their shutdown");
        failed = true;
    }
    if failed {
        std::process::exit(1);
    }
}
