//! The facade's contract: names, auto traits, and the behaviours the issues pin down.

use gort::chan::{bounded, unbounded, Receiver, Sender};
use gort::time::{
    after, after_func, interval, sleep, tick, AfterFunc, Instant, Interval, MissedTickBehavior,
    Sleep, Ticker, Timer,
};
use gort::{Builder, JoinError, JoinHandle, Runtime};
use std::fmt::Debug;
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::Arc;
use std::time::Duration;

fn send_sync<T: Send + Sync>() {}
fn send<T: Send>() {}
fn debug<T: Debug>() {}
fn copy<T: Copy>() {}

#[test]
fn handles_are_send_sync_and_debug() {
    send_sync::<Runtime>();
    send_sync::<Timer>();
    send_sync::<Ticker>();
    send_sync::<AfterFunc>();
    send_sync::<Sender<u32>>();
    send_sync::<Receiver<u32>>();
    send::<JoinHandle<u32>>();
    send::<JoinError>();
    send::<Sleep>();
    send::<Interval>();
    debug::<Runtime>();
    debug::<Builder>();
    debug::<Timer>();
    debug::<Ticker>();
    debug::<AfterFunc>();
    debug::<Sleep>();
    debug::<Interval>();
    debug::<Instant>();
    debug::<Sender<u32>>();
    debug::<Receiver<u32>>();
    debug::<JoinHandle<u32>>();
    debug::<JoinError>();
    debug::<gort::Metrics>();
    copy::<MissedTickBehavior>();
    debug::<MissedTickBehavior>();
    copy::<Instant>();
}

#[test]
fn send_and_recv_futures_are_send() {
    fn assert_send<F: std::future::Future + Send>(_: &F) {}
    let (tx, rx) = bounded::<String>(1);
    let s = tx.send(String::new());
    assert_send(&s);
    let r = rx.recv();
    assert_send(&r);
    let h: JoinHandle<()> = {
        let rt = Runtime::new().unwrap();
        rt.spawn(async {})
    };
    assert_send(&h);
}

#[test]
fn a_panic_in_block_on_reaches_the_caller() {
    let rt = Runtime::new().unwrap();
    let err = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        rt.block_on(async { panic!("from the future") })
    }))
    .unwrap_err();
    assert_eq!(err.downcast_ref::<&str>(), Some(&"from the future"));
}

#[gort::test]
async fn test_macro_runs_on_a_runtime() {
    sleep(Duration::from_millis(1)).await;
    assert_eq!(gort::spawn(async { 2 }).await.unwrap(), 2);
}

#[gort::test(procs = 1)]
async fn test_macro_takes_procs() {
    assert_eq!(gort::spawn(async { 3 }).await.unwrap(), 3);
}

#[test]
fn after_func_is_fn_and_a_reset_after_firing_runs_it_again() {
    let rt = Builder::new().procs(2).build().unwrap();
    let runs = Arc::new(AtomicUsize::new(0));
    let r = runs.clone();
    rt.block_on(async move {
        let f = after_func(Duration::from_millis(1), move || {
            r.fetch_add(1, SeqCst);
        });
        while runs.load(SeqCst) == 0 {
            sleep(Duration::from_millis(1)).await;
        }
        assert!(
            !f.reset(Duration::from_millis(1)),
            "it had fired: not active"
        );
        while runs.load(SeqCst) < 2 {
            sleep(Duration::from_millis(1)).await;
        }
        assert!(!f.stop());
    });
}

#[test]
fn dropping_every_sender_closes_and_dropping_every_receiver_fails_sends() {
    let rt = Runtime::new().unwrap();
    rt.block_on(async {
        let (tx, rx) = unbounded::<u8>();
        tx.send(1).await.unwrap();
        drop(tx);
        assert_eq!(rx.recv().await, Some(1));
        assert_eq!(rx.recv().await, None);

        let (tx, rx) = bounded::<u8>(4);
        drop(rx);
        assert_eq!(tx.send(9).await.unwrap_err().0, 9);
    });
}

#[test]
fn interval_defaults_to_burst_and_first_tick_is_immediate() {
    let rt = Runtime::new().unwrap();
    rt.block_on(async {
        let mut iv = interval(Duration::from_millis(50));
        assert_eq!(iv.missed_tick_behavior(), MissedTickBehavior::Burst);
        let t0 = Instant::now();
        iv.tick().await;
        assert!(t0.elapsed() < Duration::from_millis(45));
    });
}

#[test]
fn timer_channel_value_is_the_due_instant() {
    let rt = Runtime::new().unwrap();
    rt.block_on(async {
        let start = Instant::now();
        let t = Timer::new(Duration::from_millis(5));
        let v = t.c().recv().await.unwrap();
        assert!(v >= start + Duration::from_millis(5));
        assert!(v <= Instant::now());
        let v = after(Duration::from_millis(1)).recv().await.unwrap();
        assert!(v <= Instant::now());
        let rx = tick(Duration::from_millis(2));
        let a = rx.recv().await.unwrap();
        let b = rx.recv().await.unwrap();
        assert!(b > a);
    });
}

#[test]
#[should_panic]
fn a_zero_period_ticker_panics() {
    let rt = Runtime::new().unwrap();
    rt.block_on(async {
        let _ = Ticker::new(Duration::ZERO);
    });
}

#[test]
fn metrics_count_timers_and_tasks() {
    let rt = Builder::new().procs(2).build().unwrap();
    rt.block_on(async {
        let t = Timer::new(Duration::from_secs(3600));
        // A channel timer is in a heap only while a receiver waits (Go 1.23): wait a moment.
        let waited = gort::time::timeout(Duration::from_millis(1), t.c().recv()).await;
        assert!(waited.is_err());
        assert!(t.stop());
        gort::spawn(async {}).await.unwrap();
    });
    let m = rt.metrics();
    assert_eq!(m.procs, 2);
    assert_eq!(m.timers_pending, 0);
    assert!(m.timers_stopped >= 1);
    assert!(m.tasks_spawned >= 1);
}
