//! A Go-style worker pool: jobs over a channel, results over another, a ticker reporting
//! progress, and a timeout around the whole thing.
//!
//! `cargo run --release --example worker_pool`

use gort::time::{timeout, Ticker};
use std::time::Duration;

#[gort::main]
async fn main() {
    let (jobs_tx, jobs_rx) = gort::chan::bounded::<u64>(64);
    let (res_tx, res_rx) = gort::chan::unbounded::<u64>();

    for _ in 0..8 {
        let (jobs, results) = (jobs_rx.clone(), res_tx.clone());
        gort::spawn(async move {
            while let Some(n) = jobs.recv().await {
                gort::time::sleep(Duration::from_micros(100)).await;
                results.send(n * n).await.unwrap();
            }
        });
    }
    drop(res_tx);

    gort::spawn(async move {
        for n in 0..1000 {
            jobs_tx.send(n).await.unwrap();
        }
        // Dropping the last Sender closes the channel: the workers' loops end.
    });

    let progress = Ticker::new(Duration::from_millis(20));
    let collect = async {
        let (mut sum, mut count) = (0u64, 0u32);
        loop {
            gort::select! {
                r = res_rx.recv() => match r {
                    Some(v) => { sum += v; count += 1; }
                    None => return (sum, count),
                },
                _ = progress.c().recv() => println!("{count} results so far"),
            }
        }
    };
    match timeout(Duration::from_secs(30), collect).await {
        Ok((sum, count)) => println!("{count} results, sum {sum}"),
        Err(e) => println!("gave up: {e}"),
    }
}
