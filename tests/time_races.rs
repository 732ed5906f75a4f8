//! gort::time's Go 1.23 timer contract under races, checked property-style: many random rounds
//! on real threads, two runtimes (one of 2 Ps), the seed printed on failure
//! (`GORT_TIME_RACES_SEED=<seed>` replays one).
//!
//! Each round drives one timer with `stop`/`reset` from a task of runtime `a`, a plain thread
//! (in `a`'s context) and a task of runtime `b`, one operation at a time (a lock orders them,
//! so that each result can be checked against a known history), while receivers on both
//! runtimes and on a plain thread take its values concurrently. The checks:
//!
//! - `stop`/`reset` return true exactly when no value of the current arming has been or can
//!   still be received: the values received in all equal the armings that ended with false
//!   (one each for a `Timer`, one run of `f` for an `after_func`), and an operation on a
//!   stopped timer returns false;
//! - after either returns, no earlier value is received: a receive that starts after
//!   operation `e` returned gets a value of an arming `>= e`;
//! - a value is the instant the timer was due (within the window its arming's clock reading
//!   could fall in), on the ticker's phase, and a ticker's values are increasing.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering::SeqCst};
use std::sync::{mpsc, Arc, Mutex};
use std::time::Duration;

use gort::time::{Instant, Ticker, Timer};
use gort_timer::{nanotime_exact, CLOCK_TRAIL};

/// Generous: a healthy run of a test takes a second or two.
const WATCHDOG: Duration = Duration::from_secs(20);
/// Random rounds per test (`GORT_TIME_RACES_ROUNDS` overrides), and operations per
/// controller in a round.
const ROUNDS: u64 = 40;
const OPS: usize = 60;

/// xorshift64*: reproducible from its seed, no dependency.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

fn seed() -> u64 {
    match std::env::var("GORT_TIME_RACES_SEED") {
        Ok(s) => s.parse().expect("GORT_TIME_RACES_SEED: a u64"),
        Err(_) => {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos() as u64
                | 1
        }
    }
}

/// Runs `rounds` rounds of `round(seed_of_round)` on a thread of its own under the watchdog;
/// a failure or a hang names the seed that replays it.
fn rounds(name: &'static str, round: fn(u64)) {
    let first = seed();
    let (tx, rx) = mpsc::channel();
    let t = std::thread::spawn(move || {
        let n = std::env::var("GORT_TIME_RACES_ROUNDS").map_or(ROUNDS, |s| s.parse().unwrap());
        for i in 0..n {
            let s = first.wrapping_add(i.wrapping_mul(0x9e37_79b9_7f4a_7c15)) | 1;
            let _ = tx.send(s);
            round(s);
        }
    });
    let mut last = first;
    loop {
        match rx.recv_timeout(WATCHDOG) {
            Ok(s) => last = s,
            Err(mpsc::RecvTimeoutError::Disconnected) => break,
            Err(mpsc::RecvTimeoutError::Timeout) => {
                panic!("{name}: round of seed {last} still running after {WATCHDOG:?}: hung")
            }
        }
    }
    if let Err(p) = t.join() {
        eprintln!("{name}: failed in the round of seed {last} (GORT_TIME_RACES_SEED={last})");
        std::panic::resume_unwind(p);
    }
}

fn runtimes() -> (gort::Runtime, gort::Runtime) {
    let a = gort::Builder::new().procs(2).build().unwrap();
    let b = gort::Builder::new().procs(1).build().unwrap();
    (a, b)
}

/// One arming: its deadline lies in `[lo, hi]` (nanos), then every `period` if > 0.
#[derive(Clone, Copy, Debug)]
struct Window {
    lo: i64,
    hi: i64,
    period: i64,
}

impl Window {
    /// Whether `v` is one of this arming's deadlines.
    fn holds(&self, v: i64) -> bool {
        if v < self.lo {
            return false;
        }
        if self.period == 0 {
            return v <= self.hi;
        }
        let n = (v - self.lo) / self.period;
        v - n * self.period <= self.hi
    }
}

/// The history of one round, in operation order (operation 0 is the creation).
#[derive(Default)]
struct History {
    /// Per operation: the arming it started (none for a stop), and when it returned.
    ops: Vec<(Option<Window>, i64)>,
    /// Whether the current arming is live (armed and not yet stopped or reset).
    live: bool,
    /// The values that must be received (or runs of `f` made): one per arming that ended
    /// with false.
    expected: u64,
}

/// What the controllers share: the history and the number of the last operation done.
struct Shared {
    history: Mutex<History>,
    epoch: AtomicUsize,
    done: AtomicBool,
}

impl Shared {
    fn new(first: Window) -> Arc<Shared> {
        let history = History {
            ops: vec![(Some(first), first.hi)],
            live: true,
            expected: 0,
        };
        Arc::new(Shared {
            history: Mutex::new(history),
            epoch: AtomicUsize::new(0),
            done: AtomicBool::new(false),
        })
    }

    /// Runs one operation, `op(d)` for a reset (`Some(d)`) or a stop (`None`), recording its
    /// result; `op` returns the operation's bool (a `Ticker`'s is taken as "was live").
    fn operate(&self, d: Option<Duration>, period: bool, op: impl FnOnce() -> bool) {
        let mut h = self.history.lock().unwrap();
        let before = nanotime_exact();
        let r = op();
        let after = nanotime_exact();
        if !h.live {
            assert!(!r, "stop/reset of a stopped timer returned true");
        } else if !r {
            h.expected += 1;
        }
        let window = d.map(|d| {
            let d = d.as_nanos() as i64;
            Window {
                lo: before + d - CLOCK_TRAIL,
                hi: after + d,
                period: if period { d } else { 0 },
            }
        });
        h.live = window.is_some();
        h.ops.push((window, after));
        self.epoch.store(h.ops.len() - 1, SeqCst);
    }
}

/// Checks a value `v` received by a receive that started after operation `e` returned: it is
/// a deadline of an arming `k >= e`, due before operation `k + 1` returned.
fn check_value(h: &History, e: usize, v: Instant) {
    let v = v.as_nanos();
    let ok = (e..h.ops.len()).any(|k| {
        let due_before_next = h.ops.get(k + 1).map_or(true, |&(_, ret)| v <= ret);
        h.ops[k].0.is_some_and(|w| w.holds(v)) && due_before_next
    });
    assert!(
        ok,
        "value {v} received after operation {e} returned is no deadline of a later arming: {:?}",
        &h.ops[e.saturating_sub(1)..]
    );
}

/// A random pause between operations: none (a yield), or up to `max_us` µs.
fn pause_len(rng: &mut Rng, max_us: u64) -> Option<Duration> {
    match rng.below(4) {
        0 => None,
        _ => Some(Duration::from_micros(rng.below(max_us))),
    }
}

/// Runs `ops` on three controllers (a task of `a`, a plain thread in `a`'s context, a task of
/// `b`), each `OPS` operations `op(rng)` apart by random pauses of up to `max_us` µs; returns
/// when all are done.
fn control(
    a: &gort::Runtime,
    b: &gort::Runtime,
    seed: u64,
    max_us: u64,
    op: impl Fn(&mut Rng) + Send + Sync + 'static,
) {
    let op = Arc::new(op);
    let task = |rt: &gort::Runtime, s: u64| {
        let op = op.clone();
        rt.spawn(async move {
            let mut rng = Rng(s);
            for _ in 0..OPS {
                op(&mut rng);
                match pause_len(&mut rng, max_us) {
                    None => gort::yield_now().await,
                    Some(d) => gort::time::sleep(d).await,
                }
            }
        })
    };
    let ta = task(a, seed ^ 0x1111);
    let tb = task(b, seed ^ 0x2222);
    let (h, op2) = (a.handle().clone(), op.clone());
    let thread = std::thread::spawn(move || {
        let _g = h.enter();
        let mut rng = Rng(seed ^ 0x3333);
        for _ in 0..OPS {
            op2(&mut rng);
            match pause_len(&mut rng, max_us) {
                None => std::thread::yield_now(),
                Some(d) => std::thread::sleep(d),
            }
        }
    });
    a.block_on(ta).unwrap();
    b.block_on(tb).unwrap();
    thread.join().unwrap();
}

/// A random duration: mostly short enough to race the operations, sometimes zero.
fn short(rng: &mut Rng) -> Duration {
    match rng.below(8) {
        0 => Duration::ZERO,
        _ => Duration::from_micros(rng.below(400)),
    }
}

/// Receivers of a channel timer's values until `done`: a task of `a` and one of `b` awaiting
/// (so the timer enters either runtime's heaps), and a plain thread polling with `try_recv`.
/// Each records `(epoch when its receive started, value)`; a ticker's receivers check that
/// their values increase.
fn receivers(
    a: &gort::Runtime,
    b: &gort::Runtime,
    shared: &Arc<Shared>,
    rx: &gort::chan::Receiver<Instant>,
    increasing: bool,
) -> Vec<std::thread::JoinHandle<Vec<(usize, Instant)>>> {
    let awaiting = |rt: &gort::Runtime| {
        let (shared, rx, h) = (shared.clone(), rx.clone(), rt.handle().clone());
        std::thread::spawn(move || {
            h.block_on(async move {
                let mut got: Vec<(usize, Instant)> = Vec::new();
                while !shared.done.load(SeqCst) {
                    let e = shared.epoch.load(SeqCst);
                    let r = gort::time::timeout(Duration::from_millis(1), rx.recv()).await;
                    if let Ok(Some(v)) = r {
                        if let (true, Some(&(_, last))) = (increasing, got.last()) {
                            assert!(v > last, "tick {v:?} after tick {last:?}");
                        }
                        got.push((e, v));
                    }
                }
                got
            })
        })
    };
    let polling = {
        let (shared, rx) = (shared.clone(), rx.clone());
        std::thread::spawn(move || {
            let mut got = Vec::new();
            while !shared.done.load(SeqCst) {
                let e = shared.epoch.load(SeqCst);
                if let Ok(v) = rx.try_recv() {
                    if let (true, Some(&(_, last))) = (increasing, got.last()) {
                        assert!(v > last, "tick {v:?} after tick {last:?}");
                    }
                    got.push((e, v));
                }
                std::thread::sleep(Duration::from_micros(50));
            }
            got
        })
    };
    // Ticks are sent in increasing order on a FIFO channel: however receivers interleave,
    // each sees its own in order.
    vec![awaiting(a), awaiting(b), polling]
}

fn timer_round(seed: u64) {
    let (a, b) = runtimes();
    let mut rng = Rng(seed);
    let d0 = short(&mut rng);
    let before = nanotime_exact();
    let timer = Arc::new({
        let _g = a.handle().enter();
        Timer::new(d0)
    });
    let d = d0.as_nanos() as i64;
    let w = Window {
        lo: before + d - CLOCK_TRAIL,
        hi: nanotime_exact() + d,
        period: 0,
    };
    let shared = Shared::new(w);
    let rxs = receivers(&a, &b, &shared, timer.c(), false);
    let (t, s) = (timer.clone(), shared.clone());
    control(&a, &b, seed, 300, move |rng| {
        if rng.below(10) < 7 {
            let d = short(rng);
            s.operate(Some(d), false, || t.reset(d));
        } else {
            s.operate(None, false, || t.stop());
        }
    });
    shared.operate(None, false, || timer.stop());
    shared.done.store(true, SeqCst);
    let got: Vec<_> = rxs.into_iter().flat_map(|r| r.join().unwrap()).collect();
    let h = shared.history.lock().unwrap();
    for &(e, v) in &got {
        check_value(&h, e, v);
    }
    assert_eq!(
        got.len() as u64,
        h.expected,
        "values received vs armings whose stop/reset returned false ({} operations)",
        h.ops.len()
    );
    assert!(timer.c().try_recv().is_err(), "a value after the last stop");
}

#[test]
fn timer_stop_and_reset_results_match_the_values_received_across_threads_and_runtimes() {
    rounds("timer", timer_round);
}

fn ticker_round(seed: u64) {
    let (a, b) = runtimes();
    let mut rng = Rng(seed);
    let p0 = period(&mut rng);
    let before = nanotime_exact();
    let ticker = Arc::new({
        let _g = a.handle().enter();
        Ticker::new(p0)
    });
    let p = p0.as_nanos() as i64;
    let w = Window {
        lo: before + p - CLOCK_TRAIL,
        hi: nanotime_exact() + p,
        period: p,
    };
    let shared = Shared::new(w);
    let rxs = receivers(&a, &b, &shared, ticker.c(), true);
    let (t, s) = (ticker.clone(), shared.clone());
    control(&a, &b, seed, 3000, move |rng| {
        // A ticker's stop and reset return nothing: recorded as "was live" (false), so
        // `expected` is not checked, only the values.
        if rng.below(10) < 7 {
            let p = period(rng);
            s.operate(Some(p), true, || {
                t.reset(p);
                false
            });
        } else {
            s.operate(None, true, || {
                t.stop();
                false
            });
        }
    });
    shared.operate(None, true, || {
        ticker.stop();
        false
    });
    shared.done.store(true, SeqCst);
    let got: Vec<_> = rxs.into_iter().flat_map(|r| r.join().unwrap()).collect();
    let h = shared.history.lock().unwrap();
    for &(e, v) in &got {
        check_value(&h, e, v);
    }
    assert!(ticker.c().try_recv().is_err(), "a tick after the last stop");
}

/// A ticker's period: 20 µs to 500 µs, so that several ticks race each operation.
fn period(rng: &mut Rng) -> Duration {
    Duration::from_micros(20 + rng.below(480))
}

#[test]
fn ticker_stop_and_reset_racing_the_ticks_let_no_old_tick_through() {
    rounds("ticker", ticker_round);
}

fn after_func_round(seed: u64) {
    let (a, b) = runtimes();
    let mut rng = Rng(seed);
    let d0 = short(&mut rng);
    let runs = Arc::new(AtomicU64::new(0));
    let af = Arc::new({
        let _g = a.handle().enter();
        let runs = runs.clone();
        gort::time::after_func(d0, move || {
            // Every other run takes a while, so that operations and firings overlap it.
            if runs.fetch_add(1, SeqCst) % 2 == 0 {
                std::thread::sleep(Duration::from_micros(100));
            }
        })
    });
    let w = Window {
        lo: 0,
        hi: 0,
        period: 0,
    };
    let shared = Shared::new(w);
    let (f, s) = (af.clone(), shared.clone());
    control(&a, &b, seed, 300, move |rng| {
        if rng.below(10) < 7 {
            let d = short(rng);
            s.operate(Some(d), false, || f.reset(d));
        } else {
            s.operate(None, false, || f.stop());
        }
    });
    shared.operate(None, false, || af.stop());
    let expected = shared.history.lock().unwrap().expected;
    // A false result means `f` ran or is queued to run: wait for the queued runs.
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while runs.load(SeqCst) < expected && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(1));
    }
    std::thread::sleep(Duration::from_millis(5));
    assert_eq!(
        runs.load(SeqCst),
        expected,
        "runs of f vs armings whose stop/reset returned false"
    );
}

#[test]
fn after_func_stop_and_reset_results_match_the_runs_of_f() {
    rounds("after_func", after_func_round);
}

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
    let wanted: u64 = timers.iter().map(|t| t.1.history.lock().unwrap().expected + 1).sum();
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
    let rxs = receivers(&a, &b, &shared, timer.c(), false);
    let (t, w, r, tr) = (timer.clone(), windows.clone(), resets.clone(), trues.clone());
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
    assert_eq!(runs.load(SeqCst), expected, "runs of f vs armings not ended with true");
}

#[test]
fn after_func_stopped_and_reset_from_everywhere_at_once_runs_once_per_arming_ended_false() {
    rounds("unordered after_func", unordered_after_func_round);
}
