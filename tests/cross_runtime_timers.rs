//! A timer left pending on one runtime's heap and moved earlier from another runtime fires at
//! its new instant: the wake-up for the earlier deadline goes to the runtime whose heap holds
//! the timer, not to the caller's (which would let the owner's Ms sleep on until the old
//! deadline, an hour here).

use std::sync::mpsc;
use std::time::{Duration, Instant};

const HOUR: Duration = Duration::from_secs(3600);
/// How long the moved timer may take: its 30 ms, plus any amount of scheduling noise, far
/// below the hour it would otherwise wait.
const BOUND: Duration = Duration::from_secs(10);

/// Two runtimes of one P each, `a` idle long enough that its Ms sleep in the poller until
/// its earliest timer.
fn two_runtimes() -> (gort::Runtime, gort::Runtime) {
    let a = gort::Builder::new().procs(1).build().unwrap();
    let b = gort::Builder::new().procs(1).build().unwrap();
    (a, b)
}

fn settle() {
    std::thread::sleep(Duration::from_millis(50));
}

/// An `after_func` armed on `a` an hour ahead, whose firing reports the instant it ran.
fn hour_after_func(a: &gort::Runtime) -> (gort::time::AfterFunc, mpsc::Receiver<Instant>) {
    let (tx, rx) = mpsc::channel();
    let af = a.block_on(async move {
        gort::time::after_func(HOUR, move || {
            let _ = tx.send(Instant::now());
        })
    });
    (af, rx)
}

fn fired_within(rx: &mpsc::Receiver<Instant>, since: Instant) -> Duration {
    let at = rx
        .recv_timeout(BOUND)
        .expect("the timer moved earlier did not fire: its runtime was not woken");
    at.saturating_duration_since(since)
}

#[test]
fn an_after_func_moved_earlier_by_a_task_of_another_runtime_fires_on_time() {
    let (a, b) = two_runtimes();
    let (af, rx) = hour_after_func(&a);
    settle();
    let start = Instant::now();
    let pending = b
        .block_on(b.spawn(async move { af.reset(Duration::from_millis(30)) }))
        .unwrap();
    assert!(pending, "the after_func was pending on `a`");
    let took = fired_within(&rx, start);
    assert!(took < BOUND, "fired {took:?} after the reset");
}

#[test]
fn an_after_func_moved_earlier_from_another_runtimes_block_on_fires_on_time() {
    let (a, b) = two_runtimes();
    let (af, rx) = hour_after_func(&a);
    settle();
    let start = Instant::now();
    assert!(b.block_on(async { af.reset(Duration::from_millis(30)) }));
    fired_within(&rx, start);
}

#[test]
fn a_channel_timer_waited_on_one_runtime_and_reset_from_another_delivers_on_time() {
    let (a, b) = two_runtimes();
    let t = std::sync::Arc::new(a.block_on(async { gort::time::Timer::new(HOUR) }));
    let (tx, rx) = mpsc::channel();
    let waiter = a.spawn({
        let t = t.clone();
        async move {
            t.c().recv().await.expect("the timer's value");
            let _ = tx.send(Instant::now());
        }
    });
    settle();
    let start = Instant::now();
    b.block_on(b.spawn(async move { t.reset(Duration::from_millis(30)) }))
        .unwrap();
    fired_within(&rx, start);
    a.block_on(waiter).unwrap();
}
