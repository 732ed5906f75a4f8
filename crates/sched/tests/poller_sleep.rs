//! The poller sleeps to a deadline with `epoll_pwait2` where the kernel has it, and on its
//! timerfd elsewhere (poller_sys.rs). Either way a runtime's timers fire on time: never
//! before their deadline, and not a sleep's worth after it. One test, so that the switch
//! to the timerfd, which holds for the whole process, flips under no other runtime.
#![cfg(target_os = "linux")]

use std::time::Duration;

use gort::time::{Instant, Ticker};

/// Far past any wake-up delay of a loaded machine, far below a missed deadline (a poll
/// that slept past its deadline waits for the next break or timer: none comes here).
const LATE: Duration = Duration::from_millis(300);

/// Runs sleeps within `epoll_pwait2`'s range (300 µs, 1 ms) and beyond it (5, 20 ms), and a
/// 1 ms ticker, on a runtime of `procs` Ps; each must fire at or after its deadline and
/// less than `LATE` after it.
fn timers_fire_on_time(procs: usize, how: &str) {
    let rt = gort::Builder::new().procs(procs).build().unwrap();
    rt.block_on(async {
        for micros in [300, 1_000, 5_000, 20_000, 300, 1_000] {
            for _ in 0..5 {
                let deadline = Instant::now() + Duration::from_micros(micros);
                gort::time::sleep_until(deadline).await;
                let late = Instant::now() - deadline;
                assert!(
                    Instant::now() >= deadline && late < LATE,
                    "{how}: a {micros} µs sleep ran {late:?} late"
                );
            }
        }
        let ticker = Ticker::new(Duration::from_millis(1));
        for _ in 0..50 {
            let due = ticker.c().recv().await.expect("a tick");
            let late = Instant::now() - due;
            assert!(late < LATE, "{how}: a tick ran {late:?} late");
        }
    });
}

#[test]
fn timers_fire_on_time_with_epoll_pwait2_and_with_the_timerfd_alone() {
    for procs in [1, 2] {
        timers_fire_on_time(procs, "epoll_pwait2 (where the kernel has it)");
        gort_sched::poller_api::timerfd_only(true);
        timers_fire_on_time(procs, "the timerfd alone");
        gort_sched::poller_api::timerfd_only(false);
    }
}
