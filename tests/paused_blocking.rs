//! The paused clock and threads that wait on the runtime: a `block_on` parked on a
//! blocking-pool thread, on a thread of the user's own or inside `block_in_place` holds the
//! clock only while its future runs, so its sleeps end by the clock's jump; a blocking
//! closure that runs user code (a `std::thread::sleep`) holds the clock until it returns.
//!
//! Every scenario runs under a watchdog: a regression that stops the clock fails the test
//! after a minute instead of hanging the suite.

use gort::runtime::Handle;
use gort::time::Instant;
use gort::{Builder, Runtime};
use std::sync::mpsc;
use std::time::Duration;

const HOUR: Duration = Duration::from_secs(3600);

/// Runs `scenario` on a thread of its own and returns its result, or fails if it did not
/// finish within a minute of real time (the clock stopped: the scenario would hang).
fn within_a_minute<R: Send + 'static>(scenario: impl FnOnce() -> R + Send + 'static) -> R {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(scenario));
        let _ = tx.send(result);
    });
    match rx.recv_timeout(Duration::from_secs(60)) {
        Ok(Ok(v)) => v,
        Ok(Err(panic)) => std::panic::resume_unwind(panic),
        Err(_) => panic!("the paused clock never moved: the scenario hung for a minute"),
    }
}

fn paused(procs: usize) -> Runtime {
    Builder::new()
        .procs(procs)
        .start_paused(true)
        .build()
        .unwrap()
}

/// How much virtual time a future took to run.
async fn timed<F: std::future::Future>(future: F) -> (F::Output, Duration) {
    let start = Instant::now();
    let out = future.await;
    (out, start.elapsed())
}

/// The user trial's case: a blocking closure bridges back to async code with the runtime's
/// handle and sleeps there. Its thread is parked in `block_on`, not running user code, so the
/// clock jumps over the hour.
#[test]
fn block_on_in_spawn_blocking_sleeps_on_a_paused_clock() {
    let slept = within_a_minute(|| {
        let rt = paused(2);
        let handle = rt.handle().clone();
        let job = rt.spawn_blocking(move || handle.block_on(timed(gort::time::sleep(HOUR))));
        rt.block_on(job).unwrap().1
    });
    assert_eq!(slept, HOUR);
}

/// The same from a task, with `Handle::current()`, and a second sleeper in the runtime: both
/// end at their own instants, and the task sees the closure's result.
#[test]
fn block_on_in_spawn_blocking_from_a_task_with_other_sleepers() {
    let (job, ticker) = within_a_minute(|| {
        let rt = paused(2);
        rt.block_on(rt.spawn(async {
            let start = Instant::now();
            let ticker = gort::spawn(async move {
                gort::time::sleep(HOUR / 4).await;
                start.elapsed()
            });
            let job = gort::spawn_blocking(move || {
                Handle::current().block_on(async move {
                    gort::time::sleep(HOUR).await;
                    start.elapsed()
                })
            });
            (job.await.unwrap(), ticker.await.unwrap())
        }))
        .unwrap()
    });
    assert_eq!((job, ticker), (HOUR, HOUR / 4));
}

/// A thread of the user's own (not the runtime's) parked in `block_on` holds nothing either,
/// while the runtime's own `block_on` waits for its answer on a channel. The start is read
/// before the thread runs: the clock may jump for its sleep before the second `block_on`
/// here begins (nothing holds the clock meanwhile).
#[test]
fn block_on_on_a_users_thread_sleeps_on_a_paused_clock() {
    let (theirs, ours) = within_a_minute(|| {
        let rt = paused(2);
        let start = rt.block_on(async { Instant::now() });
        let handle = rt.handle().clone();
        let (tx, rx) = gort::chan::bounded(1);
        let thread = std::thread::spawn(move || {
            let slept = handle.block_on(async move {
                let (_, slept) = timed(gort::time::sleep(HOUR)).await;
                tx.send(()).await.unwrap();
                slept
            });
            slept
        });
        let ours = rt.block_on(async move {
            rx.recv().await.unwrap();
            start.elapsed()
        });
        (thread.join().unwrap(), ours)
    });
    assert_eq!((theirs, ours), (HOUR, HOUR));
}

/// Tokio's bridge, nested: a task's `block_in_place` starts a blocking closure and waits for
/// it with `block_on`; the closure waits for a sleep with `block_on` too. Two parked threads,
/// neither holding the clock.
#[test]
fn block_on_in_spawn_blocking_in_block_in_place_sleeps() {
    let slept = within_a_minute(|| {
        let rt = paused(2);
        rt.block_on(rt.spawn(async {
            let start = Instant::now();
            gort::block_in_place(move || {
                let job = gort::spawn_blocking(move || {
                    Handle::current().block_on(gort::time::sleep(HOUR));
                    start.elapsed()
                });
                Handle::current().block_on(job).unwrap()
            })
        }))
        .unwrap()
    });
    assert_eq!(slept, HOUR);
}

/// While the parked thread's future runs (here a real 100 ms `std::thread::sleep` inside the
/// future, after its timer woke it) it holds the clock as a running task does, and so does
/// the closure's own code after `block_on` returned: a sleeper due a virtual millisecond
/// later waits for both.
#[test]
fn a_blocking_closure_holds_the_clock_while_its_future_or_its_code_runs() {
    let (inside, after, sleeper) = within_a_minute(|| {
        let rt = paused(2);
        rt.block_on(rt.spawn(async {
            let start = Instant::now();
            let job = gort::spawn_blocking(move || {
                let inside = Handle::current().block_on(async {
                    gort::time::sleep(HOUR).await;
                    let woke = Instant::now();
                    std::thread::sleep(Duration::from_millis(100));
                    Instant::now() - woke
                });
                let back = Instant::now();
                std::thread::sleep(Duration::from_millis(100));
                (inside, Instant::now() - back)
            });
            let sleeper = gort::spawn(async move {
                gort::time::sleep(HOUR + Duration::from_millis(1)).await;
                start.elapsed()
            });
            let (inside, after) = job.await.unwrap();
            (inside, after, sleeper.await.unwrap())
        }))
        .unwrap()
    });
    assert_eq!(
        inside,
        Duration::ZERO,
        "the clock moved under a running future"
    );
    assert_eq!(
        after,
        Duration::ZERO,
        "the clock moved under the closure's code"
    );
    assert_eq!(sleeper, HOUR + Duration::from_millis(1));
}

/// A blocking closure that sleeps in real time (`std::thread::sleep`, a blocking read) runs
/// user code the whole time: the clock does not jump past it (as Tokio since 1.24), so a
/// `timeout` of the task waiting for it does not fire on a paused clock; once it returns,
/// the clock moves again.
#[test]
fn a_blocking_closure_that_sleeps_in_real_time_holds_the_clock_until_it_returns() {
    let (job, waited) = within_a_minute(|| {
        let rt = paused(2);
        rt.block_on(async {
            let start = Instant::now();
            let job = gort::spawn_blocking(move || {
                std::thread::sleep(Duration::from_millis(200));
                start.elapsed()
            });
            let job = gort::time::timeout(Duration::from_secs(1), job).await;
            let job = job.expect("the clock jumped past a running blocking closure");
            gort::time::sleep(HOUR).await;
            (job.unwrap(), start.elapsed())
        })
    });
    assert_eq!((job, waited), (Duration::ZERO, HOUR));
}

/// A panic in the future a blocking closure waits for gives every hold back: the one its
/// `block_on` lent out and the one the woken future held. The clock still jumps.
#[test]
fn a_panic_in_block_on_in_spawn_blocking_leaves_the_paused_clock_free() {
    let slept = within_a_minute(|| {
        let rt = paused(2);
        let handle = rt.handle().clone();
        let job = rt.spawn_blocking(move || {
            handle.block_on(async {
                gort::time::sleep(HOUR).await;
                panic!("in the bridged future");
            })
        });
        let err = rt.block_on(job).unwrap_err();
        assert!(err.is_panic());
        // The sleep is made inside the runtime: its deadline is on the virtual clock.
        rt.block_on(async { timed(gort::time::sleep(HOUR)).await.1 })
    });
    assert_eq!(slept, HOUR);
}

/// The same when the closure panics after its `block_on` returned: the job's hold is given
/// back as the task catches the panic.
#[test]
fn a_panic_in_a_blocking_closure_after_block_on_leaves_the_paused_clock_free() {
    let slept = within_a_minute(|| {
        let rt = paused(1);
        rt.block_on(async {
            let job = gort::spawn_blocking(|| {
                Handle::current().block_on(gort::time::sleep(HOUR));
                panic!("after the bridge");
            });
            assert!(job.await.unwrap_err().is_panic());
            timed(gort::time::sleep(HOUR)).await.1
        })
    });
    assert_eq!(slept, HOUR);
}

/// Many bridged sleepers at once, mixed with task sleepers, on 4 Ps: each wakes at exactly
/// its own deadline (a clock that jumped while a woken future had not run yet would make one
/// late), and the clock ends at the last deadline.
#[test]
fn many_bridged_sleepers_each_wake_at_their_deadline() {
    let (late, (ended, last)) = within_a_minute(|| {
        let rt = paused(4);
        rt.block_on(async {
            let start = Instant::now();
            let mut jobs = Vec::new();
            for i in 1..=48u64 {
                let d = Duration::from_secs(60 * ((i * 37) % 97 + 1));
                if i % 3 == 0 {
                    jobs.push(gort::spawn(async move {
                        gort::time::sleep(d).await;
                        (start.elapsed(), d)
                    }));
                } else {
                    jobs.push(gort::spawn(async move {
                        gort::spawn_blocking(move || {
                            Handle::current().block_on(gort::time::sleep(d));
                            (start.elapsed(), d)
                        })
                        .await
                        .unwrap()
                    }));
                }
            }
            let (mut late, mut last) = (Vec::new(), Duration::ZERO);
            for job in jobs {
                let (woke, due) = job.await.unwrap();
                if woke != due {
                    late.push((woke, due));
                }
                last = last.max(due);
            }
            (late, (start.elapsed(), last))
        })
    });
    assert!(late.is_empty(), "woke off their deadlines: {late:?}");
    assert_eq!(ended, last, "the clock did not end at the last deadline");
}

/// `block_in_place` inside `block_on`'s own future (no P there), bridging back with a
/// `block_on` of the same runtime: the outer poll's hold of the clock is lent out while the
/// inner `block_on` parks, so its sleep ends by the clock's jump (a worker's
/// `block_in_place` does the same; this one panicked before, as `block_on` inside `block_on`).
#[test]
fn block_on_in_block_in_place_in_block_on_sleeps() {
    let slept = within_a_minute(|| {
        let rt = paused(2);
        rt.block_on(async {
            gort::block_in_place(|| Handle::current().block_on(timed(gort::time::sleep(HOUR))))
        })
        .1
    });
    assert_eq!(slept, HOUR);
}
