//! gort::chan's `Stream` and `Sink` adapters, `select!` and gort::sync misused the way user
//! code does: a stream poll cut off by a `timeout` and followed by `recv`, a `Sink` send in a
//! losing `select!` arm, rendezvous `try_send`/`try_recv` pairs, `close` under parked sends,
//! `WaitGroup` misuse and waits cut off by timeouts, `spawn_limited` cut off by timeouts.
//! The rule each test checks: no value, slot or wake-up is lost, nothing hangs.

mod support;

use support::within;

use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::Arc;
use std::time::Duration;

use futures::{SinkExt, StreamExt};
use gort::chan::{bounded, select, TryRecvError};
use gort::sync::{ErrGroup, WaitGroup};
use gort::time::{sleep, timeout};

fn rt() -> gort::Runtime {
    gort::Builder::new().procs(2).build().unwrap()
}

const MS: Duration = Duration::from_millis(1);

/// `timeout(d, rx.next())` gives up; a value sent next is received by `recv` on the same
/// receiver and by a clone, and the end is seen after it.
#[test]
fn a_stream_poll_cut_off_by_a_timeout_leaves_the_value_to_recv() {
    within(|| {
        rt().block_on(async {
            for cap in [0, 1, 4] {
                let (tx, mut rx) = bounded::<u32>(cap);
                assert!(timeout(MS, rx.next()).await.is_err());
                let sender = gort::spawn(async move {
                    tx.send(7).await.unwrap();
                    tx.send(8).await.unwrap();
                });
                assert_eq!(rx.recv().await, Some(7), "capacity {cap}");
                let rx2 = rx.clone();
                assert_eq!(rx2.recv().await, Some(8), "capacity {cap}");
                sender.await.unwrap();
                assert_eq!(rx2.recv().await, None, "capacity {cap}");
                assert_eq!(rx.try_recv(), Err(TryRecvError::Closed));
            }
        })
    });
}

/// A clone of a receiver whose stream poll was cut off sees the end of a closed channel
/// once the value sent to it was received through `try_recv`.
#[test]
fn a_stream_poll_cut_off_holds_no_value_back_from_try_recv() {
    within(|| {
        rt().block_on(async {
            let (tx, mut rx) = bounded::<u32>(0);
            assert!(timeout(MS, rx.next()).await.is_err());
            // A rendezvous send completes against the parked stream slot.
            gort::spawn(async move { tx.send(1).await.unwrap() })
                .await
                .unwrap();
            let rx2 = rx.clone();
            assert_eq!(rx.try_recv(), Ok(1));
            assert_eq!(rx2.recv().await, None);
        })
    });
}

/// A `Sink` send in a `select!` arm that loses is kept by the sender and delivered by the
/// next flush; a receiver waiting meanwhile is not stranded.
#[test]
fn a_sink_send_in_a_losing_select_arm_is_delivered_by_the_next_flush() {
    within(|| {
        rt().block_on(async {
            let (mut tx, rx) = bounded::<u32>(0);
            let lost = select! {
                r = SinkExt::send(&mut tx, 1) => { r.unwrap(); false }
                _ = sleep(MS) => true,
            };
            assert!(lost, "nobody receives yet");
            let got = gort::spawn(async move { rx.recv().await });
            sleep(MS).await;
            tx.flush().await.unwrap();
            assert_eq!(got.await.unwrap(), Some(1));
        })
    });
}

/// `poll_ready` without `start_send`, then the sender dropped: nothing sent, channel closes.
/// A stream polled after its `None` keeps saying `None`.
#[test]
fn sink_ready_without_send_and_a_stream_polled_after_its_end() {
    within(|| {
        rt().block_on(async {
            let (mut tx, mut rx) = bounded::<u32>(0);
            std::future::poll_fn(|cx| futures::Sink::poll_ready(std::pin::Pin::new(&mut tx), cx))
                .await
                .unwrap();
            drop(tx);
            for _ in 0..3 {
                assert_eq!(rx.next().await, None);
            }
        })
    });
}

/// Unbuffered `try_send`/`try_recv` succeed only against a parked peer (Go's non-blocking
/// select on an unbuffered channel).
#[test]
fn rendezvous_try_operations_meet_only_parked_peers() {
    within(|| {
        rt().block_on(async {
            let (tx, rx) = bounded::<u32>(0);
            assert!(tx.try_send(1).unwrap_err().is_full());
            assert_eq!(rx.try_recv(), Err(TryRecvError::Empty));
            let rx2 = rx.clone();
            let waiting = gort::spawn(async move { rx2.recv().await });
            while tx.try_send(2).is_err() {
                gort::task::yield_now().await;
            }
            assert_eq!(waiting.await.unwrap(), Some(2));
            let tx2 = tx.clone();
            let sending = gort::spawn(async move { tx2.send(3).await });
            let v = loop {
                match rx.try_recv() {
                    Ok(v) => break v,
                    Err(e) => assert!(e.is_empty()),
                }
                gort::task::yield_now().await;
            };
            assert_eq!(v, 3);
            sending.await.unwrap().unwrap();
        })
    });
}

/// `close` from the receiving side while many sends are parked on 2 Ps: every send fails
/// with its value back, none is lost or delivered.
#[test]
fn close_fails_every_parked_send_with_its_value() {
    within(|| {
        rt().block_on(async {
            let (tx, rx) = bounded::<usize>(0);
            let back = Arc::new(AtomicUsize::new(0));
            let mut sends = Vec::new();
            for i in 0..200 {
                let (tx, back) = (tx.clone(), back.clone());
                sends.push(gort::spawn(async move {
                    let e = tx.send(i).await.unwrap_err();
                    assert_eq!(e.into_inner(), i);
                    back.fetch_add(1, SeqCst);
                }));
            }
            sleep(Duration::from_millis(5)).await; // let them park (not required)
            rx.close();
            for s in sends {
                s.await.unwrap();
            }
            assert_eq!(back.load(SeqCst), 200);
            assert!(tx.send(0).await.is_err());
        })
    });
}

/// Ten thousand receiver clones dropped: the channel stays open for the last one and closes
/// with it.
#[test]
fn ten_thousand_receiver_clones_dropped() {
    within(|| {
        rt().block_on(async {
            let (tx, rx) = bounded::<u32>(1);
            let clones: Vec<_> = (0..10_000).map(|_| rx.clone()).collect();
            drop(clones);
            tx.send(1).await.unwrap();
            assert_eq!(rx.recv().await, Some(1));
            drop(rx);
            assert!(tx.send(2).await.is_err());
        })
    });
}

/// `select!` whose every arm is disabled and that has no `else` panics with the documented
/// message; the task's panic reaches its join handle and the runtime goes on.
#[test]
fn a_select_with_every_arm_disabled_panics_clearly() {
    within(|| {
        rt().block_on(async {
            let (_tx, rx) = bounded::<u32>(1);
            let h = gort::spawn(async move {
                select! {
                    v = rx.recv(), if false => v,
                }
            });
            let e = h.await.unwrap_err();
            let p = e.into_panic();
            let msg = p
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| p.downcast_ref::<String>().cloned())
                .unwrap_or_default();
            assert!(msg.contains("all branches are disabled"), "{msg}");
            assert_eq!(gort::spawn(async { 1 }).await.unwrap(), 1);
        })
    });
}

/// Many waits on one group, each cut off by a timeout at random, while the counter is
/// driven to zero and up again: every wait that stays to the end returns.
#[test]
fn wait_group_waits_cut_off_by_timeouts_lose_no_wake_up() {
    within(|| {
        rt().block_on(async {
            for round in 0..20u64 {
                let wg = WaitGroup::new();
                wg.add(1);
                let returned = Arc::new(AtomicUsize::new(0));
                let mut waits = Vec::new();
                for i in 0..100u64 {
                    let (wg, returned) = (wg.clone(), returned.clone());
                    waits.push(gort::spawn(async move {
                        // Some give up once or twice first, others wait to the end.
                        for _ in 0..(i % 3) {
                            let _ = timeout(Duration::from_micros(i * 7 + round), wg.wait()).await;
                        }
                        wg.wait().await;
                        returned.fetch_add(1, SeqCst);
                    }));
                }
                sleep(MS).await;
                wg.done(); // zero: every parked wait returns...
                wg.add(1); // ... even though the counter rose again before they ran
                for w in waits {
                    // A wait that parked only after the rise waits for the next zero.
                    if timeout(Duration::from_millis(5), w).await.is_err() {
                        wg.done();
                        wg.add(1);
                    }
                }
                wg.done();
                wg.wait().await;
            }
        })
    });
}

/// Go panics on a negative counter; so does gort, and the group stays usable.
#[test]
fn wait_group_done_more_than_add_panics_and_leaves_the_group_usable() {
    within(|| {
        let wg = WaitGroup::new();
        wg.add(1);
        wg.done();
        let r = std::panic::catch_unwind(|| wg.done());
        let p = r.unwrap_err();
        assert_eq!(
            p.downcast_ref::<String>().map(String::as_str),
            Some("sync: negative WaitGroup counter")
        );
        assert_eq!(wg.count(), 0);
        wg.add(2);
        wg.done();
        wg.done();
        futures::executor::block_on(wg.wait());
    });
}

/// `spawn_limited` futures cut off by timeouts at random, from several tasks at once on 2
/// Ps: no slot is lost, so afterwards `limit` tasks still run at the same time (two tasks
/// that wait for each other would hang with a slot lost).
#[test]
fn spawn_limited_cut_off_by_timeouts_loses_no_slot() {
    within(|| {
        rt().block_on(async {
            let mut group = ErrGroup::<()>::new();
            group.set_limit(Some(2));
            let group = Arc::new(group);
            let mut spawners = Vec::new();
            for s in 0..4u64 {
                let group = group.clone();
                spawners.push(gort::spawn(async move {
                    for i in 0..100u64 {
                        let work = async move {
                            sleep(Duration::from_micros(i % 50)).await;
                            Ok(())
                        };
                        let _ = timeout(
                            Duration::from_micros((i * 13 + s * 7) % 200),
                            group.spawn_limited(work),
                        )
                        .await;
                    }
                }));
            }
            for s in spawners {
                s.await.unwrap();
            }
            group.wait().await.unwrap();
            let (a_tx, a_rx) = bounded::<()>(0);
            let (b_tx, b_rx) = bounded::<()>(0);
            group
                .spawn_limited(async move {
                    a_tx.send(()).await.unwrap();
                    b_rx.recv().await.unwrap();
                    Ok(())
                })
                .await;
            group
                .spawn_limited(async move {
                    a_rx.recv().await.unwrap();
                    b_tx.send(()).await.unwrap();
                    Ok(())
                })
                .await;
            group.wait().await.unwrap();
        })
    });
}

/// A task spinning on `select!` with `default` against a full channel, on a runtime of one P:
/// the select yields on a spent cooperative budget, so the receiver that frees the room gets
/// to run (Go preempts such a loop; here the budget does it).
#[test]
fn a_select_default_spin_on_one_p_lets_the_receiver_run() {
    within(|| {
        let rt = gort::Builder::new().procs(1).build().unwrap();
        rt.block_on(async {
            let (tx, rx) = bounded::<u32>(1);
            tx.try_send(0).unwrap();
            let spinner = gort::spawn(async move {
                let mut spins = 0u64;
                loop {
                    select! {
                        r = tx.send(1) => { r.unwrap(); break spins; }
                        default => spins += 1,
                    }
                }
            });
            let receiver = gort::spawn(async move {
                assert_eq!(rx.recv().await, Some(0));
                assert_eq!(rx.recv().await, Some(1));
            });
            spinner.await.unwrap();
            receiver.await.unwrap();
        })
    });
}

/// The same with `Stream::next` in a select arm beside a timer, and `recv` between the
/// selects, from several receivers on 2 Ps: every value is received exactly once.
#[test]
fn stream_arms_cut_off_by_timers_and_recv_mixed_deliver_each_value_once() {
    within(|| {
        rt().block_on(async {
            const N: usize = 2_000;
            let (tx, rx) = bounded::<usize>(0);
            let seen: Arc<Vec<AtomicUsize>> =
                Arc::new((0..N).map(|_| AtomicUsize::new(0)).collect());
            let mut receivers = Vec::new();
            for r in 0..3u64 {
                let (mut rx, seen) = (rx.clone(), seen.clone());
                receivers.push(gort::spawn(async move {
                    let mut turn = 0u64;
                    loop {
                        turn += 1;
                        let v = if turn % 3 == r {
                            rx.recv().await
                        } else {
                            select! {
                                v = rx.next() => v,
                                _ = sleep(Duration::from_micros(turn % 40)) => continue,
                            }
                        };
                        match v {
                            Some(v) => {
                                seen[v].fetch_add(1, SeqCst);
                            }
                            None => break,
                        }
                    }
                }));
            }
            drop(rx);
            for v in 0..N {
                tx.send(v).await.unwrap();
            }
            drop(tx);
            for r in receivers {
                r.await.unwrap();
            }
            for (v, n) in seen.iter().enumerate() {
                assert_eq!(n.load(SeqCst), 1, "value {v}");
            }
        })
    });
}

/// A loop over a `select!` whose only arm is disabled takes `else` every time; on one P it
/// still lets the task that ends the loop run.
#[test]
fn a_select_else_spin_on_one_p_lets_other_tasks_run() {
    within(|| {
        let rt = gort::Builder::new().procs(1).build().unwrap();
        rt.block_on(async {
            let (_tx, rx) = bounded::<u32>(1);
            let stop = Arc::new(AtomicUsize::new(0));
            let spinner = {
                let stop = stop.clone();
                gort::spawn(async move {
                    while stop.load(SeqCst) == 0 {
                        select! {
                            _ = rx.recv(), if false => {}
                            else => {}
                        }
                    }
                })
            };
            let stopper = gort::spawn(async move { stop.store(1, SeqCst) });
            spinner.await.unwrap();
            stopper.await.unwrap();
        })
    });
}

/// `wait` on a group already at zero is ready every time: a loop around it (waiting for
/// something else to happen between rounds) spends the budget like a loop of ready channel
/// operations, so on one P the task it waits for runs.
#[test]
fn a_loop_over_a_ready_wait_group_wait_on_one_p_lets_other_tasks_run() {
    within(|| {
        let rt = gort::Builder::new().procs(1).build().unwrap();
        rt.block_on(async {
            let wg = WaitGroup::new();
            let stop = Arc::new(AtomicUsize::new(0));
            let spinner = {
                let (wg, stop) = (wg.clone(), stop.clone());
                gort::spawn(async move {
                    while stop.load(SeqCst) == 0 {
                        wg.wait().await;
                    }
                })
            };
            let stopper = gort::spawn(async move { stop.store(1, SeqCst) });
            spinner.await.unwrap();
            stopper.await.unwrap();
        })
    });
}

/// A `select!` loop whose timer arm has a deadline already past (a flush deadline never
/// moved forward): every round completes by that arm, which no channel operation paid for;
/// on one P the task that ends the loop still runs.
#[test]
fn a_select_loop_on_a_past_deadline_on_one_p_lets_other_tasks_run() {
    within(|| {
        let rt = gort::Builder::new().procs(1).build().unwrap();
        rt.block_on(async {
            let (tx, rx) = bounded::<u32>(1);
            let spinner = gort::spawn(async move {
                let deadline = gort::time::Instant::now();
                let mut flushes = 0u64;
                loop {
                    select! {
                        v = rx.recv() => break (v, flushes),
                        _ = gort::time::sleep_until(deadline) => flushes += 1,
                    }
                }
            });
            let sender = gort::spawn(async move { tx.send(5).await.unwrap() });
            let (v, _) = spinner.await.unwrap();
            assert_eq!(v, Some(5));
            sender.await.unwrap();
        })
    });
}

/// A `Sink` send cut off by a `timeout` stays in flight and offered: a receiver that comes
/// later takes it, and the next flush finds it delivered. Dropped unflushed, it is withdrawn.
#[test]
fn a_sink_send_cut_off_by_a_timeout_stays_offered_until_the_sender_drops() {
    within(|| {
        rt().block_on(async {
            let (mut tx, rx) = bounded::<u32>(0);
            assert!(timeout(MS, SinkExt::send(&mut tx, 1)).await.is_err());
            assert_eq!(rx.recv().await, Some(1), "still offered");
            tx.flush().await.unwrap();

            assert!(timeout(MS, SinkExt::send(&mut tx, 2)).await.is_err());
            drop(tx);
            assert_eq!(rx.recv().await, None, "withdrawn with the sender");
        })
    });
}
