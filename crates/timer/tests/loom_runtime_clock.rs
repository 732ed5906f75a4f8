//! loom models of a runtime's clock (`RuntimeClock`, `clock/runtime_clock.rs`): its paused
//! flag and its 64-bit value are read together under a seqlock while `pause`, `jump_to` and
//! `resume` write them; a reader never sees the flag of one transition with the value of
//! another.
//!
//! Run: `RUSTFLAGS="--cfg loom" LOOM_MAX_PREEMPTIONS=2 cargo test --release -p gort-timer
//! --test loom_runtime_clock`. The real clock still runs under loom: a reading of it is small
//! (the process is young: under 2^50 ns, 13 days), the jumps go past 2^62 ns (where the old
//! one-word state wrapped), so a torn read shows as a value that is neither. Readers run on
//! spawned threads (loom explored a single schedule of a reader on the model's main thread).
#![cfg(loom)]

use gort_loom::{thread, Arc};
use gort_timer::{Nanos, RuntimeClock};

/// A paused clock's target, past 146 years.
const FAR: Nanos = (1 << 62) + 12_345;
/// Real readings of a young process are below this.
const YOUNG: Nanos = 1 << 50;

/// Two readings on another thread.
fn reader(clock: &Arc<RuntimeClock>) -> thread::JoinHandle<(Nanos, Nanos)> {
    let clock = clock.clone();
    thread::spawn(move || {
        let a = clock.now();
        let _ = clock.is_paused();
        (a, clock.now())
    })
}

#[test]
fn readings_racing_pause_and_jumps_are_real_or_frozen_and_never_go_back() {
    loom::model(|| {
        let clock = Arc::new(RuntimeClock::new());
        let r = reader(&clock);
        assert!(clock.pause());
        assert!(clock.jump_to(FAR));
        let (a, b) = r.join().unwrap();
        for n in [a, b] {
            // Real (>= 1, small), the frozen real reading, or FAR: never a torn pair such as
            // the pause's flag with the old offset (0), or FAR read as an offset.
            assert!((1..YOUNG).contains(&n) || n == FAR, "torn reading {n}");
        }
        assert!(b >= a, "went back from {a} to {b}");
    });
}

#[test]
fn readings_racing_resume_are_frozen_or_resumed() {
    loom::model(|| {
        let clock = Arc::new(RuntimeClock::new());
        assert!(clock.pause());
        assert!(clock.jump_to(FAR));
        let r = reader(&clock);
        assert!(clock.resume());
        let (a, b) = r.join().unwrap();
        for n in [a, b] {
            // Frozen (FAR) or resumed (FAR plus the real time since): never the resume's
            // offset read as a frozen value (below FAR).
            assert!((FAR..FAR + YOUNG).contains(&n), "torn reading {n}");
        }
        assert!(b >= a, "went back from {a} to {b}");
        assert!(!clock.is_paused());
    });
}

#[test]
fn paused_readings_racing_jumps_are_the_values_stored_in_order() {
    loom::model(|| {
        let clock = Arc::new(RuntimeClock::new());
        assert!(clock.pause());
        let start = clock.now();
        let r = reader(&clock);
        assert!(clock.jump_to(FAR));
        assert!(clock.jump_to(FAR + 1));
        let (a, b) = r.join().unwrap();
        for n in [a, b] {
            assert!(n == start || n == FAR || n == FAR + 1, "{n}");
        }
        assert!(b >= a, "went back from {a} to {b}");
        assert_eq!(clock.now(), FAR + 1);
    });
}
