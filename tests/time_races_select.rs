//! gort::time's timer contract under races, continued (the checks are those of
//! `tests/time_races.rs`): timers received in one `select!`, and a `Timer` and an
//! `after_func` stopped and reset by every controller at once, in no known order.

mod time_races_common;

use std::sync::atomic::{AtomicU64, Ordering::SeqCst};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use gort::time::{Instant, Timer};
use gort_timer::{nanotime_exact, CLOCK_TRAIL};
use time_races_common::*;

/// Three timers received in one `select!` by tasks of both runtimes (each parked receive
/// blocks all three, and every other arm's end unblocks them), while the controllers reset
/// and stop them at random: the same checks per timer, and at the end each timer, reset to
/// 1 ms, delivers to a select parked with no other way out (a receive left unblocked would
/// leave its timer in no heap, and the select parked for ever).
fn select_round(seed: u64) {
    let (a, b) = runtimes();
    let timers: Arc<Vec<(Timer, Arc<Shared>)>> = Arc::new(
        (0..3)
            .map(|_| {
                let before = nanotime_exact();
                let t = {
                    let _g = a.handle().enter();
                    Timer::new(Duration::from_secs(3600))
                };
                let hour = 3_600_000_000_000;
                let w = Window {
                    lo: before + hour - CLOCK_TRAIL,
                    hi: nanotime_exact() + hour,
                    period: 0,
                };
                (t, Shared::new(w))
            })
            .collect(),
    );
    let (done_tx, done_rx) = gort::chan::bounded::<()>(1);
    let received = Arc::new(AtomicU64::new(0));
    let receiver = |rt: &gort::Runtime| {
        let (timers, done, n) = (timers.clone(), done_rx.clone(), received.clone());
        rt.spawn(async move {
            let mut got: Vec<(usize, usize, Instant)> = Vec::new();
            loop {
                let e: Vec<usize> = timers.iter().map(|t| t.1.epoch.load(SeqCst)).collect();
                gort::select! {
                    v = timers[0].0.c().recv() => got.push((0, e[0], v.unwrap())),
                    v = timers[1].0.c().recv() => got.push((1, e[1], v.unwrap())),
                    v = timers[2].0.c().recv() => got.push((2, e[2], v.unwrap())),
                    _ = done.recv() => break,
                }
                n.fetch_add(1, SeqCst);
            }
            got
        })
    };
    let rxs = [receiver(&a), receiver(&a), receiver(&b)];
    let ts = timers.clone();
    control(&a, &b, seed, 300, move |rng| {
        let (t, s) = &ts[rng.below(3) as usize];
        if rng.below(10) < 7 {
            let d = short(rng);
            s.operate(Some(d), false, || t.reset(d));
        } else {
            s.operate(None, false, || t.stop());
        }
    });
    let d = Duration::from_millis(1);
    for (t, s) in timers.iter() {
        let _g = a.handle().enter();
        s.operate(Some(d), false, || t.reset(d));
    }
    // Every final arming is received: no receive is left waiting on a timer in no heap.
    let wanted: u64 = timers
        .iter()
        .map(|t| t.1.history.lock().unwrap().expected + 1)
        .sum();
    let start = std::time::Instant::now();
    while received.load(SeqCst) < wanted && start.elapsed() < Duration::from_secs(5) {
        std::thread::sleep(d);
    }
    drop(done_tx);
    let mut got = Vec::new();
    for r in rxs {
        got.extend(a.block_on(r).unwrap());
    }
    for (i, (_, s)) in timers.iter().enumerate() {
        let h = s.history.lock().unwrap();
        for &(_, e, v) in got.iter().filter(|g| g.0 == i) {
            check_value(&h, e, v);
        }
    }
    let unread: u64 = timers.iter().map(|(t, _)| t.c().len() as u64).sum();
    assert_eq!(
        got.len() as u64 + unread,
        wanted,
        "values received vs armings ended with false plus the final ones"
    );
    assert_eq!(unread, 0, "a final value nobody parked in select! received");
}

#[test]
fn timers_received_in_one_select_keep_the_contract_and_wake_the_select() {
    rounds("select", select_round);
}

/// One timer reset and stopped by all the controllers at once, with no lock between them,
/// while the receivers take its values. No order of the operations is known, but each
/// arming (the first, and one per reset) ends exactly once, by the one operation that
/// returned its result: so the values received are the armings minus the true results,
/// whatever the interleaving; and each value is the due instant of one of the resets.
fn unordered_round(seed: u64) {
    let (a, b) = runtimes();
    let d0 = short(&mut Rng(seed));
    let before = nanotime_exact();
    let timer = Arc::new({
        let _g = a.handle().enter();
        Timer::new(d0)
    });
    let d = d0.as_nanos() as i64;
    let first = Window {
        lo: before + d - CLOCK_TRAIL,
        hi: nanotime_exact() + d,
        period: 0,
    };
    let windows = Arc::new(Mutex::new(vec![first]));
    let (resets, trues) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
    let shared = Shared::new(first);
    let rxs = receivers(&a, &b, &shared, timer.c());
    let (t, w, r, tr) = (
        timer.clone(),
        windows.clone(),
        resets.clone(),
        trues.clone(),
    );
    control(&a, &b, seed, 100, move |rng| {
        if rng.below(10) < 6 {
            let d = short(rng);
            let before = nanotime_exact();
            let was = t.reset(d);
            let after = nanotime_exact();
            let d = d.as_nanos() as i64;
            w.lock().unwrap().push(Window {
                lo: before + d - CLOCK_TRAIL,
                hi: after + d,
                period: 0,
            });
            r.fetch_add(1, SeqCst);
            tr.fetch_add(was as u64, SeqCst);
        } else {
            tr.fetch_add(t.stop() as u64, SeqCst);
        }
    });
    trues.fetch_add(timer.stop() as u64, SeqCst);
    shared.done.store(true, SeqCst);
    let got: Vec<_> = rxs.into_iter().flat_map(|r| r.join().unwrap()).collect();
    let windows = windows.lock().unwrap();
    for &(_, v) in &got {
        let n = v.as_nanos();
        assert!(
            windows.iter().any(|w| w.holds(n)),
            "value {n} is the due instant of no arming"
        );
    }
    let armings = 1 + resets.load(SeqCst);
    assert_eq!(
        got.len() as u64,
        armings - trues.load(SeqCst),
        "values received vs armings ({armings}) that no stop/reset ended with true"
    );
}

#[test]
fn timer_stopped_and_reset_from_everywhere_at_once_delivers_one_value_per_arming_ended_false() {
    rounds("unordered", unordered_round);
}

/// An `after_func` reset and stopped by all the controllers at once (no lock), its `f`
/// sometimes slow: the runs of `f` are the armings minus the true results.
fn unordered_after_func_round(seed: u64) {
    let (a, b) = runtimes();
    let runs = Arc::new(AtomicU64::new(0));
    let af = Arc::new({
        let _g = a.handle().enter();
        let runs = runs.clone();
        gort::time::after_func(short(&mut Rng(seed)), move || {
            if runs.fetch_add(1, SeqCst) % 2 == 0 {
                std::thread::sleep(Duration::from_micros(100));
            }
        })
    });
    let (resets, trues) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
    let (f, r, tr) = (af.clone(), resets.clone(), trues.clone());
    control(&a, &b, seed, 100, move |rng| {
        if rng.below(10) < 6 {
            let was = f.reset(short(rng));
            r.fetch_add(1, SeqCst);
            tr.fetch_add(was as u64, SeqCst);
        } else {
            tr.fetch_add(f.stop() as u64, SeqCst);
        }
    });
    trues.fetch_add(af.stop() as u64, SeqCst);
    let expected = 1 + resets.load(SeqCst) - trues.load(SeqCst);
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while runs.load(SeqCst) < expected && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(1));
    }
    std::thread::sleep(Duration::from_millis(5));
    assert_eq!(
        runs.load(SeqCst),
        expected,
        "runs of f vs armings not ended with true"
    );
}

#[test]
fn after_func_stopped_and_reset_from_everywhere_at_once_runs_once_per_arming_ended_false() {
    rounds("unordered after_func", unordered_after_func_round);
}

/// An `after_func` reset while its `f` is still running (blocked here until told): the new
/// arming runs `f` again alongside the first run, as Go starts a goroutine per firing; it is
/// neither lost nor held back until the first run returns. The reset reports false (the
/// timer had fired).
fn overlapping_after_func_round(seed: u64) {
    let a = gort::Builder::new().procs(2).build().unwrap();
    let mut rng = Rng(seed);
    let runs = Arc::new(AtomicU64::new(0));
    let release = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let af = {
        let _g = a.handle().enter();
        let (runs, release) = (runs.clone(), release.clone());
        gort::time::after_func(short(&mut rng), move || {
            if runs.fetch_add(1, SeqCst) == 0 {
                let start = std::time::Instant::now();
                while !release.load(SeqCst) && start.elapsed() < Duration::from_secs(10) {
                    std::thread::sleep(Duration::from_micros(100));
                }
            }
        })
    };
    let wait_for = |n: u64| {
        let start = std::time::Instant::now();
        while runs.load(SeqCst) < n && start.elapsed() < Duration::from_secs(5) {
            std::thread::sleep(Duration::from_micros(100));
        }
        runs.load(SeqCst)
    };
    assert_eq!(wait_for(1), 1, "the first firing never ran f");
    let was = {
        let _g = a.handle().enter();
        af.reset(short(&mut rng))
    };
    assert!(!was, "reset of a fired after_func returned true");
    let n = wait_for(2);
    release.store(true, SeqCst);
    assert_eq!(
        n, 2,
        "the second firing did not run f while the first run was going"
    );
}

#[test]
fn an_after_func_reset_while_f_runs_runs_f_again_alongside() {
    rounds("overlapping after_func", overlapping_after_func_round);
}
