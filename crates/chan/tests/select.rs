//! `select!`: fairness, `default`, control flow, any futures, and Go's "one arm takes effect".

mod common;

use std::future::ready;
use std::task::Poll;

use common::{poll_once, poll_with, CountingWaker};
use futures::executor::block_on;
use gort_chan::{bounded, select, unbounded, TryRecvError};

fn assert_share(count: u32, total: u32, lo: f64, hi: f64) {
    let share = f64::from(count) / f64::from(total);
    assert!(
        (lo..=hi).contains(&share),
        "arm chosen {count} of {total} times ({share:.3}), expected {lo}..={hi}"
    );
}

#[test]
fn fairness_two_always_ready_futures() {
    let mut first = 0;
    for _ in 0..10_000 {
        let arm = block_on(async {
            select! {
                a = ready(0) => a,
                b = ready(1) => b,
            }
        });
        first += u32::from(arm == 0);
    }
    assert_share(first, 10_000, 0.4, 0.6);
}

#[test]
fn fairness_two_always_ready_channels_consumes_one_value_per_select() {
    let (tx_a, rx_a) = unbounded();
    let (tx_b, rx_b) = unbounded();
    for i in 0..10_000 {
        tx_a.try_send(i).unwrap();
        tx_b.try_send(i).unwrap();
    }
    let mut from_a = 0;
    block_on(async {
        for _ in 0..10_000 {
            select! {
                v = rx_a.recv() => { assert!(v.is_some()); from_a += 1; }
                v = rx_b.recv() => assert!(v.is_some()),
            }
        }
    });
    assert_share(from_a, 10_000, 0.4, 0.6);
    assert_eq!(
        rx_a.len() + rx_b.len(),
        10_000,
        "each select took exactly one value"
    );
    // What stayed behind is still in order.
    let next_a = rx_a.try_recv().unwrap();
    assert_eq!(next_a, from_a as i32);
}

#[test]
fn fairness_three_arms_not_adjacent_bias() {
    let mut counts = [0u32; 3];
    for _ in 0..9_000 {
        let arm = block_on(async {
            select! {
                a = ready(0) => a,
                b = ready(1) => b,
                c = ready(2) => c,
            }
        });
        counts[arm] += 1;
    }
    for c in counts {
        assert_share(c, 9_000, 0.25, 0.42);
    }
}

#[test]
fn default_runs_only_when_nothing_is_ready() {
    let (tx, rx) = bounded::<u8>(1);
    let got = block_on(async {
        select! {
            v = rx.recv() => v,
            default => Some(99),
        }
    });
    assert_eq!(got, Some(99));
    tx.try_send(1).unwrap();
    for _ in 0..100 {
        let got = block_on(async {
            select! {
                v = rx.recv() => v,
                default => Some(99),
            }
        });
        assert_eq!(got, Some(1), "a ready arm always beats default");
        tx.try_send(1).unwrap();
    }
}

#[test]
fn default_does_not_park_operations() {
    let (tx, rx) = bounded::<u8>(0);
    block_on(async {
        select! {
            _ = rx.recv() => panic!("nothing to receive"),
            default => {}
        }
    });
    // Had the receive parked and stayed behind, this would succeed.
    assert!(tx.try_send(1).unwrap_err().is_full());
}

#[test]
fn default_receives_from_a_parked_unbuffered_sender() {
    // Go's non-blocking receive succeeds when a sender is blocked.
    let (tx, rx) = bounded(0);
    let mut send = tx.send(5);
    assert!(poll_once(&mut send).is_pending());
    let got = block_on(async {
        select! {
            v = rx.recv() => v,
            default => None,
        }
    });
    assert_eq!(got, Some(5));
    assert_eq!(poll_once(&mut send), Poll::Ready(Ok(())));
}

#[test]
fn only_default() {
    assert_eq!(
        block_on(async {
            select! { default => 3 }
        }),
        3
    );
}

#[test]
fn bodies_use_control_flow_of_the_enclosing_function() {
    async fn first_even(rx: &gort_chan::Receiver<u32>) -> Result<u32, &'static str> {
        loop {
            select! {
                v = rx.recv() => {
                    let v = v.ok_or("closed")?;
                    if v % 2 == 1 {
                        continue;
                    }
                    return Ok(v);
                }
            }
        }
    }
    let (tx, rx) = unbounded();
    for v in [1, 3, 4] {
        tx.try_send(v).unwrap();
    }
    assert_eq!(block_on(first_even(&rx)), Ok(4));
    drop(tx);
    assert_eq!(block_on(first_even(&rx)), Err("closed"));

    let n = block_on(async {
        let mut n = 0;
        loop {
            select! {
                _ = ready(()) => {
                    n += 1;
                    if n == 3 {
                        break;
                    }
                    ready(()).await;
                }
            }
        }
        n
    });
    assert_eq!(n, 3);
}

#[test]
fn arms_are_any_futures_including_unpin_less_async_blocks() {
    let (tx, rx) = bounded::<u8>(0);
    let (_never_tx, never) = bounded::<()>(0);
    let got = block_on(async {
        let slow = async {
            never.recv().await;
            "slow"
        };
        let via_channel = async {
            let v = rx.recv().await;
            v.map(|_| "channel").unwrap_or("closed")
        };
        let sender = async {
            tx.send(1).await.unwrap();
            futures::future::pending::<()>().await;
        };
        futures::pin_mut!(sender);
        // Drive the sender alongside the select.
        let sel = async {
            select! {
                s = slow => s,
                c = via_channel => c,
            }
        };
        futures::pin_mut!(sel);
        match futures::future::select(sel, sender).await {
            futures::future::Either::Left((got, _)) => got,
            futures::future::Either::Right(_) => unreachable!("the sender never finishes"),
        }
    });
    assert_eq!(got, "channel");
}

#[test]
fn patterns_bind_and_destructure() {
    let got = block_on(async {
        select! {
            (a, b) = ready((1, 2)) => a + b,
            _ = futures::future::pending::<()>() => 0,
        }
    });
    assert_eq!(got, 3);
}

#[test]
fn ten_arms() {
    let (txs, rxs): (Vec<_>, Vec<_>) = (0..10).map(|_| bounded::<usize>(1)).unzip();
    txs[7].try_send(7).unwrap();
    let got = block_on(async {
        select! {
            v = rxs[0].recv() => v,
            v = rxs[1].recv() => v,
            v = rxs[2].recv() => v,
            v = rxs[3].recv() => v,
            v = rxs[4].recv() => v,
            v = rxs[5].recv() => v,
            v = rxs[6].recv() => v,
            v = rxs[7].recv() => v,
            v = rxs[8].recv() => v,
            v = rxs[9].recv() => v,
        }
    });
    assert_eq!(got, Some(7));
}

#[test]
fn nested_select() {
    let (tx, rx) = bounded::<u8>(1);
    let (_tx2, rx2) = bounded::<u8>(1);
    tx.try_send(4).unwrap();
    let got = block_on(async {
        select! {
            v = async {
                select! {
                    v = rx.recv() => v,
                    v = rx2.recv() => v,
                }
            } => v,
            _ = futures::future::pending::<()>() => None,
        }
    });
    assert_eq!(got, Some(4));
}

#[test]
fn exactly_one_receive_takes_effect() {
    for _ in 0..200 {
        let (tx_a, rx_a) = bounded::<&str>(0);
        let (tx_b, rx_b) = bounded::<&str>(0);
        let mut sa = tx_a.send("a");
        let mut sb = tx_b.send("b");
        assert!(poll_once(&mut sa).is_pending());
        assert!(poll_once(&mut sb).is_pending());
        let got = block_on(async {
            select! {
                v = rx_a.recv() => v.unwrap(),
                v = rx_b.recv() => v.unwrap(),
            }
        });
        let (done, other, other_rx) = match got {
            "a" => (&mut sa, &mut sb, &rx_b),
            _ => (&mut sb, &mut sa, &rx_a),
        };
        assert_eq!(poll_once(done), Poll::Ready(Ok(())));
        assert!(
            poll_once(other).is_pending(),
            "the other sender must still wait"
        );
        assert!(other_rx.try_recv().is_ok());
    }
}

#[test]
fn a_send_arm_completed_while_parked_is_the_one_chosen() {
    // Without a commit protocol, the select could see both arms ready, pick `quit`, and drop
    // a send that a receiver already took.
    for _ in 0..300 {
        let (tx, rx) = bounded::<u8>(0);
        let (quit_tx, quit_rx) = bounded::<()>(0);
        let mut sel = Box::pin(async {
            select! {
                r = tx.send(1) => r.map(|_| "sent").unwrap_or("closed"),
                _ = quit_rx.recv() => "quit",
            }
        });
        assert!(poll_once(&mut sel).is_pending());
        assert_eq!(rx.try_recv(), Ok(1), "the parked send arm offers its value");
        quit_tx.close();
        assert_eq!(poll_once(&mut sel), Poll::Ready("sent"));
    }
}

#[test]
fn close_commits_the_arm_it_completes() {
    // Go's closechan completes the parked select case, so no other case can happen after.
    for _ in 0..300 {
        let (tx_a, rx_a) = bounded::<u8>(0);
        let (tx_b, rx_b) = bounded::<u8>(0);
        let mut sel = Box::pin(async {
            select! {
                v = rx_a.recv() => v.map(|_| "a").unwrap_or("a closed"),
                r = tx_b.send(2) => r.map(|_| "b sent").unwrap_or("b closed"),
            }
        });
        assert!(poll_once(&mut sel).is_pending());
        tx_a.close();
        assert_eq!(
            rx_b.try_recv(),
            Err(TryRecvError::Empty),
            "the select is decided"
        );
        assert_eq!(poll_once(&mut sel), Poll::Ready("a closed"));
    }
}

#[test]
fn a_select_never_pairs_with_itself_and_does_not_spin() {
    let (tx, rx) = bounded::<u8>(0);
    let got = block_on(async {
        select! {
            _ = tx.send(1) => "sent",
            _ = rx.recv() => "received",
            default => "default",
        }
    });
    assert_eq!(got, "default");

    let (counter, waker) = CountingWaker::new();
    let mut sel = Box::pin(async {
        select! {
            _ = tx.send(1) => "sent",
            _ = rx.recv() => "received",
        }
    });
    for _ in 0..5 {
        assert!(poll_with(&mut sel, &waker).is_pending());
    }
    assert_eq!(counter.count(), 0, "no self wake-ups");
    // A third party completes it.
    assert_eq!(rx.try_recv(), Ok(1));
    assert_eq!(counter.count(), 1);
    assert_eq!(poll_with(&mut sel, &waker), Poll::Ready("sent"));
}

#[test]
fn dropping_a_decided_select_puts_the_value_back() {
    let (tx, rx) = bounded::<u8>(0);
    let (_tx2, rx2) = bounded::<u8>(0);
    let rx_clone = rx.clone();
    let mut sel = Box::pin(async {
        select! {
            v = rx_clone.recv() => v,
            v = rx2.recv() => v,
        }
    });
    assert!(poll_once(&mut sel).is_pending());
    assert_eq!(tx.try_send(8), Ok(()), "handed to the parked arm");
    drop(sel);
    assert_eq!(rx.try_recv(), Ok(8));
}

#[test]
fn dropping_a_parked_select_sends_nothing() {
    let (tx, rx) = bounded::<u8>(0);
    let (_tx2, rx2) = bounded::<u8>(0);
    let mut sel = Box::pin(async {
        select! {
            _ = tx.send(1) => {},
            _ = rx2.recv() => {},
        }
    });
    assert!(poll_once(&mut sel).is_pending());
    drop(sel);
    assert_eq!(rx.try_recv(), Err(TryRecvError::Empty));
}

#[test]
fn select_future_is_send() {
    fn assert_send<T: Send>(_: &T) {}
    let (tx, rx) = bounded::<u8>(1);
    let fut = async move {
        select! {
            v = rx.recv() => v,
            _ = tx.send(1) => None,
        }
    };
    assert_send(&fut);
}
