//! `select!`'s arm forms: `, if` guards, `biased;`, refutable patterns, `else`, and Go's
//! nil-channel arm (`Option<&Receiver<T>>`), each with the commit rule (one arm takes effect).

mod common;

use std::future::{pending, ready};
use std::pin::pin;
use std::task::Poll;

use common::poll_once;
use futures::executor::block_on;
use gort_chan::{bounded, select, unbounded, Receiver, TryRecvError};

/// A false guard disables its arm: its ready future is never polled (nor its value taken),
/// and the select takes the other arm.
#[test]
fn guard_false_disables_the_arm() {
    let (tx_a, rx_a) = unbounded();
    let (tx_b, rx_b) = unbounded();
    tx_a.try_send(1).unwrap();
    tx_b.try_send(2).unwrap();
    for _ in 0..100 {
        let got = block_on(async {
            select! {
                v = rx_a.recv(), if false => v,
                v = rx_b.recv(), if 1 + 1 == 2 => v,
            }
        });
        assert_eq!(got, Some(2));
        tx_b.try_send(2).unwrap();
        assert_eq!(rx_a.len(), 1, "a disabled arm took a value");
    }
}

/// The guard is evaluated before its arm's expression, and the expression of a disabled arm
/// is still evaluated (as in Tokio).
#[test]
fn guard_and_expression_are_evaluated_in_order() {
    let mut log = Vec::new();
    let got = block_on(async {
        select! {
            v = { log.push("f0"); ready(0) }, if { log.push("c0"); false } => v,
            v = { log.push("f1"); ready(1) } => v,
        }
    });
    assert_eq!(got, 1);
    assert_eq!(log, ["c0", "f0", "f1"]);
}

/// `biased;` polls the arms in declared order: the first ready arm always wins.
#[test]
fn biased_takes_the_first_ready_arm() {
    for _ in 0..1_000 {
        let got = block_on(async {
            select! {
                biased;
                v = pending::<u8>() => v,
                v = ready(1) => v,
                v = ready(2) => v,
            }
        });
        assert_eq!(got, 1);
    }
}

/// Without `biased;`, two ready arms are both chosen (random order).
#[test]
fn unbiased_chooses_both() {
    let mut seen = [0u32; 2];
    for _ in 0..1_000 {
        let i: usize = block_on(async {
            select! {
                v = ready(0) => v,
                v = ready(1) => v,
            }
        });
        seen[i] += 1;
    }
    assert!(seen[0] > 200 && seen[1] > 200, "{seen:?}");
}

/// A refutable pattern that does not match disables its arm (Tokio's rule), and the select
/// goes on with the others: here a closed channel's `None` lets the loop wait on the other.
#[test]
fn refutable_pattern_disables_the_arm() {
    let (tx_a, rx_a) = unbounded::<u32>();
    let (tx_b, rx_b) = unbounded::<u32>();
    tx_a.close();
    tx_b.try_send(7).unwrap();
    for _ in 0..100 {
        let got = block_on(async {
            select! {
                Some(v) = rx_a.recv() => v,
                Some(v) = rx_b.recv() => v + 100,
            }
        });
        assert_eq!(got, 107);
        tx_b.try_send(7).unwrap();
    }
}

/// A mismatch seen while parked (a counterparty completed the arm) reopens the select for the
/// other arms: a later send on another arm still completes it.
#[test]
fn refutable_mismatch_after_parking_reopens_the_select() {
    let (tx_a, rx_a) = bounded::<u32>(0);
    let (tx_b, rx_b) = bounded::<u32>(0);
    let mut sel = pin!(async {
        select! {
            Some(7) = rx_a.recv() => "a",
            Some(v) = rx_b.recv() => if v == 9 { "b" } else { "?" },
        }
    });
    assert!(poll_once(&mut sel).is_pending());
    // Completes arm a with a value its pattern rejects: consumed (as in Tokio), arm disabled.
    assert!(tx_a.try_send(8).is_ok());
    assert!(poll_once(&mut sel).is_pending());
    // The select is parked on b alone; a's channel is untouched from now on.
    assert!(tx_a.try_send(7).unwrap_err().is_full());
    tx_b.try_send(9).unwrap();
    assert_eq!(poll_once(&mut sel), Poll::Ready("b"));
    assert_eq!(rx_b.try_recv(), Err(TryRecvError::Empty));
}

/// `else` runs when every arm is disabled (by guards or by patterns).
#[test]
fn else_runs_when_every_arm_is_disabled() {
    let (tx, rx) = unbounded::<u8>();
    let got = block_on(async {
        select! {
            v = rx.recv(), if false => v.map(u32::from),
            v = ready(5u32), if false => Some(v),
            else => None,
        }
    });
    assert_eq!(got, None);
    tx.close();
    let got = block_on(async {
        select! {
            Some(v) = rx.recv() => v,
            else => 0,
        }
    });
    assert_eq!(got, 0);
}

/// With `else`, an arm that is ready still wins.
#[test]
fn else_does_not_preempt_a_ready_arm() {
    let got = block_on(async {
        select! {
            v = ready(3), if true => v,
            else => 0,
        }
    });
    assert_eq!(got, 3);
}

/// Every arm disabled and no `else`: Tokio's panic message, not a hang.
#[test]
#[should_panic(expected = "all branches are disabled and there is no else branch")]
fn all_disabled_without_else_panics() {
    block_on(async {
        select! {
            v = ready(1), if false => v,
            Some(v) = ready(None::<i32>) => v,
        }
    });
}

/// Go's nil channel: an `Option<&Receiver<T>>` arm that is `None` is never ready; `Some(rx)`
/// receives as `rx.recv()` does (`None` once closed).
#[test]
fn option_receiver_arm_is_go_nil_channel() {
    let (tx, rx) = unbounded::<u8>();
    tx.try_send(1).unwrap();
    let (_tx2, quiet) = unbounded::<u8>();
    let mut enabled: Option<&Receiver<u8>> = Some(&rx);
    let got = block_on(async {
        select! {
            v = enabled => v,
            v = quiet.recv() => v.map(|v| v + 10),
        }
    });
    assert_eq!(got, Some(1));
    // The nil-channel idiom: stop listening to `rx` by setting it to None.
    tx.try_send(2).unwrap();
    enabled = None;
    let got = block_on(async {
        select! {
            v = enabled => v,
            default => Some(99),
        }
    });
    assert_eq!(got, Some(99));
    assert_eq!(rx.len(), 1, "a None arm took a value");
    // A closed channel through the option yields None, as `recv` does.
    drop(tx);
    rx.try_recv().unwrap();
    let got = block_on(async {
        select! {
            v = Some(&rx) => v,
        }
    });
    assert_eq!(got, None);
}

/// The Go loop that merges two channels until both are closed, turning each off (None) as it
/// closes.
#[test]
fn option_receiver_merge_loop() {
    let (tx_a, rx_a) = unbounded();
    let (tx_b, rx_b) = unbounded();
    for i in 0..5 {
        tx_a.try_send(i).unwrap();
        tx_b.try_send(i + 100).unwrap();
    }
    drop((tx_a, tx_b));
    let (mut a, mut b) = (Some(&rx_a), Some(&rx_b));
    let mut got = Vec::new();
    block_on(async {
        while a.is_some() || b.is_some() {
            select! {
                v = a => match v { Some(v) => got.push(v), None => a = None },
                v = b => match v { Some(v) => got.push(v), None => b = None },
            }
        }
    });
    got.sort_unstable();
    assert_eq!(got, [0, 1, 2, 3, 4, 100, 101, 102, 103, 104]);
}

/// The commit rule with guards and patterns: of two parked receive arms whose senders race
/// (from two threads), exactly one value is taken; the other stays in its channel.
#[test]
fn guarded_and_refutable_arms_commit_once() {
    for _ in 0..200 {
        let (tx_a, rx_a) = bounded::<u32>(0);
        let (tx_b, rx_b) = bounded::<u32>(0);
        let (_tx_c, rx_c) = bounded::<u32>(0);
        let sender = |tx: gort_chan::Sender<u32>, v| std::thread::spawn(move || tx.try_send(v));
        let got = std::thread::scope(|s| {
            let h = s.spawn(|| {
                block_on(async {
                    select! {
                        Some(v) = rx_a.recv(), if true => v,
                        Some(v) = rx_b.recv() => v,
                        v = rx_c.recv(), if false => v.unwrap(),
                    }
                })
            });
            // Both senders race; repeat until the select has parked and takes one.
            loop {
                let a = sender(tx_a.clone(), 1);
                let b = sender(tx_b.clone(), 2);
                let (a, b) = (a.join().unwrap(), b.join().unwrap());
                assert!(!(a.is_ok() && b.is_ok()), "both arms took effect");
                if a.is_ok() || b.is_ok() {
                    break;
                }
                std::thread::yield_now();
            }
            h.join().unwrap()
        });
        assert!(got == 1 || got == 2);
        assert_eq!(rx_a.try_recv(), Err(TryRecvError::Empty));
        assert_eq!(rx_b.try_recv(), Err(TryRecvError::Empty));
    }
}

/// A `default` select proves "nothing ready" by polling its arms twice over the same channel
/// sections (CHANNELS.md, "`default` is a snapshot"). An arm that makes a new channel on
/// every poll never gives two passes over the same channels: the select still takes
/// `default` (after its bounded retries) instead of spinning for good.
#[test]
fn default_with_an_arm_that_makes_a_new_channel_each_poll() {
    use std::future::poll_fn;
    use std::future::Future;
    use std::pin::pin;

    let (_tx, rx) = gort_chan::bounded::<u8>(0);
    let polls = std::cell::Cell::new(0);
    let fresh = poll_fn(|cx| {
        polls.set(polls.get() + 1);
        let (_t, r) = gort_chan::bounded::<u8>(0);
        let polled = pin!(r.recv()).poll(cx).map(|_| ());
        polled
    });
    let got = futures::executor::block_on(async {
        gort_chan::select! {
            _ = rx.recv() => "rx",
            _ = fresh => "fresh",
            default => "default",
        }
    });
    assert_eq!(got, "default");
    // Two passes a try, every try retried: the bound was reached.
    assert_eq!(polls.get(), 128, "the arm was polled {} times", polls.get());
}
