//! A receiver's waker is user code, and may call back into the very timer that woke it: a
//! waker registered on a `Timer`'s or `Ticker`'s channel (another executor's, or a wrapper
//! around the task's) that stops or resets it when woken. The timer's fire sent the value and
//! woke that receiver under the timer's arming lock, which the `reset` then waited for on the
//! same thread: the M deadlocked, and with one P the whole runtime with it. The wake-ups now
//! happen after the arming lock is released.
#![cfg(not(loom))]

use std::future::Future;
use std::pin::pin;
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::{mpsc, Arc};
use std::task::{Context, Wake, Waker};
use std::time::Duration;

use gort::time::{Ticker, Timer};

/// Generous: the machine may be loaded; a healthy run takes milliseconds.
const PATIENCE: Duration = Duration::from_secs(60);

/// What the waker does to its timer when woken; how a round of the test starts.
trait Rearm: Send + Sync + 'static {
    fn rearm(&self, wakes: usize);
    fn start_round(&self) {}
    fn c(&self) -> &gort::chan::Receiver<gort::time::Instant>;
}

impl Rearm for Timer {
    fn start_round(&self) {
        self.reset(Duration::from_micros(20));
    }
    fn c(&self) -> &gort::chan::Receiver<gort::time::Instant> {
        Timer::c(self)
    }
    fn rearm(&self, wakes: usize) {
        // Every third wake-up leaves the value alone, for the receive to take it (a reset
        // drains it: Go 1.23).
        match wakes % 3 {
            0 => {
                self.reset(Duration::from_micros(50));
            }
            1 => {
                self.stop();
                self.reset(Duration::from_micros(10));
            }
            _ => {}
        }
    }
}

impl Rearm for Ticker {
    fn c(&self) -> &gort::chan::Receiver<gort::time::Instant> {
        Ticker::c(self)
    }
    fn rearm(&self, wakes: usize) {
        match wakes % 3 {
            0 => self.reset(Duration::from_micros(50)),
            1 => {
                self.stop();
                self.reset(Duration::from_micros(10));
            }
            _ => {}
        }
    }
}

/// Calls back into its timer, then wakes the task.
struct RearmOnWake<T> {
    task: Waker,
    timer: Arc<T>,
    wakes: Arc<AtomicUsize>,
}

impl<T: Rearm> Wake for RearmOnWake<T> {
    fn wake(self: Arc<Self>) {
        self.timer.rearm(self.wakes.fetch_add(1, SeqCst));
        self.task.wake_by_ref();
    }
}

/// Receives `rounds` values from a timer's channel through a waker that re-arms it, on a
/// one-P runtime; fails instead of hanging.
fn receive_through_rearming_wakers<T: Rearm>(
    make: impl FnOnce() -> T + Send + 'static,
    rounds: usize,
) {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let rt = gort::Builder::new().procs(1).build().unwrap();
        let received = rt.block_on(rt.spawn(async move {
            let timer = Arc::new(make());
            let wakes = Arc::new(AtomicUsize::new(0));
            let mut received = 0;
            for _ in 0..rounds {
                timer.start_round();
                let mut recv = pin!(timer.c().recv());
                let value = std::future::poll_fn(|cx| {
                    let waker = Waker::from(Arc::new(RearmOnWake {
                        task: cx.waker().clone(),
                        timer: timer.clone(),
                        wakes: wakes.clone(),
                    }));
                    recv.as_mut().poll(&mut Context::from_waker(&waker))
                })
                .await;
                received += usize::from(value.is_some());
            }
            received
        }));
        let _ = tx.send(received.unwrap());
    });
    let received = rx
        .recv_timeout(PATIENCE)
        .expect("a waker that re-arms its timer deadlocked the runtime");
    assert_eq!(received, rounds);
}

#[test]
fn a_waker_that_resets_its_timer_does_not_deadlock() {
    receive_through_rearming_wakers(|| Timer::new(Duration::from_micros(50)), 100);
}

#[test]
fn a_waker_that_resets_its_ticker_does_not_deadlock() {
    receive_through_rearming_wakers(|| Ticker::new(Duration::from_micros(50)), 100);
}
