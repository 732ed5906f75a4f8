//! Go's channel tests (`src/runtime/chan_test.go`, Go 1.19), ported to gort: goroutines are
//! `gort::spawn`, `GOMAXPROCS` is `gort::Builder::procs`, `runtime.Gosched` is
//! `gort::yield_now`, Go's `select` is `gort::select!` (a `default` arm where Go has one), a
//! receive from a closed channel is `None` (Go's zero value with `ok == false`), and a nil
//! channel in a `select` is a disabled arm (a `, if` guard) or a `None` receiver.
//!
//! Each test runs under a watchdog, so a hang fails it instead of hanging CI. Iteration counts
//! are Go's where they take well under a second here; where Go's take seconds, they are scaled
//! down (Go's own `-short` counts, or as noted), more so in debug builds.
//!
//! Not ported:
//! - TestShrinkStackDuringBlockedSend and TestNoShrinkStackWhileParking: they check that Go's
//!   GC may move a goroutine's stack while it is blocked on (or parking on) a channel. gort's
//!   tasks are futures with no stack of their own, and a parked operation's slot lives in
//!   the channel, never on a stack: there is nothing to shrink.
//! - TestSelectStackAdjust's stack part (the same reason); its channel part, a `close` waking
//!   selects that hold two arms on the closed channel, is `select_stack_adjust` below.

mod common;

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicUsize, Ordering::SeqCst};
use std::sync::Arc;
use std::time::Duration;

use common::{run_under_watchdog as run, scaled};
use gort::chan::{bounded, Receiver, Sender};
use gort::select;

async fn sleep_ms(ms: u64) {
    gort::time::sleep(Duration::from_millis(ms)).await;
}

/// Go: TestChan (chan_test.go). Go runs capacities 0..200 (0..20 with `-short`); here 0..20
/// and a few larger ones, each with Go's five checks.
#[test]
fn chan() {
    run(4, async {
        for cap in (0..20).chain([50, 100, 199]) {
            chan_recv_from_empty_blocks(cap).await;
            chan_send_to_full_blocks(cap).await;
            chan_recv_after_close(cap).await;
            chan_close_unblocks_recv(cap).await;
            chan_fifo_and_many_senders(cap).await;
            chan_len_cap(cap);
        }
    });
}

async fn chan_recv_from_empty_blocks(cap: usize) {
    let (tx, rx) = bounded::<i32>(cap);
    let recv1 = Arc::new(AtomicBool::new(false));
    let recv2 = Arc::new(AtomicBool::new(false));
    let mut tasks = Vec::new();
    for flag in [recv1.clone(), recv2.clone()] {
        let rx = rx.clone();
        tasks.push(gort::spawn(async move {
            let _ = rx.recv().await;
            flag.store(true, SeqCst);
        }));
    }
    sleep_ms(1).await;
    assert!(
        !recv1.load(SeqCst) && !recv2.load(SeqCst),
        "chan[{cap}]: receive from empty chan"
    );
    // A non-blocking receive does not block.
    select! {
        _ = rx.recv() => panic!("chan[{cap}]: receive from empty chan"),
        default => {}
    }
    tx.send(0).await.unwrap();
    tx.send(0).await.unwrap();
    for t in tasks {
        t.await.unwrap();
    }
}

async fn chan_send_to_full_blocks(cap: usize) {
    let (tx, rx) = bounded::<i32>(cap);
    for i in 0..cap {
        tx.send(i as i32).await.unwrap();
    }
    let sent = Arc::new(AtomicU32::new(0));
    let sender = {
        let (tx, sent) = (tx.clone(), sent.clone());
        gort::spawn(async move {
            tx.send(0).await.unwrap();
            sent.store(1, SeqCst);
        })
    };
    sleep_ms(1).await;
    assert_eq!(sent.load(SeqCst), 0, "chan[{cap}]: send to full chan");
    // A non-blocking send does not block.
    select! {
        _ = tx.send(0) => panic!("chan[{cap}]: send to full chan"),
        default => {}
    }
    rx.recv().await.unwrap();
    sender.await.unwrap();
}

async fn chan_recv_after_close(cap: usize) {
    let (tx, rx) = bounded::<i32>(cap);
    for i in 0..cap {
        tx.send(i as i32).await.unwrap();
    }
    tx.close();
    for i in 0..cap {
        assert_eq!(rx.recv().await, Some(i as i32), "chan[{cap}]");
    }
    // Go's `v := <-c` (zero) and `v, ok := <-c` (zero, false): both are `None` here.
    assert_eq!(rx.recv().await, None, "chan[{cap}]");
    assert_eq!(rx.recv().await, None, "chan[{cap}]");
}

async fn chan_close_unblocks_recv(cap: usize) {
    let (tx, rx) = bounded::<i32>(cap);
    let (done_tx, done_rx) = bounded::<bool>(0);
    gort::spawn(async move {
        let v = rx.recv().await;
        done_tx.send(v.is_none()).await.unwrap();
    });
    sleep_ms(1).await;
    tx.close();
    assert!(
        done_rx.recv().await.unwrap(),
        "chan[{cap}]: received non zero from closed chan"
    );
}

async fn chan_fifo_and_many_senders(cap: usize) {
    let (tx, rx) = bounded::<i32>(cap);
    // 100 integers received uncorrupted, in FIFO order (Go does it twice: `<-c` and
    // `v, ok := <-c`, which are one operation here).
    let sender = {
        let tx = tx.clone();
        gort::spawn(async move {
            for i in 0..100 {
                tx.send(i).await.unwrap();
            }
        })
    };
    for i in 0..100 {
        assert_eq!(rx.recv().await, Some(i), "chan[{cap}]");
    }
    sender.await.unwrap();

    // 1000 integers from each of 4 senders, received by 4 receivers: each value 4 times.
    const P: usize = 4;
    const L: i32 = 1000;
    for _ in 0..P {
        let tx = tx.clone();
        gort::spawn(async move {
            for i in 0..L {
                tx.send(i).await.unwrap();
            }
        });
    }
    let (done_tx, done_rx) = bounded::<HashMap<i32, usize>>(0);
    for _ in 0..P {
        let (rx, done_tx) = (rx.clone(), done_tx.clone());
        gort::spawn(async move {
            let mut recv = HashMap::new();
            for _ in 0..L {
                *recv.entry(rx.recv().await.unwrap()).or_insert(0) += 1;
            }
            done_tx.send(recv).await.unwrap();
        });
    }
    let mut recv = HashMap::new();
    for _ in 0..P {
        for (k, v) in done_rx.recv().await.unwrap() {
            *recv.entry(k).or_insert(0) += v;
        }
    }
    assert_eq!(recv.len(), L as usize, "chan[{cap}]: distinct values");
    assert!(recv.values().all(|&v| v == P), "chan[{cap}]: counts");
}

fn chan_len_cap(cap: usize) {
    let (tx, rx) = bounded::<usize>(cap);
    assert_eq!((rx.len(), rx.capacity()), (0, Some(cap)), "chan[{cap}]");
    for i in 0..cap {
        tx.try_send(i).unwrap();
    }
    assert_eq!((rx.len(), rx.capacity()), (cap, Some(cap)), "chan[{cap}]");
}

/// Go: TestNonblockRecvRace (chan_test.go). A receive with `default` on a channel that holds
/// a value or is closed never takes `default`, whatever the closer and another receiver do
/// meanwhile.
#[test]
fn nonblock_recv_race() {
    let n = scaled(10_000, 2_000);
    run(2, async move {
        let failed = Arc::new(AtomicUsize::new(0));
        let mut tasks = Vec::with_capacity(n);
        for _ in 0..n {
            let (tx, rx) = bounded::<i32>(1);
            tx.send(1).await.unwrap();
            let (rx2, failed) = (rx.clone(), failed.clone());
            tasks.push(gort::spawn(async move {
                select! {
                    _ = rx2.recv() => {}
                    default => {
                        failed.fetch_add(1, SeqCst);
                    }
                }
            }));
            tx.close();
            rx.recv().await;
        }
        for t in tasks {
            t.await.unwrap();
        }
        assert_eq!(failed.load(SeqCst), 0, "chan is not ready");
    });
}

/// Go: TestNonblockSelectRace (chan_test.go). A select acts on the channels' state at one
/// moment, not over a smeared window: from the moment the task is spawned, `c1` or `c2`
/// always holds a value, so its select with `default` must receive one. Go runs 100,000
/// rounds (1,000 with `-short`).
#[test]
fn nonblock_select_race() {
    nonblock_select_race_with(|tx2: &Sender<i32>| tx2.try_send(1).unwrap(), 1);
}

/// Go: TestNonblockSelectRace2 (chan_test.go): as `nonblock_select_race`, with `close(c2)`
/// (an unbuffered `c2`) in place of `c2 <- 1`.
#[test]
fn nonblock_select_race2() {
    nonblock_select_race_with(|tx2: &Sender<i32>| tx2.close(), 0);
}

fn nonblock_select_race_with(ready_c2: fn(&Sender<i32>), cap2: usize) {
    let n = scaled(100_000, 10_000);
    run(2, async move {
        let (done_tx, done_rx) = bounded::<bool>(1);
        for i in 0..n {
            let (tx1, rx1) = bounded::<i32>(1);
            let (tx2, rx2) = bounded::<i32>(cap2);
            tx1.send(1).await.unwrap();
            // Go's channels outlive their receivers; here the last receiver's drop closes
            // one, so the main task keeps `c2` open until the round ends.
            let (rx1b, rx2b, done_tx) = (rx1.clone(), rx2.clone(), done_tx.clone());
            gort::spawn(async move {
                let got = select! {
                    _ = rx1b.recv() => true,
                    _ = rx2b.recv() => true,
                    default => false,
                };
                done_tx.send(got).await.unwrap();
            });
            ready_c2(&tx2);
            select! {
                _ = rx1.recv() => {}
                default => {}
            }
            assert!(done_rx.recv().await.unwrap(), "round {i}: no chan is ready");
        }
    });
}

/// Go: TestSelfSelect (chan_test.go). A select that sends and receives on the same channel
/// neither crashes nor deadlocks, and (unbuffered) never receives its own value.
#[test]
fn self_select() {
    run(2, async {
        for cap in [0, 10] {
            let (tx, rx) = bounded::<usize>(cap);
            let mut tasks = Vec::new();
            for p in 0..2 {
                let (tx, rx) = (tx.clone(), rx.clone());
                tasks.push(gort::spawn(async move {
                    for i in 0..1000 {
                        // Go writes the two arms in both orders; gort polls them in a random
                        // order anyway, so both orders are here too.
                        let got = if p == 0 || i % 2 == 0 {
                            select! {
                                _ = tx.send(p) => None,
                                v = rx.recv() => v,
                            }
                        } else {
                            select! {
                                v = rx.recv() => v,
                                _ = tx.send(p) => None,
                            }
                        };
                        if cap == 0 {
                            assert_ne!(got, Some(p), "self receive");
                        }
                    }
                }));
            }
            for t in tasks {
                t.await.unwrap();
            }
        }
    });
}

/// Go: TestSelectStress (chan_test.go). Four senders and four receivers, one per channel, plus
/// one task that sends on all four in one select and one that receives from all four in one
/// select, `N` values per channel each; nothing deadlocks. Go runs N = 100,000 (10,000 with
/// `-short`) on 10 Ps.
#[test]
fn select_stress() {
    let n = scaled(10_000, 2_000);
    run(10, async move {
        let chans: Vec<(Sender<u8>, Receiver<u8>)> =
            vec![bounded(0), bounded(0), bounded(2), bounded(3)];
        let mut tasks = Vec::new();
        for (tx, rx) in &chans {
            let tx = tx.clone();
            tasks.push(gort::spawn(async move {
                for _ in 0..n {
                    tx.send(0).await.unwrap();
                }
            }));
            let rx = rx.clone();
            tasks.push(gort::spawn(async move {
                for _ in 0..n {
                    rx.recv().await.unwrap();
                }
            }));
        }
        let txs: Vec<Sender<u8>> = chans.iter().map(|c| c.0.clone()).collect();
        tasks.push(gort::spawn(async move {
            // A channel done with is Go's nil channel: its arm's guard is false.
            let mut sent = [0; 4];
            for _ in 0..4 * n {
                let k = select! {
                    _ = txs[3].send(0), if sent[3] < n => 3,
                    _ = txs[2].send(0), if sent[2] < n => 2,
                    _ = txs[0].send(0), if sent[0] < n => 0,
                    _ = txs[1].send(0), if sent[1] < n => 1,
                };
                sent[k] += 1;
            }
        }));
        let rxs: Vec<Receiver<u8>> = chans.iter().map(|c| c.1.clone()).collect();
        tasks.push(gort::spawn(async move {
            let mut got = [0; 4];
            for _ in 0..4 * n {
                let k = select! {
                    _ = rxs[0].recv(), if got[0] < n => 0,
                    _ = rxs[1].recv(), if got[1] < n => 1,
                    _ = rxs[2].recv(), if got[2] < n => 2,
                    _ = rxs[3].recv(), if got[3] < n => 3,
                };
                got[k] += 1;
            }
        }));
        for t in tasks {
            t.await.unwrap();
        }
    });
}

/// Go: TestSelectFairness (chan_test.go). A select over two always-ready channels (and two
/// never-ready ones) picks each about half the time: Go's bound, the margin of error at a
/// confidence of six nines over 10,000 trials.
#[test]
fn select_fairness() {
    const TRIALS: usize = 10_000;
    run(2, async {
        let (tx1, rx1) = bounded::<u8>(TRIALS + 1);
        let (tx2, rx2) = bounded::<u8>(TRIALS + 1);
        for _ in 0..TRIALS + 1 {
            tx1.try_send(1).unwrap();
            tx2.try_send(2).unwrap();
        }
        let (_tx3, rx3) = bounded::<u8>(0);
        let (_tx4, rx4) = bounded::<u8>(0);
        let (out_tx, out_rx) = bounded::<u8>(0);
        let (done_tx, done_rx) = bounded::<()>(0);
        let picker = gort::spawn(async move {
            loop {
                let b = select! {
                    b = rx3.recv() => b,
                    b = rx4.recv() => b,
                    b = rx1.recv() => b,
                    b = rx2.recv() => b,
                };
                select! {
                    _ = out_tx.send(b.unwrap()) => {}
                    _ = done_rx.recv() => return,
                }
            }
        });
        let (mut cnt1, mut cnt2) = (0, 0);
        for _ in 0..TRIALS {
            match out_rx.recv().await.unwrap() {
                1 => cnt1 += 1,
                2 => cnt2 += 1,
                b => panic!("unexpected value {b} on channel"),
            }
        }
        let r = cnt1 as f64 / TRIALS as f64;
        let e = (r - 0.5).abs();
        assert!(
            e <= 4.891676 / (2.0 * (TRIALS as f64).sqrt()),
            "unfair select: in {TRIALS} trials, results were {cnt1}, {cnt2}"
        );
        done_tx.close();
        picker.await.unwrap();
        drop((tx1, tx2));
    });
}

/// Go: TestChanSendInterface (chan_test.go): sends of boxed trait objects, with `default` and
/// with two send arms, compile and do not crash (a send arm that lost drops its value).
#[test]
fn chan_send_interface() {
    struct Mt;
    run(1, async {
        let (tx, _rx) = bounded::<Box<dyn std::any::Any + Send>>(1);
        tx.send(Box::new(Mt)).await.unwrap();
        select! {
            _ = tx.send(Box::new(Mt)) => panic!("sent to a full channel"),
            default => {}
        }
        select! {
            _ = tx.send(Box::new(Mt)) => panic!("sent to a full channel"),
            _ = tx.send(Box::new(Mt)) => panic!("sent to a full channel"),
            default => {}
        }
    });
}

/// Go: TestPseudoRandomSend (chan_test.go). A select of two sends on one channel picks each
/// often (more than a tenth of the time).
#[test]
fn pseudo_random_send() {
    const N: usize = 100;
    run(2, async {
        for cap in [0, N] {
            let (tx, rx) = bounded::<usize>(cap);
            let reader = gort::spawn(async move {
                let mut l = Vec::with_capacity(N);
                for _ in 0..N {
                    gort::yield_now().await;
                    l.push(rx.recv().await.unwrap());
                }
                l
            });
            for _ in 0..N {
                select! {
                    _ = tx.send(1) => {}
                    _ = tx.send(0) => {}
                }
            }
            let l = reader.await.unwrap();
            let n1: usize = l.iter().sum();
            let n0 = N - n1;
            assert!(
                n0 > N / 10 && n1 > N / 10,
                "want pseudorandom, got {n0} zeros and {n1} ones (chan cap {cap})"
            );
        }
    });
}

/// Go: TestMultiConsumer (chan_test.go). 23 workers `range` over a job channel (yielding now
/// and then to disturb its FIFO-ish order) and forward to a result channel, closed once every
/// worker is done: every job arrives once. Go runs 271,828 jobs; a tenth of that in debug.
#[test]
fn multi_consumer() {
    const NWORK: usize = 23;
    const PN: [usize; 10] = [2, 3, 7, 11, 13, 17, 19, 23, 27, 31];
    let niter = scaled(271_828, 27_182);
    run(2, async move {
        let (q_tx, q_rx) = bounded::<usize>(NWORK * 3);
        let (r_tx, r_rx) = bounded::<usize>(NWORK * 3);
        let mut workers = Vec::new();
        for w in 0..NWORK {
            let (q_rx, r_tx) = (q_rx.clone(), r_tx.clone());
            workers.push(gort::spawn(async move {
                while let Some(v) = q_rx.recv().await {
                    if PN[w % PN.len()] == v {
                        gort::yield_now().await;
                    }
                    r_tx.send(v).await.unwrap();
                }
            }));
        }
        drop(q_rx);
        // Feeder and closer.
        let feeder = gort::spawn(async move {
            let mut expect = 0;
            for i in 0..niter {
                let v = PN[i % PN.len()];
                expect += v;
                q_tx.send(v).await.unwrap();
            }
            q_tx.close(); // no more work
            for w in workers {
                w.await.unwrap(); // workers done
            }
            r_tx.close(); // ... so there can be no more results
            expect
        });
        let (mut n, mut s) = (0, 0);
        while let Some(v) = r_rx.recv().await {
            n += 1;
            s += v;
        }
        let expect = feeder.await.unwrap();
        assert_eq!((n, s), (niter, expect), "(received, sum)");
    });
}

/// Go: TestSelectDuplicateChannel (chan_test.go). A select with two arms on one channel,
/// woken through a third, leaves that channel's wait queue intact: a later send on it still
/// reaches the receiver parked behind the select.
#[test]
fn select_duplicate_channel() {
    run(2, async {
        let (c_tx, c_rx) = bounded::<i32>(0);
        let (d_tx, d_rx) = bounded::<i32>(0);
        let (e_tx, e_rx) = bounded::<i32>(0);
        let a = {
            let c_rx = c_rx.clone();
            gort::spawn(async move {
                select! {
                    _ = c_rx.recv() => {}
                    _ = c_rx.recv() => {}
                    _ = d_rx.recv() => {}
                }
                e_tx.send(9).await.unwrap();
            })
        };
        sleep_ms(1).await; // A queues first on c
        let b = gort::spawn(async move { c_rx.recv().await });
        sleep_ms(1).await; // B queues on c behind A
        d_tx.send(7).await.unwrap(); // wakes A, which leaves c's queue
        assert_eq!(e_rx.recv().await, Some(9));
        c_tx.send(8).await.unwrap(); // reaches B
        assert_eq!(b.await.unwrap(), Some(8));
        a.await.unwrap();
    });
}

/// Go: TestSelectStackAdjust (chan_test.go), its channel part: a `close` wakes two parked
/// selects, one of them holding two arms on each of the two channels (Go's duplicate `c2`,
/// `d2`; the other's are nil); each takes the closed channel's arm.
#[test]
fn select_stack_adjust() {
    run(2, async {
        let (c_tx, c_rx) = bounded::<i32>(0);
        let (d_tx, d_rx) = bounded::<i32>(0);
        let mut tasks = Vec::new();
        for dup in [false, true] {
            let (c_rx, d_rx) = (c_rx.clone(), d_rx.clone());
            let (ready_tx, ready_rx) = bounded::<()>(0);
            tasks.push((
                ready_rx,
                gort::spawn(async move {
                    ready_tx.send(()).await.unwrap();
                    let (c2, d2) = if dup {
                        (Some(&c_rx), Some(&d_rx))
                    } else {
                        (None, None)
                    };
                    select! {
                        _ = c_rx.recv() => "c",
                        _ = c2 => "c2",
                        v = d_rx.recv() => { assert_eq!(v, None); "d" }
                        v = d2 => { assert_eq!(v, None); "d2" }
                    }
                }),
            ));
        }
        for (ready, _) in &tasks {
            ready.recv().await.unwrap();
        }
        sleep_ms(10).await; // let both park in their select
        d_tx.close();
        for (_, t) in tasks {
            let arm = t.await.unwrap();
            assert!(arm == "d" || arm == "d2", "woke on {arm}");
        }
        drop(c_tx);
    });
}

/// Go's select-with-timeout idiom (`case <-time.After(d)`): the timer's arm wins only when no
/// value comes first, and a value that comes first wins over a later timer.
#[test]
fn select_timeout() {
    run(2, async {
        let (tx, rx) = bounded::<i32>(0);
        let timer = gort::time::after(Duration::from_millis(5));
        let timed_out = select! {
            _ = rx.recv() => false,
            _ = timer.recv() => true,
        };
        assert!(timed_out, "nothing was sent");
        let sender = gort::spawn(async move { tx.send(1).await.unwrap() });
        let timer = gort::time::after(Duration::from_secs(20));
        let got = select! {
            v = rx.recv() => v,
            _ = timer.recv() => None,
        };
        assert_eq!(got, Some(1));
        sender.await.unwrap();
    });
}
