//! Go's contract for `CancelFunc`: once any cancel of a context returns, that context and every
//! descendant are done (`Err()` non-nil, `Done()` closed). Go's `cancelCtx.cancel` holds the
//! node's lock while it cancels the children, so a second canceller of the node, or of a
//! descendant the first one is going through, waits. A user's test campaign found gort's
//! second canceller returning at once while the first was still on its way down the chain
//! (`cancel(); if child.Err() == nil { ... }` saw a live child), whether the first was a
//! `CancelFn` on another thread or a deadline firing on an M.

use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::{mpsc, Arc, Barrier};
use std::task::{Context as TaskContext, Wake, Waker};
use std::time::Duration;

use gort::context::{self, CancelFn, Context};
use gort::time::Instant;

/// Generations of a chain: enough that a walk down it takes long next to a thread's start.
const CHAIN: usize = 200;
/// The node whose cancel races its ancestor's (the user's program: node 20 of 200).
const MID: usize = 20;

/// Runs `f` on a thread of its own; panics if it has not returned in `secs` (a deadlock: the
/// thread is left blocked, and the process ends with the test binary).
fn within<T: Send + 'static>(secs: u64, what: &str, f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = mpsc::channel();
    let worker = std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    match rx.recv_timeout(Duration::from_secs(secs)) {
        Ok(v) => v,
        Err(mpsc::RecvTimeoutError::Disconnected) => {
            std::panic::resume_unwind(worker.join().unwrap_err())
        }
        Err(mpsc::RecvTimeoutError::Timeout) => panic!("{what}: hung for {secs} s"),
    }
}

/// A chain of [`CHAIN`] contexts under `root` (`chain[0]` is `root`), and the `CancelFn` of
/// each of its derived nodes (`cancels[i]` cancels `chain[i + 1]`).
fn chain(root: &Context) -> (Vec<Context>, Vec<CancelFn>) {
    let mut chain = vec![root.clone()];
    let mut cancels = Vec::with_capacity(CHAIN);
    for _ in 0..CHAIN {
        let (c, f) = context::with_cancel(chain.last().unwrap());
        chain.push(c);
        cancels.push(f);
    }
    (chain, cancels)
}

/// The index of a context of `ctxs` that is not done (its error unset or its `done` open),
/// looked for from the last: a cancel's walk goes down a chain, so its end is done last.
fn first_live(ctxs: &[Context]) -> Option<usize> {
    ctxs.iter()
        .rposition(|c| c.err().is_none() || !c.done().is_closed())
}

/// A thread that cancels with `cancel` once the caller, too, passes the barrier returned.
fn cancel_at_the_barrier(cancel: CancelFn) -> (Arc<Barrier>, std::thread::JoinHandle<()>) {
    let go = Arc::new(Barrier::new(2));
    let theirs = go.clone();
    let thread = std::thread::spawn(move || {
        theirs.wait();
        cancel.cancel();
    });
    (go, thread)
}

/// A plain thread cancels the root of a chain while this one cancels node [`MID`] (the
/// user's `ctx_cancel_race`): when this cancel returns, every node below `MID` is done,
/// whichever of the two reached them. Round by round this thread starts its cancel once
/// node `MID - k` is done, `k` from `MID` (at the root's cancel) down to 1, so that the two
/// walks meet at every point around `MID`.
#[test]
fn a_cancel_racing_an_ancestors_returns_with_its_subtree_done() {
    const ROUNDS: usize = 2_000;
    let early = within(120, "racing cancels", || {
        let mut early = 0;
        for round in 0..ROUNDS {
            let (root, cancel_root) = context::with_cancel(&Context::background());
            let (chain, cancels) = chain(&root);
            let (go, other) = cancel_at_the_barrier(cancel_root);
            go.wait();
            let k = MID - round % MID;
            while k < MID && chain[MID - k].err().is_none() {
                std::hint::spin_loop();
            }
            cancels[MID - 1].cancel();
            if first_live(&chain[MID..]).is_some() {
                early += 1;
            }
            other.join().unwrap();
            assert_eq!(first_live(&chain), None, "a cancel was lost");
        }
        early
    });
    assert_eq!(
        early, 0,
        "{early} of {ROUNDS} cancels returned with a descendant not yet done"
    );
}

/// A second cancel of the same node, made once the first has set the node's error (so the
/// first is on its way down): it returns only once the whole chain is done.
#[test]
fn a_second_cancel_of_a_node_returns_with_its_subtree_done() {
    const ROUNDS: usize = 2_000;
    let early = within(120, "a second cancel", || {
        let mut early = 0;
        for _ in 0..ROUNDS {
            let (root, cancel_root) = context::with_cancel(&Context::background());
            let (chain, _cancels) = chain(&root);
            let again = cancel_root.clone();
            let (go, first) = cancel_at_the_barrier(cancel_root);
            go.wait();
            while root.err().is_none() {
                std::hint::spin_loop();
            }
            again.cancel();
            if first_live(&chain).is_some() {
                early += 1;
            }
            first.join().unwrap();
        }
        early
    });
    assert_eq!(
        early, 0,
        "{early} of {ROUNDS} second cancels returned with a descendant not yet done"
    );
}

/// A deadline fires on one of the runtime's threads and walks down the chain (after_funcs
/// registered along it); a plain thread, seeing the root done, cancels node [`MID`]: when
/// that cancel returns, every node below it is done, and every after_func runs once.
#[test]
fn a_cancel_racing_a_deadline_returns_with_its_subtree_done() {
    const ROUNDS: usize = 300;
    let (early, ran) = within(120, "a cancel racing a deadline", || {
        let rt = gort::Builder::new().procs(2).build().unwrap();
        let ran = Arc::new(AtomicUsize::new(0));
        let mut early = 0;
        for _ in 0..ROUNDS {
            let (root, _cancel_root, chain, cancels) = rt.block_on(async {
                let (root, cancel_root) = context::with_deadline(
                    &Context::background(),
                    Instant::now() + Duration::from_micros(300),
                );
                let (chain, cancels) = chain(&root);
                (root, cancel_root, chain, cancels)
            });
            for c in chain.iter().skip(1).step_by(7) {
                let ran = ran.clone();
                drop(context::after_func(c, move || {
                    ran.fetch_add(1, SeqCst);
                }));
            }
            while root.err().is_none() {
                std::hint::spin_loop();
            }
            cancels[MID - 1].cancel();
            if first_live(&chain[MID..]).is_some() {
                early += 1;
            }
        }
        let want = ROUNDS * (1..=CHAIN).step_by(7).count();
        let start = std::time::Instant::now();
        while ran.load(SeqCst) < want && start.elapsed() < Duration::from_secs(20) {
            std::thread::sleep(Duration::from_millis(1));
        }
        (early, (ran.load(SeqCst), want))
    });
    assert_eq!(
        early, 0,
        "{early} of {ROUNDS} cancels returned with a descendant not yet done"
    );
    assert_eq!(ran.0, ran.1, "after_funcs run, of those registered");
}

/// Cancels from four plain threads and two tasks, and deadlines firing on the runtime's
/// threads, on random overlapping subtrees of a tree of contexts with after_funcs
/// registered: no cancel hangs, each returns with its subtree done, and every after_func
/// runs exactly once.
#[test]
fn cancels_on_overlapping_subtrees_neither_hang_nor_return_early() {
    const ROUNDS: u64 = 60;
    const NODES: usize = 300;
    within(240, "cancels on overlapping subtrees", || {
        let rt = gort::Builder::new().procs(2).build().unwrap();
        for round in 0..ROUNDS {
            let mut x = round * 977 + 1;
            let mut rnd = move || {
                x = x
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                (x >> 33) as usize
            };
            // parents[i] < i; node 0 is a with_cancel root.
            let mut ctxs = Vec::with_capacity(NODES);
            let mut cancels = Vec::with_capacity(NODES);
            let mut parents = vec![usize::MAX];
            let (root, cancel_root) = context::with_cancel(&Context::background());
            ctxs.push(root);
            cancels.push(cancel_root);
            rt.block_on(async {
                for i in 1..NODES {
                    let p = rnd() % i;
                    let (c, f) = if rnd() % 3 == 0 {
                        let d = Duration::from_micros(100 + (rnd() % 2_000) as u64);
                        context::with_timeout(&ctxs[p], d)
                    } else {
                        context::with_cancel(&ctxs[p])
                    };
                    ctxs.push(c);
                    cancels.push(f);
                    parents.push(p);
                }
            });
            let ran: Arc<Vec<AtomicUsize>> =
                Arc::new((0..NODES).map(|_| AtomicUsize::new(0)).collect());
            for (i, c) in ctxs.iter().enumerate() {
                let ran = ran.clone();
                drop(context::after_func(c, move || {
                    ran[i].fetch_add(1, SeqCst);
                }));
            }
            // subtree[i]: i and its descendants.
            let mut subtree: Vec<Vec<usize>> = (0..NODES).map(|i| vec![i]).collect();
            for d in (1..NODES).rev() {
                let mut a = parents[d];
                while a != usize::MAX {
                    subtree[a].push(d);
                    a = parents[a];
                }
            }
            let ctxs = Arc::new(ctxs);
            let subtree = Arc::new(subtree);
            let check = {
                let (ctxs, subtree) = (ctxs.clone(), subtree.clone());
                move |i: usize| {
                    for &d in &subtree[i] {
                        let c = &ctxs[d];
                        assert!(
                            c.err().is_some() && c.done().is_closed(),
                            "round {round}: node {d} live after the cancel of its ancestor {i} returned"
                        );
                    }
                }
            };
            // Six cancellers, each cancelling a random third of the nodes (the root last).
            let picks: Vec<Vec<usize>> = (0..6)
                .map(|_| {
                    let mut p: Vec<usize> = (1..NODES).filter(|_| rnd() % 3 == 0).collect();
                    for k in (1..p.len()).rev() {
                        p.swap(k, rnd() % (k + 1));
                    }
                    p.push(0);
                    p
                })
                .collect();
            let go = Arc::new(Barrier::new(5));
            let mut threads = Vec::new();
            let mut tasks = Vec::new();
            for (k, pick) in picks.into_iter().enumerate() {
                let mine: Vec<(usize, CancelFn)> =
                    pick.into_iter().map(|i| (i, cancels[i].clone())).collect();
                let check = check.clone();
                if k < 4 {
                    let go = go.clone();
                    threads.push(std::thread::spawn(move || {
                        go.wait();
                        for (i, c) in mine {
                            c.cancel();
                            check(i);
                        }
                    }));
                } else {
                    tasks.push(rt.spawn(async move {
                        for (j, (i, c)) in mine.into_iter().enumerate() {
                            if j % 16 == 0 {
                                gort::yield_now().await;
                            }
                            c.cancel();
                            check(i);
                        }
                    }));
                }
            }
            go.wait();
            for t in threads {
                t.join().unwrap();
            }
            rt.block_on(async {
                for t in tasks {
                    t.await.unwrap();
                }
            });
            let start = std::time::Instant::now();
            while ran.iter().any(|r| r.load(SeqCst) == 0)
                && start.elapsed() < Duration::from_secs(20)
            {
                std::thread::sleep(Duration::from_millis(1));
            }
            for (i, r) in ran.iter().enumerate() {
                assert_eq!(
                    r.load(SeqCst),
                    1,
                    "round {round}: node {i}'s after_func runs"
                );
            }
        }
    });
}

/// A waker on a descendant's `done` that cancels the root again, and the chain's middle,
/// when the root's cancel wakes it: the cancel wakes it on its way down, with the chain's
/// cancel in progress on this very thread, so those cancels must not wait for it to finish.
#[test]
fn a_waker_that_cancels_an_ancestor_during_the_cancel_does_not_hang() {
    struct CancelOnWake(Vec<CancelFn>, AtomicUsize);
    impl Wake for CancelOnWake {
        fn wake(self: Arc<Self>) {
            self.wake_by_ref();
        }
        fn wake_by_ref(self: &Arc<Self>) {
            self.1.fetch_add(1, SeqCst);
            for c in &self.0 {
                c.cancel();
            }
        }
    }
    within(20, "a waker cancelling an ancestor", || {
        let (root, cancel_root) = context::with_cancel(&Context::background());
        let (chain, cancels) = chain(&root);
        let waker = Arc::new(CancelOnWake(
            vec![cancel_root.clone(), cancels[MID - 1].clone()],
            AtomicUsize::new(0),
        ));
        let leaf = chain.last().unwrap().clone();
        let mut recv = Box::pin(leaf.done().recv());
        let w = Waker::from(waker.clone());
        assert!(recv
            .as_mut()
            .poll(&mut TaskContext::from_waker(&w))
            .is_pending());
        cancel_root.cancel();
        assert_eq!(waker.1.load(SeqCst), 1, "woken once");
        assert_eq!(first_live(&chain), None);
    });
}
