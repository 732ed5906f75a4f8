//! Go 1.23's timer-channel guarantees (go#37196, go#69312, go#61542): no stale value after
//! Stop/Reset, Stop of a fired-but-unreceived timer returns true and drains, `len(c) == 0`
//! after stop, unreferenced timers are stopped and freed.

use std::time::Duration;

use gort_sched::Runtime;
use gort_time::{after, sleep, tick, Instant, Ticker, Timer};

const MS: Duration = Duration::from_millis(1);

fn run<F: std::future::Future>(f: F) -> F::Output {
    Runtime::new().unwrap().block_on(f)
}

/// Waits (generously) until `t` has fired: its value is buffered.
async fn until_buffered<T>(c: &gort_chan::Receiver<T>) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while c.is_empty() {
        assert!(Instant::now() < deadline, "timer never fired");
        sleep(MS).await;
    }
}

/// Polls a receive once (it parks), then waits (generously) until a value was handed to it
/// and its waker woken; the receive is left unpolled.
async fn park_until_handed<F: std::future::Future + Unpin>(fut: &mut F) {
    use std::sync::atomic::{AtomicBool, Ordering::SeqCst};
    use std::sync::Arc;
    struct Flag(AtomicBool);
    impl std::task::Wake for Flag {
        fn wake(self: Arc<Self>) {
            self.0.store(true, SeqCst);
        }
    }
    let flag = Arc::new(Flag(AtomicBool::new(false)));
    let waker = std::task::Waker::from(flag.clone());
    let mut cx = std::task::Context::from_waker(&waker);
    assert!(
        std::pin::Pin::new(&mut *fut).poll(&mut cx).is_pending(),
        "parks before the value comes"
    );
    let deadline = Instant::now() + Duration::from_secs(10);
    while !flag.0.load(SeqCst) {
        assert!(Instant::now() < deadline, "no value in 10 s");
        sleep(MS).await;
    }
}

#[test]
fn stop_of_fired_unreceived_timer_is_true_and_drains() {
    run(async {
        let t = Timer::new(Duration::ZERO);
        until_buffered(t.c()).await;
        assert!(t.stop(), "fired but unreceived counts as stopped");
        assert_eq!(t.c().len(), 0);
        sleep(5 * MS).await;
        assert!(t.c().try_recv().is_err(), "a value arrived after stop");
        assert!(!t.stop(), "second stop");
    });
}

#[test]
fn stop_after_receive_is_false() {
    run(async {
        let t = Timer::new(MS);
        t.c().recv().await.unwrap();
        assert!(!t.stop());
    });
}

#[test]
fn reset_of_fired_unreceived_timer_is_true_and_no_stale_value() {
    run(async {
        let t = Timer::new(Duration::ZERO);
        until_buffered(t.c()).await;
        let before = Instant::now();
        assert!(
            t.reset(20 * MS),
            "fired but unreceived: reset reports it active"
        );
        assert_eq!(t.c().len(), 0, "the stale value was drained");
        let v = t.c().recv().await.unwrap();
        assert!(
            v >= before + 20 * MS,
            "received {v:?}, a value of the old arming"
        );
    });
}

#[test]
fn reset_after_stop_and_after_receive_is_false() {
    run(async {
        let t = Timer::new(Duration::from_secs(3600));
        assert!(t.stop());
        assert!(!t.reset(MS));
        t.c().recv().await.unwrap();
        assert!(!t.reset(MS));
        assert!(t.reset(Duration::from_secs(3600)), "pending: true");
    });
}

#[test]
fn value_is_the_due_instant() {
    run(async {
        let before = Instant::now();
        let t = Timer::new(10 * MS);
        let after_new = Instant::now();
        sleep(30 * MS).await; // deliver late on purpose
        let v = t.c().recv().await.unwrap();
        assert!(
            v >= before + 10 * MS && v <= after_new + 10 * MS,
            "{v:?} is not the deadline"
        );
    });
}

#[test]
fn ticker_stop_and_reset_drop_buffered_tick() {
    run(async {
        let tk = Ticker::new(MS);
        until_buffered(tk.c()).await;
        tk.stop();
        assert_eq!(tk.c().len(), 0);
        sleep(5 * MS).await;
        assert!(tk.c().try_recv().is_err(), "a tick after stop");

        tk.reset(MS);
        until_buffered(tk.c()).await;
        let before = Instant::now();
        tk.reset(Duration::from_secs(3600));
        assert_eq!(tk.c().len(), 0);
        sleep(5 * MS).await;
        assert!(tk.c().try_recv().is_err(), "a stale tick after reset");
        tk.reset(2 * MS);
        let v = tk.c().recv().await.unwrap();
        assert!(v >= before + 2 * MS);
    });
}

/// Go 1.23: a timer channel is in a heap only while a receive waits on it (issue 17, item 5:
/// before, every armed timer was pending, so an unread ticker fired for nothing).
#[test]
fn timers_are_pending_only_while_a_receiver_waits() {
    let rt = Runtime::new().unwrap();
    rt.block_on(async {
        let base = rt.metrics().timers_pending;
        let t = Timer::new(Duration::from_secs(3600));
        let tk = Ticker::new(Duration::from_secs(3600));
        let a = after(Duration::from_secs(3600));
        let c = tick(Duration::from_secs(3600));
        assert_eq!(rt.metrics().timers_pending, base, "unread timers in a heap");
        {
            let waits = [t.c().recv(), tk.c().recv(), a.recv(), c.recv()];
            let mut waits = waits.map(Box::pin);
            for w in &mut waits {
                assert!(futures_poll_once(w.as_mut()).is_pending());
            }
            assert_eq!(rt.metrics().timers_pending, base + 4, "waited-on timers");
        }
        assert_eq!(
            rt.metrics().timers_pending,
            base,
            "timers still pending after their receives were dropped"
        );
        drop((t, tk, a, c));
        assert_eq!(rt.metrics().timers_pending, base, "dropped timers pending");
    });
}

fn futures_poll_once<F: std::future::Future>(
    f: std::pin::Pin<&mut F>,
) -> std::task::Poll<F::Output> {
    struct Nop;
    impl std::task::Wake for Nop {
        fn wake(self: std::sync::Arc<Self>) {}
    }
    let waker = std::task::Waker::from(std::sync::Arc::new(Nop));
    f.poll(&mut std::task::Context::from_waker(&waker))
}

#[test]
fn receiver_clone_keeps_timer_alive() {
    run(async {
        let t = Timer::new(5 * MS);
        let c = t.c().clone();
        drop(t);
        assert!(gort_time::timeout(Duration::from_secs(10), c.recv())
            .await
            .unwrap()
            .is_some());
    });
}

/// go#61542: `after` in a select loop does not pile up pending timers.
#[test]
fn after_in_a_select_loop_does_not_pile_up() {
    let rt = Runtime::new().unwrap();
    rt.block_on(async {
        let base = rt.metrics().timers_pending;
        let (tx, rx) = gort_chan::unbounded();
        for i in 0..1000 {
            tx.try_send(i).unwrap();
            let hour = after(Duration::from_secs(3600));
            gort_chan::select! {
                v = rx.recv() => assert_eq!(v, Some(i)),
                _ = hour.recv() => panic!("an hour passed"),
            }
        }
        assert!(
            rt.metrics().timers_pending <= base + 1,
            "{:?}",
            rt.metrics()
        );
    });
}

/// A value handed to a parked plain `recv()` future whose owner has not polled it yet is not
/// "received": `stop` drains it and returns true, and dropping the future afterwards does not
/// put it back (the channel core used to bounce it into the buffer after `stop` returned).
#[test]
fn stop_reclaims_a_value_handed_to_an_unpolled_receive() {
    run(async {
        let t = Timer::new(5 * MS);
        // The fire hands the value to the parked receive and wakes it; we do not poll it.
        let mut fut = Box::pin(t.c().recv());
        park_until_handed(&mut fut).await;
        assert!(t.stop(), "a value nobody has seen yet counts as stopped");
        drop(fut);
        assert!(t.c().try_recv().is_err(), "the drained value came back");
        assert!(!t.stop());
    });
}

/// A tick handed to a parked `recv()` that is then cut off (a `timeout` past its deadline,
/// another `select!` arm) after a newer tick was sent is dropped, not put back: put back, it
/// reached the next receive after the newer one, and a receiver saw a tick older than the
/// one before it (`tests/time_races.rs` under load). A ticker's ticks arrive in increasing
/// order or not at all, however its receives are cut off.
#[test]
fn a_tick_cut_off_after_a_newer_one_was_sent_is_dropped_not_put_back() {
    run(async {
        let ticker = Ticker::new(2 * MS);
        let rx = ticker.c();
        // A tick is handed to a receive whose owner does not poll it yet.
        let mut cut_off = Box::pin(rx.recv());
        park_until_handed(&mut cut_off).await;
        // A newer tick goes to another receive, which returns it.
        let newer = rx.recv().await.expect("a newer tick");
        // The first receive is cut off: its tick is older than one already received.
        drop(cut_off);
        let next = rx.recv().await.expect("a later tick");
        assert!(
            next > newer,
            "a tick {:?} older than the one received before it came back",
            newer.duration_since(next)
        );
    });
}
