//! A `block_on` whose blocking loom can see, for the loom models.
//!
//! It parks on a loom `Mutex` + `Condvar` rather than `loom::thread::park`: loom 0.7's
//! `unpark` makes a thread that is blocked on a *mutex* runnable (and then panics with
//! "expected to be able to acquire lock"), and our wakers run while other threads may be
//! blocked on the channel lock.
#![allow(dead_code)]

use std::future::Future;
use std::pin::{pin, Pin};
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};

use loom::sync::{Condvar, Mutex};

/// A wake-up flag a thread can wait on.
struct Parker {
    notified: Mutex<bool>,
    cv: Condvar,
}

impl Wake for Parker {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        *self.notified.lock().unwrap() = true;
        self.cv.notify_one();
    }
}

/// Polls `f` until it is ready, waiting for a wake-up in between. A lost wake-up shows as a
/// loom deadlock (every thread blocked).
pub fn block_on<F: Future>(f: F) -> F::Output {
    let parker = Arc::new(Parker {
        notified: Mutex::new(false),
        cv: Condvar::new(),
    });
    let waker = Waker::from(parker.clone());
    let mut cx = Context::from_waker(&waker);
    let mut f = pin!(f);
    loop {
        if let Poll::Ready(v) = f.as_mut().poll(&mut cx) {
            return v;
        }
        let mut notified = parker.notified.lock().unwrap();
        while !*notified {
            notified = parker.cv.wait(notified).unwrap();
        }
        *notified = false;
    }
}

/// Polls `f` once with a waker that does nothing.
pub fn poll_once<F: Future + Unpin>(f: &mut F) -> Poll<F::Output> {
    Pin::new(f).poll(&mut Context::from_waker(futures::task::noop_waker_ref()))
}
