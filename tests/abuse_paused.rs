//! The paused clock (`gort::time::{pause, resume, advance}`) abused as test code uses it:
//! far jumps, `resume` in the middle of an `advance`, several tasks moving one clock, timers
//! changed from plain threads while the clock jumps.

mod support;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use gort::time::Instant;
use support::{paused, within};

const YEAR: Duration = Duration::from_secs(365 * 24 * 3600);

#[test]
fn a_paused_sleep_of_two_centuries_returns_at_its_instant() {
    within(|| {
        paused(1).block_on(async {
            let start = Instant::now();
            gort::time::sleep(200 * YEAR).await;
            assert_eq!(Instant::now() - start, 200 * YEAR);
        });
    });
}

#[test]
fn advancing_a_paused_clock_by_two_centuries_moves_it_exactly() {
    within(|| {
        paused(2).block_on(async {
            let start = Instant::now();
            gort::time::advance(200 * YEAR).await;
            assert_eq!(Instant::now() - start, 200 * YEAR);
            gort::time::sleep(Duration::from_secs(1)).await;
            assert_eq!(Instant::now() - start, 200 * YEAR + Duration::from_secs(1));
        });
    });
}

#[test]
fn resume_while_another_task_advances_an_hour_ends_that_advance() {
    within(|| {
        paused(2).block_on(async {
            let start = Instant::now();
            // An hour-long advance on a clock someone resumes midway: on a running clock the
            // rest of that hour would pass in real time.
            let advancing = gort::spawn(gort::time::advance(Duration::from_secs(3600)));
            let _never = gort::spawn(async {
                // Keeps a timer between now and the target, so the advance stops on the way.
                gort::time::sleep(Duration::from_secs(1800)).await;
                std::future::pending::<()>().await;
            });
            gort::time::sleep(Duration::from_secs(600)).await;
            gort::time::resume();
            let real = std::time::Instant::now();
            advancing.await.unwrap();
            assert!(
                real.elapsed() < Duration::from_secs(10),
                "{:?}",
                real.elapsed()
            );
            assert!(Instant::now() - start >= Duration::from_secs(600));
        });
    });
}

#[test]
fn sleeps_pending_at_resume_end_after_their_remaining_real_time() {
    within(|| {
        paused(2).block_on(async {
            let start = Instant::now();
            let sleeper = gort::spawn(async move {
                gort::time::sleep(Duration::from_millis(300)).await;
                Instant::now()
            });
            gort::time::advance(Duration::from_millis(100)).await;
            gort::time::resume();
            let real = std::time::Instant::now();
            let woke = sleeper.await.unwrap();
            let waited = real.elapsed();
            assert!(
                woke - start >= Duration::from_millis(300),
                "{:?}",
                woke - start
            );
            // The 200 ms left pass in real time: not at once, not never.
            assert!(waited >= Duration::from_millis(150), "{waited:?}");
            assert!(waited < Duration::from_secs(10), "{waited:?}");
        });
    });
}

#[test]
fn instant_now_never_goes_back_while_the_clock_is_paused_jumped_and_resumed() {
    within(|| {
        let rt = gort::Builder::new().procs(2).build().unwrap();
        let handle = rt.handle().clone();
        rt.block_on(async move {
            // Paused once before the readers start (see `RuntimeClock::now` on a first pause
            // racing a reader).
            gort::time::pause();
            gort::time::resume();
            let stop = Arc::new(AtomicBool::new(false));
            // Plain threads inside the runtime's context read its clock in a loop while a
            // task pauses, jumps and resumes it.
            let readers: Vec<_> = (0..2)
                .map(|_| {
                    let (stop, handle) = (stop.clone(), handle.clone());
                    std::thread::spawn(move || {
                        let _in = handle.enter();
                        let mut last = Instant::now();
                        let mut reads = 0u64;
                        while !stop.load(Ordering::Relaxed) {
                            let now = Instant::now();
                            assert!(now >= last, "went back by {:?}", last - now);
                            last = now;
                            reads += 1;
                        }
                        reads
                    })
                })
                .collect();
            let start = Instant::now();
            for round in 0..300u64 {
                gort::time::pause();
                gort::time::advance(Duration::from_micros(round % 7)).await;
                gort::time::resume();
                gort::yield_now().await;
            }
            assert!(Instant::now() - start >= Duration::from_micros(900));
            stop.store(true, Ordering::Relaxed);
            for r in readers {
                assert!(r.join().unwrap() > 0);
            }
        });
    });
}

#[test]
fn several_tasks_advancing_one_clock_all_return_and_fire_every_timer_once() {
    within(|| {
        paused(2).block_on(async {
            let start = Instant::now();
            let fired = Arc::new(std::sync::atomic::AtomicUsize::new(0));
            let sleepers: Vec<_> = (1..=100u64)
                .map(|i| {
                    let fired = fired.clone();
                    gort::spawn(async move {
                        gort::time::sleep(Duration::from_millis(i * 10)).await;
                        fired.fetch_add(1, Ordering::SeqCst);
                        Instant::now() - start
                    })
                })
                .collect();
            let advancers: Vec<_> = (1..=8u64)
                .map(|i| gort::spawn(gort::time::advance(Duration::from_millis(i * 125))))
                .collect();
            for a in advancers {
                a.await.unwrap();
            }
            assert!(Instant::now() - start >= Duration::from_millis(1000));
            for (i, s) in sleepers.into_iter().enumerate() {
                assert_eq!(s.await.unwrap(), Duration::from_millis((i as u64 + 1) * 10));
            }
            assert_eq!(fired.load(Ordering::SeqCst), 100);
        });
    });
}

#[test]
fn timers_reset_and_stopped_from_a_plain_thread_while_the_clock_jumps() {
    within(|| {
        let rt = paused(2);
        let handle = rt.handle().clone();
        rt.block_on(async move {
            let timers: Arc<Vec<gort::time::Timer>> = Arc::new(
                (0..16)
                    .map(|i| gort::time::Timer::new(Duration::from_millis(10 + i)))
                    .collect(),
            );
            let stop = Arc::new(AtomicBool::new(false));
            let churn = {
                let (timers, stop) = (timers.clone(), stop.clone());
                std::thread::spawn(move || {
                    // A plain thread inside the runtime's context: it reads the paused clock.
                    let _in = handle.enter();
                    let mut i = 0u64;
                    while !stop.load(Ordering::Relaxed) {
                        let t = &timers[(i % 16) as usize];
                        if i % 3 == 0 {
                            t.stop();
                        } else {
                            t.reset(Duration::from_millis(1 + i % 50));
                        }
                        i += 1;
                        if i % 256 == 0 {
                            std::thread::yield_now();
                        }
                    }
                })
            };
            let start = Instant::now();
            for _ in 0..50 {
                gort::time::advance(Duration::from_millis(20)).await;
                for t in timers.iter() {
                    let _ = t.c().try_recv();
                }
            }
            assert_eq!(Instant::now() - start, Duration::from_millis(1000));
            stop.store(true, Ordering::Relaxed);
            churn.join().unwrap();
            // Quiet again: every timer still works on the paused clock.
            for t in timers.iter() {
                t.reset(Duration::from_millis(5));
            }
            for t in timers.iter() {
                let at = t.c().recv().await.unwrap();
                assert!(at >= start);
            }
        });
    });
}

#[test]
fn resume_from_an_after_func_callback_ends_the_advance_waiting_on_it() {
    within(|| {
        paused(2).block_on(async {
            let start = Instant::now();
            let _af = gort::time::after_func(Duration::from_secs(1), gort::time::resume);
            let _far = gort::spawn(gort::time::sleep(Duration::from_secs(7200)));
            let real = std::time::Instant::now();
            gort::time::advance(Duration::from_secs(3600)).await;
            assert!(!gort::time::is_paused());
            assert!(
                real.elapsed() < Duration::from_secs(10),
                "{:?}",
                real.elapsed()
            );
            let at = Instant::now() - start;
            assert!(
                at >= Duration::from_secs(1) && at < Duration::from_secs(3600),
                "{at:?}"
            );
        });
    });
}

#[test]
fn advance_from_block_on_in_a_blocking_closure_moves_the_clock() {
    within(|| {
        let rt = paused(2);
        let handle = rt.handle().clone();
        rt.block_on(async move {
            let start = Instant::now();
            let sleeper = gort::spawn(async move {
                gort::time::sleep(Duration::from_secs(30)).await;
                Instant::now() - start
            });
            let moved = gort::spawn_blocking(move || {
                handle.block_on(async {
                    gort::time::advance(Duration::from_secs(60)).await;
                    Instant::now()
                })
            })
            .await
            .unwrap();
            assert_eq!(moved - start, Duration::from_secs(60));
            assert_eq!(sleeper.await.unwrap(), Duration::from_secs(30));
        });
    });
}

#[test]
fn pausing_from_a_task_lets_block_ons_earlier_sleep_end_by_a_jump() {
    within(|| {
        let rt = gort::Builder::new().procs(2).build().unwrap();
        rt.block_on(async {
            let start = Instant::now();
            gort::spawn(async { gort::time::pause() });
            let real = std::time::Instant::now();
            gort::time::sleep(Duration::from_secs(3600)).await;
            assert!(gort::time::is_paused());
            assert!(
                real.elapsed() < Duration::from_secs(10),
                "{:?}",
                real.elapsed()
            );
            assert!(Instant::now() - start >= Duration::from_secs(3600));
        });
    });
}

#[test]
fn dropping_a_paused_runtime_with_an_advance_in_flight_returns() {
    within(|| {
        let rt = paused(2);
        rt.block_on(async {
            let (_tx, rx) = gort::chan::bounded::<()>(0);
            // Blocked for good on a channel, and an advance whose target a socket-free,
            // timer-free runtime reaches at once; plus one that waits behind a busy task.
            gort::spawn(async move {
                let _ = rx.recv().await;
            });
            gort::spawn(gort::time::advance(Duration::from_secs(3600)));
            gort::spawn(async {
                loop {
                    gort::yield_now().await;
                }
            });
            gort::spawn(gort::time::advance(Duration::from_secs(60)));
            gort::yield_now().await;
        });
        drop(rt);
    });
}

#[test]
fn pause_resume_and_advance_racing_from_several_tasks_panic_clearly_or_return() {
    within(|| {
        let rt = gort::Builder::new().procs(3).build().unwrap();
        rt.block_on(async {
            let start = Instant::now();
            let sleepers: Vec<_> = (1..=20u64)
                .map(|i| {
                    gort::spawn(async move {
                        gort::time::sleep(Duration::from_millis(i)).await;
                        Instant::now() - start >= Duration::from_millis(i)
                    })
                })
                .collect();
            let togglers: Vec<_> = (0..3)
                .map(|t| {
                    gort::spawn(async move {
                        let mut clear = 0u32;
                        for round in 0..200u64 {
                            let step = gort::spawn(async move {
                                match (t + round) % 3 {
                                    0 => gort::time::pause(),
                                    1 => gort::time::resume(),
                                    _ => gort::time::advance(Duration::from_micros(round)).await,
                                }
                            });
                            if let Err(e) = step.await {
                                let msg = support::panic_message(e.into_panic());
                                assert!(
                                    msg.contains("already paused") || msg.contains("not paused"),
                                    "unclear panic: {msg:?}"
                                );
                                clear += 1;
                            }
                            gort::yield_now().await;
                        }
                        clear
                    })
                })
                .collect();
            for t in togglers {
                t.await.unwrap();
            }
            if gort::time::is_paused() {
                gort::time::resume();
            }
            for s in sleepers {
                assert!(s.await.unwrap(), "a sleep ended before its deadline");
            }
        });
    });
}
