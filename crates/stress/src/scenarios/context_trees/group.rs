//! The `gort::sync` part of a round: an `ErrGroup` with a context and a limit of 1-4, whose
//! 8-24 tasks (spawned with `spawn`, `try_spawn` and `spawn_limited`) sleep in a `select!`
//! against the group's context, some failing; a `WaitGroup` counts them on the side. `wait`
//! must return an error of a task that failed before the group's context was canceled (the
//! first), or `Ok` if none failed; the context must be canceled only after a failure, and
//! by `wait`'s end in any case; no more than the limit may run at once.

use super::super::Ctx;
use crate::rng::Rng;
use gort::context::{Context, Error};
use gort::sync::{ErrGroup, WaitGroup};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// What the tasks share.
#[derive(Default)]
struct Book {
    running: AtomicUsize,
    most: AtomicUsize,
    /// Set by a failing task before it returns its error.
    failed: AtomicBool,
    /// The tasks that returned an error while the group's context was still live: the first
    /// error is one of them.
    early: Mutex<Vec<usize>>,
    /// Tasks that ran their body.
    ran: AtomicUsize,
}

/// One group's run; returns the number of tasks spawned.
pub(crate) async fn run(ctx: Arc<Ctx>, mut rng: Rng) -> u64 {
    let limit = rng.range(1..5) as usize;
    let (mut group, gctx) = ErrGroup::<usize>::with_context(&Context::background());
    group.set_limit(Some(limit));
    let (book, wg) = (Arc::new(Book::default()), WaitGroup::new());
    let tasks = rng.range(8..25) as usize;
    let mut spawned = 0;
    for k in 0..tasks {
        let fail = rng.chance(15);
        let nap = rng.duration(Duration::ZERO, Duration::from_millis(3));
        let t = task(
            ctx.clone(),
            book.clone(),
            wg.clone(),
            gctx.clone(),
            k,
            fail,
            nap,
        );
        wg.add(1);
        match rng.below(3) {
            0 => group.spawn(t),
            1 => group.spawn_limited(t).await,
            _ => {
                if !group.try_spawn(t) {
                    wg.done(); // not spawned: its future was dropped unrun
                    continue;
                }
            }
        }
        spawned += 1;
    }
    let result = group.wait().await;
    check(&ctx, &book, &wg, &gctx, result, limit, spawned);
    spawned as u64
}

/// A task of the group: naps in a `select!` against the group's context, then fails or not.
async fn task(
    ctx: Arc<Ctx>,
    book: Arc<Book>,
    wg: WaitGroup,
    gctx: Context,
    k: usize,
    fail: bool,
    nap: Duration,
) -> Result<(), usize> {
    let now = book.running.fetch_add(1, Relaxed) + 1;
    book.most.fetch_max(now, Relaxed);
    book.ran.fetch_add(1, Relaxed);
    let canceled = gort::select! {
        _ = gort::time::sleep(nap) => false,
        _ = gctx.done().recv() => true,
    };
    if canceled && !book.failed.load(Relaxed) {
        ctx.violation(format!(
            "an ErrGroup's context was canceled ({:?}) before any task failed",
            gctx.err()
        ));
    }
    let result = if fail {
        book.failed.store(true, Relaxed);
        if gctx.err().is_none() {
            book.early.lock().unwrap_or_else(|e| e.into_inner()).push(k);
        }
        Err(k)
    } else {
        Ok(())
    };
    book.running.fetch_sub(1, Relaxed);
    wg.done();
    result
}

/// After `wait`: the first error, the context, the limit, every task counted.
fn check(
    ctx: &Ctx,
    book: &Book,
    wg: &WaitGroup,
    gctx: &Context,
    result: Result<(), usize>,
    limit: usize,
    spawned: usize,
) {
    let early = book.early.lock().unwrap_or_else(|e| e.into_inner());
    match result {
        Ok(()) if book.failed.load(Relaxed) => {
            ctx.violation("ErrGroup::wait returned Ok though a task failed")
        }
        Err(k) if !early.contains(&k) => ctx.violation(format!(
            "ErrGroup::wait returned task {k}'s error, not the first (those before the cancel: {early:?})"
        )),
        _ => {}
    }
    if gctx.err() != Some(Error::Canceled) {
        ctx.violation(format!(
            "an ErrGroup's context is {:?} after wait returned",
            gctx.err()
        ));
    }
    let most = book.most.load(Relaxed);
    if most > limit {
        ctx.violation(format!(
            "an ErrGroup with limit {limit} ran {most} tasks at once"
        ));
    }
    let (ran, count) = (book.ran.load(Relaxed), wg.count());
    if ran != spawned || count != 0 {
        ctx.violation(format!(
            "after ErrGroup::wait: {ran} of {spawned} tasks ran, the WaitGroup counts {count}"
        ));
    }
    ctx.counts.ops.fetch_add(spawned as u64, Relaxed);
}
