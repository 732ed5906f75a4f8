//! Native-thread stress: mutators arm, stop and re-arm their own timers on two heaps while
//! an owner and a stealer check both heaps and a resizer moves timers between them. Checks
//! the accounting identity: every arming ends exactly once, by firing, by `del` returning
//! true, or by a `modify` that returned true.
#![cfg(not(loom))]

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::SeqCst};
use std::sync::Arc;
use std::time::{Duration, Instant};

use gort_timer::*;

struct Rng(u64);
impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d) % n
    }
}

#[derive(Default)]
struct Tally {
    armed: AtomicU64,
    ended_by_del: AtomicU64,
    ended_by_modify: AtomicU64,
    fired: Arc<AtomicU64>,
}

#[test]
fn concurrent_mutators_checkers_and_moves_balance() {
    let heaps = Arc::new([Timers::new(0), Timers::new(1)]);
    let tally = Arc::new(Tally::default());
    let stop = Arc::new(AtomicBool::new(false));
    let host = |_: Nanos| {};
    let mut threads = Vec::new();

    for (id, local) in [(0usize, true), (1, false)] {
        let (heaps, stop) = (heaps.clone(), stop.clone());
        threads.push(std::thread::spawn(move || {
            while !stop.load(SeqCst) {
                heaps[id].check(0, local);
                heaps[1 - id].check(0, !local);
                std::thread::yield_now();
            }
        }));
    }
    {
        let (heaps, stop) = (heaps.clone(), stop.clone());
        threads.push(std::thread::spawn(move || {
            let mut dir = 0;
            while !stop.load(SeqCst) {
                drop(heaps[dir].move_to(&heaps[1 - dir], &|_| {}));
                dir = 1 - dir;
                std::thread::sleep(Duration::from_millis(2));
            }
        }));
    }
    let deadline = Instant::now() + Duration::from_millis(300);
    let mut mutators = Vec::new();
    for seed in 1..=2u64 {
        let (heaps, tally) = (heaps.clone(), tally.clone());
        mutators.push(std::thread::spawn(move || {
            let mut rng = Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15));
            let fired = tally.fired.clone();
            let timers: Vec<_> = (0..64).map(|_| Timer::new()).collect();
            while Instant::now() < deadline {
                let t = &timers[rng.below(64) as usize];
                let home = &heaps[rng.below(2) as usize];
                let when = nanotime() + rng.below(500_000) as Nanos;
                match rng.below(3) {
                    0 => {
                        if del(t) {
                            tally.ended_by_del.fetch_add(1, SeqCst);
                        }
                    }
                    _ => {
                        let f = fired.clone();
                        let fire: Arc<dyn Fire> = Arc::new(move |_| {
                            f.fetch_add(1, SeqCst);
                        });
                        tally.armed.fetch_add(1, SeqCst);
                        // Installed inside the arming: a one-shot run racing a separate
                        // `set_fire` could take the new payload and leave the arming none.
                        if modify_fire(t, when, 0, &fire, home, &host) {
                            tally.ended_by_modify.fetch_add(1, SeqCst);
                        }
                    }
                }
            }
            timers
        }));
    }
    let timers: Vec<_> = mutators
        .into_iter()
        .flat_map(|m| m.join().unwrap())
        .collect();
    stop.store(true, SeqCst);
    for t in threads {
        t.join().unwrap();
    }
    // Run out every remaining deadline (all are within 0.5 ms of the end).
    std::thread::sleep(Duration::from_millis(2));
    for h in heaps.iter() {
        h.check(0, true);
        h.verify();
    }
    assert!(
        timers.iter().all(|t| !t.is_pending()),
        "a timer was left pending"
    );
    let armed = tally.armed.load(SeqCst);
    let ended = tally.fired.load(SeqCst)
        + tally.ended_by_del.load(SeqCst)
        + tally.ended_by_modify.load(SeqCst);
    assert!(armed > 1_000, "too little work to mean anything: {armed}");
    assert_eq!(ended, armed, "every arming ends exactly once");
}
