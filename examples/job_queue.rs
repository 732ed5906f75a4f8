//! A rate-limited job queue with retries, as a Go service would write it: a producer feeds
//! jobs through a bounded channel, a rate limiter (a `Ticker`, Go's `time.Tick` limiter)
//! hands out one start per tick, workers in an `ErrGroup` run each attempt under its own
//! `context` deadline, retry failed attempts with exponential backoff (`time::after` raced
//! against the context), and drain gracefully when the parent context is canceled: a job
//! already started finishes (or gives up at its deadline), the rest are handed back.
//!
//! Checked: every job is accounted for exactly once (done, failed for good, or handed back
//! unstarted), the rate limit held, and a job that hangs is cut by its deadline.
//!
//! `cargo run --release --example job_queue`

use gort::chan::{bounded, Receiver, Sender};
use gort::context::{self, Context};
use gort::sync::ErrGroup;
use gort::time::{Instant, Ticker};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

const JOBS: u64 = 400;
const WORKERS: usize = 8;
const RATE: Duration = Duration::from_micros(500); // at most one attempt start per 500 µs
const ATTEMPT_TIMEOUT: Duration = Duration::from_millis(20);
const MAX_ATTEMPTS: u32 = 4;

#[derive(Debug, Clone, Copy, PartialEq)]
enum Outcome {
    Done,
    GaveUp,
    Returned,
}

/// One attempt at job `id`: most succeed at once, some fail transiently for a few attempts,
/// some hang until their deadline.
async fn attempt(ctx: &Context, id: u64, n: u32) -> Result<(), String> {
    let work = Duration::from_micros(200 + (id * 37 % 800));
    let hangs = id % 23 == 0 && n < 2;
    let flaky = id % 7 == 0 && n < 2;
    let never = id % 101 == 0;
    let sleep = if hangs {
        gort::time::sleep(Duration::from_secs(3600))
    } else {
        gort::time::sleep(work)
    };
    gort::select! {
        _ = sleep => {}
        _ = ctx.done().recv() => return Err(format!("job {id} attempt {n}: {}", ctx.err().unwrap())),
    }
    if flaky || never {
        return Err(format!("job {id} attempt {n}: transient failure"));
    }
    Ok(())
}

async fn worker(
    ctx: Context,
    jobs: Receiver<u64>,
    limiter: Receiver<u64>,
    results: Sender<(u64, Outcome, u32)>,
    starts: Arc<AtomicU64>,
) -> Result<(), String> {
    loop {
        // Drain: once canceled, take no new job.
        let id = gort::select! {
            biased;
            _ = ctx.done().recv() => return Ok(()),
            j = jobs.recv() => match j { Some(id) => id, None => return Ok(()) },
        };
        let mut n = 0;
        let outcome = loop {
            // The rate limit: one start per token.
            gort::select! {
                Some(_) = limiter.recv() => {},
                _ = ctx.done().recv() => break Outcome::Returned,
            }
            starts.fetch_add(1, Ordering::Relaxed);
            // Each attempt under its own deadline, derived from the worker's context so a
            // cancel still reaches it.
            let (actx, cancel) = context::with_timeout(&ctx, ATTEMPT_TIMEOUT);
            let r = attempt(&actx, id, n).await;
            cancel.cancel();
            n += 1;
            if r.is_ok() {
                break Outcome::Done;
            }
            if n == MAX_ATTEMPTS {
                break Outcome::GaveUp;
            }
            let backoff = Duration::from_millis(1 << n);
            let timer = gort::time::after(backoff);
            gort::select! {
                _ = timer.recv() => {},
                _ = ctx.done().recv() => break Outcome::Returned,
            }
        };
        results
            .send((id, outcome, n))
            .await
            .map_err(|_| "results closed")?;
    }
}

async fn run(cancel_after: Option<Duration>) -> Result<(), String> {
    let started = Instant::now();
    let (parent, cancel) = context::with_cancel(&Context::background());
    let (group, ctx) = ErrGroup::<String>::with_context(&parent);
    let (job_tx, job_rx) = bounded::<u64>(16);
    let (res_tx, res_rx) = bounded(64);
    let starts = Arc::new(AtomicU64::new(0));

    // The limiter: a ticker forwarded into a channel of capacity 1 (a burst of one).
    // Not in the group: the group's context is canceled only when its wait returns, so a
    // limiter waiting for that inside the group would wait for ever (as in Go).
    let (tok_tx, tok_rx) = bounded::<u64>(1);
    let (lctx, stop_limiter) = context::with_cancel(&ctx);
    let limiter = gort::spawn(async move {
        let t = Ticker::new(RATE);
        let mut n = 0;
        loop {
            gort::select! {
                _ = t.c().recv() => { n += 1; let _ = tok_tx.try_send(n); },
                _ = lctx.done().recv() => return,
            }
        }
    });
    for _ in 0..WORKERS {
        let w = worker(
            ctx.clone(),
            job_rx.clone(),
            tok_rx.clone(),
            res_tx.clone(),
            starts.clone(),
        );
        group.spawn(w);
    }
    drop(res_tx);
    // The producer: jobs it could not hand over go back as Returned.
    let pctx = ctx.clone();
    let back = res_rx.clone();
    let producer = gort::spawn(async move {
        let mut returned = Vec::new();
        for id in 0..JOBS {
            gort::select! {
                biased;
                _ = pctx.done().recv() => returned.push(id),
                r = job_tx.send(id) => r.expect("workers alive"),
            }
        }
        drop(job_tx);
        drop(back);
        returned
    });
    if let Some(d) = cancel_after {
        gort::spawn(async move {
            gort::time::sleep(d).await;
            cancel.cancel();
        });
    } else {
        std::mem::forget(cancel);
    }
    let mut seen = vec![None; JOBS as usize];
    let collect = async {
        let mut returned = producer.await.unwrap();
        // Jobs still in the channel when the workers stopped are handed back too.
        while let Ok(id) = job_rx.try_recv() {
            returned.push(id);
        }
        returned
    };
    // Results arrive until every worker has returned (the last Sender dropped).
    let results = async {
        let mut v = Vec::new();
        while let Some(r) = res_rx.recv().await {
            v.push(r);
        }
        v
    };
    let (results, waited) = futures::join!(results, async {
        let r = group.wait().await;
        stop_limiter.cancel();
        r
    });
    waited?;
    limiter.await.unwrap();
    let returned = collect.await;
    for (id, outcome, n) in results {
        if seen[id as usize].replace(outcome).is_some() {
            return Err(format!("job {id} reported twice"));
        }
        if outcome == Outcome::GaveUp && n != MAX_ATTEMPTS {
            return Err(format!("job {id} gave up after {n}"));
        }
    }
    for id in returned {
        if seen[id as usize].replace(Outcome::Returned).is_some() {
            return Err(format!("job {id} returned and reported"));
        }
    }
    let count = |o| seen.iter().filter(|s| **s == Some(o)).count();
    let lost = seen.iter().filter(|s| s.is_none()).count();
    let elapsed = started.elapsed();
    let starts = starts.load(Ordering::Relaxed);
    println!(
        "cancel {cancel_after:?}: {} done, {} gave up, {} handed back, {lost} lost; {starts} attempts in {elapsed:?}",
        count(Outcome::Done),
        count(Outcome::GaveUp),
        count(Outcome::Returned),
    );
    if lost > 0 {
        return Err(format!("{lost} jobs lost"));
    }
    // The limiter: no more starts than ticks (plus the one buffered token).
    let max_starts = elapsed.as_micros() as u64 / RATE.as_micros() as u64 + 2;
    if starts > max_starts {
        return Err(format!("{starts} starts in {elapsed:?}: over the rate"));
    }
    if cancel_after.is_none() && (count(Outcome::Returned) > 0 || count(Outcome::GaveUp) != 4) {
        return Err("without a cancel every job runs; only the 4 `never` jobs give up".into());
    }
    Ok(())
}

#[gort::main]
async fn main() {
    let mut failed = false;
    for cancel in [None, Some(Duration::from_millis(60)), Some(Duration::ZERO)] {
        if let Err(e) = run(cancel).await {
            eprintln!("FAILED: {e}");
            failed = true;
        }
    }
    if failed {
        std::process::exit(1);
    }
}
