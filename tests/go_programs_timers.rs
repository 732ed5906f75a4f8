//! Go's `time.AfterFunc` idioms on gort, under the hostile twists of the Go programs: a
//! debouncer (`t.Reset(quiet)` on every event, from tasks on every P), timers stopped and
//! reset from plain threads while tasks reset them too (checked by exact accounting: every
//! arming either runs its function or is cancelled by a `Stop`/`Reset` that returned true),
//! and callbacks that panic, in `time::after_func` and in `context::after_func`, next to
//! callbacks that must still run; then the runtime dropped with timers pending.

mod support;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::SeqCst};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use gort::context::{self, Context};
use gort::time::after_func;
use support::{rt, within};

/// A debouncer: events from 8 tasks reset one `after_func`; each run flushes what has
/// accumulated. Every event is flushed exactly once, and the last flush comes one quiet
/// period after the last event.
#[test]
fn debounce_reset_from_every_p() {
    for procs in [1, 4] {
        within(move || {
            let rt = rt(procs);
            let pending = Arc::new(Mutex::new(Vec::<u64>::new()));
            let flushed = Arc::new(Mutex::new(Vec::<u64>::new()));
            let flushes = Arc::new(AtomicU64::new(0));
            let quiet = Duration::from_millis(20);
            rt.block_on(async {
                let t = {
                    let (pending, flushed, flushes) =
                        (pending.clone(), flushed.clone(), flushes.clone());
                    Arc::new(after_func(Duration::from_secs(3600), move || {
                        let batch = std::mem::take(&mut *pending.lock().unwrap());
                        flushed.lock().unwrap().extend(batch);
                        flushes.fetch_add(1, SeqCst);
                    }))
                };
                let mut producers = Vec::new();
                for p in 0..8u64 {
                    let (t, pending) = (t.clone(), pending.clone());
                    producers.push(gort::spawn(async move {
                        for i in 0..200u64 {
                            pending.lock().unwrap().push(p * 1000 + i);
                            t.reset(quiet);
                            if i % 10 == 0 {
                                gort::time::sleep(Duration::from_micros(300)).await;
                            }
                        }
                    }));
                }
                for p in producers {
                    p.await.unwrap();
                }
                let start = Instant::now();
                while !pending.lock().unwrap().is_empty() || flushes.load(SeqCst) == 0 {
                    assert!(start.elapsed() < Duration::from_secs(10), "never flushed");
                    gort::time::sleep(Duration::from_millis(1)).await;
                }
                t.stop();
            });
            let mut got = flushed.lock().unwrap().clone();
            got.sort_unstable();
            let want: Vec<u64> = (0..8u64)
                .flat_map(|p| (0..200).map(move |i| p * 1000 + i))
                .collect();
            assert_eq!(got, want, "events lost or flushed twice");
        });
    }
}

/// Per-timer accounting: armings, runs, and the `stop`/`reset` calls that cancelled a
/// pending arming (returned true).
#[derive(Default)]
struct Account {
    arms: AtomicU64,
    runs: AtomicU64,
    cancelled: AtomicU64,
}

/// 64 `after_func` timers of 0-2 ms, reset by tasks on 4 Ps and by two plain threads (which
/// enter the runtime, as `reset` needs its timers), and stopped by two more plain threads
/// (no runtime needed to stop). After a final stop of each and a quiet period, every arming
/// is accounted for: runs + cancelled == arms, exactly.
#[test]
fn stop_and_reset_from_plain_threads_account_exactly() {
    for procs in [1, 4] {
        within(move || {
            let rt = Arc::new(rt(procs));
            let accounts: Vec<Arc<Account>> = (0..64).map(|_| Arc::default()).collect();
            let timers: Arc<Vec<gort::time::AfterFunc>> = Arc::new(rt.block_on(async {
                accounts
                    .iter()
                    .map(|a| {
                        a.arms.fetch_add(1, SeqCst);
                        let a = a.clone();
                        after_func(Duration::from_millis(1), move || {
                            a.runs.fetch_add(1, SeqCst);
                        })
                    })
                    .collect()
            }));
            let accounts = Arc::new(accounts);
            let stop_all = Arc::new(AtomicBool::new(false));
            let mut threads = Vec::new();
            for th in 0..4u64 {
                let (rt, timers, accounts, stop_all) = (
                    rt.clone(),
                    timers.clone(),
                    accounts.clone(),
                    stop_all.clone(),
                );
                threads.push(std::thread::spawn(move || {
                    let _enter = rt.handle().enter();
                    let mut i = th as usize;
                    while !stop_all.load(SeqCst) {
                        let k = i % 64;
                        let a = &accounts[k];
                        if th < 2 {
                            a.arms.fetch_add(1, SeqCst);
                            if timers[k].reset(Duration::from_micros((i % 3) as u64 * 700)) {
                                a.cancelled.fetch_add(1, SeqCst);
                            }
                        } else if timers[k].stop() {
                            a.cancelled.fetch_add(1, SeqCst);
                        }
                        i = i.wrapping_mul(31).wrapping_add(7);
                    }
                }));
            }
            rt.block_on(async {
                let mut tasks = Vec::new();
                for w in 0..4usize {
                    let (timers, accounts) = (timers.clone(), accounts.clone());
                    tasks.push(gort::spawn(async move {
                        for i in 0..2000usize {
                            let k = (i * 7 + w) % 64;
                            accounts[k].arms.fetch_add(1, SeqCst);
                            if timers[k].reset(Duration::from_micros((i % 4) as u64 * 500)) {
                                accounts[k].cancelled.fetch_add(1, SeqCst);
                            }
                            if i % 50 == 0 {
                                gort::time::sleep(Duration::from_micros(200)).await;
                            }
                        }
                    }));
                }
                for t in tasks {
                    t.await.unwrap();
                }
            });
            stop_all.store(true, SeqCst);
            for t in threads {
                t.join().unwrap();
            }
            for (t, a) in timers.iter().zip(accounts.iter()) {
                if t.stop() {
                    a.cancelled.fetch_add(1, SeqCst);
                }
            }
            // A run that was started just before the final stop may still be on its way.
            rt.block_on(gort::time::sleep(Duration::from_millis(50)));
            for (k, a) in accounts.iter().enumerate() {
                let (arms, runs, cancelled) = (
                    a.arms.load(SeqCst),
                    a.runs.load(SeqCst),
                    a.cancelled.load(SeqCst),
                );
                assert_eq!(
                    runs + cancelled,
                    arms,
                    "timer {k}: {runs} runs + {cancelled} cancelled"
                );
            }
        });
    }
}

/// `after_func` callbacks that panic, half of 400, among callbacks that count: every
/// counting callback runs, the runtime keeps its Ms and goes on running tasks; the same for
/// `context::after_func` callbacks started by one cancel. Then the runtime is dropped with
/// 100 panicking callbacks still pending.
#[test]
fn panicking_callbacks_hurt_nobody_else() {
    for procs in [1, 4] {
        within(move || {
            let rt = rt(procs);
            let ran = Arc::new(AtomicU64::new(0));
            rt.block_on(async {
                let mut keep = Vec::new();
                for i in 0..400u64 {
                    let ran = ran.clone();
                    keep.push(after_func(Duration::from_micros(i * 10), move || {
                        if i % 2 == 0 {
                            panic!("callback {i} panicked");
                        }
                        ran.fetch_add(1, SeqCst);
                    }));
                }
                let (ctx, cancel) = context::with_cancel(&Context::background());
                let mut stops = Vec::new();
                for i in 0..100u64 {
                    let ran = ran.clone();
                    stops.push(context::after_func(&ctx, move || {
                        if i % 2 == 0 {
                            panic!("context callback {i} panicked");
                        }
                        ran.fetch_add(1, SeqCst);
                    }));
                }
                cancel.cancel();
                let start = Instant::now();
                while ran.load(SeqCst) < 250 {
                    assert!(
                        start.elapsed() < Duration::from_secs(10),
                        "only {} callbacks ran",
                        ran.load(SeqCst)
                    );
                    gort::time::sleep(Duration::from_millis(1)).await;
                }
                // The runtime still runs tasks on every P.
                let mut hs = Vec::new();
                for i in 0..100u64 {
                    hs.push(gort::spawn(async move { i }));
                }
                let mut sum = 0;
                for h in hs {
                    sum += h.await.unwrap();
                }
                assert_eq!(sum, 4950);
                for i in 0..100u64 {
                    drop(after_func(Duration::from_millis(5 + i), move || {
                        panic!("pending callback {i}")
                    }));
                }
            });
            assert_eq!(ran.load(SeqCst), 250);
            support::drop_within(rt, Duration::from_secs(10), "runtime drop hung");
        });
    }
}

/// Where the ticker is, for [`ticker_stopped_and_reset_from_a_plain_thread`].
#[derive(Clone, Copy, Debug)]
enum TickerState {
    Running,
    /// Stopped; `stop` returned at this instant.
    Stopped(gort::time::Instant),
}

/// A task selects on a 1 ms `Ticker` and a quit channel while a plain thread (entered in
/// the runtime) stops it and resets it again and again. No tick due after a `stop` returned
/// is ever received before the next `reset` (the ticker's timer does not fire once
/// stopped); ticks keep coming after each reset (none lost for good).
#[test]
fn ticker_stopped_and_reset_from_a_plain_thread() {
    for procs in [1, 4] {
        within(move || {
            let rt = Arc::new(rt(procs));
            let ticker =
                Arc::new(rt.block_on(async { gort::time::Ticker::new(Duration::from_millis(1)) }));
            let state = Arc::new(Mutex::new(TickerState::Running));
            let (quit_tx, quit) = gort::chan::bounded::<()>(0);
            let receiver = {
                let (ticker, state) = (ticker.clone(), state.clone());
                rt.spawn(async move {
                    let mut ticks = 0u64;
                    loop {
                        gort::select! {
                            t = ticker.c().recv() => {
                                let due = t.unwrap();
                                if let TickerState::Stopped(at) = *state.lock().unwrap() {
                                    assert!(due <= at, "a tick due {:?} after the stop", due - at);
                                }
                                ticks += 1;
                            }
                            _ = quit.recv() => return ticks,
                        }
                    }
                })
            };
            {
                let _enter = rt.handle().enter();
                for round in 0..100 {
                    {
                        let mut s = state.lock().unwrap();
                        ticker.stop();
                        *s = TickerState::Stopped(gort::time::Instant::now());
                    }
                    std::thread::sleep(Duration::from_micros(500 + 30 * (round % 50)));
                    {
                        let mut s = state.lock().unwrap();
                        ticker.reset(Duration::from_millis(1));
                        *s = TickerState::Running;
                    }
                    std::thread::sleep(Duration::from_millis(2));
                }
            }
            quit_tx.close();
            let ticks = rt.block_on(receiver).unwrap();
            // 100 running windows of 2 ms each at 1 ms: at least a few ticks, whatever the load.
            assert!(ticks > 0, "procs {procs}: no tick after any reset");
        });
    }
}
