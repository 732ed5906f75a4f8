//! The counters of `Runtime::metrics` and `Runtime::proc_metrics` move when the thing they
//! count happens: a steal, a poller wake-up by a socket, a fired timer. Real threads and a
//! real loopback socket; each wait gives up after 20 s so that a regression fails instead of
//! hanging.
#![cfg(not(loom))]

use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::Arc;
use std::time::{Duration, Instant};

const GIVE_UP: Duration = Duration::from_secs(20);

/// Guards `tasks_stolen`: a task on one P spawns tasks into its own queue and spins without
/// yielding until the other P's M has run them, which it can only do by stealing. The last
/// spawned sits in the spinner's `runnext` slot, which thieves leave alone, so the spinner
/// waits for all but one.
#[test]
fn steals_are_counted_on_the_thief_p() {
    const SPAWNED: usize = 16;
    let rt = gort::Builder::new().procs(2).build().unwrap();
    let ran = Arc::new(AtomicUsize::new(0));
    let all_ran = rt.block_on({
        let ran = ran.clone();
        rt.spawn(async move {
            for _ in 0..SPAWNED {
                let ran = ran.clone();
                gort::spawn(async move {
                    ran.fetch_add(1, SeqCst);
                });
            }
            let give_up = Instant::now() + GIVE_UP;
            while ran.load(SeqCst) < SPAWNED - 1 && Instant::now() < give_up {
                std::hint::spin_loop();
            }
            ran.load(SeqCst) >= SPAWNED - 1
        })
    });
    assert!(
        all_ran.unwrap(),
        "the other P never stole the spawned tasks"
    );
    let m = rt.metrics();
    let per_p: Vec<u64> = rt.proc_metrics().iter().map(|p| p.tasks_stolen).collect();
    assert!(m.tasks_stolen >= 1, "no steal counted: {m:?}");
    assert!(
        m.tasks_stolen <= SPAWNED as u64,
        "more tasks stolen than there were: {m:?}"
    );
    assert_eq!(per_p.iter().sum::<u64>(), m.tasks_stolen);
}

/// Guards `poller_wakeups_io`: with every task blocked on a socket and no timer armed, the
/// idle M sleeps in the poller until a plain thread connects over loopback; that wake-up
/// must be counted as an I/O one.
#[test]
fn a_socket_event_wakes_the_poller_and_is_counted() {
    let rt = gort::Builder::new().procs(1).build().unwrap();
    let listener = rt
        .block_on(gort::net::TcpListener::bind("127.0.0.1:0"))
        .unwrap();
    let addr = listener.local_addr().unwrap();
    let before = rt.metrics();
    let client = std::thread::spawn(move || {
        // Long enough for the accepting task to park and the M to block in the poller.
        std::thread::sleep(Duration::from_millis(100));
        std::net::TcpStream::connect(addr).unwrap()
    });
    let accepted = rt.block_on(rt.spawn(async move { listener.accept().await.is_ok() }));
    let _stream = client.join().unwrap();
    assert!(accepted.unwrap());
    let after = rt.metrics();
    assert!(
        after.poller_wakeups_io > before.poller_wakeups_io,
        "no I/O wake-up counted: before {before:?}, after {after:?}"
    );
    assert!(after.poller_wakeups >= after.poller_wakeups_io);
}

/// Guards the lateness histogram as the runtime sees it: every timer callback run is in
/// exactly one bucket, per P and in the sum. (A sleep whose deadline passed before it was
/// first polled completes without firing a timer, so not every sleep is counted. Each sleep
/// is made by its task, just before its first poll: made before the spawn, all 50 could pass
/// their deadlines while the tasks waited for a P, as on a loaded machine in debug, and none
/// would fire.)
#[test]
fn every_fired_timer_lands_in_one_lateness_bucket() {
    let rt = gort::Builder::new().procs(2).build().unwrap();
    rt.block_on(async {
        let sleeps: Vec<_> = (1..=50u64)
            .map(|i| {
                gort::spawn(async move {
                    gort::time::sleep(Duration::from_micros(100 * i)).await;
                })
            })
            .collect();
        for s in sleeps {
            s.await.unwrap();
        }
    });
    let m = rt.metrics();
    assert!(m.timers_fired >= 1, "{m:?}");
    assert_eq!(m.timer_lateness.iter().sum::<u64>(), m.timers_fired);
    for p in rt.proc_metrics() {
        assert_eq!(p.timer_lateness.iter().sum::<u64>(), p.timers_fired);
    }
}

/// Guards `ProcMetrics::busy`: a task that spins for 200 ms without yielding keeps its P held
/// all that time, while the other P, with nothing to run, is given up and stays idle. The
/// bounds are wide: the spinner's P counts at least 150 ms however the OS schedules its
/// thread (busy time is wall time while held), and the idle P only the moments its M looked
/// for work (well under 100 ms even on a loaded machine).
#[test]
fn a_spinning_task_makes_its_p_busy_and_the_other_stays_idle() {
    const SPIN: Duration = Duration::from_millis(200);
    let rt = gort::Builder::new().procs(2).build().unwrap();
    let before: Vec<Duration> = rt.proc_metrics().iter().map(|p| p.busy).collect();
    rt.block_on(rt.spawn(async {
        let start = Instant::now();
        while start.elapsed() < SPIN {
            std::hint::spin_loop();
        }
    }))
    .unwrap();
    let mut busy: Vec<Duration> = rt
        .proc_metrics()
        .iter()
        .zip(&before)
        .map(|(p, b)| p.busy - *b)
        .collect();
    busy.sort();
    assert!(
        busy[1] >= Duration::from_millis(150),
        "the spinner's P was busy only {:?}",
        busy[1]
    );
    assert!(
        busy[0] < Duration::from_millis(100),
        "the P without work was busy {:?}",
        busy[0]
    );
}

/// Guards the busy clock's stop: a P given up stops counting, so two reads with the
/// runtime idle in between (every P given up) differ by little.
#[test]
fn an_idle_runtime_adds_no_busy_time() {
    let rt = gort::Builder::new().procs(2).build().unwrap();
    rt.block_on(rt.spawn(async {})).unwrap();
    // Let the Ms finish looking for work and give their Ps up.
    std::thread::sleep(Duration::from_millis(50));
    let before: Duration = rt.proc_metrics().iter().map(|p| p.busy).sum();
    std::thread::sleep(Duration::from_millis(300));
    let after: Duration = rt.proc_metrics().iter().map(|p| p.busy).sum();
    assert!(
        after - before < Duration::from_millis(100),
        "idle Ps counted {:?} of busy time in 300 ms",
        after - before
    );
}
