//! Wakers are user code: a channel operation wakes and drops other executors' wakers after
//! unlocking. One whose `wake` or `drop` panics reaches the caller of the operation that woke
//! it, but the other parked operations are still woken, and the process does not abort.

use std::future::Future;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering::SeqCst};
use std::sync::Arc;
use std::task::{Context, Wake, Waker};

use gort_chan::bounded;

/// Records that it was woken.
struct Flag(AtomicBool);

impl Wake for Flag {
    fn wake(self: Arc<Self>) {
        self.0.store(true, SeqCst);
    }
}

/// Panics when woken.
struct PanicsOnWake;

impl Wake for PanicsOnWake {
    fn wake(self: Arc<Self>) {
        panic!("test: this waker panics when woken");
    }
}

/// Panics when its last reference is dropped.
struct PanicsOnDrop;

impl Wake for PanicsOnDrop {
    fn wake(self: Arc<Self>) {}
}

impl Drop for PanicsOnDrop {
    fn drop(&mut self) {
        panic!("test: this waker panics when dropped");
    }
}

/// Polls `f` once with `waker`; it must park.
fn park<F: Future>(f: &mut Pin<Box<F>>, waker: Waker) {
    assert!(f
        .as_mut()
        .poll(&mut Context::from_waker(&waker))
        .is_pending());
}

/// The close woke the wakers in order and stopped at the first that panicked: the receivers
/// parked behind it were never woken, and a task waiting there hung for good.
#[test]
fn a_close_wakes_every_receiver_past_wakers_that_panic() {
    let (tx, rx) = bounded::<u32>(0);
    let mut futures = Vec::new();
    let mut flags = Vec::new();
    for i in 0..6 {
        let mut f = Box::pin(rx.recv());
        match i % 3 {
            0 => park(&mut f, Waker::from(Arc::new(PanicsOnWake))),
            1 => park(&mut f, Waker::from(Arc::new(PanicsOnDrop))),
            _ => {
                let flag = Arc::new(Flag(AtomicBool::new(false)));
                park(&mut f, Waker::from(flag.clone()));
                flags.push(flag);
            }
        }
        futures.push(f);
    }
    // The last sender's drop closes the channel and wakes the receivers.
    let closed = catch_unwind(AssertUnwindSafe(|| drop(tx)));
    assert!(
        closed.is_err(),
        "the first waker's panic reaches the dropping thread"
    );
    for flag in &flags {
        assert!(
            flag.0.load(SeqCst),
            "a receiver behind a panicking waker was not woken"
        );
    }
    for f in &mut futures {
        let waker = Waker::from(Arc::new(Flag(AtomicBool::new(false))));
        let end = f.as_mut().poll(&mut Context::from_waker(&waker));
        assert!(end.is_ready(), "every receiver sees the end");
    }
}

/// The same for senders parked on a rendezvous channel that a receiver closes.
#[test]
fn a_close_wakes_every_sender_past_wakers_that_panic() {
    let (tx, rx) = bounded::<u32>(0);
    let mut futures = Vec::new();
    let mut flags = Vec::new();
    for i in 0..4 {
        let mut f = Box::pin(tx.send(i));
        if i % 2 == 0 {
            park(&mut f, Waker::from(Arc::new(PanicsOnWake)));
        } else {
            let flag = Arc::new(Flag(AtomicBool::new(false)));
            park(&mut f, Waker::from(flag.clone()));
            flags.push(flag);
        }
        futures.push(f);
    }
    assert!(catch_unwind(AssertUnwindSafe(|| rx.close())).is_err());
    for flag in &flags {
        assert!(
            flag.0.load(SeqCst),
            "a sender behind a panicking waker was not woken"
        );
    }
}
