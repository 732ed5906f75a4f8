//! A P whose holder has timers of its own runs a busy peer's overdue timer at its first
//! scheduling round after the timer is `STALL` (100 µs) overdue (peers.rs, `watch_peer`), not
//! at a second look a whole slice later: a timer-woken task waits for the first yield of
//! any P.

use gort_sched::timer_api::modtimer;
use gort_sched::Builder;
use gort_timer::{deadline_after, nanotime, Nanos, Timer};
use std::sync::atomic::{AtomicBool, Ordering::SeqCst};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The watcher's slice between yields: short enough that its first yield 100 µs after a
/// deadline comes before sysmon's 500 µs grace, long enough that a second look costs a slice.
const WATCHER_SLICE: Duration = Duration::from_micros(400);
/// The slow task's slice: its P holds each timer, due `DUE_IN` into the slice.
const SLOW_SLICE: Duration = Duration::from_millis(15);
const DUE_IN: Duration = Duration::from_millis(4);
const TIMERS: usize = 32;
/// How overdue a busy peer's timer must be before a watcher takes it (peers.rs, `STALL`): a
/// round that begins sooner after the deadline rightly leaves the timer.
const STALL: Nanos = 100_000;

fn spin_for(d: Duration) {
    let end = nanotime() + d.as_nanos() as Nanos;
    while nanotime() < end {
        std::hint::spin_loop();
    }
}

/// The M that armed a timer, the M that ran it, its deadline and when it ran.
type Fired = (String, String, Nanos, Nanos);
/// One scheduling round of the watcher: the clock before its yield and after, and its M.
type Round = (Nanos, Nanos, String);

/// How a timer the watcher's M ran relates to the watcher's rounds.
#[derive(Debug, PartialEq)]
enum Taken {
    /// In the first round after the deadline (the round before ended before it).
    First,
    /// In a later round (the round before began `STALL` or more after the deadline and left
    /// the timer).
    Later,
    /// Not by the watcher for another M, or the deadline fell inside the round before
    /// (cannot tell), or the round before began less than `STALL` after the deadline (it
    /// rightly left the timer: taking it then is not the rule).
    Other,
}

fn classify(rounds: &[Round], (armed_on, name, when, ran): &Fired) -> Taken {
    if armed_on == name {
        // Its own holder's round ran it (the tasks may share an M at the start).
        return Taken::Other;
    }
    // The round that ran it: the watcher's M was between its yield and its resume then.
    let Some(r) = rounds
        .iter()
        .position(|(before, after, m)| before < ran && ran < after && m == name)
    else {
        return Taken::Other;
    };
    match r.checked_sub(1).map(|q| &rounds[q]) {
        Some((_, after, _)) if after <= when => Taken::First,
        Some((before, _, _)) if *before >= when + STALL => Taken::Later,
        _ => Taken::Other,
    }
}

/// Two Ps: a slow task yields every 15 ms and, at the start of each slice, arms a timer on
/// its own P due 4 ms later (each records the M that armed it and the M that ran it); a
/// watcher task holds an hour-long timer on the other P and yields every 400 µs, reading the
/// clock before and after each yield (its scheduling round runs in between). Each timer the
/// watcher's M ran for the other M is classed by the round that ran it.
///
/// Before, the first look after a deadline only noted the slow P's round count (it had
/// changed since the last timer: the slow P yields between timers) and a second look ran
/// the timer: never in the first round after the deadline (20 runs of 20 failed). Now the
/// first round at least `STALL` (100 µs) after the deadline runs it: the first round after
/// the deadline in about three cases of four (the round falls 100-400 µs after it), more on
/// a loaded machine, where the watcher's rounds are further apart. A round that began less
/// than `STALL` after the deadline rightly leaves the timer, so the timer it leaves is not
/// counted as taken later: counted so, and clustered because each timer's deadline falls
/// only ~15 µs later in the watcher's 400 µs cycle than the last one's (15 ms mod ~405 µs),
/// those made up to 8 of 15 counted timers and failed 1 run in 40 on a busy machine. A timer
/// counted as later is one a round left although it began `STALL` after the deadline, which
/// the rule forbids (none in 70 runs, 30 beside CPU hogs); the second-look code still
/// fails, as it takes none in the first round.
/// Rounds, not time, so that the OS descheduling either thread does not make the test
/// flaky; the timers sysmon ran (the watcher's M descheduled past 500 µs) are not counted.
#[test]
fn a_watching_p_runs_a_busy_peers_overdue_timer_at_its_first_round() {
    let rt = Builder::new().procs(2).build().unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let rounds = Arc::new(Mutex::new(Vec::<Round>::with_capacity(4096)));
    let fired = Arc::new(Mutex::new(Vec::<Fired>::new()));
    let (s, r) = (stop.clone(), rounds.clone());
    let watcher = rt.spawn(async move {
        // An hour-long timer on the P of each M the watcher runs on (the two tasks may share
        // one at the start), so that the watcher's P has timers of its own.
        let mut own = Vec::new();
        let mut on = String::new();
        while !s.load(SeqCst) {
            let name = std::thread::current().name().unwrap_or("").to_owned();
            if name != on {
                let t = Timer::new();
                let when = deadline_after(nanotime(), Duration::from_secs(3600));
                modtimer(&t, when, 0, None).expect("in a runtime");
                own.push(t);
                on = name;
            }
            spin_for(WATCHER_SLICE);
            let before = nanotime();
            gort_sched::yield_now().await;
            let name = std::thread::current().name().unwrap_or("").to_owned();
            r.lock().unwrap().push((before, nanotime(), name));
        }
        for t in own {
            assert!(gort_timer::del(&t), "an hour-long timer was not pending");
        }
    });
    let f = fired.clone();
    let slow = rt.spawn(async move {
        let mut armed = Vec::new();
        for _ in 0..TIMERS {
            let t = Timer::new();
            let f = f.clone();
            let armed_on = std::thread::current().name().unwrap_or("").to_owned();
            t.set_fire(Arc::new(move |when: Nanos| {
                let name = std::thread::current().name().unwrap_or("").to_owned();
                f.lock()
                    .unwrap()
                    .push((armed_on.clone(), name, when, nanotime()));
            }));
            modtimer(&t, deadline_after(nanotime(), DUE_IN), 0, None).expect("in a runtime");
            armed.push(t);
            spin_for(SLOW_SLICE);
            gort_sched::yield_now().await;
        }
        armed
    });
    let armed = rt.block_on(slow).unwrap();
    stop.store(true, SeqCst);
    rt.block_on(watcher).unwrap();
    drop(armed);
    let rounds = rounds.lock().unwrap();
    let fired = fired.lock().unwrap();
    assert_eq!(fired.len(), TIMERS, "not every timer fired");
    let taken: Vec<Taken> = fired.iter().map(|f| classify(&rounds, f)).collect();
    let first = taken.iter().filter(|t| **t == Taken::First).count();
    let later = taken.iter().filter(|t| **t == Taken::Later).count();
    // A few later ones are allowed: a round that finds the heap locked (sysmon looking at
    // it just before the deadline) leaves the timer to the next.
    assert!(
        first >= 1 && later * 4 <= first,
        "the watcher ran {first} timers in its first round after the deadline and {later} \
         later ({taken:?}; all: {fired:?})"
    );
}
