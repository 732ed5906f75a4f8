//! Starts and drops 100 runtimes, each left with pending timers (sleeps, timers, tickers,
//! `after_func`s whose closures hold channel ends and tasks), tasks blocked on channels,
//! channels holding values, a finished blocking closure, one that arms a timer, and one that
//! arms a timer after shutdown's first drain: a leak checker must find nothing the runtimes
//! lost. See design/STRESS.md, "Leak check".
//!
//! `valgrind --leak-check=full target/release/examples/leakcheck`

use std::sync::atomic::{AtomicBool, Ordering::SeqCst};
use std::sync::Arc;
use std::time::Duration;

const RUNTIMES: usize = 100;
const HOUR: Duration = Duration::from_secs(3600);

fn main() {
    for i in 0..RUNTIMES {
        let rt = gort::Builder::new().procs(1 + i % 3).build().unwrap();
        rt.block_on(leave_work_pending());
        drop(rt);
    }
    println!("leakcheck: {RUNTIMES} runtimes started and dropped");
}

/// Everything a runtime may hold when it is dropped.
async fn leave_work_pending() {
    let (tx, rx) = gort::chan::bounded::<Vec<u8>>(4);
    tx.send(vec![1; 64]).await.unwrap(); // a value left in the channel
    let (never_tx, never_rx) = gort::chan::bounded::<u8>(0);
    for _ in 0..4 {
        let never = never_rx.clone();
        drop(gort::spawn(async move { never.recv().await }));
        drop(gort::spawn(gort::time::sleep(HOUR)));
    }
    // A task and its own timer's payload referring to each other: a cycle only the
    // shutdown's drain breaks.
    let blocked = gort::spawn(async move { never_rx.recv().await });
    let keep = (never_tx, tx.clone());
    let f = gort::time::after_func(HOUR, move || {
        let _ = (&blocked, &keep);
    });
    drop(f);
    let timer = gort::time::Timer::new(HOUR);
    let ticker = gort::time::Ticker::new(Duration::from_millis(1));
    drop(gort::spawn(async move {
        let _held = (timer, ticker, rx);
        std::future::pending::<()>().await
    }));
    // Blocking closures: one that finished, one that arms a timer as it returns.
    gort::spawn_blocking(|| vec![0u8; 128]).await.unwrap();
    drop(gort::spawn_blocking(move || {
        drop(gort::time::after_func(HOUR, move || {
            let _ = &tx;
        }))
    }));
    // And one still running when shutdown's first drain passes, which then arms a timer
    // whose payload holds a task of the runtime (the cycle again, made after the drain).
    let began = Arc::new(AtomicBool::new(false));
    let flag = SetOnDrop(began.clone());
    drop(gort::spawn(async move {
        let _flag = flag;
        std::future::pending::<()>().await
    }));
    let (started_tx, started_rx) = gort::chan::bounded::<()>(1);
    drop(gort::spawn_blocking(move || {
        let _ = started_tx.try_send(());
        while !began.load(SeqCst) {
            std::thread::sleep(Duration::from_millis(1));
        }
        std::thread::sleep(Duration::from_millis(10));
        let task = gort::spawn(async {});
        drop(gort::time::after_func(HOUR, move || {
            let _ = &task;
        }));
    }));
    let _ = started_rx.recv().await;
    gort::time::sleep(Duration::from_millis(2)).await;
}

/// Sets its flag when dropped: here, when shutdown drops the task that holds it.
struct SetOnDrop(Arc<AtomicBool>);

impl Drop for SetOnDrop {
    fn drop(&mut self) {
        self.0.store(true, SeqCst);
    }
}
