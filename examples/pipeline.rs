//! A Go-style pipeline: a generator, N parallel stages and a fan-in over bounded channels,
//! run as an `ErrGroup` (Go's errgroup): the first stage to fail cancels the group's
//! context, and every other task leaves its `select!` on `ctx.done()`. A `WaitGroup` closes
//! the fan-in once the last stage is done (Go's `go func() { wg.Wait(); close(out) }()`).
//! Checks that a clean run delivers every item exactly once, and that a poisoned item stops
//! the whole pipeline quickly with the stage's error.
//!
//! `cargo run --release --example pipeline`

use std::collections::HashSet;
use std::time::Duration;

use gort::chan::{bounded, Receiver, Sender};
use gort::context::Context;
use gort::sync::{ErrGroup, WaitGroup};

const ITEMS: u64 = 20_000;
const STAGES: usize = 8;

async fn generate(ctx: Context, out: Sender<u64>) -> Result<(), String> {
    for item in 0..ITEMS {
        gort::select! {
            sent = out.send(item) => sent.map_err(|_| "the stages are gone".to_string())?,
            _ = ctx.done().recv() => return Ok(()), // someone failed: stop quietly
        }
    }
    Ok(()) // dropping `out` closes the channel: the stages' loops end
}

async fn stage(
    ctx: Context,
    input: Receiver<u64>,
    out: Sender<u64>,
    poison: Option<u64>,
) -> Result<(), String> {
    loop {
        let item = gort::select! {
            item = input.recv() => match item {
                Some(item) => item,
                None => return Ok(()), // the generator is done
            },
            _ = ctx.done().recv() => return Ok(()),
            _ = gort::time::sleep(Duration::from_secs(5)) => return Err("input stalled".into()),
        };
        if Some(item) == poison {
            return Err(format!("item {item} is poisoned"));
        }
        gort::select! {
            sent = out.send(item * 2) => sent.map_err(|_| "the collector is gone".to_string())?,
            _ = ctx.done().recv() => return Ok(()),
        }
    }
}

/// Runs the pipeline; returns what the collector received and the group's result.
async fn run(poison: Option<u64>) -> (Vec<u64>, Result<(), String>) {
    let (group, ctx) = ErrGroup::with_context(&Context::background());
    let (items_tx, items_rx) = bounded(16);
    let (results_tx, results_rx) = bounded(16);
    group.spawn(generate(ctx.clone(), items_tx));

    let stages = WaitGroup::new();
    for _ in 0..STAGES {
        stages.add(1);
        let (ctx, input, out, stages) = (
            ctx.clone(),
            items_rx.clone(),
            results_tx.clone(),
            stages.clone(),
        );
        group.spawn(async move {
            let result = stage(ctx, input, out, poison).await;
            stages.done();
            result
        });
    }
    gort::spawn(async move {
        stages.wait().await;
        results_tx.close(); // every stage is done: end the collector's loop
    });
    drop(items_rx);

    let mut received = Vec::new();
    while let Some(v) = results_rx.recv().await {
        received.push(v);
    }
    (received, group.wait().await)
}

#[gort::main]
async fn main() {
    let start = gort::time::Instant::now();
    let (received, result) = run(None).await;
    assert_eq!(result, Ok(()));
    let distinct: HashSet<u64> = received.iter().copied().collect();
    assert_eq!(received.len() as u64, ITEMS, "items lost or duplicated");
    assert_eq!(
        distinct,
        (0..ITEMS).map(|i| i * 2).collect::<HashSet<u64>>()
    );
    println!(
        "{ITEMS} items through {STAGES} stages in {:?}",
        start.elapsed()
    );

    let start = gort::time::Instant::now();
    let (received, result) = run(Some(ITEMS / 4)).await;
    assert_eq!(result, Err(format!("item {} is poisoned", ITEMS / 4)));
    let distinct: HashSet<u64> = received.iter().copied().collect();
    assert_eq!(distinct.len(), received.len(), "duplicated items");
    assert!((received.len() as u64) < ITEMS);
    println!(
        "poisoned run stopped after {} items in {:?}: {}",
        received.len(),
        start.elapsed(),
        result.unwrap_err()
    );
}
