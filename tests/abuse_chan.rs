//! gort::chan misused the way user code does: values whose `Drop` sends on (or closes) the
//! channel that drops them, a `select!` that names one channel twice or sends to itself, a
//! receiver dropped in the body of the arm that received from it. The rule each test checks:
//! no user `Drop` runs under a channel lock (a re-entrant send would deadlock), no hang.

mod support;

use support::within;

use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::Arc;
use std::time::Duration;

use gort::chan::{bounded, select, unbounded, Sender};

fn rt() -> gort::Runtime {
    gort::Builder::new().procs(2).build().unwrap()
}

/// A value whose `Drop` sends a harmless value on the channel it travels in, and reads its
/// length and closed state: all would deadlock if the channel dropped it under its lock.
struct Boomerang {
    back: Option<Sender<Boomerang>>,
    drops: Arc<AtomicUsize>,
}

impl Drop for Boomerang {
    fn drop(&mut self) {
        self.drops.fetch_add(1, SeqCst);
        if let Some(tx) = self.back.take() {
            let _ = tx.len();
            let _ = tx.is_closed();
            let _ = tx.try_send(Boomerang {
                back: None,
                drops: self.drops.clone(),
            });
        }
    }
}

fn fill(tx: &Sender<Boomerang>, n: usize, drops: &Arc<AtomicUsize>) {
    for _ in 0..n {
        tx.try_send(Boomerang {
            back: Some(tx.clone()),
            drops: drops.clone(),
        })
        .map_err(|_| ())
        .unwrap();
    }
}

#[test]
fn values_whose_drop_sends_on_their_channel_dropped_by_the_last_receiver() {
    within(|| {
        for cap in [4, 1024] {
            let drops = Arc::new(AtomicUsize::new(0));
            let (tx, rx) = bounded(cap);
            fill(&tx, 4, &drops);
            drop(tx);
            drop(rx);
            assert!(drops.load(SeqCst) >= 4);
        }
        let drops = Arc::new(AtomicUsize::new(0));
        let (tx, rx) = unbounded();
        fill(&tx, 100, &drops);
        drop(tx);
        drop(rx);
        assert!(drops.load(SeqCst) >= 100);
    });
}

#[test]
fn values_whose_drop_sends_on_their_channel_when_it_is_closed_or_drained() {
    within(|| {
        let drops = Arc::new(AtomicUsize::new(0));
        let (tx, rx) = bounded(8);
        fill(&tx, 8, &drops);
        rx.close();
        let taken = tx.take_buffered();
        let _ = taken;
        while let Ok(v) = rx.try_recv() {
            drop(v);
        }
        drop((tx, rx));
        let (tx, rx) = bounded(8);
        fill(&tx, 8, &drops);
        tx.close();
        drop(rx);
        drop(tx);
    });
}

#[test]
fn a_blocked_senders_value_whose_drop_sends_is_dropped_when_the_receiver_goes() {
    within(|| {
        let rt = rt();
        let drops = Arc::new(AtomicUsize::new(0));
        let (tx, rx) = bounded::<Boomerang>(0);
        let mut senders = Vec::new();
        for _ in 0..4 {
            let v = Boomerang {
                back: Some(tx.clone()),
                drops: drops.clone(),
            };
            let tx = tx.clone();
            senders.push(rt.spawn(async move { tx.send(v).await.is_err() }));
        }
        rt.block_on(gort::time::sleep(Duration::from_millis(20)));
        drop(rx);
        rt.block_on(async {
            for s in senders {
                assert!(s.await.unwrap(), "a send succeeded with no receiver");
            }
        });
        drop(tx);
        assert!(drops.load(SeqCst) >= 4);
    });
}

#[test]
fn a_select_naming_one_channel_twice_receives_once() {
    within(|| {
        let rt = rt();
        rt.block_on(async {
            let (tx, rx) = bounded(1);
            for i in 0..200u32 {
                tx.send(i).await.unwrap();
                let got = select! {
                    a = rx.recv() => a,
                    b = rx.recv() => b,
                };
                assert_eq!(got, Some(i));
                assert!(rx.try_recv().is_err(), "one select received twice");
            }
            // Parked on both arms, then one send: one arm gets it, the other is withdrawn.
            let (tx, rx) = bounded::<u32>(0);
            let rx2 = rx.clone();
            let h = gort::spawn(async move {
                select! {
                    a = rx2.recv() => a,
                    b = rx2.recv() => b,
                }
            });
            gort::time::sleep(Duration::from_millis(5)).await;
            tx.send(7).await.unwrap();
            assert_eq!(h.await.unwrap(), Some(7));
            let r = gort::time::timeout(Duration::from_millis(5), tx.send(8)).await;
            assert!(r.is_err(), "a withdrawn arm still received");
            drop(rx);
        });
    });
}

#[test]
fn a_select_sending_and_receiving_on_one_unbuffered_channel_never_meets_itself() {
    within(|| {
        let rt = rt();
        rt.block_on(async {
            let (tx, rx) = bounded::<u32>(0);
            // Go's selectgo never matches a select's send with its own receive.
            let r = gort::time::timeout(Duration::from_millis(20), async {
                select! {
                    r = tx.send(1) => format!("sent {r:?}"),
                    v = rx.recv() => format!("received {v:?}"),
                }
            })
            .await;
            assert!(r.is_err(), "the select met itself: {r:?}");
            // Another party still completes it, by one arm only.
            let (tx2, rx2) = (tx.clone(), rx.clone());
            let h = gort::spawn(async move {
                select! {
                    r = tx2.send(1) => r.is_ok(),
                    v = rx2.recv() => v == Some(2),
                }
            });
            gort::time::sleep(Duration::from_millis(5)).await;
            let sent = select! {
                v = rx.recv() => v == Some(1),
                r = tx.send(2) => r.is_ok(),
            };
            assert!(sent);
            assert!(h.await.unwrap());
        });
    });
}

#[test]
fn a_receiver_dropped_in_its_own_arms_body_closes_the_channel() {
    within(|| {
        let rt = rt();
        rt.block_on(async {
            let (tx, rx) = bounded::<u32>(1);
            let (_tx_other, rx_other) = bounded::<u32>(1);
            tx.send(1).await.unwrap();
            let rx = Some(rx);
            let mut rx = rx;
            let got = select! {
                v = rx.as_ref().unwrap().recv() => { rx = None; v },
                v = rx_other.recv() => v,
            };
            assert_eq!(got, Some(1));
            assert!(rx.is_none());
            assert!(
                tx.send(2).await.is_err(),
                "the dropped receiver still receives"
            );
            // The nil-channel idiom with the receiver gone: the arm waits forever.
            let r = gort::time::timeout(Duration::from_millis(5), async {
                select! {
                    v = rx.as_ref() => v,
                }
            })
            .await;
            assert!(r.is_err());
        });
    });
}

/// Go before 1.23 leaked a `time.After` per loop turn until it fired. A select in a loop
/// with an hour-long `after` arm that never wins leaves no pending timer behind, nor does a
/// `timeout` or a `sleep` dropped unfired.
#[test]
fn abandoned_timer_arms_in_a_select_loop_leave_no_pending_timers() {
    within(|| {
        let rt = gort::Builder::new().procs(2).build().unwrap();
        rt.block_on(async {
            let (tx, rx) = bounded::<u32>(1);
            for i in 0..50_000u32 {
                tx.send(i).await.unwrap();
                let hour = gort::time::after(Duration::from_secs(3600));
                let got = select! {
                    v = rx.recv() => v,
                    _ = hour.recv() => None,
                };
                assert_eq!(got, Some(i));
                let r = gort::time::timeout(Duration::from_secs(3600), rx.recv());
                tx.send(i).await.unwrap();
                assert_eq!(r.await, Ok(Some(i)));
            }
        });
        let m = rt.metrics();
        assert!(m.timers_pending < 1_000, "timers left pending: {m:?}");
        drop(rt);
    });
}
