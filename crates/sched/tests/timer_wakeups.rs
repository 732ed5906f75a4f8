//! How many Ms a timer wakes. A task that sleeps in a loop on an idle runtime arms each sleep
//! on the M that came back from the poller to run it, while nobody polls: Go's
//! `wakeNetPoller` woke a parked M for it (which took the poller role while the first M
//! parked), a futex round trip per sleep. The M that armed it now owes that wake-up and pays
//! it only if it runs another task before it polls itself (park.rs, `wake_netpoller`).

use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::Arc;
use std::time::{Duration, Instant};

const SLEEPS: u64 = 300;

fn two_ps() -> gort::Runtime {
    gort::Builder::new().procs(2).build().unwrap()
}

/// Parked Ms woken (and poller wake-ups) while a task on an otherwise idle runtime of 2 Ps
/// waits `SLEEPS` times on `wait`, after a warm-up that lets both Ms start and go idle.
fn parked_ms_woken<W, F>(mut wait: W) -> (u64, u64)
where
    W: FnMut() -> F + Send + 'static,
    F: std::future::Future<Output = ()> + Send,
{
    let rt = two_ps();
    rt.block_on(rt.spawn(async move {
        for _ in 0..20 {
            wait().await;
        }
        let h = gort::Handle::current();
        let before = h.metrics();
        for _ in 0..SLEEPS {
            wait().await;
        }
        let after = h.metrics();
        (
            after.ms_woken - before.ms_woken,
            after.poller_wakeups - before.poller_wakeups,
        )
    }))
    .unwrap()
}

/// A task sleeps 1 ms in a loop on an otherwise idle runtime of 2 Ps: the poller M wakes for
/// each sleep and runs the task itself; no parked M is woken per sleep (before: one each).
#[test]
fn a_task_sleeping_in_a_loop_wakes_no_parked_m_per_sleep() {
    let (woken, polls) = parked_ms_woken(|| gort::time::sleep(Duration::from_millis(1)));
    // Generous: sysmon's looks, a parked M's backstop or a stray hand-off may cost a few.
    assert!(
        woken < SLEEPS / 10,
        "{woken} parked Ms woken for {SLEEPS} sleeps (poller wake-ups: {polls})"
    );
}

/// The same with an `Interval`, whose sleep is re-armed by the poll that waits for the next
/// tick.
#[test]
fn an_interval_wakes_no_parked_m_per_tick() {
    let interval = Arc::new(std::sync::Mutex::new(gort::time::interval(
        Duration::from_millis(1),
    )));
    let (woken, polls) = parked_ms_woken(move || {
        let interval = interval.clone();
        async move { std::future::poll_fn(|cx| interval.lock().unwrap().poll_tick(cx).map(drop)).await }
    });
    assert!(
        woken < SLEEPS / 10,
        "{woken} parked Ms woken for {SLEEPS} ticks (poller wake-ups: {polls})"
    );
}

/// A timer that wakes someone else (an `after_func` here), armed by a task that then computes
/// in the same poll while the other P idles and nobody polls: an M is woken (or started) at
/// once to poll for it (Go's rule), not left to the computing M's next round or to sysmon.
/// Only a `Sleep`, whose firing wakes the very task that armed it, lets its M owe the
/// wake-up. The timer is due after the check, so that nothing else (its firing, sysmon's
/// look) wakes an M in between.
#[test]
fn a_timer_armed_by_a_task_that_computes_wakes_an_m_to_poll_for_it() {
    let started = Arc::new(AtomicUsize::new(0));
    let counter = started.clone();
    let rt = gort::Builder::new()
        .procs(2)
        .on_thread_start(move || {
            counter.fetch_add(1, SeqCst);
        })
        .build()
        .unwrap();
    let woken = rt
        .block_on(rt.spawn(async move {
            // The other M, if any, goes idle; this one comes back from the poller.
            gort::time::sleep(Duration::from_millis(20)).await;
            let h = gort::Handle::current();
            let (woken, threads) = (h.metrics().ms_woken, started.load(SeqCst));
            let _t = gort::time::after_func(Duration::from_millis(500), || {});
            let start = Instant::now();
            while start.elapsed() < Duration::from_millis(100) {
                std::hint::spin_loop();
            }
            h.metrics().ms_woken - woken + (started.load(SeqCst) - threads) as u64
        }))
        .unwrap();
    assert!(
        woken >= 1,
        "no M woken or started for a timer armed by a task that then computed"
    );
}
