//! Scheduler shapes R1-R4 on gort (procs = W).

use std::sync::Arc;

use crate::common::{Figures, Latch, Meter, Params};
use crate::timer_gort::{go, run};

/// R1: one task spawns N empty tasks and waits for all.
pub fn r1_spawn_many(p: &Params) -> Figures {
    let n = p.n(1_000_000);
    run(p, move || async move {
        let done = Arc::new(Latch::new(n));
        let m = Meter::start();
        for _ in 0..n {
            let done = done.clone();
            go(async move { done.arrive() });
        }
        done.wait().await;
        vec![("per_task_ns", m.ns_per(n))]
    })
}

/// R2: 1,000 tasks each yield 1,000 times (quick: 100 times).
pub fn r2_yield_many(p: &Params) -> Figures {
    let (tasks, yields) = (1000, p.n(1000));
    run(p, move || async move {
        let done = Arc::new(Latch::new(tasks));
        let m = Meter::start();
        for _ in 0..tasks {
            let done = done.clone();
            go(async move {
                for _ in 0..yields {
                    gort::yield_now().await;
                }
                done.arrive();
            });
        }
        done.wait().await;
        vec![("per_yield_ns", m.ns_per(tasks * yields))]
    })
}

/// R3: 1,000 pairs of tasks bounce a message 1,000 times (quick: 100) over two channels of
/// capacity 1.
pub fn r3_ping_pong(p: &Params) -> Figures {
    let (pairs, rounds) = (1000, p.n(1000));
    run(p, move || async move {
        let done = Arc::new(Latch::new(pairs));
        let m = Meter::start();
        for _ in 0..pairs {
            let (ping_tx, ping_rx) = gort::chan::bounded::<u64>(1);
            let (pong_tx, pong_rx) = gort::chan::bounded::<u64>(1);
            go(async move {
                while let Some(v) = ping_rx.recv().await {
                    if pong_tx.send(v).await.is_err() {
                        break;
                    }
                }
            });
            let done = done.clone();
            go(async move {
                for i in 0..rounds as u64 {
                    assert!(ping_tx.send(i).await.is_ok(), "ponger gone");
                    assert_eq!(pong_rx.recv().await, Some(i));
                }
                ping_tx.close();
                done.arrive();
            });
        }
        done.wait().await;
        vec![("per_round_trip_ns", m.ns_per(pairs * rounds))]
    })
}

/// Spawns the next link of R4's chain, or opens the latch at the end.
fn chain(left: usize, done: Arc<Latch>) {
    if left == 0 {
        done.arrive();
    } else {
        go(async move { chain(left - 1, done) });
    }
}

/// R4: each task spawns the next, 100,000 deep (quick: 10,000).
pub fn r4_chained_spawn(p: &Params) -> Figures {
    let n = p.n(100_000);
    run(p, move || async move {
        let done = Arc::new(Latch::new(1));
        let m = Meter::start();
        chain(n, done.clone());
        done.wait().await;
        vec![("per_spawn_ns", m.ns_per(n))]
    })
}
