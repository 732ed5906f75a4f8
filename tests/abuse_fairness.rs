//! Tasks that never stop running on a runtime of one P, cooperatively (every poll returns
//! `Pending` soon) but for ever: a task that wakes itself, a pair passing a message back and
//! forth (each wake-up takes Go's `runnext` slot), a loop of `yield_now`. The rule: timers
//! still fire, tasks spawned from outside still run, and the runtime's drop returns.

mod support;

use support::within;

use std::future::poll_fn;
use std::sync::atomic::{AtomicBool, Ordering::SeqCst};
use std::sync::{mpsc, Arc};
use std::task::Poll;
use std::time::Duration;

/// How late a 10 ms sleep or a spawned task may be behind the busy tasks: far more than any
/// fair scheduler needs, far less than starvation.
const LATE: Duration = Duration::from_secs(5);

fn busy_self_waker(stop: Arc<AtomicBool>) -> impl std::future::Future<Output = ()> {
    poll_fn(move |cx| {
        if stop.load(SeqCst) {
            return Poll::Ready(());
        }
        cx.waker().wake_by_ref();
        Poll::Pending
    })
}

async fn busy_ping_pong(stop: Arc<AtomicBool>) {
    let (atx, arx) = gort::chan::bounded::<u32>(0);
    let (btx, brx) = gort::chan::bounded::<u32>(0);
    let s = stop.clone();
    let pong = gort::spawn(async move {
        while let Some(v) = arx.recv().await {
            if btx.send(v + 1).await.is_err() || s.load(SeqCst) {
                break;
            }
        }
    });
    let mut v = 0;
    while !stop.load(SeqCst) {
        if atx.send(v).await.is_err() {
            break;
        }
        match brx.recv().await {
            Some(w) => v = w,
            None => break,
        }
    }
    drop(atx);
    drop(brx);
    let _ = pong.await;
}

async fn busy_yielder(stop: Arc<AtomicBool>) {
    while !stop.load(SeqCst) {
        gort::task::yield_now().await;
    }
}

/// A busy task's future, made from the flag that stops it.
type Busy = std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>>;

fn check(name: &str, busy: fn(Arc<AtomicBool>) -> Busy) {
    let name = name.to_string();
    within(move || {
        let rt = gort::Builder::new().procs(1).build().unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let b1 = rt.spawn(busy(stop.clone()));
        let b2 = rt.spawn(busy(stop.clone()));
        std::thread::sleep(Duration::from_millis(10));
        // A timer on the busy P.
        let begun = std::time::Instant::now();
        let (tx, rx) = mpsc::channel();
        drop(rt.spawn(async move {
            gort::time::sleep(Duration::from_millis(10)).await;
            let _ = tx.send(());
        }));
        rx.recv_timeout(LATE)
            .unwrap_or_else(|_| panic!("{name}: a 10 ms sleep starved for {LATE:?}"));
        // A task from outside, through the global queue.
        let (tx, rx) = mpsc::channel();
        drop(rt.spawn(async move {
            let _ = tx.send(());
        }));
        rx.recv_timeout(LATE)
            .unwrap_or_else(|_| panic!("{name}: a spawned task starved for {LATE:?}"));
        assert!(begun.elapsed() < LATE * 2);
        stop.store(true, SeqCst);
        rt.block_on(async move {
            b1.await.unwrap();
            b2.await.unwrap();
        });
        drop(rt);
    });
}

#[test]
fn a_task_that_wakes_itself_starves_neither_timers_nor_spawns() {
    check("self-waker", |s| Box::pin(busy_self_waker(s)));
}

#[test]
fn a_ping_pong_pair_starves_neither_timers_nor_spawns() {
    check("ping-pong", |s| Box::pin(busy_ping_pong(s)));
}

#[test]
fn a_yield_loop_starves_neither_timers_nor_spawns() {
    check("yield loop", |s| Box::pin(busy_yielder(s)));
}
