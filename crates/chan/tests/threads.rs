//! Multi-threaded behaviour: MPMC delivery, per-sender FIFO, rendezvous, select under load.

mod common;

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::Duration;

use futures::executor::block_on;
use gort_chan::{bounded, select, unbounded, Receiver, Sender};

const SENDERS: usize = 4;
const RECEIVERS: usize = 3;
const PER_SENDER: usize = 5_000;

/// Runs `SENDERS` sender threads and `RECEIVERS` receiver threads over one channel; checks
/// every value arrives exactly once and each receiver sees each sender's values in order.
fn mpmc_fifo(tx: Sender<(usize, usize)>, rx: Receiver<(usize, usize)>) {
    let senders: Vec<_> = (0..SENDERS)
        .map(|s| {
            let tx = tx.clone();
            thread::spawn(move || {
                block_on(async {
                    for seq in 0..PER_SENDER {
                        tx.send((s, seq)).await.unwrap();
                    }
                })
            })
        })
        .collect();
    drop(tx);
    let receivers: Vec<_> = (0..RECEIVERS)
        .map(|_| {
            let rx = rx.clone();
            thread::spawn(move || {
                let mut last = [None::<usize>; SENDERS];
                let mut got = Vec::new();
                block_on(async {
                    while let Some((s, seq)) = rx.recv().await {
                        assert!(
                            last[s].map_or(true, |l| l < seq),
                            "sender {s}: {seq} after {:?}",
                            last[s]
                        );
                        last[s] = Some(seq);
                        got.push((s, seq));
                    }
                });
                got
            })
        })
        .collect();
    drop(rx);
    for s in senders {
        s.join().unwrap();
    }
    let mut all = HashSet::new();
    for r in receivers {
        for v in r.join().unwrap() {
            assert!(all.insert(v), "{v:?} received twice");
        }
    }
    assert_eq!(all.len(), SENDERS * PER_SENDER);
}

#[test]
fn mpmc_fifo_unbuffered() {
    let (tx, rx) = bounded(0);
    mpmc_fifo(tx, rx);
}

#[test]
fn mpmc_fifo_capacity_one() {
    let (tx, rx) = bounded(1);
    mpmc_fifo(tx, rx);
}

#[test]
fn mpmc_fifo_capacity_sixteen() {
    let (tx, rx) = bounded(16);
    mpmc_fifo(tx, rx);
}

#[test]
fn mpmc_fifo_unbounded() {
    let (tx, rx) = unbounded();
    mpmc_fifo(tx, rx);
}

#[test]
fn unbuffered_send_waits_for_a_receiver_across_threads() {
    let (tx, rx) = bounded(0);
    let sent = Arc::new(AtomicBool::new(false));
    let sender = {
        let sent = sent.clone();
        thread::spawn(move || {
            block_on(tx.send(1)).unwrap();
            sent.store(true, Ordering::SeqCst);
        })
    };
    // However long we wait, nothing can complete the send but a receive.
    thread::sleep(Duration::from_millis(50));
    assert!(
        !sent.load(Ordering::SeqCst),
        "send completed with no receiver"
    );
    assert_eq!(block_on(rx.recv()), Some(1));
    sender.join().unwrap();
    assert!(sent.load(Ordering::SeqCst));
}

#[test]
fn ping_pong_unbuffered() {
    let (ping_tx, ping_rx) = bounded::<u32>(0);
    let (pong_tx, pong_rx) = bounded::<u32>(0);
    let ponger = thread::spawn(move || {
        block_on(async {
            while let Some(v) = ping_rx.recv().await {
                pong_tx.send(v + 1).await.unwrap();
            }
        })
    });
    block_on(async {
        for i in 0..2_000 {
            ping_tx.send(i).await.unwrap();
            assert_eq!(pong_rx.recv().await, Some(i + 1));
        }
    });
    drop(ping_tx);
    ponger.join().unwrap();
}

/// Producers select over sending each value on one of two channels; consumers select over
/// receiving from either. Both sides use select, so parked arms meet parked arms: every value
/// must still be sent on exactly one channel and received exactly once.
#[test]
fn select_on_both_sides_delivers_each_value_once() {
    const PRODUCERS: usize = 3;
    const PER_PRODUCER: usize = 3_000;
    for cap in [0, 1] {
        let (tx_a, rx_a) = bounded::<usize>(cap);
        let (tx_b, rx_b) = bounded::<usize>(cap);
        let producers: Vec<_> = (0..PRODUCERS)
            .map(|p| {
                let (tx_a, tx_b) = (tx_a.clone(), tx_b.clone());
                thread::spawn(move || {
                    block_on(async {
                        for i in 0..PER_PRODUCER {
                            let v = p * PER_PRODUCER + i;
                            select! {
                                r = tx_a.send(v) => r.unwrap(),
                                r = tx_b.send(v) => r.unwrap(),
                            }
                        }
                    })
                })
            })
            .collect();
        drop((tx_a, tx_b));
        let consumers: Vec<_> = (0..2)
            .map(|_| {
                let (rx_a, rx_b) = (rx_a.clone(), rx_b.clone());
                thread::spawn(move || {
                    let mut got = Vec::new();
                    let (mut a_open, mut b_open) = (true, true);
                    block_on(async {
                        while a_open || b_open {
                            select! {
                                v = rx_a.recv() => match v {
                                    Some(v) => got.push(v),
                                    None => a_open = false,
                                },
                                v = rx_b.recv() => match v {
                                    Some(v) => got.push(v),
                                    None => b_open = false,
                                },
                            }
                            // A closed channel is always ready; finish the other with plain
                            // receives.
                            if !a_open {
                                while let Some(v) = rx_b.recv().await {
                                    got.push(v);
                                }
                                b_open = false;
                            } else if !b_open {
                                while let Some(v) = rx_a.recv().await {
                                    got.push(v);
                                }
                                a_open = false;
                            }
                        }
                    });
                    got
                })
            })
            .collect();
        for p in producers {
            p.join().unwrap();
        }
        let mut all = HashSet::new();
        for c in consumers {
            for v in c.join().unwrap() {
                assert!(all.insert(v), "cap {cap}: {v} received twice");
            }
        }
        assert_eq!(
            all.len(),
            PRODUCERS * PER_PRODUCER,
            "cap {cap}: values lost"
        );
    }
}

#[test]
fn close_while_many_wait() {
    for _ in 0..50 {
        let (tx, rx) = bounded::<u32>(0);
        let waiters: Vec<_> = (0..4)
            .map(|i| {
                let (tx, rx) = (tx.clone(), rx.clone());
                thread::spawn(move || {
                    block_on(async {
                        if i % 2 == 0 {
                            // Either delivered (to a receiver before the close) or refused.
                            tx.send(i).await.is_ok()
                        } else {
                            rx.recv().await.is_some()
                        }
                    })
                })
            })
            .collect();
        thread::sleep(Duration::from_millis(1));
        tx.close();
        let results: Vec<bool> = waiters.into_iter().map(|w| w.join().unwrap()).collect();
        let sent = results.iter().step_by(2).filter(|&&ok| ok).count();
        let received = results.iter().skip(1).step_by(2).filter(|&&ok| ok).count();
        assert_eq!(
            sent, received,
            "every successful send was received: {results:?}"
        );
    }
}
