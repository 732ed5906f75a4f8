//! The cooperative budget (gort-coop): a task whose every `.await` is ready yields after 128
//! ready operations, so a `timeout` around it fires and its P's other tasks run.
//!
//! Without the budget, the three `timeout_fires_around_*` tests,
//! `an_always_ready_loop_lets_another_task_run` and
//! `consume_budget_yields_a_loop_that_awaits_nothing_else` hang (each loop never returns
//! `Pending`), and the watchdog fails them after 30 s. The other tests pin what the budget
//! must not change: no value lost or duplicated across its yields, `unconstrained` turns it
//! off, and a `select!` with a timer arm fires (which it did before too: sysmon runs a stuck
//! P's timers and the select picks the ready timer arm at random).

use std::collections::HashSet;
use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering::SeqCst};
use std::sync::{mpsc, Arc};
use std::time::Duration;

use gort::time::Instant;

/// Runs `f` on its own thread and fails if it does not return within `limit`: a loop that
/// never yields hangs the runtime (the thread is left behind; the test process exits anyway).
fn within<R: Send + 'static>(limit: Duration, f: impl FnOnce() -> R + Send + 'static) -> R {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    match rx.recv_timeout(limit) {
        Ok(r) => r,
        Err(mpsc::RecvTimeoutError::Timeout) => {
            panic!("still running after {limit:?}: the loop never yielded")
        }
        Err(mpsc::RecvTimeoutError::Disconnected) => panic!("the runtime's thread panicked"),
    }
}

const WATCHDOG: Duration = Duration::from_secs(30);

/// A timeout of 10 ms may fire late on a loaded 2-vCPU machine, never seconds late.
const GENEROUS: Duration = Duration::from_secs(5);

/// Values a consumer of 20 µs per value takes 40 s to drain, longer than the watchdog.
const FULL: usize = 2_000_000;

#[test]
fn timeout_fires_around_a_channel_another_task_keeps_full() {
    for procs in [1, 2] {
        let elapsed = within(WATCHDOG, move || {
            let rt = gort::Builder::new().procs(procs).build().unwrap();
            rt.block_on(async {
                let (tx, rx) = gort::chan::bounded::<u64>(FULL);
                let producer = gort::spawn(async move {
                    let mut i = 0u64;
                    while tx.send(i).await.is_ok() {
                        i += 1;
                    }
                });
                while rx.len() < FULL {
                    gort::yield_now().await;
                }
                let start = Instant::now();
                // Every receive is ready: the channel holds more than the loop can take
                // before the watchdog, and the producer tops it up.
                let consumer = async {
                    loop {
                        rx.recv().await.unwrap();
                        let work = std::time::Instant::now();
                        while work.elapsed() < Duration::from_micros(20) {
                            std::hint::spin_loop();
                        }
                    }
                };
                let r = gort::time::timeout(Duration::from_millis(10), consumer).await;
                assert!(r.is_err(), "the loop only ends by the timeout");
                let elapsed = start.elapsed();
                rx.close();
                producer.await.unwrap();
                elapsed
            })
        });
        assert!(elapsed < GENEROUS, "procs {procs}: fired after {elapsed:?}");
    }
}

#[test]
fn timeout_fires_around_a_self_feeding_loop_in_block_on() {
    // No other task at all: the budget of `block_on`'s own future makes the loop yield.
    let elapsed = within(WATCHDOG, || {
        gort::Runtime::new().unwrap().block_on(async {
            let (tx, rx) = gort::chan::bounded(1);
            let start = Instant::now();
            let echo = async {
                loop {
                    tx.send(1u8).await.unwrap();
                    rx.recv().await.unwrap();
                }
            };
            assert!(gort::time::timeout(Duration::from_millis(10), echo)
                .await
                .is_err());
            start.elapsed()
        })
    });
    assert!(elapsed < GENEROUS, "fired after {elapsed:?}");
}

#[test]
fn timeout_fires_around_a_socket_read_loop_whose_peer_keeps_writing() {
    let elapsed = within(WATCHDOG, || {
        let rt = gort::Builder::new().procs(2).build().unwrap();
        rt.block_on(async {
            let listener = gort::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            let addr = listener.local_addr().unwrap();
            let stop = Arc::new(AtomicBool::new(false));
            let writer = gort::spawn({
                let stop = stop.clone();
                async move {
                    let conn = gort::net::TcpStream::connect(addr).await.unwrap();
                    let chunk = vec![7u8; 64 * 1024];
                    while !stop.load(SeqCst) {
                        if conn.write_all(&chunk).await.is_err() {
                            break;
                        }
                    }
                }
            });
            let (conn, _) = listener.accept().await.unwrap();
            // Let the writer fill the socket's buffers: then one-byte reads find data ready
            // far longer than the timeout, as long as the writer keeps up.
            gort::time::sleep(Duration::from_millis(50)).await;
            let start = Instant::now();
            let reader = async {
                let mut byte = [0u8; 1];
                loop {
                    assert_eq!(conn.read(&mut byte).await.unwrap(), 1);
                }
            };
            let r = gort::time::timeout(Duration::from_millis(10), reader).await;
            assert!(r.is_err(), "the loop only ends by the timeout");
            let elapsed = start.elapsed();
            stop.store(true, SeqCst);
            drop(conn);
            writer.await.unwrap();
            elapsed
        })
    });
    assert!(elapsed < GENEROUS, "fired after {elapsed:?}");
}

/// On one P, a task looping over a channel that is always ready (it feeds itself) until
/// another task has set a flag (at most `rounds_cap` rounds), plainly or inside `unconstrained`.
/// Returns how many rounds the loop made before it saw the flag.
async fn rounds_until_flag(rounds_cap: u64, unconstrained: bool) -> u64 {
    let flag = Arc::new(AtomicBool::new(false));
    // On the loop's P (its `runnext`): it runs only when the loop yields.
    let setter = gort::spawn({
        let flag = flag.clone();
        async move { flag.store(true, SeqCst) }
    });
    let (tx, rx) = gort::chan::bounded(1);
    let spin = async {
        let mut rounds = 0;
        while !flag.load(SeqCst) && rounds < rounds_cap {
            tx.send(rounds).await.unwrap();
            assert_eq!(rx.recv().await, Some(rounds));
            rounds += 1;
        }
        rounds
    };
    let rounds = if unconstrained {
        gort::task::unconstrained(spin).await
    } else {
        spin.await
    };
    setter.await.unwrap();
    rounds
}

#[test]
fn an_always_ready_loop_lets_another_task_run() {
    let rounds = within(WATCHDOG, || {
        let rt = gort::Builder::new().procs(1).build().unwrap();
        rt.block_on(rt.spawn(rounds_until_flag(u64::MAX, false)))
            .unwrap()
    });
    // A round is a send and a receive: two units of the budget of 128, so the 65th round's
    // send yields, and the loop sees the flag after it.
    assert_eq!(rounds, 65, "the other task ran only after {rounds} rounds");
}

#[test]
fn unconstrained_turns_the_budget_off() {
    let rounds = within(WATCHDOG, || {
        let rt = gort::Builder::new().procs(1).build().unwrap();
        rt.block_on(rt.spawn(rounds_until_flag(10_000, true)))
            .unwrap()
    });
    assert_eq!(rounds, 10_000, "the loop yielded inside unconstrained");
}

#[test]
fn consume_budget_yields_a_loop_that_awaits_nothing_else() {
    let rounds = within(WATCHDOG, || {
        let rt = gort::Builder::new().procs(1).build().unwrap();
        rt.block_on(rt.spawn(async {
            let flag = Arc::new(AtomicBool::new(false));
            let setter = gort::spawn({
                let flag = flag.clone();
                async move { flag.store(true, SeqCst) }
            });
            let mut rounds = 0u64;
            while !flag.load(SeqCst) {
                rounds += 1;
                gort::task::consume_budget().await;
            }
            setter.await.unwrap();
            rounds
        }))
        .unwrap()
    });
    // 128 units, then the 129th `consume_budget` yields.
    assert_eq!(rounds, 129, "the other task ran only after {rounds} rounds");
}

/// `senders` tasks each send `per` tagged values; the receivers take them with every kind of
/// receive the budget touches (plain `recv`, a `select!` over two channels, a `recv` cut off
/// by a short `timeout`, the `Stream`), yielding for budget many times on the way. Every value
/// must arrive exactly once, and, when no receive is cut off, each sender's in order.
///
/// A `recv` cut off after a sender handed it a value puts the value back at the front
/// (`Core::bounce`); the sender has moved on, and a receiver that took its next value
/// meanwhile sees the two out of order (design/CHANNELS.md, "Order"), so the order is checked
/// on the runs without the `timeout` receiver.
#[test]
fn no_value_is_lost_or_duplicated_across_budget_yields() {
    for procs in [1, 2] {
        budget_receivers(procs, &[0, 1, 2, 3], false);
        budget_receivers(procs, &[0, 1, 3], true);
    }
}

/// The run of [`no_value_is_lost_or_duplicated_across_budget_yields`] with receivers of
/// `kinds` (0 `recv`, 1 `select!`, 2 `recv` under `timeout`, 3 `Stream`).
fn budget_receivers(procs: usize, kinds: &'static [u8], check_order: bool) {
    const SENDERS: u64 = 4;
    const PER: u64 = 20_000;
    {
        let got = within(WATCHDOG * 2, move || {
            let rt = gort::Builder::new().procs(procs).build().unwrap();
            rt.block_on(async {
                let (tx_a, rx_a) = gort::chan::bounded::<u64>(64);
                let (tx_b, rx_b) = gort::chan::bounded::<u64>(0);
                for s in 0..SENDERS {
                    let tx = if s % 2 == 0 {
                        tx_a.clone()
                    } else {
                        tx_b.clone()
                    };
                    gort::spawn(async move {
                        for i in 0..PER {
                            tx.send(s << 32 | i).await.unwrap();
                        }
                    });
                }
                drop((tx_a, tx_b));
                let mut receivers = Vec::new();
                for &kind in kinds {
                    let (rx_a, rx_b) = (rx_a.clone(), rx_b.clone());
                    receivers.push(gort::spawn(async move {
                        let mut got = Vec::new();
                        let (mut a_open, mut b_open) = (true, true);
                        while a_open || b_open {
                            let v = match kind {
                                0 if a_open => rx_a.recv().await.or_else(|| {
                                    a_open = false;
                                    None
                                }),
                                0 => rx_b.recv().await.or_else(|| {
                                    b_open = false;
                                    None
                                }),
                                1 => gort::select! {
                                    Some(v) = rx_a.recv(), if a_open => Some(v),
                                    Some(v) = rx_b.recv(), if b_open => Some(v),
                                    else => { (a_open, b_open) = (false, false); None }
                                },
                                2 => {
                                    let rx = if a_open { &rx_a } else { &rx_b };
                                    let d = Duration::from_micros(50);
                                    match gort::time::timeout(d, rx.recv()).await {
                                        Ok(Some(v)) => Some(v),
                                        Ok(None) if a_open => {
                                            a_open = false;
                                            None
                                        }
                                        Ok(None) => {
                                            b_open = false;
                                            None
                                        }
                                        Err(_) => None, // cut off: the value stays queued
                                    }
                                }
                                _ => {
                                    use futures::StreamExt;
                                    let mut rx = if a_open { rx_a.clone() } else { rx_b.clone() };
                                    let v = rx.next().await;
                                    if v.is_none() {
                                        if a_open {
                                            a_open = false;
                                        } else {
                                            b_open = false;
                                        }
                                    }
                                    v
                                }
                            };
                            got.extend(v);
                        }
                        got
                    }));
                }
                let mut all = Vec::new();
                for r in receivers {
                    all.push(r.await.unwrap());
                }
                all
            })
        });
        let mut seen = HashSet::new();
        for got in &got {
            let mut last = [None::<u64>; SENDERS as usize];
            for &v in got {
                assert!(seen.insert(v), "procs {procs}: {v:#x} received twice");
                let (s, i) = ((v >> 32) as usize, v & 0xffff_ffff);
                assert!(
                    !check_order || last[s].map_or(true, |l| l < i),
                    "procs {procs}: sender {s} out of order"
                );
                last[s] = Some(i);
            }
        }
        assert_eq!(
            seen.len() as u64,
            SENDERS * PER,
            "procs {procs}: values lost"
        );
    }
}

#[test]
fn a_select_with_a_timer_arm_fires_around_a_ready_channel() {
    let elapsed = within(WATCHDOG, || {
        let rt = gort::Builder::new().procs(1).build().unwrap();
        rt.block_on(rt.spawn(async {
            let (tx, rx) = gort::chan::bounded(1);
            let deadline = gort::time::after(Duration::from_millis(10));
            let start = Instant::now();
            let mut n = 0u64;
            loop {
                tx.send(n).await.unwrap();
                gort::select! {
                    v = rx.recv() => assert_eq!(v, Some(n)),
                    _ = deadline.recv() => break,
                }
                n += 1;
            }
            start.elapsed()
        }))
        .unwrap()
    });
    assert!(elapsed < GENEROUS, "fired after {elapsed:?}");
}

/// A receive parked under a `timeout` is handed a value, then polled again on a spent budget
/// after its deadline: it returns the value. Before, the budget made the receive `Pending`,
/// the timeout's deadline check came next and cut it off, and the value was put back behind
/// anything delivered meanwhile (a `Ticker`'s receiver saw an older tick after a newer one:
/// `tests/time_races.rs`, design/CHANNELS.md "Cancel safety").
#[test]
fn a_handed_value_survives_a_spent_budget_and_a_timeout() {
    within(WATCHDOG, || {
        let rt = gort::Builder::new().procs(1).build().unwrap();
        rt.block_on(async {
            gort::spawn(async {
                let (tx, rx) = gort::chan::bounded::<u32>(1);
                let (fill_tx, fill_rx) = gort::chan::bounded::<u32>(256);
                for i in 0..256 {
                    fill_tx.try_send(i).unwrap();
                }
                let limit = Duration::from_millis(20);
                let mut cut = Box::pin(gort::time::timeout(limit, rx.recv()));
                std::future::poll_fn(|cx| {
                    // One task poll: the receive parks, a sender completes it, ready receives
                    // spend the budget, and the deadline passes.
                    assert!(cut.as_mut().poll(cx).is_pending(), "nothing sent yet");
                    tx.try_send(7).unwrap();
                    let mut fill = 0;
                    while gort::task::has_budget_remaining() {
                        let mut recv = std::pin::pin!(fill_rx.recv());
                        assert!(recv.as_mut().poll(cx).is_ready(), "a buffered value");
                        fill += 1;
                    }
                    assert!(fill <= 256, "the budget is 128 operations a poll");
                    std::thread::sleep(limit + Duration::from_millis(5));
                    match cut.as_mut().poll(cx) {
                        std::task::Poll::Ready(r) => {
                            assert_eq!(r, Ok(Some(7)), "the handed value, not a timeout");
                        }
                        std::task::Poll::Pending => panic!("the handed value was held back"),
                    }
                    std::task::Poll::Ready(())
                })
                .await;
                assert!(rx.try_recv().is_err(), "nothing was put back");
            })
            .await
            .unwrap();
        });
    });
}
