//! gort::time's futures moved between tasks and runtimes after their first poll, and
//! `Interval`'s missed-tick behaviours under a paused clock advanced from another task:
//! property-style, many random rounds on real threads, the seed printed on failure
//! (`GORT_TIME_RACES_SEED=<seed>` replays one).

mod time_races_common;

use std::future::{poll_fn, Future};
use std::pin::Pin;
use std::task::Poll;
use std::time::Duration;

use gort::time::{Instant, MissedTickBehavior, Sleep};
use time_races_common::{rounds, Rng};

/// `Interval`'s: a tick returned later than this after its due instant counts as missed.
const TOLERANCE: Duration = Duration::from_millis(5);

/// Polls `f` once with the current task's waker.
async fn poll_once<F: Future + Unpin>(f: &mut F) -> Poll<F::Output> {
    poll_fn(|cx| Poll::Ready(Pin::new(&mut *f).poll(cx))).await
}

/// How a moved sleep ends its journey: awaited as is, reset to a new deadline first, or
/// wrapped in a timeout whose own deadline races it.
#[derive(Clone, Copy, Debug)]
enum Fate {
    Await,
    Reset(Duration),
    Timeout(Duration),
}

/// Sleeps made and polled once by tasks of runtime `a`, then moved to a task of runtime `b`
/// or of `a` again (through a channel, so possibly to another M), which may reset them, and
/// awaits them: each completes (no lost wake-up), never before its deadline.
fn sleep_round(seed: u64) {
    let a = gort::Builder::new().procs(2).build().unwrap();
    let b = gort::Builder::new().procs(1).build().unwrap();
    let mut rng = Rng(seed);
    let (tx, rx) = std::sync::mpsc::channel::<(Pin<Box<Sleep>>, Fate)>();
    let n = 40;
    let plans: Vec<(Duration, Fate, bool)> = (0..n)
        .map(|_| {
            let d = Duration::from_micros(rng.below(2000));
            let fate = match rng.below(3) {
                0 => Fate::Await,
                1 => Fate::Reset(Duration::from_micros(rng.below(2000))),
                _ => Fate::Timeout(Duration::from_micros(rng.below(2000))),
            };
            (d, fate, rng.below(2) == 0)
        })
        .collect();
    let makers: Vec<_> = plans
        .iter()
        .map(|&(d, fate, _)| {
            let tx = tx.clone();
            a.spawn(async move {
                let mut s = Box::pin(gort::time::sleep(d));
                let _ = poll_once(&mut s).await;
                tx.send((s, fate)).unwrap();
            })
        })
        .collect();
    drop(tx);
    for m in makers {
        a.block_on(m).unwrap();
    }
    let waiters: Vec<_> = rx
        .into_iter()
        .zip(plans.iter().map(|p| p.2))
        .map(|((mut s, fate), on_b)| {
            let rt = if on_b { &b } else { &a };
            rt.spawn(async move {
                match fate {
                    Fate::Await => {
                        let due = s.deadline();
                        s.as_mut().await;
                        assert!(Instant::now() >= due, "a moved sleep ended early");
                    }
                    Fate::Reset(d) => {
                        let due = Instant::now() + d;
                        s.as_mut().reset(due);
                        s.as_mut().await;
                        assert!(Instant::now() >= due, "a moved, reset sleep ended early");
                    }
                    Fate::Timeout(d) => {
                        let (due, limit) = (s.deadline(), Instant::now() + d);
                        match gort::time::timeout(d, s.as_mut()).await {
                            Ok(()) => assert!(Instant::now() >= due, "ended early"),
                            Err(_) => assert!(Instant::now() >= limit, "timed out early"),
                        }
                    }
                }
            })
        })
        .collect();
    for w in waiters {
        a.block_on(w).unwrap();
    }
}

#[test]
fn sleeps_moved_between_tasks_and_runtimes_after_their_first_poll_end_on_time() {
    rounds("sleep", sleep_round);
}

/// One interval consumed under a paused clock while another task advances it by random
/// steps, the consumer itself busy for random spans (sleeps, advances, yields). What each
/// behaviour returns is checked against its rule (`MissedTickBehavior`'s timeline): every
/// value is a due instant at or before the clock when it is returned, and the next one is
/// the last plus a period (Burst), plus a period from the late return (Delay), or the first
/// point of the schedule after the late return (Skip).
fn interval_round(seed: u64) {
    let rt = gort::Builder::new().procs(2).build().unwrap();
    rt.block_on(async move {
        gort::time::pause();
        let mut rng = Rng(seed);
        let behaviors = [
            MissedTickBehavior::Burst,
            MissedTickBehavior::Delay,
            MissedTickBehavior::Skip,
        ];
        let behavior = behaviors[rng.below(3) as usize];
        let period = Duration::from_millis(1 + rng.below(20));
        let mut advancer = Rng(rng.next());
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let stop2 = stop.clone();
        let other = gort::spawn(async move {
            while !stop2.load(std::sync::atomic::Ordering::SeqCst) {
                gort::time::advance(Duration::from_micros(advancer.below(30_000))).await;
                gort::yield_now().await;
            }
        });
        let mut iv = gort::time::interval(period);
        if rng.below(4) > 0 {
            iv.set_missed_tick_behavior(behavior);
        } else {
            assert_eq!(
                iv.missed_tick_behavior(),
                MissedTickBehavior::Burst,
                "the default"
            );
        }
        let behavior = iv.missed_tick_behavior();
        // The interval reads the clock inside `tick`, between `before` and `after`: another
        // task's `advance` may move it in between.
        let first = iv.tick().await;
        let mut last = (first, first, Instant::now());
        for i in 0..200 {
            match rng.below(4) {
                0 => gort::time::sleep(Duration::from_micros(rng.below(40_000))).await,
                1 => gort::time::advance(Duration::from_micros(rng.below(40_000))).await,
                2 => gort::yield_now().await,
                _ => {}
            }
            let before = Instant::now();
            let due = iv.tick().await;
            let after = Instant::now();
            assert!(
                due <= after,
                "tick {i}: due {due:?} returned early, at {after:?}"
            );
            let (prev_due, b, a) = last;
            let on_time = due == prev_due + period;
            let ok = match behavior {
                MissedTickBehavior::Burst => on_time,
                MissedTickBehavior::Delay => {
                    on_time || (due >= b + period && due <= a + period && a > prev_due + TOLERANCE)
                }
                MissedTickBehavior::Skip => {
                    let phase = (due - first).as_nanos() % period.as_nanos() == 0;
                    on_time || (phase && due > b && due <= a + period && a > prev_due + TOLERANCE)
                }
            };
            assert!(
                ok,
                "{behavior:?}, period {period:?}, tick {i}: {due:?} after {prev_due:?} \
                 returned between {b:?} and {a:?}"
            );
            last = (due, before.max(due), after);
        }
        stop.store(true, std::sync::atomic::Ordering::SeqCst);
        other.await.unwrap();
    });
}

#[test]
fn interval_behaviours_hold_under_a_paused_clock_advanced_from_another_task() {
    rounds("interval", interval_round);
}

/// Where a moved sleep is reset, and where it is then awaited.
#[derive(Clone, Copy, Debug)]
enum Place {
    TaskOfA,
    TaskOfB,
    PlainThread,
}

/// An hour's sleeps polled on runtime `a` (so in `a`'s heaps, with `a` idle until the hour),
/// then reset to a few milliseconds from a task of `a`, a task of `b` or a plain thread, and
/// awaited on either runtime: each ends at its new deadline, not an hour later (the wake-up
/// for the earlier deadline reaches whichever runtime holds the timer).
fn hour_sleep_round(seed: u64) {
    let a = gort::Builder::new().procs(2).build().unwrap();
    let b = gort::Builder::new().procs(1).build().unwrap();
    let mut rng = Rng(seed);
    let places = [Place::TaskOfA, Place::TaskOfB, Place::PlainThread];
    let n = 8;
    let sleeps: Vec<Pin<Box<Sleep>>> = a.block_on(async move {
        let mut v = Vec::new();
        for _ in 0..n {
            let mut s = Box::pin(gort::time::sleep(Duration::from_secs(3600)));
            assert!(poll_once(&mut s).await.is_pending());
            v.push(s);
        }
        v
    });
    std::thread::sleep(Duration::from_millis(rng.below(20)));
    let mut joins = Vec::new();
    for mut s in sleeps {
        let d = Duration::from_millis(1 + rng.below(30));
        let (at, then_b) = (places[rng.below(3) as usize], rng.below(2) == 0);
        let reset = move |s: &mut Pin<Box<Sleep>>| {
            let due = Instant::now() + d;
            s.as_mut().reset(due);
            due
        };
        let due = match at {
            Place::TaskOfA => a
                .block_on(a.spawn(async move { (reset(&mut s), s) }))
                .unwrap(),
            Place::TaskOfB => b
                .block_on(b.spawn(async move { (reset(&mut s), s) }))
                .unwrap(),
            Place::PlainThread => std::thread::spawn(move || (reset(&mut s), s))
                .join()
                .unwrap(),
        };
        let rt = if then_b { &b } else { &a };
        let start = std::time::Instant::now();
        joins.push((
            rt.spawn(async move {
                let (due, mut s) = due;
                s.as_mut().await;
                assert!(Instant::now() >= due, "a sleep moved earlier ended early");
            }),
            start,
            at,
            then_b,
        ));
    }
    for (j, start, at, then_b) in joins {
        a.block_on(j).unwrap();
        let took = start.elapsed();
        assert!(
            took < Duration::from_secs(5),
            "an hour's sleep reset to ≤ 30 ms at {at:?} and awaited on {} took {took:?}",
            if then_b { "b" } else { "a" }
        );
    }
}

#[test]
fn hour_sleeps_moved_earlier_from_anywhere_end_at_their_new_deadline() {
    rounds("hour sleep", hour_sleep_round);
}

/// Under a paused clock, `after_func`s of random delays and a ticker, while another task
/// advances the clock by random steps and this one advances, sleeps and receives: after an
/// `advance` returns, every `f` due by then has run, once, and none due later; each ran at
/// or after its due instant (virtual clock); each tick received is on the ticker's phase,
/// not after the clock, and later than the one before.
fn paused_round(seed: u64) {
    use std::sync::atomic::{AtomicBool, AtomicI64, Ordering::SeqCst};
    use std::sync::Arc;
    let rt = gort::Builder::new().procs(2).build().unwrap();
    rt.block_on(async move {
        gort::time::pause();
        let mut rng = Rng(seed);
        let start = Instant::now();
        let funcs: Vec<(
            Instant,
            Arc<AtomicI64>,
            Arc<AtomicI64>,
            gort::time::AfterFunc,
        )> = (0..30)
            .map(|_| {
                let d = Duration::from_micros(rng.below(200_000));
                let (runs, at) = (Arc::new(AtomicI64::new(0)), Arc::new(AtomicI64::new(0)));
                let (r, a) = (runs.clone(), at.clone());
                let f = gort::time::after_func(d, move || {
                    a.store(Instant::now().as_nanos(), SeqCst);
                    r.fetch_add(1, SeqCst);
                });
                (start + d, runs, at, f)
            })
            .collect();
        let period = Duration::from_micros(100 + rng.below(10_000));
        let ticker = gort::time::Ticker::new(period);
        let stop = Arc::new(AtomicBool::new(false));
        let (stop2, mut other_rng) = (stop.clone(), Rng(rng.next()));
        let other = gort::spawn(async move {
            while !stop2.load(SeqCst) {
                gort::time::advance(Duration::from_micros(other_rng.below(5_000))).await;
                gort::yield_now().await;
            }
        });
        let mut last_tick = None;
        for _ in 0..100 {
            match rng.below(3) {
                0 => {
                    gort::time::advance(Duration::from_micros(rng.below(10_000))).await;
                    let now = Instant::now();
                    for (due, runs, at, _) in &funcs {
                        let n = runs.load(SeqCst);
                        if *due <= now {
                            assert_eq!(n, 1, "f due {due:?} ran {n} times by {now:?}");
                            let at = Instant::from_nanos(at.load(SeqCst));
                            assert!(at >= *due, "f due {due:?} ran at {at:?}");
                        }
                    }
                }
                1 => gort::time::sleep(Duration::from_micros(rng.below(3_000))).await,
                _ => {
                    let v = ticker.c().recv().await.unwrap();
                    let now = Instant::now();
                    assert!(v <= now, "tick {v:?} received at {now:?}");
                    let k = (v - start).as_nanos() % period.as_nanos();
                    assert_eq!(
                        k, 0,
                        "tick {v:?} off the phase of {start:?} + n * {period:?}"
                    );
                    if let Some(last) = last_tick {
                        assert!(v > last, "tick {v:?} after {last:?}");
                    }
                    last_tick = Some(v);
                }
            }
        }
        stop.store(true, SeqCst);
        other.await.unwrap();
        let now = Instant::now();
        for (due, runs, _, _) in &funcs {
            let n = runs.load(SeqCst);
            assert!(n <= 1, "f due {due:?} ran {n} times");
            assert!(*due > now || n == 1, "f due {due:?} has not run by {now:?}");
        }
    });
}

#[test]
fn after_funcs_and_a_ticker_under_a_paused_clock_advanced_from_two_tasks() {
    rounds("paused", paused_round);
}

/// Sleeps armed on runtime `a` (polled once there), `a` dropped at a random moment (its
/// shutdown wakes the sleeps still in its heaps), then the sleeps awaited on runtime `b`:
/// each still ends at or after its deadline, never early because its first runtime went.
fn orphaned_sleep_round(seed: u64) {
    let mut rng = Rng(seed);
    let a = gort::Builder::new().procs(2).build().unwrap();
    let b = gort::Builder::new().procs(1).build().unwrap();
    let sleeps: Vec<Pin<Box<Sleep>>> = a.block_on(async {
        let mut v = Vec::new();
        for _ in 0..10 {
            let mut s = Box::pin(gort::time::sleep(Duration::from_micros(rng.below(60_000))));
            let _ = poll_once(&mut s).await;
            v.push(s);
        }
        v
    });
    std::thread::sleep(Duration::from_micros(rng.below(30_000)));
    drop(a);
    let joins: Vec<_> = sleeps
        .into_iter()
        .map(|mut s| {
            b.spawn(async move {
                let due = s.deadline();
                s.as_mut().await;
                let now = Instant::now();
                assert!(
                    now >= due,
                    "a sleep whose runtime was dropped ended {:?} early",
                    due - now
                );
            })
        })
        .collect();
    for j in joins {
        b.block_on(j).unwrap();
    }
}

#[test]
fn sleeps_whose_runtime_was_dropped_still_end_no_earlier_than_their_deadline_elsewhere() {
    rounds("orphaned sleep", orphaned_sleep_round);
}
