//! sysmon parks while every P is idle (Go's `sched.sysmonwait`) and is back at its duties
//! when a P is taken: timers of busy Ps, the sockets' look for a thread off every P, and
//! nothing it used to do is lost (sysmon.rs, "Parking"). Bounds are generous: a busy machine
//! delays threads by milliseconds, never by the seconds that a lost wake-up costs.
#![cfg(not(loom))]

use gort::time::Ticker;
use gort_sched::timer_api::modtimer;
use gort_timer::{deadline_after, nanotime, Nanos, Timer};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::SeqCst};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How long a hog spins at most: a sysmon that stayed parked leaves the timer to the end.
const HOG_LIMIT: Duration = Duration::from_secs(3);

fn sysmon_looks(rt: &gort::Runtime) -> u64 {
    rt.metrics().sysmon_wakeups
}

/// Runs one task to completion, then leaves the runtime idle long enough for sysmon to park.
fn warm_then_idle(rt: &gort::Runtime) {
    rt.block_on(rt.spawn(async {})).unwrap();
    std::thread::sleep(Duration::from_millis(50));
}

#[test]
fn an_idle_runtime_does_not_wake_sysmon() {
    let rt = gort::Builder::new().procs(2).build().unwrap();
    warm_then_idle(&rt);
    let before = sysmon_looks(&rt);
    std::thread::sleep(Duration::from_millis(200));
    let looks = sysmon_looks(&rt) - before;
    // A sysmon that ticks every 10 ms while a P is idle looks ~20 times here.
    assert!(
        looks <= 2,
        "sysmon looked {looks} times in 200 ms of idleness"
    );
}

/// An idle 1 ms ticker (T5_idle) takes a P every tick for a few microseconds: those short
/// spells push sysmon's alarm ahead instead of waking it.
#[test]
fn an_idle_ticker_does_not_wake_sysmon_every_period() {
    let rt = gort::Builder::new().procs(2).build().unwrap();
    warm_then_idle(&rt);
    let before = sysmon_looks(&rt);
    let stalls = rt
        .block_on(rt.spawn(async {
            let ticker = Ticker::new(Duration::from_millis(1));
            let mut last = Instant::now();
            let mut stalls = 0;
            for _ in 0..200 {
                ticker.c().recv().await.unwrap();
                stalls += u64::from(last.elapsed() > STALL);
                last = Instant::now();
            }
            stalls
        }))
        .unwrap();
    let looks = sysmon_looks(&rt) - before;
    // Ticking every 10 ms, sysmon looked ~20 times over these 200 ticks; it now looks only
    // when the ticks leave a gap of more than 7 ms (a stalled machine), and then up to a few
    // times before it parks again. A loaded machine makes such gaps (11 looks were seen
    // beside CPU hogs): each the consumer saw allows `LOOKS_PER_STALL` more.
    assert!(
        looks <= 10 + LOOKS_PER_STALL * stalls,
        "sysmon looked {looks} times over 200 ticks, with {stalls} gaps of over {STALL:?}"
    );
}

/// A gap between two ticks that lets sysmon's alarm ring: no P taken for this long.
const STALL: Duration = Duration::from_millis(7);
/// sysmon's looks after a gap before it parks again, at most (its quiet rounds).
const LOOKS_PER_STALL: u64 = 5;

/// Spawns one hog per P; each spins until `fired` or `HOG_LIMIT` and returns whether it saw
/// `fired`. Returns once every hog runs.
fn start_hogs(
    rt: &gort::Runtime,
    procs: usize,
    fired: &Arc<AtomicBool>,
) -> Vec<gort::JoinHandle<bool>> {
    let started = Arc::new(AtomicUsize::new(0));
    let hogs = (0..procs)
        .map(|_| {
            let (fired, started) = (fired.clone(), started.clone());
            rt.spawn(async move {
                started.fetch_add(1, SeqCst);
                let end = Instant::now() + HOG_LIMIT;
                while Instant::now() < end {
                    if fired.load(SeqCst) {
                        return true;
                    }
                    std::hint::spin_loop();
                }
                false
            })
        })
        .collect();
    let give_up = Instant::now() + Duration::from_secs(20);
    while started.load(SeqCst) < procs {
        assert!(Instant::now() < give_up, "the hogs did not start");
        std::thread::sleep(Duration::from_millis(1));
    }
    hogs
}

/// After an idle spell (sysmon parked), every P is taken by a task that never yields and a
/// timer is armed off every P: no M polls, so only sysmon can run it (go#38860), and it must
/// have been alerted by the takes.
#[test]
fn sysmon_runs_the_timers_of_busy_ps_after_an_idle_spell() {
    let rt = gort::Builder::new().procs(2).build().unwrap();
    warm_then_idle(&rt);
    let parked_at = sysmon_looks(&rt);
    std::thread::sleep(Duration::from_millis(50));
    assert!(sysmon_looks(&rt) - parked_at <= 1, "sysmon did not park");
    let fired = Arc::new(AtomicBool::new(false));
    let hogs = start_hogs(&rt, 2, &fired);
    let _timer = arm_flag(&rt, Duration::from_millis(20), &fired);
    for hog in hogs {
        assert!(
            rt.block_on(hog).unwrap(),
            "the timer did not fire while every P was busy"
        );
    }
}

/// Arms a bare runtime timer `d` from now that sets `fired`: its callback runs where the
/// timer is run (an `AfterFunc`'s function would be a task, which no P could run).
fn arm_flag(rt: &gort::Runtime, d: Duration, fired: &Arc<AtomicBool>) -> Arc<Timer> {
    rt.block_on(async {
        let t = Timer::new();
        let fired = fired.clone();
        t.set_fire(Arc::new(move |_: Nanos| fired.store(true, SeqCst)));
        modtimer(&t, deadline_after(nanotime(), d), 0, None).expect("in a runtime");
        t
    })
}

/// The same as a stress test of the park/alert race: idle spells of lengths stepping through
/// sysmon's 10 ms period, so that the takes land before, during and after its parking (a lost
/// alert leaves the timer to the end of the hogs' 3 s: the test fails instead of hanging).
#[test]
fn sysmon_is_never_left_parked_by_a_take_racing_its_parking() {
    let rt = gort::Builder::new().procs(2).build().unwrap();
    for round in 0..40u64 {
        let gap = Duration::from_micros(round * 300);
        std::thread::sleep(gap);
        let fired = Arc::new(AtomicBool::new(false));
        let hogs = start_hogs(&rt, 2, &fired);
        let _timer = arm_flag(&rt, Duration::from_millis(1), &fired);
        for hog in hogs {
            assert!(
                rt.block_on(hog).unwrap(),
                "round {round} (idle {gap:?}): the timer did not fire while every P was busy"
            );
        }
    }
}

/// `block_in_place` hands its P off itself (no sysmon retake, unlike Go's syscalls): after
/// an idle spell, a task blocked in it does not keep the only P from another task.
#[test]
fn block_in_place_hands_its_p_off_after_an_idle_spell() {
    let rt = gort::Builder::new().procs(1).build().unwrap();
    warm_then_idle(&rt);
    let other_ran = Arc::new(AtomicBool::new(false));
    let blocked = rt.spawn({
        let other_ran = other_ran.clone();
        async move {
            gort::block_in_place(|| {
                let end = Instant::now() + HOG_LIMIT;
                while !other_ran.load(SeqCst) && Instant::now() < end {
                    std::thread::sleep(Duration::from_millis(1));
                }
            });
            other_ran.load(SeqCst)
        }
    });
    std::thread::sleep(Duration::from_millis(20));
    rt.spawn({
        let other_ran = other_ran.clone();
        async move { other_ran.store(true, SeqCst) }
    });
    assert!(
        rt.block_on(blocked).unwrap(),
        "the other task did not run while the first was in block_in_place"
    );
}

/// A thread off every P (`block_on`) waits on a socket while every P is idle and no M polls
/// (no timer, no other waiter): sysmon, parked, is alerted by the new waiter and its look
/// finds the connection within its period (without the alert nobody would ever poll).
#[test]
fn a_socket_waiter_off_every_p_gets_sysmon_back() {
    let rt = gort::Builder::new().procs(2).build().unwrap();
    let l = rt
        .block_on(gort::net::TcpListener::bind("127.0.0.1:0"))
        .unwrap();
    let addr = l.local_addr().unwrap();
    warm_then_idle(&rt);
    let client = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(50));
        std::net::TcpStream::connect(addr).unwrap()
    });
    let (done_tx, done_rx) = std::sync::mpsc::channel();
    let waiter = std::thread::spawn(move || {
        rt.block_on(l.accept()).unwrap();
        done_tx.send(()).unwrap();
    });
    let accepted = done_rx.recv_timeout(Duration::from_secs(10));
    assert!(accepted.is_ok(), "the accept was never served");
    waiter.join().unwrap();
    drop(client.join().unwrap());
}
