//! context-trees: rounds of random `gort::context` trees (depth up to 6, fan-out up to 8, a
//! few hundred nodes) made of `with_cancel`, `with_deadline`, `with_timeout` and their cause
//! forms, with deadlines 0-50 ms ahead (some past, some later than the parent's). Tasks on
//! every P wait on `done()` (alone, or in a `select!` with a channel or a sleep), register
//! `after_func`s (some stopped), poll `err()` against `done()`, and cancel random nodes, as
//! does a blocking thread without a P. Every done must be due (a cancel on its chain, or its
//! effective deadline), every `err()`/`cause()` must say which and stay put, every
//! `after_func` must run exactly once unless stopped. The tree is in [`tree`]; beside it, each
//! round runs an `ErrGroup` with a limit ([`group`]).

use super::{join_all, Ctx};
use crate::rng::Rng;
use gort::chan::{Receiver, Sender};
use gort::context::{self, AfterFunc};
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tree::{CauseKey, Tree};

mod group;
mod tree;

pub(crate) use tree::{MAX_DEPTH, MAX_FANOUT};

/// One line for `--list`.
pub const ABOUT: &str = "random context trees (with_cancel/deadline/timeout and cause forms, deadlines -5..50 ms) waited on \
    from every P (done, select! with a channel or a sleep), after_funcs (some stopped), cancels from tasks and a blocking \
    thread: done never early, err/cause consistent and stable, after_funcs exactly once, err Some only once done is closed";

/// The latest own deadline of a node, from the round's start.
const MAX_DEADLINE: Duration = Duration::from_millis(50);

/// How long the cancellers keep cancelling, from the round's start.
const CANCEL_SPAN: Duration = Duration::from_millis(40);

/// Runs context-trees.
pub fn run(ctx: &Arc<Ctx>) {
    let rt = ctx.runtime();
    let end = ctx.epoch + ctx.part(0.9);
    let c = ctx.clone();
    let (rounds, nodes) = rt.block_on(async move {
        let (mut round, mut nodes) = (0u64, 0u64);
        while std::time::Instant::now() < end {
            nodes += one_round(&c, round).await;
            round += 1;
        }
        (round, nodes)
    });
    ctx.note(format!(
        "rounds={rounds} nodes={nodes} (depth <= {MAX_DEPTH}, fan-out <= {MAX_FANOUT})"
    ));
    ctx.finish_runtime(rt);
}

/// One `after_func` registration: its node, how often it ran, whether a `stop` returned true.
struct Reg {
    node: usize,
    ran: AtomicU8,
    stopped: AtomicBool,
}

/// A round's state shared by its tasks.
struct Round {
    tree: Arc<Tree>,
    regs: Arc<Vec<Reg>>,
    handles: Vec<AfterFunc>,
    /// Values for the waiters that `select!` on a channel (sent by the cancellers).
    work: (Sender<u32>, Receiver<u32>),
    /// Set once the cancellers' span is over: pollers and stoppers stop.
    over: AtomicBool,
    /// What each node's waiter saw `cause()` say, for the stability check at the end.
    seen: Mutex<Vec<Option<CauseKey>>>,
}

/// A round: builds a tree, runs waiters, pollers, a stopper and cancellers against it (and a
/// blocking canceller), cancels the root, and checks every node and `after_func`. Returns the
/// number of nodes.
async fn one_round(ctx: &Arc<Ctx>, round: u64) -> u64 {
    let seed = |k: u64| ctx.rng((round << 24) | k);
    let mut rng = seed(0);
    let tree = Arc::new(Tree::build(ctx, &mut rng));
    let n = tree.len();
    let (regs, handles) = register_after_funcs(ctx, &tree, &mut rng);
    let r = Arc::new(Round {
        tree,
        regs,
        handles,
        work: gort::chan::bounded(4),
        over: AtomicBool::new(false),
        seen: Mutex::new(vec![None; n]),
    });
    let procs = ctx.cfg.procs as u64;
    let waiters: Vec<_> = (0..n as u64)
        .map(|i| gort::spawn(waiter(ctx.clone(), r.clone(), i as usize, seed(1 + i))))
        .collect();
    let helpers: Vec<_> = (0..procs * 2)
        .map(|k| gort::spawn(canceller(ctx.clone(), r.clone(), seed(1 << 20 | k))))
        .chain((0..procs).map(|k| gort::spawn(poller(ctx.clone(), r.clone(), seed(2 << 20 | k)))))
        .chain([gort::spawn(stopper(ctx.clone(), r.clone(), seed(3 << 20)))])
        .collect();
    let group = gort::spawn(group::run(ctx.clone(), seed(5 << 20)));
    let (rb, cb, mut rngb) = (r.clone(), ctx.clone(), seed(4 << 20));
    let blocking = gort::spawn_blocking(move || blocking_canceller(&cb, &rb, &mut rngb));
    // Past every deadline and every canceller: then the root goes, and everything ends.
    gort::time::sleep(MAX_DEADLINE + Duration::from_millis(5)).await;
    r.over.store(true, Relaxed);
    join_all(ctx, "context-trees helper", helpers).await;
    join_all(ctx, "ErrGroup", vec![group]).await;
    if let Err(e) = blocking.await {
        ctx.violation(format!("the blocking canceller did not join: {e}"));
    }
    cancel_checked(ctx, &r.tree, 0);
    join_all(ctx, "context-trees waiter", waiters).await;
    await_after_funcs(&r.regs).await;
    gort::time::sleep(Duration::from_millis(2)).await; // let a second run show up
    check_round(ctx, &r);
    n as u64
}

/// Registers an `after_func` on about a third of the nodes; each checks, when it runs, that
/// its context is done and that the done was due.
fn register_after_funcs(
    ctx: &Arc<Ctx>,
    tree: &Arc<Tree>,
    rng: &mut Rng,
) -> (Arc<Vec<Reg>>, Vec<AfterFunc>) {
    let regs: Arc<Vec<Reg>> = Arc::new(
        (0..tree.len())
            .filter(|_| rng.chance(33))
            .map(|node| Reg {
                node,
                ran: AtomicU8::new(0),
                stopped: AtomicBool::new(false),
            })
            .collect(),
    );
    let handles = (0..regs.len())
        .map(|k| {
            let (c, t, rs) = (ctx.clone(), tree.clone(), regs.clone());
            let i = regs[k].node;
            context::after_func(&tree.node(i).ctx, move || {
                let now = c.now_ns();
                if t.node(i).ctx.err().is_none() {
                    c.violation(format!(
                        "after_func {k}: ran while node {i}'s err() is None"
                    ));
                }
                if now < t.due(i) {
                    c.violation(format!("after_func {k}: ran before node {i} was due"));
                }
                rs[k].ran.fetch_add(1, Relaxed);
                c.counts.fired.fetch_add(1, Relaxed);
            })
        })
        .collect();
    (regs, handles)
}

/// Cancels node `i` (recording the instant first), then checks that the node is done: a
/// cancel is synchronous for the node it names.
fn cancel_checked(ctx: &Ctx, tree: &Tree, i: usize) {
    tree.cancel(ctx, i);
    ctx.counts.stopped.fetch_add(1, Relaxed);
    if tree.node(i).ctx.err().is_none() {
        ctx.violation(format!("node {i}: err() is None after its cancel returned"));
    }
}

/// Waits for node `i` to be done, in one of three ways, then checks what it says.
async fn waiter(ctx: Arc<Ctx>, r: Arc<Round>, i: usize, mut rng: Rng) {
    let node = r.tree.node(i);
    let done = node.ctx.done();
    match rng.below(3) {
        0 => {
            if done.recv().await.is_some() {
                ctx.violation(format!("node {i}: done() received a value"));
            }
        }
        1 => loop {
            let closed = gort::select! {
                _ = r.work.1.recv() => false,
                v = done.recv() => v.is_none(),
            };
            if closed {
                break;
            }
        },
        _ => loop {
            let d = rng.duration(Duration::ZERO, Duration::from_millis(10));
            let closed = gort::select! {
                _ = gort::time::sleep(d) => false,
                v = done.recv() => v.is_none(),
            };
            if closed {
                break;
            }
        },
    }
    let seen = ctx.now_ns();
    ctx.counts.ops.fetch_add(1, Relaxed);
    let key = r.tree.check_done(&ctx, i, seen, "done() closed");
    let due = r.tree.due(i);
    if seen >= due {
        ctx.record_lateness(due, seen, "a context's done");
    }
    r.seen.lock().unwrap_or_else(|e| e.into_inner())[i] = Some(key);
}

/// Cancels a few random nodes over [`CANCEL_SPAN`], feeds the waiters' channel, and derives
/// late children of random nodes (a child of a done parent is done at once).
async fn canceller(ctx: Arc<Ctx>, r: Arc<Round>, mut rng: Rng) {
    let n = r.tree.len() as u64;
    let cancels = rng.range(2..8);
    for _ in 0..cancels {
        gort::time::sleep(rng.duration(Duration::ZERO, CANCEL_SPAN / cancels as u32)).await;
        let _ = r.work.0.try_send(0);
        if rng.chance(25) {
            late_child(&ctx, &r.tree, rng.below(n) as usize, &mut rng);
        }
        // The root only at the end: it would end the round at once.
        cancel_checked(&ctx, &r.tree, rng.range(1..n.max(2)) as usize);
    }
}

/// Derives a child of node `p` while others cancel around it: if `p` was done before, the
/// child must be done at once, with `p`'s error and cause. The child is canceled after.
fn late_child(ctx: &Ctx, tree: &Tree, p: usize, rng: &mut Rng) {
    let parent = &tree.node(p).ctx;
    let before = parent
        .err()
        .map(|_| parent.cause().as_ref().map(CauseKey::of));
    let (child, cancel) = if rng.chance(50) {
        context::with_cancel(parent)
    } else {
        let t = rng.duration(Duration::from_millis(1), MAX_DEADLINE);
        context::with_timeout(parent, t)
    };
    if let Some(cause) = before {
        let got = child.cause().as_ref().map(CauseKey::of);
        if child.err() != parent.err() || got != cause {
            ctx.violation(format!(
                "a child of done node {p}: err() {:?} cause() {got:?}, its parent's {:?} {cause:?}",
                child.err(),
                parent.err()
            ));
        }
    }
    cancel.cancel();
    if !child.done().is_closed() {
        ctx.violation(format!(
            "a late child of node {p}: done() open after its cancel"
        ));
    }
}

/// Until the round is over, reads random nodes' `err()` then `done()`: an error before
/// `done()` is closed breaks Go's contract (`Err` is nil until `Done` is closed). The other
/// order (closed, then no error) is checked as well.
async fn poller(ctx: Arc<Ctx>, r: Arc<Round>, mut rng: Rng) {
    let n = r.tree.len() as u64;
    let mut k = 0u32;
    while !r.over.load(Relaxed) {
        let i = rng.below(n) as usize;
        let c = &r.tree.node(i).ctx;
        if let Some(e) = c.err() {
            if !c.done().is_closed() {
                ctx.violation(format!(
                    "node {i}: err() returned {e:?} while done() was still open"
                ));
            }
        } else if c.done().is_closed() && c.err().is_none() {
            ctx.violation(format!("node {i}: done() closed while err() is None"));
        }
        k += 1;
        if k % 64 == 0 {
            gort::time::sleep(Duration::from_micros(200)).await;
        } else {
            gort::yield_now().await;
        }
    }
}

/// Stops about half of the `after_func`s at random instants while their nodes get canceled.
async fn stopper(ctx: Arc<Ctx>, r: Arc<Round>, mut rng: Rng) {
    let m = r.handles.len().max(1) as u32;
    for (k, h) in r.handles.iter().enumerate() {
        if !rng.chance(50) {
            continue;
        }
        gort::time::sleep(rng.duration(Duration::ZERO, MAX_DEADLINE * 2 / m)).await;
        let ran_before = r.regs[k].ran.load(Relaxed);
        if h.stop() {
            r.regs[k].stopped.store(true, Relaxed);
            ctx.counts.reset.fetch_add(1, Relaxed);
            if ran_before > 0 {
                ctx.violation(format!("after_func {k}: stop() returned true after it ran"));
            }
        }
    }
}

/// From a thread without a P: sleeps, cancels random nodes, derives late children (their
/// deadlines go to the context crate's own thread there).
fn blocking_canceller(ctx: &Ctx, r: &Round, rng: &mut Rng) {
    let n = r.tree.len() as u64;
    for _ in 0..3 {
        std::thread::sleep(rng.duration(Duration::ZERO, CANCEL_SPAN / 3));
        late_child(ctx, &r.tree, rng.below(n) as usize, rng);
        cancel_checked(ctx, &r.tree, rng.range(1..n.max(2)) as usize);
    }
}

/// Waits until every `after_func` not stopped ran, or 3 s of the time the process could run
/// (a lost one then shows in the check rather than as a hang).
async fn await_after_funcs(regs: &[Reg]) {
    crate::patience::wait_until(Duration::from_secs(3), Duration::from_millis(1), || {
        regs.iter()
            .all(|g| g.stopped.load(Relaxed) || g.ran.load(Relaxed) != 0)
    })
    .await;
}

/// At the round's end: every node done, with the `cause()` its waiter saw; every
/// `after_func` ran once, or never if stopped.
fn check_round(ctx: &Ctx, r: &Round) {
    let seen = r.seen.lock().unwrap_or_else(|e| e.into_inner());
    for (i, saw) in seen.iter().enumerate() {
        let c = &r.tree.node(i).ctx;
        let now = c.cause().as_ref().map(CauseKey::of);
        if c.err().is_none() || !c.done().is_closed() {
            ctx.violation(format!("node {i}: not done after the root's cancel"));
        } else if *saw != now {
            ctx.violation(format!(
                "node {i}: cause() changed from {saw:?} to {now:?} once done"
            ));
        }
    }
    for (k, g) in r.regs.iter().enumerate() {
        let (ran, stopped) = (g.ran.load(Relaxed), g.stopped.load(Relaxed));
        let want = u8::from(!stopped);
        if ran != want {
            ctx.violation(format!(
                "after_func {k} on node {}: ran {ran} times, expected {want} (stop returned {stopped})",
                g.node
            ));
        }
    }
}
