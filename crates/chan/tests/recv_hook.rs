//! The hidden receive hook gort's channel timers use (`bounded_with_hook`, `RecvHook`): it is
//! told before every receive and `len`, and every parked receive operation is reported once
//! as parked and once as unparked, whichever way it ends (value, cancel, select, stream); the
//! last receiver's drop is reported once, outside the channel's lock, and a hook that owns
//! its channel's sender and lets it go then frees both.

mod common;

use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::{Arc, Mutex};
use std::task::Poll;

use common::poll_once;
use futures::StreamExt;
use gort_chan::{bounded_with_hook, RecvHook};

#[derive(Default)]
struct Counts {
    looks: AtomicUsize,
    parked: AtomicUsize,
    unparked: AtomicUsize,
    dropped: AtomicUsize,
}

impl RecvHook for Counts {
    fn before_recv(&self) {
        self.looks.fetch_add(1, SeqCst);
    }
    fn parked(self: Arc<Self>) {
        self.parked.fetch_add(1, SeqCst);
    }
    fn unparked(self: Arc<Self>) {
        self.unparked.fetch_add(1, SeqCst);
    }
    fn last_receiver_dropped(&self) {
        self.dropped.fetch_add(1, SeqCst);
    }
}

impl Counts {
    /// (parked, unparked)
    fn parks(&self) -> (usize, usize) {
        (self.parked.load(SeqCst), self.unparked.load(SeqCst))
    }
}

fn hooked() -> (
    Arc<Counts>,
    gort_chan::TimerSender<u32>,
    gort_chan::Receiver<u32>,
) {
    let counts = Arc::new(Counts::default());
    let (tx, rx) = bounded_with_hook(1, counts.clone());
    (counts, tx, rx)
}

#[test]
fn try_recv_and_len_look_without_parking() {
    let (counts, tx, rx) = hooked();
    assert!(rx.try_recv().is_err());
    tx.try_send(1).unwrap();
    assert_eq!(rx.len(), 1);
    assert_eq!(rx.try_recv(), Ok(1));
    assert_eq!(counts.looks.load(SeqCst), 3);
    assert_eq!(counts.parks(), (0, 0));
}

#[test]
fn a_ready_recv_does_not_park() {
    let (counts, tx, rx) = hooked();
    tx.try_send(1).unwrap();
    assert_eq!(poll_once(&mut rx.recv()), Poll::Ready(Some(1)));
    assert_eq!(counts.parks(), (0, 0));
    assert_eq!(counts.looks.load(SeqCst), 1);
}

#[test]
fn a_parked_recv_is_unparked_by_its_value() {
    let (counts, tx, rx) = hooked();
    let mut f = rx.recv();
    assert!(poll_once(&mut f).is_pending());
    assert!(poll_once(&mut f).is_pending());
    assert_eq!(counts.parks(), (1, 0), "parked once, however often polled");
    tx.try_send(7).unwrap();
    assert_eq!(poll_once(&mut f), Poll::Ready(Some(7)));
    assert_eq!(counts.parks(), (1, 1));
    drop(f);
    assert_eq!(counts.parks(), (1, 1), "not unparked twice");
}

#[test]
fn a_dropped_parked_recv_is_unparked() {
    let (counts, _tx, rx) = hooked();
    let mut f = rx.recv();
    assert!(poll_once(&mut f).is_pending());
    drop(f);
    assert_eq!(counts.parks(), (1, 1));
}

#[test]
fn select_arms_park_and_unpark() {
    let (counts, tx, rx) = hooked();
    let (other_tx, other_rx) = gort_chan::bounded::<u32>(1);
    let mut sel = Box::pin(async {
        gort_chan::select! {
            v = rx.recv() => v,
            v = other_rx.recv() => v,
        }
    });
    assert!(poll_once(&mut sel).is_pending());
    assert_eq!(counts.parks(), (1, 0));
    other_tx.try_send(2).unwrap();
    assert_eq!(poll_once(&mut sel), Poll::Ready(Some(2)));
    drop(sel);
    assert_eq!(counts.parks(), (1, 1), "the losing arm was unparked");
    drop(tx);
}

#[test]
fn a_parked_stream_is_unparked_when_its_receiver_drops() {
    let (counts, _tx, mut rx) = hooked();
    assert!(poll_once(&mut rx.next()).is_pending());
    assert_eq!(counts.parks(), (1, 0));
    drop(rx);
    assert_eq!(counts.parks(), (1, 1));
}

#[test]
fn the_channel_holds_its_hook_until_it_is_freed() {
    let (counts, tx, rx) = hooked();
    assert_eq!(Arc::strong_count(&counts), 2);
    drop(tx);
    assert_eq!(
        Arc::strong_count(&counts),
        2,
        "the receiver keeps the channel"
    );
    drop(rx);
    assert_eq!(
        Arc::strong_count(&counts),
        1,
        "the channel was freed with its hook"
    );
}

#[test]
fn the_last_receiver_drop_is_told_once() {
    let (counts, _tx, rx) = hooked();
    let rx2 = rx.clone();
    drop(rx);
    assert_eq!(counts.dropped.load(SeqCst), 0, "a receiver is still alive");
    drop(rx2);
    assert_eq!(counts.dropped.load(SeqCst), 1);
}

/// A hook that owns its channel's sender, as a timer's core does: the channel owns the hook
/// and the hook the channel until the last receiver goes.
#[derive(Default)]
struct Owner {
    tx: Mutex<Option<gort_chan::TimerSender<Arc<()>>>>,
    dropped: AtomicUsize,
}

impl RecvHook for Owner {
    fn before_recv(&self) {}
    fn parked(self: Arc<Self>) {}
    fn unparked(self: Arc<Self>) {}
    fn last_receiver_dropped(&self) {
        let tx = self.tx.lock().unwrap().take().expect("told once");
        // Outside the channel's lock (this would deadlock under it): closed, no receiver.
        assert!(tx.try_send(Arc::new(())).is_err());
        self.dropped.fetch_add(1, SeqCst);
        drop(tx);
    }
}

#[test]
fn a_hook_owning_the_sender_is_freed_with_the_channel() {
    let owner = Arc::new(Owner::default());
    let value = Arc::new(());
    let (tx, rx) = bounded_with_hook(1, owner.clone());
    tx.try_send(value.clone()).unwrap();
    *owner.tx.lock().unwrap() = Some(tx);
    assert_eq!(Arc::strong_count(&owner), 2);
    drop(rx);
    assert_eq!(owner.dropped.load(SeqCst), 1);
    assert_eq!(
        Arc::strong_count(&owner),
        1,
        "the channel was freed: no cycle left"
    );
    assert_eq!(
        Arc::strong_count(&value),
        1,
        "the buffered value was dropped"
    );
}

#[test]
fn the_timer_sender_drains_and_its_drop_closes() {
    let (_counts, tx, rx) = hooked();
    assert_eq!(tx.take_buffered(), 0);
    tx.try_send(4).unwrap();
    assert_eq!(tx.try_send(5), Err(gort_chan::TrySendError::Full(5)));
    assert_eq!(tx.take_buffered(), 1);
    assert!(rx.try_recv().is_err(), "the drained value is gone");
    tx.try_send(6).unwrap();
    drop(tx);
    assert_eq!(rx.try_recv(), Ok(6), "buffered values outlive the sender");
    assert!(rx.try_recv().unwrap_err().is_closed());
}

/// A fused channel's slot 0 is boxed only while a receive uses it; one a leaked receive
/// future still holds is freed with the channel, its waker with it (Miri and memcheck see a
/// leak otherwise).
#[test]
fn a_leaked_parked_receive_is_freed_with_the_channel() {
    let (counts, tx, rx) = hooked();
    for _ in 0..3 {
        let mut f = rx.recv();
        assert!(poll_once(&mut f).is_pending());
        tx.try_send(1).unwrap();
        assert_eq!(poll_once(&mut f), Poll::Ready(Some(1)));
    }
    let mut f = rx.recv();
    assert!(poll_once(&mut f).is_pending());
    std::mem::forget(f);
    drop(tx);
    drop(rx);
    assert_eq!(counts.parks(), (4, 3), "the leaked receive never unparked");
    assert_eq!(Arc::strong_count(&counts), 1, "the channel was freed");
}
