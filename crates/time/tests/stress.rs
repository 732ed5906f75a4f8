//! Stress: many tasks over 4 Ps (on however many cores) start, stop, reset and receive from
//! Timers and AfterFuncs with sub-millisecond deadlines, so fires race with stop/reset on
//! other threads all the time. Checked on every step:
//!
//! - a `Timer` arming yields at most one value, never after a stop/reset ended it;
//! - `stop()`/`reset()` return true exactly when that arming's value was not received;
//! - every value received is the due instant of the current arming (a stale one would be the
//!   deadline of an earlier arming);
//! - an `AfterFunc` runs exactly once per arming that no stop/reset returned true for.

use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::Arc;
use std::time::Duration;

use gort_sched::{spawn, yield_now, Builder};
use gort_time::{after_func, sleep, timeout, Instant, Timer};

const TASKS: u64 = 12;
const STEPS: usize = 300;

struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }
    /// 0..1.5 ms, sometimes exactly zero.
    fn duration(&mut self) -> Duration {
        match self.below(8) {
            0 => Duration::ZERO,
            _ => Duration::from_micros(self.below(1500)),
        }
    }
}

/// What the model knows about the current arming of one Timer.
#[derive(Debug)]
struct Arming {
    /// The due instant lies in `lo..=hi` (the clock before and after arming, plus `d`).
    lo: Instant,
    hi: Instant,
    received: bool,
    /// A stop or reset ended it.
    ended: bool,
}

impl Arming {
    /// What stop/reset must return now.
    fn live(&self) -> bool {
        !self.received && !self.ended
    }
}

async fn timer_task(seed: u64) -> usize {
    let mut rng = Rng(seed);
    let d = rng.duration();
    let before = Instant::now();
    let t = Timer::new(d);
    let mut cur = Arming {
        lo: before + d,
        hi: Instant::now() + d,
        received: false,
        ended: false,
    };
    let mut received = 0;
    for step in 0..STEPS {
        match rng.below(5) {
            0 | 1 => {
                let wait = Duration::from_micros(rng.below(1000));
                if let Ok(v) = timeout(wait, t.c().recv()).await {
                    let v = v.expect("timer channel closed while the timer is alive");
                    assert!(cur.live(), "step {step}: value {v:?} for {cur:?}");
                    assert!(
                        cur.lo <= v && v <= cur.hi,
                        "step {step}: stale {v:?}, {cur:?}"
                    );
                    cur.received = true;
                    received += 1;
                }
            }
            2 => {
                let r = t.stop();
                assert_eq!(r, cur.live(), "step {step}: stop() with {cur:?}");
                cur.ended = true;
                assert_eq!(t.c().len(), 0, "step {step}: value buffered after stop");
            }
            3 => {
                let d = rng.duration();
                let before = Instant::now();
                let r = t.reset(d);
                let after = Instant::now();
                assert_eq!(r, cur.live(), "step {step}: reset() with {cur:?}");
                // (A value may already be buffered: the new arming's, if `d` was tiny; the
                // receive step checks that it is.)
                cur = Arming {
                    lo: before + d,
                    hi: after + d,
                    received: false,
                    ended: false,
                };
            }
            _ => {
                if rng.below(2) == 0 {
                    yield_now().await;
                } else {
                    sleep(Duration::from_micros(rng.below(300))).await;
                }
            }
        }
    }
    // Finally: nothing of a stopped arming ever shows up.
    let live = cur.live();
    assert_eq!(t.stop(), live);
    sleep(Duration::from_millis(3)).await;
    assert!(t.c().try_recv().is_err(), "a value after the final stop");
    received
}

/// Returns (armings, cancelled) and the handle's run counter.
async fn after_func_task(seed: u64) -> (usize, usize, Arc<AtomicUsize>) {
    let mut rng = Rng(seed);
    let ran = Arc::new(AtomicUsize::new(0));
    let r = ran.clone();
    let f = after_func(rng.duration(), move || {
        r.fetch_add(1, SeqCst);
    });
    let (mut armings, mut cancelled) = (1, 0);
    for _ in 0..STEPS {
        match rng.below(4) {
            0 => cancelled += usize::from(f.stop()),
            1 => {
                cancelled += usize::from(f.reset(rng.duration()));
                armings += 1;
            }
            2 => yield_now().await,
            _ => sleep(Duration::from_micros(rng.below(300))).await,
        }
    }
    (armings, cancelled, ran)
}

#[test]
fn timers_and_after_funcs_under_contention() {
    let rt = Builder::new().procs(4).build().unwrap();
    rt.block_on(async {
        let timers: Vec<_> = (0..TASKS)
            .map(|i| spawn(timer_task(0x9e37_79b9_7f4a_7c15 ^ (i + 1))))
            .collect();
        let funcs: Vec<_> = (0..TASKS / 2)
            .map(|i| spawn(after_func_task(0xd1b5_4a32_d192_ed03 ^ (i + 1))))
            .collect();
        let mut received = 0;
        for h in timers {
            received += h.await.unwrap();
        }
        assert!(
            received > 0,
            "no timer ever delivered: the test exercised nothing"
        );
        for h in funcs {
            let (armings, cancelled, ran) = h.await.unwrap();
            let want = armings - cancelled;
            let deadline = Instant::now() + Duration::from_secs(10);
            while ran.load(SeqCst) < want && Instant::now() < deadline {
                sleep(Duration::from_millis(1)).await;
            }
            sleep(Duration::from_millis(5)).await;
            assert_eq!(
                ran.load(SeqCst),
                want,
                "{armings} armings, {cancelled} cancelled by a true stop/reset"
            );
        }
    });
    let m = rt.metrics();
    assert_eq!(m.timers_pending, 0, "timers left armed: {m:?}");
    assert_eq!(m.task_panics, 0, "{m:?}");
}
