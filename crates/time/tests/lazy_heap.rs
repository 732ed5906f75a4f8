//! Go 1.23's lazy timer channels (issue 17, item 5): a channel `Timer`/`Ticker` is in a heap
//! only while a receiver waits on its channel, and a receiver that arrives after the deadline
//! gets the value Go 1.23 gives (the due instant; for a ticker the oldest unreceived tick,
//! then the next tick of its phase, the ones in between dropped).
//! Their CPU cost is checked alone in `unread_ticker_cpu.rs`.

use std::time::Duration;

use gort_sched::Runtime;
use gort_time::{after, sleep, Instant, Ticker, Timer};

const MS: Duration = Duration::from_millis(1);

fn run<F: std::future::Future>(f: F) -> F::Output {
    Runtime::new().unwrap().block_on(f)
}

#[test]
fn a_ticker_read_after_a_pause_gets_the_oldest_tick_then_its_phase() {
    run(async {
        let period = 10 * MS;
        let before = Instant::now();
        let t = Ticker::new(period);
        let after_new = Instant::now();
        sleep(105 * MS).await;
        let first_read = Instant::now();
        let v1 = t.c().recv().await.unwrap();
        // Go 1.23: the first tick's due instant, although ten periods passed.
        assert!(
            v1 >= before + period && v1 <= after_new + period,
            "got {v1:?}, not the first tick (created between {before:?} and {after_new:?})"
        );
        let v2 = t.c().recv().await.unwrap();
        // The ticks in between are dropped: the next one is the first of the phase after the
        // read, and still on the phase.
        assert!(
            v2 > first_read,
            "got a missed tick {v2:?} (read at {first_read:?})"
        );
        let since = (v2 - v1).as_nanos();
        assert_eq!(
            since % period.as_nanos(),
            0,
            "{v2:?} is off the phase of {v1:?}"
        );
        assert!(v2 - v1 >= 10 * period);
    });
}

#[test]
fn a_late_receiver_gets_the_due_instant_of_a_timer() {
    run(async {
        let before = Instant::now();
        let t = Timer::new(5 * MS);
        let a = after(5 * MS);
        let after_new = Instant::now();
        sleep(50 * MS).await;
        for v in [t.c().recv().await.unwrap(), a.recv().await.unwrap()] {
            assert!(v >= before + 5 * MS && v <= after_new + 5 * MS, "{v:?}");
        }
        assert!(!t.stop(), "received: stop reports nothing stopped");
    });
}

#[test]
fn a_select_with_default_sees_a_due_timer() {
    run(async {
        let t = Timer::new(MS);
        sleep(20 * MS).await;
        let got = gort_chan::select! {
            v = t.c().recv() => v,
            default => None,
        };
        assert!(
            got.is_some(),
            "a due timer's value is ready for a non-blocking select"
        );
    });
}

#[test]
fn len_reports_a_due_value() {
    run(async {
        let t = Timer::new(MS);
        assert_eq!(t.c().len(), 0);
        sleep(20 * MS).await;
        assert_eq!(t.c().len(), 1, "a due timer's value is buffered when asked");
        assert!(t.stop(), "unreceived: stop reports it stopped, and drains");
        assert_eq!(t.c().len(), 0);
    });
}

/// The stop/reset rules hold for a due value nobody has looked at yet: it counts as not
/// received, and it is never received after stop/reset returns.
#[test]
fn stop_and_reset_of_a_due_unlooked_at_timer() {
    run(async {
        let t = Timer::new(MS);
        sleep(20 * MS).await;
        assert!(t.stop(), "due but never received: stopped");
        assert!(t.c().try_recv().is_err(), "a value after stop");
        assert!(!t.stop());

        assert!(!t.reset(MS), "stopped: reset reports nothing pending");
        sleep(20 * MS).await;
        let at = Instant::now();
        assert!(
            t.reset(20 * MS),
            "due but never received: reset reports it pending"
        );
        let v = t.c().recv().await.unwrap();
        assert!(
            v >= at + 20 * MS,
            "received {v:?}, a value of the old arming"
        );

        let tk = Ticker::new(MS);
        sleep(20 * MS).await;
        tk.stop();
        sleep(5 * MS).await;
        assert!(tk.c().try_recv().is_err(), "a tick after stop");
        let at = Instant::now();
        tk.reset(10 * MS);
        let v = tk.c().recv().await.unwrap();
        assert!(
            v >= at + 10 * MS,
            "received {v:?}, a tick of the old arming"
        );
    });
}

/// A receiver waiting in a task is woken by the heap; a second waiter and a cancelled wait
/// keep the count of waiters right (the timer leaves the heap only with the last).
#[test]
fn waiting_receivers_are_served_by_the_heap() {
    let rt = Runtime::new().unwrap();
    rt.block_on(async {
        let base = rt.metrics().timers_pending;
        let t = Ticker::new(5 * MS);
        let c = t.c().clone();
        let h = gort_sched::spawn(async move {
            for _ in 0..3 {
                c.recv().await.unwrap();
            }
        });
        // A second waiter that gives up: its cancelled wait must not take the timer out of
        // the heap while the task still waits (the task would then hang).
        let _ = gort_time::timeout(MS, t.c().recv()).await;
        gort_time::timeout(Duration::from_secs(10), h)
            .await
            .expect("the waiting task was not served")
            .unwrap();
        for _ in 0..3 {
            t.c().recv().await.unwrap();
        }
        assert_eq!(
            rt.metrics().timers_pending,
            base,
            "no waiter left, yet in a heap"
        );
    });
}

/// The runtime timer exists only while it may be in a heap: a wait given up leaves it stopped
/// in its heap (kept, and revived by the next wait), a fire frees it (the next wait makes a
/// new one). Either way each wait gets the instant the timer was due, and nothing stays
/// pending. (A wait may be served early on a slow machine: then it is the value.)
#[test]
fn waits_given_up_and_made_again_get_the_due_instant() {
    let rt = Runtime::new().unwrap();
    rt.block_on(async {
        let base = rt.metrics().timers_pending;
        let t = Timer::new(Duration::from_secs(3600));
        for round in 0..3 {
            let start = Instant::now();
            // Pending only the first time (armed for an hour); then its value was received.
            assert_eq!(t.reset(20 * MS), round == 0);
            let mut got = None;
            for _ in 0..3 {
                if let Ok(v) = gort_time::timeout(MS, t.c().recv()).await {
                    got = v;
                    break;
                }
            }
            let due = match got {
                Some(v) => v,
                None => t.c().recv().await.expect("the timer's value"),
            };
            assert!(due >= start + 20 * MS, "a value before its deadline");
            assert!(t.c().try_recv().is_err(), "one value per arming");
        }
        assert_eq!(rt.metrics().timers_pending, base, "a fired timer in a heap");
    });
}
