//! `Interval`, `timeout`, `Ticker` and `after_func` on a paused clock, checked on exact
//! instants against what Tokio's paused clock gives (Tokio's `MissedTickBehavior` docs, its
//! `Timeout` polling the inner future first), and `Interval` abused: reset while a tick is
//! pending, dropped mid-poll, reset into the past, moved between tasks.

mod support;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use gort::time::{Instant, MissedTickBehavior};
use support::{paused, within};

const MS: Duration = Duration::from_millis(1);

/// Ticks of a 100 ms interval whose consumer takes the first tick, then is away until
/// 350 ms, then takes `n` more: (due, taken at), in ms from the start.
async fn ticks_after_a_stall(behavior: MissedTickBehavior, n: usize) -> Vec<(u64, u64)> {
    let start = Instant::now();
    let ms = |t: Instant| (t - start).as_millis() as u64;
    let mut iv = gort::time::interval(100 * MS);
    iv.set_missed_tick_behavior(behavior);
    let first = iv.tick().await;
    let mut out = vec![(ms(first), ms(Instant::now()))];
    gort::time::sleep(350 * MS).await;
    for _ in 0..n {
        let due = iv.tick().await;
        out.push((ms(due), ms(Instant::now())));
    }
    out
}

#[test]
fn missed_tick_behaviors_give_tokios_instants_on_a_paused_clock() {
    within(|| {
        for procs in [1, 3] {
            paused(procs).block_on(async {
                assert_eq!(
                    ticks_after_a_stall(MissedTickBehavior::Burst, 5).await,
                    [
                        (0, 0),
                        (100, 350),
                        (200, 350),
                        (300, 350),
                        (400, 400),
                        (500, 500)
                    ]
                );
                assert_eq!(
                    ticks_after_a_stall(MissedTickBehavior::Delay, 3).await,
                    [(0, 0), (100, 350), (450, 450), (550, 550)]
                );
                assert_eq!(
                    ticks_after_a_stall(MissedTickBehavior::Skip, 3).await,
                    [(0, 0), (100, 350), (400, 400), (500, 500)]
                );
            });
        }
    });
}

#[test]
fn reset_variants_while_a_tick_is_pending() {
    within(|| {
        paused(2).block_on(async {
            let start = Instant::now();
            let ms = |t: Instant| (t - start).as_millis() as u64;
            let mut iv = gort::time::interval(100 * MS);
            iv.tick().await;
            // A tick pending (polled, not ready) when reset from another poll.
            {
                let mut tick = std::pin::pin!(iv.tick());
                assert!(futures::poll!(tick.as_mut()).is_pending());
            }
            gort::time::sleep(50 * MS).await;
            iv.reset(); // now + period
            assert_eq!(ms(iv.tick().await), 150);
            assert_eq!(ms(iv.tick().await), 250);
            iv.reset_immediately();
            assert_eq!((ms(iv.tick().await), ms(Instant::now())), (250, 250));
            assert_eq!(ms(iv.tick().await), 350);
            // Into the past, Burst: every tick from there on, at once, then on schedule.
            iv.reset_at(start + 120 * MS);
            let mut got = Vec::new();
            for _ in 0..4 {
                got.push(ms(iv.tick().await));
            }
            assert_eq!(got, [120, 220, 320, 420]);
            assert_eq!(ms(Instant::now()), 420);
        });
    });
}

#[test]
fn an_interval_dropped_mid_poll_or_moved_between_tasks_neither_hangs_nor_fires_twice() {
    within(|| {
        paused(2).block_on(async {
            let start = Instant::now();
            // Aborted while its task waits on a tick: the clock still jumps for the others.
            let waiting = gort::spawn(async {
                let mut iv = gort::time::interval(Duration::from_secs(3600));
                iv.tick().await;
                iv.tick().await;
            });
            gort::yield_now().await;
            waiting.abort();
            assert!(waiting.await.unwrap_err().is_cancelled());
            gort::time::sleep(10 * MS).await;
            assert_eq!(Instant::now() - start, 10 * MS);
            // Polled in one task, then moved to another: the second is woken, once per tick.
            let mut iv = gort::time::interval(100 * MS);
            iv.tick().await;
            {
                let mut tick = std::pin::pin!(iv.tick());
                assert!(futures::poll!(tick.as_mut()).is_pending());
            }
            let count = Arc::new(AtomicUsize::new(0));
            let c = count.clone();
            let mover = gort::spawn(async move {
                let mut dues = Vec::new();
                for _ in 0..3 {
                    dues.push(iv.tick().await);
                    c.fetch_add(1, Ordering::SeqCst);
                }
                dues
            });
            let dues = mover.await.unwrap();
            let ms: Vec<u64> = dues
                .iter()
                .map(|d| (*d - start).as_millis() as u64)
                .collect();
            assert_eq!(ms, [110, 210, 310]);
            assert_eq!(count.load(Ordering::SeqCst), 3);
        });
    });
}

#[test]
fn timeout_ticker_and_after_func_fire_on_tokios_and_gos_instants() {
    within(|| {
        paused(2).block_on(async {
            let start = Instant::now();
            // Tokio polls the inner future first: a sleep ending at the deadline wins.
            assert_eq!(
                gort::time::timeout(
                    Duration::from_secs(1),
                    gort::time::sleep(Duration::from_secs(1))
                )
                .await,
                Ok(())
            );
            let two_halves = async {
                gort::time::sleep(500 * MS).await;
                gort::time::sleep(500 * MS).await;
            };
            assert!(gort::time::timeout(Duration::from_secs(1), two_halves)
                .await
                .is_ok());
            assert!(
                gort::time::timeout(Duration::from_secs(1), gort::time::sleep(1001 * MS))
                    .await
                    .is_err()
            );
            assert_eq!(Instant::now() - start, Duration::from_secs(3));
            // Go's Ticker: first tick one period in, each value its due instant.
            let t0 = Instant::now();
            let ticker = gort::time::Ticker::new(250 * MS);
            for k in 1..=4u32 {
                assert_eq!(ticker.c().recv().await.unwrap(), t0 + k * 250 * MS);
            }
            // after_func at its instant, once, and reset from inside a task.
            let fired = Arc::new(std::sync::Mutex::new(Vec::new()));
            let f = fired.clone();
            let af =
                gort::time::after_func(100 * MS, move || f.lock().unwrap().push(Instant::now()));
            gort::time::sleep(50 * MS).await;
            assert!(af.reset(100 * MS)); // was pending: now due at +150
            gort::time::sleep(Duration::from_secs(1)).await;
            let t1 = t0 + 1000 * MS;
            assert_eq!(*fired.lock().unwrap(), [t1 + 150 * MS]);
        });
    });
}
