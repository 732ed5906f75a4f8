//! Testing time-dependent code with a paused clock: a debouncer and a retry with exponential
//! backoff, each spanning minutes of virtual time, checked to the nanosecond in microseconds
//! of wall time.
//!
//! ```sh
//! cargo run --release --example paused_clock
//! ```
//!
//! In a test suite the same code goes in `#[gort::test(start_paused = true)]` functions.

use gort::chan::{self, Receiver, Sender};
use gort::time::{self, Instant};
use std::time::Duration;

/// Forwards the last event of every burst once `quiet` has passed without a new one.
async fn debounce(events: Receiver<u32>, out: Sender<(u32, Instant)>, quiet: Duration) {
    let mut pending = None;
    loop {
        let timer = time::sleep(if pending.is_some() {
            quiet
        } else {
            Duration::MAX
        });
        gort::select! {
            ev = events.recv() => match ev {
                Some(ev) => pending = Some(ev),
                None => return,
            },
            _ = timer => {
                if let Some(ev) = pending.take() {
                    let _ = out.send((ev, Instant::now())).await;
                }
            }
        }
    }
}

/// Calls `attempt` until it succeeds, sleeping 1 s, 2 s, 4 s, ... (at most `cap`) between
/// tries. Returns the instants of the tries.
async fn retry_with_backoff(mut attempt: impl FnMut() -> bool, cap: Duration) -> Vec<Instant> {
    let mut tries = vec![Instant::now()];
    let mut delay = Duration::from_secs(1);
    while !attempt() {
        time::sleep(delay).await;
        tries.push(Instant::now());
        delay = (delay * 2).min(cap);
    }
    tries
}

async fn check_the_debouncer() {
    let (tx, rx) = chan::bounded(16);
    let (out_tx, out_rx) = chan::bounded(16);
    let quiet = Duration::from_millis(500);
    gort::spawn(debounce(rx, out_tx, quiet));
    let start = Instant::now();
    // A burst of three events 100 ms apart, a pause of 2 s, then one more event.
    for ev in 1..=3 {
        tx.send(ev).await.unwrap();
        time::sleep(Duration::from_millis(100)).await;
    }
    time::sleep(Duration::from_secs(2)).await;
    tx.send(4).await.unwrap();
    let first = out_rx.recv().await.unwrap();
    let second = out_rx.recv().await.unwrap();
    // Event 3 was sent at 200 ms: it goes out 500 ms later. Event 4 at 2.3 s, out at 2.8 s.
    assert_eq!(first, (3, start + Duration::from_millis(700)));
    assert_eq!(second, (4, start + Duration::from_millis(2800)));
}

async fn check_the_backoff() {
    let mut calls = 0;
    let start = Instant::now();
    let tries = retry_with_backoff(
        || {
            calls += 1;
            calls == 8
        },
        Duration::from_secs(30),
    )
    .await;
    let offsets: Vec<u64> = tries.iter().map(|t| (*t - start).as_secs()).collect();
    assert_eq!(offsets, [0, 1, 3, 7, 15, 31, 61, 91]);
}

#[gort::main(start_paused = true)]
async fn main() {
    let wall = std::time::Instant::now();
    let start = Instant::now();
    check_the_debouncer().await;
    check_the_backoff().await;
    println!(
        "debouncer and backoff checked: {:?} of virtual time in {:?} of wall time",
        start.elapsed(),
        wall.elapsed()
    );
}
