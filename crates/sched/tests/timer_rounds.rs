//! A scheduling round runs at most its ring's room of due timers (`P::timer_room`:
//! half the 1,024-slot ring, less the tasks queued) and leaves the rest in the heap, in deadline
//! order, for the next rounds: a P back from a long task with thousands of timers due must not
//! move all their tasks to the run queues at once, where the ring's overflow would wait in the
//! global queue behind newer work (design/TIMERS.md, "Bounded rounds").

use gort_sched::timer_api::modtimer;
use gort_sched::Builder;
use gort_timer::{nanotime, Nanos, Timer};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const TIMERS: usize = 10_000;
/// The free half of an empty ring.
const ROOM: usize = 512;

/// Deadlines fired: by the runtime's Ms, and by sysmon (which may take a stuck P's timers if
/// the machine preempts the test past sysmon's grace; those are not a round's).
#[derive(Default)]
struct Fired {
    by_ms: Vec<Nanos>,
    by_sysmon: usize,
}

fn all_fired(log: &Mutex<Fired>) -> bool {
    let f = log.lock().unwrap();
    f.by_ms.len() + f.by_sysmon == TIMERS
}

fn spin_until(t: Nanos) {
    while nanotime() < t {
        std::hint::spin_loop();
    }
}

#[test]
fn a_round_runs_at_most_the_rings_room_of_due_timers_in_deadline_order() {
    let rt = Builder::new().procs(1).build().unwrap();
    let fired = Arc::new(Mutex::new(Fired::default()));
    let log = fired.clone();
    let (first_round, all) = rt
        .block_on(rt.spawn(async move {
            // Deadlines after the arming, in reverse order of arming; the task spins past
            // the last so that all are due at its next round.
            let base = nanotime() + Duration::from_millis(100).as_nanos() as Nanos;
            let timers: Vec<_> = (0..TIMERS)
                .map(|i| {
                    let t = Timer::new();
                    let log = log.clone();
                    t.set_fire(Arc::new(move |when: Nanos| {
                        let mut f = log.lock().unwrap();
                        if std::thread::current().name() == Some("gort-sysmon") {
                            f.by_sysmon += 1;
                        } else {
                            f.by_ms.push(when);
                        }
                    }));
                    modtimer(&t, base + (TIMERS - i) as Nanos, 0, None).expect("in a runtime");
                    t
                })
                .collect();
            spin_until(base + TIMERS as Nanos + 1_000);
            let before = log.lock().unwrap().by_ms.len();
            gort_sched::yield_now().await;
            let first_round = log.lock().unwrap().by_ms.len() - before;
            let deadline = Instant::now() + Duration::from_secs(20);
            while !all_fired(&log) {
                assert!(Instant::now() < deadline, "the timers did not all fire");
                gort_sched::yield_now().await;
            }
            drop(timers);
            (first_round, TIMERS)
        }))
        .unwrap();
    assert!(
        first_round <= ROOM,
        "one round ran {first_round} of {all} due timers (at most {ROOM})"
    );
    let f = fired.lock().unwrap();
    assert!(
        f.by_ms.windows(2).all(|w| w[0] < w[1]),
        "the Ms' rounds ran the timers out of deadline order"
    );
}
