//! A task woken by a timer must not wait behind tasks that yield rarely (shape T10).

use gort::time::Ticker;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The tests each keep two threads spinning: run them one at a time, or each takes the
/// other's CPUs.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

fn spin_for(d: Duration) {
    let end = Instant::now() + d;
    while Instant::now() < end {
        std::hint::spin_loop();
    }
}

/// Spawns `n` tasks that spin in slices of `slice` between yields until the flag returned is
/// set.
fn spawn_spinners(n: usize, slice: Duration) -> Arc<AtomicBool> {
    let stop = Arc::new(AtomicBool::new(false));
    for _ in 0..n {
        let stop = stop.clone();
        gort::spawn(async move {
            while !stop.load(Relaxed) {
                spin_for(slice);
                gort::yield_now().await;
            }
        });
    }
    stop
}

/// A 1 ms ticker read by one task while two tasks spin in 10 ms slices between yields, on 2
/// Ps. A tick that sysmon ran (every P busy) woke the task into the global queue, which a P
/// whose ring holds a yielding spinner looked at only every 61st round: ~0.6 s, a handful of
/// ticks per second. Now a yield serves waiting started work first, so the task runs within
/// about one slice: some 100 ticks per second. The bound (30 in a second) is far from both.
#[test]
fn a_ticker_task_runs_within_a_slice_of_coarse_spinners() {
    let _serial = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let rt = gort::Builder::new().procs(2).build().unwrap();
    let received = rt.block_on(async {
        let stop = spawn_spinners(2, Duration::from_millis(10));
        let reader = gort::spawn(async move {
            let ticker = Ticker::new(Duration::from_millis(1));
            let t0 = Instant::now();
            let mut n = 0;
            while t0.elapsed() < Duration::from_secs(1) {
                ticker.c().recv().await.unwrap();
                n += 1;
            }
            n
        });
        let n = reader.await.unwrap();
        stop.store(true, Relaxed);
        n
    });
    assert!(
        received >= 30,
        "only {received} ticks in 1 s under 10 ms slices"
    );
}

/// A 1 ms ticker read by one task while two tasks spin in 1 ms slices between yields, on 2
/// Ps (shape T10_1ms): each tick must arrive in the first scheduling round of either P after
/// its deadline, whichever P holds the ticker's timer (its own P's round runs it, or the
/// other P's look at its peers; sysmon, 500 µs late, lands the task in the global queue that
/// both Ps serve at their next yield). Each spinner reads the clock before its yield and
/// after it resumes, the round of its P running in between; a tick is on time if it arrived
/// before the first resume that followed a yield begun after its deadline (the task woken
/// runs before the spinner that yielded). Counted in rounds, not time, so that the OS
/// descheduling a thread does not make the test flaky; an M descheduled between running the
/// timer and running the task still loses a few (91-99 % on time in 8 runs at load 3-5;
/// 77.6 % once, in a CI rehearsal beside a release build of the benchmarks, two `rustc`
/// on the two cores). Waiting for one particular P's round leaves the ticks whose first
/// round after the deadline is the other P's to a later one (37-69 % on time in 4 runs
/// with `help_peer` off): the bound, 3 in 4, is between. Release builds only: the bound is set by the rounds
/// of optimized code; in a debug build, whose rounds are several times longer, 54-79 % of
/// the ticks were on time on a quiet machine (at 706bfdd, and at fa6bada before it; not traced
/// further), so the test would measure the build, not the rule. `.ci/test.sh` runs it in
/// release.
#[test]
#[cfg_attr(
    debug_assertions,
    ignore = "calibrated on release builds' round lengths; run with --release"
)]
fn a_tick_arrives_in_the_first_round_of_either_p() {
    let _serial = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let rt = gort::Builder::new().procs(2).build().unwrap();
    // (yield began, spinner resumed)
    let rounds = Arc::new(Mutex::new(Vec::<(Instant, Instant)>::with_capacity(4096)));
    let r = rounds.clone();
    let (t0, receipts) = rt.block_on(async move {
        let stop = Arc::new(AtomicBool::new(false));
        for _ in 0..2 {
            let (stop, r) = (stop.clone(), r.clone());
            gort::spawn(async move {
                while !stop.load(Relaxed) {
                    spin_for(Duration::from_millis(1));
                    let before = Instant::now();
                    gort::yield_now().await;
                    r.lock().unwrap().push((before, Instant::now()));
                }
            });
        }
        let reader = gort::spawn(async move {
            let t0 = Instant::now();
            let ticker = Ticker::new(Duration::from_millis(1));
            let mut got = Vec::with_capacity(1024);
            while t0.elapsed() < Duration::from_millis(500) {
                ticker.c().recv().await.unwrap();
                got.push(Instant::now());
            }
            (t0, got)
        });
        let got = reader.await.unwrap();
        stop.store(true, Relaxed);
        got
    });
    let rounds = rounds.lock().unwrap();
    let last = *receipts.last().expect("no tick arrived");
    let (mut ticks, mut on_time) = (0, 0);
    for k in 1.. {
        let due = t0 + Duration::from_millis(k);
        if due > last {
            break;
        }
        let got = receipts[receipts.partition_point(|&t| t < due)];
        let first_resume = rounds.iter().filter(|r| r.0 >= due).map(|r| r.1).min();
        if let Some(resume) = first_resume {
            ticks += 1;
            on_time += usize::from(got < resume);
        }
    }
    assert!(
        ticks >= 50 && on_time * 4 >= ticks * 3,
        "{on_time} of {ticks} ticks arrived in the first round of either P after their deadline"
    );
}

/// Eight tasks each sleep 1 ms in a loop while two tasks spin in 10 ms slices between yields,
/// on 2 Ps. sysmon runs a stuck P's due timers in one go and the woken tasks land together in
/// the global queue; a yield served one of them, and the rest waited for the next wake-up or
/// the 61-round check: sleeps 0.6-1.1 s late (found by the stress scenario coarse-load). A
/// yield now takes Go's share of them (`globrunqget`), so each sleep ends within about two
/// slices. A loaded machine keeps the Ms off their CPUs for hundreds of milliseconds now and
/// then (a 200 ms bound failed 7 of 40 debug runs beside CPU hogs, at up to 437 ms; one try
/// in 120 took 670 ms), so the bound is 300 ms, half the late sleeps of old, and the test has
/// `ATTEMPTS` tries of a second each: those late sleeps were in every second.
#[test]
fn many_timer_woken_tasks_run_within_slices_of_coarse_spinners() {
    const ATTEMPTS: usize = 3;
    let _serial = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let mut worsts = Vec::new();
    for _ in 0..ATTEMPTS {
        let worst = worst_sleep_beside_coarse_spinners();
        if worst < Duration::from_millis(300) {
            return;
        }
        worsts.push(worst);
    }
    panic!("the worst 1 ms sleep beside 10 ms slices took, in each try: {worsts:?}");
}

/// One second of the scenario above on a fresh runtime: the longest any 1 ms sleep took.
fn worst_sleep_beside_coarse_spinners() -> Duration {
    let rt = gort::Builder::new().procs(2).build().unwrap();
    rt.block_on(async {
        let stop = spawn_spinners(2, Duration::from_millis(10));
        let sleepers: Vec<_> = (0..8)
            .map(|_| {
                gort::spawn(async {
                    let t0 = Instant::now();
                    let mut worst = Duration::ZERO;
                    while t0.elapsed() < Duration::from_secs(1) {
                        let asked = Instant::now();
                        gort::time::sleep(Duration::from_millis(1)).await;
                        worst = worst.max(asked.elapsed());
                    }
                    worst
                })
            })
            .collect();
        let mut worst = Duration::ZERO;
        for s in sleepers {
            worst = worst.max(s.await.unwrap());
        }
        stop.store(true, Relaxed);
        worst
    })
}
