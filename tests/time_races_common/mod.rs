//! What the `time_races*` tests share: the random rounds under a watchdog, the controllers
//! and receivers of one timer, and the history its operations are checked against (see
//! `tests/time_races.rs`).

#![allow(dead_code)] // each test binary uses a part

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::SeqCst};
use std::sync::{mpsc, Arc, Mutex};
use std::time::Duration;

use gort::time::Instant;
use gort_timer::{nanotime_exact, CLOCK_TRAIL};

/// Generous: a healthy run of a test takes a second or two.
pub const WATCHDOG: Duration = Duration::from_secs(20);
/// Random rounds per test (`GORT_TIME_RACES_ROUNDS` overrides), and operations per
/// controller in a round.
pub const ROUNDS: u64 = 40;
pub const OPS: usize = 60;

/// xorshift64*: reproducible from its seed, no dependency.
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

pub fn seed() -> u64 {
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
pub fn rounds(name: &'static str, round: fn(u64)) {
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

pub fn runtimes() -> (gort::Runtime, gort::Runtime) {
    let a = gort::Builder::new().procs(2).build().unwrap();
    let b = gort::Builder::new().procs(1).build().unwrap();
    (a, b)
}

/// One arming: its deadline lies in `[lo, hi]` (nanos), then every `period` if > 0.
#[derive(Clone, Copy, Debug)]
pub struct Window {
    pub lo: i64,
    pub hi: i64,
    pub period: i64,
}

impl Window {
    /// Whether `v` is one of this arming's deadlines.
    pub fn holds(&self, v: i64) -> bool {
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
pub struct History {
    /// Per operation: the arming it started (none for a stop), and when it returned.
    pub ops: Vec<(Option<Window>, i64)>,
    /// Whether the current arming is live (armed and not yet stopped or reset).
    pub live: bool,
    /// The values that must be received (or runs of `f` made): one per arming that ended
    /// with false.
    pub expected: u64,
}

/// What the controllers share: the history and the number of the last operation done.
pub struct Shared {
    pub history: Mutex<History>,
    pub epoch: AtomicUsize,
    pub done: AtomicBool,
}

impl Shared {
    pub fn new(first: Window) -> Arc<Shared> {
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
    pub fn operate(&self, d: Option<Duration>, period: bool, op: impl FnOnce() -> bool) {
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
pub fn check_value(h: &History, e: usize, v: Instant) {
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
pub fn pause_len(rng: &mut Rng, max_us: u64) -> Option<Duration> {
    match rng.below(4) {
        0 => None,
        _ => Some(Duration::from_micros(rng.below(max_us))),
    }
}

/// Runs `ops` on three controllers (a task of `a`, a plain thread in `a`'s context, a task of
/// `b`), each `OPS` operations `op(rng)` apart by random pauses of up to `max_us` µs; returns
/// when all are done.
pub fn control(
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
pub fn short(rng: &mut Rng) -> Duration {
    match rng.below(8) {
        0 => Duration::ZERO,
        _ => Duration::from_micros(rng.below(400)),
    }
}

/// Receivers of a channel timer's values until `done`: a task of `a` and one of `b` awaiting
/// (so the timer enters either runtime's heaps), and a plain thread polling with `try_recv`.
/// Each records `(epoch when its receive started, value)`, in the order it received them (a
/// ticker's are checked by [`check_increasing`]).
pub fn receivers(
    a: &gort::Runtime,
    b: &gort::Runtime,
    shared: &Arc<Shared>,
    rx: &gort::chan::Receiver<Instant>,
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
                    got.push((e, v));
                }
                std::thread::sleep(Duration::from_micros(50));
            }
            got
        })
    };
    vec![awaiting(a), awaiting(b), polling]
}

/// Checks one receiver's ticks, in the order it received them. Ticks go through a FIFO
/// channel in the order they are sent, and within an arming they are sent in increasing
/// order; across a reset they may not be: a reset reads the clock before it takes the timer
/// (as Go's `Reset` computes `when` first), so a tick of the old arming that falls due in
/// between is sent first, and the new arming's first deadline, counted from the earlier
/// reading, may lie before it. So a tick no later than the one before it must be of a later
/// arming whose operation began (to within the clock's trail) before that earlier tick.
pub fn check_increasing(h: &History, got: &[(usize, Instant)]) {
    for pair in got.windows(2) {
        let ((e1, v1), (e2, v2)) = (
            (pair[0].0, pair[0].1.as_nanos()),
            (pair[1].0, pair[1].1.as_nanos()),
        );
        if v2 > v1 {
            continue;
        }
        // Arming `j` holds the earlier tick, a later arming `k` the later one, and `k`'s
        // operation began before the earlier tick was due (`lo - period` is the clock
        // reading it began with, less the trail).
        let arming = |k: usize, v: i64| h.ops[k].0.filter(|w| w.holds(v));
        let raced = (e1..h.ops.len())
            .filter(|&j| arming(j, v1).is_some())
            .any(|j| {
                ((j + 1).max(e2)..h.ops.len())
                    .filter_map(|k| arming(k, v2))
                    .any(|w| w.lo - w.period <= v1)
            });
        assert!(
            raced,
            "tick {v2} after tick {v1}, and no later arming holding it began before {v1}: {:?}",
            &h.ops[e1.saturating_sub(1)..]
        );
    }
}
