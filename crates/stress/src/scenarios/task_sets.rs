//! task-sets: rounds of owner tasks on every P, each filling a `JoinSet` with tasks that
//! finish at once, sleep 0-5 ms, wait on a channel, panic, or spawn a child and await it,
//! while other tasks and a blocking thread without a P abort random ones (checking
//! `is_finished` first). The owner drains its set one of six ways: `join_next`,
//! `try_join_next`, `select!` of `join_next` against a channel and a sleep, `join_all`,
//! `shutdown` after a few joins, or dropping it after a few joins.
//!
//! Every task carries a [`Rec`]: its tag (its output), whether its body ran to the end,
//! reached its panic, or had an abort called on it (set before the call), how often its
//! future was dropped (a guard the future owns) and how often its set returned it. The
//! checks are in [`Book`]: each output is its own task's, once; `is_panic` exactly for the
//! tasks that panicked; `is_cancelled` only for a task aborted before it completed and never
//! for one whose body ran to its end (Tokio's promise: a cancelled task's future was dropped
//! unfinished); a returned task's future is already dropped, once; `is_finished` only after
//! completion, a panic or an abort; a dropped set's tasks all end and drop their futures.

mod book;

use super::faults::{quiet_injected_panics, INJECTED};
use super::{join_all, Ctx};
use crate::patience::{self, Patience};
use crate::rng::Rng;
use book::Book;
use gort::chan::{Receiver, Sender};
use gort::task::{AbortHandle, JoinSet};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering::Relaxed, Ordering::SeqCst};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

/// One line for `--list`.
pub const ABOUT: &str = "JoinSets filled on every P with tasks that finish, sleep, wait on a channel, panic or spawn, aborted from tasks \
    and a blocking thread while the owner joins (join_next, try_join_next, select!, join_all, shutdown, drop): each output once and its own, \
    is_panic/is_cancelled exact, no cancelled task ran to completion, every future dropped once, is_finished only when done";

/// The longest sleep of a task.
const MAX_SLEEP: Duration = Duration::from_millis(5);

/// How long a drain may go without a result while tasks are in the set: every task ends
/// within about 10 ms (the gates of sets that are drained open within 5 ms), so this is a
/// lost result or wake-up. Counted in the time the process could run (`patience.rs`), as
/// is [`SETTLE`].
const STALL: Duration = Duration::from_secs(2);

/// How long a dropped set's tasks, or a child, get to end and drop their futures.
const SETTLE: Duration = Duration::from_secs(2);

/// What a task does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Now,
    Sleep,
    Gate,
    Panic,
    Spawner,
}

/// How the owner drains its set.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Drain {
    JoinNext,
    TryJoin,
    Select,
    JoinAll,
    Shutdown,
    Drop,
}

const DRAINS: [Drain; 6] = [
    Drain::JoinNext,
    Drain::TryJoin,
    Drain::Select,
    Drain::JoinAll,
    Drain::Shutdown,
    Drain::Drop,
];

/// One task's record.
#[derive(Debug)]
struct Rec {
    tag: u64,
    kind: Kind,
    /// `gort::task::id()` as the body saw it.
    id: OnceLock<gort::task::Id>,
    /// The body ran to its end (set just before it returns).
    completed: AtomicBool,
    /// The body reached its `panic!`.
    panicked: AtomicBool,
    /// An abort was called on it (set just before the call).
    abort_called: AtomicBool,
    /// Drops of the guard its future owns.
    drops: AtomicU32,
    /// Times its set returned it.
    returned: AtomicU32,
}

impl Rec {
    fn new(tag: u64, kind: Kind) -> Arc<Rec> {
        Arc::new(Rec {
            tag,
            kind,
            id: OnceLock::new(),
            completed: AtomicBool::new(false),
            panicked: AtomicBool::new(false),
            abort_called: AtomicBool::new(false),
            drops: AtomicU32::new(0),
            returned: AtomicU32::new(0),
        })
    }

    /// Whether the task may be finished: its body completed or panicked, or it was aborted.
    fn may_be_finished(&self) -> bool {
        self.completed.load(SeqCst) || self.panicked.load(SeqCst) || self.abort_called.load(SeqCst)
    }
}

/// Owned by a task's future: counts the future's drops.
struct Guard(Arc<Rec>);

impl Drop for Guard {
    fn drop(&mut self) {
        self.0.drops.fetch_add(1, SeqCst);
    }
}

/// What the scenario's tasks share.
#[derive(Debug, Default)]
struct Shared {
    next_tag: AtomicU64,
    /// Bodies that reached their panic (each panics once).
    panics: AtomicU64,
    /// Children of spawner tasks, checked at the end of their round.
    children: Mutex<Vec<Arc<Rec>>>,
    /// Outputs by drain, for the note.
    returned: [AtomicU64; 6],
    cancelled: AtomicU64,
}

/// Runs task-sets.
pub fn run(ctx: &Arc<Ctx>) {
    quiet_injected_panics();
    let rt = ctx.runtime();
    let owners = ctx.cfg.procs as u64 * 8;
    let end = ctx.epoch + ctx.part(0.85);
    let shared = Arc::new(Shared::default());
    let (c, s) = (ctx.clone(), shared.clone());
    let rounds = rt.block_on(async move {
        let mut round = 0u64;
        while std::time::Instant::now() < end {
            let handles: Vec<_> = (0..owners)
                .map(|o| gort::spawn(owner(c.clone(), s.clone(), c.rng(round * owners + o))))
                .collect();
            join_all(&c, "task-sets owner", handles).await;
            let children = std::mem::take(&mut *s.children.lock().unwrap());
            settle(&c, &children, "a spawner's child").await;
            round += 1;
        }
        round
    });
    let expected = shared.panics.load(SeqCst);
    let counted = rt.metrics().task_panics;
    ctx.violations.check(counted == expected, || {
        format!("Metrics::task_panics = {counted}, but {expected} task bodies panicked")
    });
    let by: Vec<String> = DRAINS
        .iter()
        .zip(&shared.returned)
        .map(|(d, n)| format!("{d:?}={}", n.load(Relaxed)))
        .collect();
    ctx.note(format!(
        "rounds={rounds} owners per round={owners} tasks={} panics={expected} cancelled={} returned by drain: {}",
        shared.next_tag.load(Relaxed),
        shared.cancelled.load(Relaxed),
        by.join(" ")
    ));
    ctx.finish_runtime(rt);
}

/// One owner's round: fill a set, hand some abort handles to aborters, drain it.
async fn owner(ctx: Arc<Ctx>, shared: Arc<Shared>, mut rng: Rng) {
    let drain = DRAINS[rng.index(DRAINS.len())];
    // join_all panics on a failed task: its sets hold no panicking task and see no abort.
    let failures = drain != Drain::JoinAll;
    let (gate_tx, gate_rx) = gort::chan::bounded::<()>(0);
    let (poke_tx, poke_rx) = gort::chan::bounded::<u32>(4);
    let mut set = JoinSet::new();
    let mut book = Book::new(&ctx, drain);
    let mut to_task = Vec::new();
    let mut to_thread = Vec::new();
    for _ in 0..8 + rng.index(25) {
        let kind = match rng.index(if failures { 5 } else { 4 }) {
            0 => Kind::Now,
            1 => Kind::Sleep,
            2 => Kind::Gate,
            3 => Kind::Spawner,
            _ => Kind::Panic,
        };
        let rec = Rec::new(shared.next_tag.fetch_add(1, Relaxed), kind);
        let d = rng.duration(Duration::ZERO, MAX_SLEEP);
        let guard = Guard(rec.clone());
        let body = body(ctx.clone(), shared.clone(), guard, gate_rx.clone(), d);
        let abort = if rng.chance(50) {
            set.spawn(body)
        } else {
            set.insert(gort::spawn(body))
        };
        ctx.counts.ops.fetch_add(1, Relaxed);
        book.add(rec.clone(), abort.clone());
        if failures && rng.chance(30) {
            if rng.chance(50) {
                to_task.push((rec, abort));
            } else {
                to_thread.push((rec, abort));
            }
        }
    }
    drop(gate_rx);
    // A set that is shut down or dropped keeps its gate shut: its waiters end only if the
    // set aborts them.
    let leaves = matches!(drain, Drain::Shutdown | Drain::Drop);
    let (gate, held) = if leaves {
        (None, Some(gate_tx))
    } else {
        let d = rng.duration(Duration::ZERO, MAX_SLEEP);
        (Some(gort::spawn(open_gate(gate_tx, d))), None)
    };
    let aborter = gort::spawn(abort_from_task(
        ctx.clone(),
        to_task,
        poke_tx,
        rng.next_u64(),
    ));
    let c = ctx.clone();
    let seed = rng.next_u64();
    let thread = gort::spawn_blocking(move || abort_from_thread(&c, to_thread, seed));
    match drain {
        Drain::JoinNext => loop {
            match patience::timeout(STALL, set.join_next()).await {
                Some(Some(r)) => book.account(r),
                Some(None) => break,
                None => break book.stalled(set.len(), "join_next"),
            }
        },
        Drain::TryJoin => try_join(&mut set, &mut book, &mut rng).await,
        Drain::Select => select_join(&mut set, &mut book, &poke_rx, &mut rng).await,
        Drain::JoinAll => match patience::timeout(STALL, set.join_all()).await {
            Some(outputs) => outputs.into_iter().for_each(|v| book.account(Ok(v))),
            None => book.stalled(usize::MAX, "join_all"),
        },
        Drain::Shutdown | Drain::Drop => {
            // A few joins first, each given up after a while (the gate waiters never end
            // by themselves); a `join_next` dropped by the timeout loses nothing.
            for _ in 0..rng.index(book.len() + 1) {
                match gort::time::timeout(MAX_SLEEP * 2, set.join_next()).await {
                    Ok(Some(r)) => book.account(r),
                    Ok(None) | Err(_) => break,
                }
            }
            // Both abort every task left: the `is_finished` checks may count them aborted.
            book.mark_all_aborted();
            if drain == Drain::Shutdown {
                if patience::timeout(STALL, set.shutdown()).await.is_none() {
                    book.stalled(set.len(), "shutdown");
                }
                ctx.violations.check(set.is_empty(), || {
                    format!("a JoinSet held {} tasks after shutdown", set.len())
                });
            }
            drop(set);
        }
    }
    join_all(&ctx, "task-sets gate", gate.into_iter().collect()).await;
    join_all(&ctx, "task-sets aborter", vec![aborter, thread]).await;
    book.finish(&shared).await;
    drop(held);
}

/// A set's task: its id, its kind's work, then its tag. The guard is an argument, so the
/// future owns it from its creation (a task aborted before its first poll drops it too).
async fn body(
    ctx: Arc<Ctx>,
    shared: Arc<Shared>,
    guard: Guard,
    gate: Receiver<()>,
    d: Duration,
) -> u64 {
    let rec = guard.0.clone();
    let _ = rec.id.set(gort::task::id());
    match rec.kind {
        Kind::Now => {}
        Kind::Sleep => sleep(&ctx, d).await,
        Kind::Gate => {
            let _ = gate.recv().await;
        }
        Kind::Panic => {
            sleep(&ctx, d / 4).await;
            shared.panics.fetch_add(1, SeqCst);
            rec.panicked.store(true, SeqCst);
            panic!("{INJECTED} task-sets panic tag={}", rec.tag);
        }
        Kind::Spawner => {
            let child = Rec::new(shared.next_tag.fetch_add(1, Relaxed), Kind::Sleep);
            shared.children.lock().unwrap().push(child.clone());
            let g = Guard(child.clone());
            let c = ctx.clone();
            // If this task is aborted while it waits, the child is detached and runs on.
            let h = gort::spawn(async move {
                let _g = g;
                sleep(&c, d).await;
                child.completed.store(true, SeqCst);
            });
            if let Err(e) = h.await {
                ctx.violation(format!("a spawner's child ended with {e}"));
            }
        }
    }
    rec.completed.store(true, SeqCst);
    rec.tag
}

/// A sleep whose wake-up lateness is recorded.
async fn sleep(ctx: &Ctx, d: Duration) {
    let s = gort::time::sleep(d);
    let due = ctx.ns(s.deadline());
    ctx.counts.started.fetch_add(1, Relaxed);
    s.await;
    ctx.record_lateness(due, ctx.now_ns(), "a set task's sleep");
    ctx.counts.fired.fetch_add(1, Relaxed);
}

/// Lets the gate waiters go (the channel closes) after `d`.
async fn open_gate(tx: Sender<()>, d: Duration) {
    gort::time::sleep(d).await;
    drop(tx);
}

/// Aborts the handles from a task, with pokes for the owner's `select!` between them.
async fn abort_from_task(
    ctx: Arc<Ctx>,
    handles: Vec<(Arc<Rec>, AbortHandle)>,
    poke: Sender<u32>,
    seed: u64,
) {
    let mut rng = Rng::new(seed);
    for (i, (rec, abort)) in handles.into_iter().enumerate() {
        if rng.chance(50) {
            gort::time::sleep(rng.duration(Duration::ZERO, MAX_SLEEP / 2)).await;
        } else {
            gort::yield_now().await;
        }
        abort_one(&ctx, &rec, &abort);
        let _ = poke.try_send(i as u32);
    }
}

/// Aborts the handles from a blocking thread without a P.
fn abort_from_thread(ctx: &Ctx, handles: Vec<(Arc<Rec>, AbortHandle)>, seed: u64) {
    let mut rng = Rng::new(seed);
    for (rec, abort) in handles {
        std::thread::sleep(rng.duration(Duration::ZERO, Duration::from_micros(1_500)));
        abort_one(ctx, &rec, &abort);
    }
}

/// Checks `is_finished`, then marks and aborts.
fn abort_one(ctx: &Ctx, rec: &Rec, abort: &AbortHandle) {
    check_finished(ctx, rec, abort);
    rec.abort_called.store(true, SeqCst);
    abort.abort();
    ctx.counts.stopped.fetch_add(1, Relaxed);
    ctx.counts.ops.fetch_add(1, Relaxed);
}

/// `is_finished` is true only for a task that completed, panicked or was aborted.
fn check_finished(ctx: &Ctx, rec: &Rec, abort: &AbortHandle) {
    if abort.is_finished() && !rec.may_be_finished() {
        ctx.violation(format!(
            "is_finished was true for task tag={} ({:?}) that neither completed, panicked nor was aborted",
            rec.tag, rec.kind
        ));
    }
}

/// `try_join_next` in a loop, with short waits when nothing is ready.
async fn try_join(set: &mut JoinSet<u64>, book: &mut Book<'_>, rng: &mut Rng) {
    let mut patience = Patience::new(STALL);
    while !set.is_empty() {
        if patience.exhausted() {
            return book.stalled(set.len(), "try_join_next");
        }
        match set.try_join_next() {
            Some(r) => {
                book.account(r);
                patience = Patience::new(STALL);
            }
            None if rng.chance(50) => gort::yield_now().await,
            None => gort::time::sleep(rng.duration(Duration::ZERO, Duration::from_millis(1))).await,
        }
        book.check_all_finished();
    }
    ctx_check_none(book, set.try_join_next().is_none());
}

fn ctx_check_none(book: &Book<'_>, none: bool) {
    book.ctx.violations.check(none, || {
        "try_join_next returned a task from an empty set".into()
    });
}

/// `select!` of `join_next` against pokes and a short sleep: the losing `join_next` is
/// dropped, and what it did not return must come from a later call.
async fn select_join(
    set: &mut JoinSet<u64>,
    book: &mut Book<'_>,
    poke: &Receiver<u32>,
    rng: &mut Rng,
) {
    let mut pokes_open = true;
    let mut patience = Patience::new(STALL);
    loop {
        if patience.exhausted() {
            return book.stalled(set.len(), "join_next in a select!");
        }
        let nap = rng.duration(Duration::ZERO, Duration::from_micros(700));
        gort::select! {
            r = set.join_next() => match r {
                Some(r) => {
                    book.account(r);
                    patience = Patience::new(STALL);
                }
                None => break,
            },
            v = poke.recv(), if pokes_open => pokes_open = v.is_some(),
            _ = gort::time::sleep(nap) => {}
        }
    }
}

/// Waits (at most [`SETTLE`]) until every one of `recs` has dropped its future, then checks
/// that each did so exactly once.
async fn settle(ctx: &Ctx, recs: &[Arc<Rec>], what: &str) {
    let mut patience = Patience::new(SETTLE);
    while recs.iter().any(|r| r.drops.load(SeqCst) == 0) && !patience.exhausted() {
        gort::time::sleep(Duration::from_millis(1)).await;
    }
    for r in recs {
        let drops = r.drops.load(SeqCst);
        ctx.violations.check(drops == 1, || {
            format!(
                "{what} (tag={}) had its future dropped {drops} times (want 1)",
                r.tag
            )
        });
    }
}
