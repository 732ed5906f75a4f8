//! Raft leader election on gort (`tests/support/raft/`, the code `examples/raft_election.rs`
//! runs): clusters of 3 and 5 nodes through lossy links, partitions, kills, restarts and a
//! stalled leader, on 1, 2 and 4 Ps, under `#[gort::test]`, and 20 seeds at once on one
//! runtime. Each run checks election safety, terms that never decrease, no stale, early or
//! stopped election timer value, no tick of a stopped ticker, a leader within 5 s after each
//! fault heals, and every task ended at shutdown; each test checks that no socket is left
//! open. The tests run one at a time (a lock), since all count one process's sockets (not
//! all its fds: `under_gort_test`'s runtime is made before it takes the lock). A debug build
//! runs the broadest six; a release build (CI's) runs all twelve.

#[path = "support/raft/mod.rs"]
mod raft;
mod support;

use raft::Transport::{self, Tcp, Udp};
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

static FDS: Mutex<()> = Mutex::new(());

fn serial() -> MutexGuard<'static, ()> {
    FDS.lock().unwrap_or_else(|e| e.into_inner())
}

/// Runs `n` nodes with `seed` on a runtime of `procs` Ps, under the watchdog; no socket is
/// left once the cluster and the runtime are gone.
fn cluster(procs: usize, n: usize, seed: u64, transport: Transport) {
    let _serial = serial();
    let fds = raft::socket_count();
    support::within(move || {
        let rt = gort::Builder::new().procs(procs).build().unwrap();
        let report = rt.block_on(raft::scenario::run(n, seed, transport));
        let report = report
            .unwrap_or_else(|e| panic!("{n} nodes on {transport:?}, seed {seed}, {procs} Ps: {e}"));
        // New terms' leaders the schedule forces: the first, after the partition, after the kill.
        assert!(report.leaders >= 3, "{report:?}");
    });
    assert_eq!(raft::socket_count(), fds, "sockets left open");
}

#[test]
#[cfg_attr(debug_assertions, ignore = "release only")]
fn three_nodes_one_p() {
    cluster(1, 3, 1, Udp);
}

#[test]
#[cfg_attr(debug_assertions, ignore = "release only")]
fn five_nodes_one_p() {
    cluster(1, 5, 2, Udp);
}

#[test]
fn three_nodes_two_ps() {
    cluster(2, 3, 3, Udp);
}

#[test]
#[cfg_attr(debug_assertions, ignore = "release only")]
fn five_nodes_two_ps() {
    cluster(2, 5, 4, Udp);
}

#[test]
#[cfg_attr(debug_assertions, ignore = "release only")]
fn five_nodes_four_ps() {
    cluster(4, 5, 5, Udp);
}

#[test]
fn tcp_three_nodes_one_p() {
    cluster(1, 3, 7, Tcp);
}

#[test]
#[cfg_attr(debug_assertions, ignore = "release only")]
fn tcp_five_nodes_four_ps() {
    cluster(4, 5, 8, Tcp);
}

#[gort::test(procs = 2)]
#[allow(clippy::await_holding_lock)] // it serialises tests, whose threads it blocks, not tasks
async fn under_gort_test() {
    let _serial = serial();
    let fds = raft::socket_count();
    let report = raft::scenario::run(3, 6, raft::Transport::Udp)
        .await
        .unwrap();
    assert!(report.leaders >= 3, "{report:?}");
    assert_eq!(raft::socket_count(), fds, "sockets left open");
}

/// 20 seeds, clusters of 3 and 5 nodes on UDP and TCP, all at once on one runtime of 4 Ps.
#[test]
fn twenty_seeds_at_once() {
    let _serial = serial();
    let fds = raft::socket_count();
    support::within(|| {
        let rt = gort::Builder::new().procs(4).build().unwrap();
        rt.block_on(async {
            let mut runs = gort::JoinSet::new();
            for seed in 100..120u64 {
                let n = if seed % 2 == 0 { 3 } else { 5 };
                let transport = if seed % 4 < 2 { Udp } else { Tcp };
                runs.spawn(async move { (n, seed, raft::scenario::run(n, seed, transport).await) });
            }
            while let Some(r) = runs.join_next().await {
                let (n, seed, r) = r.unwrap();
                if let Err(e) = r {
                    panic!("{n} nodes, seed {seed}: {e}");
                }
            }
        });
    });
    assert_eq!(raft::socket_count(), fds, "sockets left open");
}

/// Heartbeats as often as election timeouts (`Timing::RACING`): each `reset` of a follower's
/// election timer races its firing, and leaders come and go all the time; no value of an
/// earlier arming may be received, and no term may have two leaders. On 1, 2 and 4 Ps.
#[test]
fn resets_racing_fires() {
    let _serial = serial();
    let fds = raft::socket_count();
    for procs in [1, 2, 4] {
        support::within(move || {
            let rt = gort::Builder::new().procs(procs).build().unwrap();
            let r = rt.block_on(raft::scenario::churn(
                5,
                procs as u64,
                Duration::from_secs(2),
            ));
            let r = r.unwrap_or_else(|e| panic!("{procs} Ps: {e}"));
            // Elections, at least; how many heartbeats land before the next election depends on
            // the machine's load (none, on a loaded one), so they are not counted on.
            assert!(r.fires > 0, "{procs} Ps: {r:?}");
        });
    }
    assert_eq!(raft::socket_count(), fds, "sockets left open");
}

/// Eight racing clusters at once on one runtime of 4 Ps: resets and fires from 40 nodes'
/// tasks on every P, timers moving between Ps' heaps.
#[test]
#[cfg_attr(debug_assertions, ignore = "release only")]
fn racing_clusters_at_once() {
    let _serial = serial();
    let fds = raft::socket_count();
    support::within(|| {
        let rt = gort::Builder::new().procs(4).build().unwrap();
        rt.block_on(async {
            let mut runs = gort::JoinSet::new();
            for seed in 200..208u64 {
                runs.spawn(raft::scenario::churn(5, seed, Duration::from_secs(2)));
            }
            while let Some(r) = runs.join_next().await {
                let r = r.unwrap().unwrap_or_else(|e| panic!("{e}"));
                assert!(r.fires > 0, "{r:?}");
            }
        });
    });
    assert_eq!(raft::socket_count(), fds, "sockets left open");
}

/// 40 kills and restarts in quick succession (some of a runtime of a node's own), on UDP and
/// on TCP, 1 and 4 Ps; then the cluster must settle, and no socket may be left.
#[test]
fn kill_storm() {
    const ROUNDS: u64 = 40;
    let _serial = serial();
    let fds = raft::socket_count();
    for (seed, transport, procs) in [(300, Udp, 1), (301, Tcp, 1), (302, Udp, 4), (303, Tcp, 4)] {
        support::within(move || {
            let rt = gort::Builder::new().procs(procs).build().unwrap();
            let r = rt.block_on(raft::scenario::kill_storm(5, seed, transport, ROUNDS));
            r.unwrap_or_else(|e| panic!("{transport:?}, {procs} Ps: {e}"));
        });
    }
    assert_eq!(raft::socket_count(), fds, "sockets left open");
}
