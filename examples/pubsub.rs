//! A pub/sub broker in Go's style: publishers send to the broker over a bounded channel; the
//! broker fans each message out to every subscriber's bounded channel, and a subscriber that
//! does not take a message within a send timeout (`select!` on the send and `time::after`) is
//! dropped (its channel closed). Subscribe and unsubscribe go through the broker's loop too.
//! At the end the broker shuts down on a `context` cancel while publishers are still blocked
//! on its full inbox: they must all return (their sends fail), none may hang.
//!
//! Checked: every fast subscriber got every message of each publisher, in order and without
//! duplicates; every slow subscriber was dropped; an unsubscribed one stops cleanly; every
//! blocked publisher returns after the shutdown.
//!
//! `cargo run --release --example pubsub`

use gort::chan::{bounded, Receiver, Sender};
use gort::context::{self, Context};
use gort::sync::WaitGroup;
use std::collections::HashMap;
use std::time::Duration;

const PUBLISHERS: u64 = 8;
const MESSAGES: u64 = 500;
const FAST: usize = 6;
const SLOW: usize = 3;
const SEND_TIMEOUT: Duration = Duration::from_millis(100);

#[derive(Clone, Copy, Debug, PartialEq)]
struct Msg {
    publisher: u64,
    seq: u64,
}

enum Ctl {
    Subscribe(u64, Sender<Msg>),
    Unsubscribe(u64),
}

async fn broker(ctx: Context, inbox: Receiver<Msg>, ctl: Receiver<Ctl>) -> (u64, Vec<u64>) {
    let mut subs: HashMap<u64, Sender<Msg>> = HashMap::new();
    let mut dropped = Vec::new();
    let mut delivered = 0;
    loop {
        gort::select! {
            biased;
            _ = ctx.done().recv() => break,
            c = ctl.recv() => match c {
                Some(Ctl::Subscribe(id, tx)) => { subs.insert(id, tx); }
                Some(Ctl::Unsubscribe(id)) => { subs.remove(&id); }
                None => break,
            },
            m = inbox.recv() => {
                let Some(m) = m else { break };
                let (mut slow, mut gone) = (Vec::new(), Vec::new());
                for (&id, tx) in &subs {
                    let timer = gort::time::after(SEND_TIMEOUT);
                    gort::select! {
                        r = tx.send(m) => if r.is_ok() { delivered += 1 } else { gone.push(id) },
                        _ = timer.recv() => slow.push(id),
                    }
                }
                for id in gone {
                    subs.remove(&id); // the subscriber left: its receiver is dropped
                }
                for id in slow {
                    subs.remove(&id); // dropping the Sender closes the subscriber's channel
                    dropped.push(id);
                }
            },
        }
    }
    // Closing the inbox fails every publisher blocked in a send (Go would need a done
    // channel in each publisher's select; a closed channel is the Rust way).
    inbox.close();
    dropped.sort_unstable();
    (delivered, dropped)
}

async fn subscriber(
    id: u64,
    ctl: Sender<Ctl>,
    subscribed: WaitGroup,
    slow: bool,
) -> Result<u64, String> {
    let (tx, rx) = bounded(4);
    // An unbuffered control channel: once the send returns, the broker has the subscription.
    ctl.send(Ctl::Subscribe(id, tx))
        .await
        .map_err(|_| "broker gone")?;
    subscribed.done();
    let mut next = HashMap::new();
    let mut got = 0;
    while let Some(m) = rx.recv().await {
        let want = next.entry(m.publisher).or_insert(0u64);
        if m.seq != *want {
            return Err(format!("sub {id}: {m:?}, want seq {want}"));
        }
        *want += 1;
        got += 1;
        if slow && got == 10 {
            // Stalls for 4 send timeouts: the broker drops it meanwhile.
            gort::time::sleep(SEND_TIMEOUT * 4).await;
        }
        if !slow && got == PUBLISHERS * MESSAGES {
            break;
        }
    }
    if !slow && got != PUBLISHERS * MESSAGES {
        return Err(format!("sub {id}: got {got} of {}", PUBLISHERS * MESSAGES));
    }
    Ok(got)
}

#[gort::main]
async fn main() {
    let started = std::time::Instant::now();
    let (ctx, cancel) = context::with_cancel(&Context::background());
    let (pub_tx, pub_rx) = bounded::<Msg>(16);
    let (ctl_tx, ctl_rx) = bounded::<Ctl>(0);
    let broker = gort::spawn(broker(ctx, pub_rx, ctl_rx));

    let subscribed = WaitGroup::new();
    subscribed.add((FAST + SLOW) as isize);
    let mut subs = Vec::new();
    for id in 0..(FAST + SLOW) as u64 {
        let s = subscriber(id, ctl_tx.clone(), subscribed.clone(), id >= FAST as u64);
        subs.push(gort::spawn(s));
    }
    // Every subscription lands before the first message is published.
    subscribed.wait().await;
    // One more that leaves at once: its channel must just close.
    let (tx, rx) = bounded(1);
    ctl_tx.send(Ctl::Subscribe(999, tx)).await.unwrap();
    ctl_tx.send(Ctl::Unsubscribe(999)).await.unwrap();
    let left_cleanly = rx.recv().await.is_none();

    let pubs: Vec<_> = (0..PUBLISHERS)
        .map(|p| {
            let tx = pub_tx.clone();
            gort::spawn(async move {
                for seq in 0..MESSAGES {
                    tx.send(Msg { publisher: p, seq })
                        .await
                        .expect("broker alive");
                }
            })
        })
        .collect();
    for p in pubs {
        p.await.unwrap();
    }
    let mut failed = !left_cleanly;
    let mut slow_total = 0;
    for (id, s) in subs.into_iter().enumerate() {
        match s.await.unwrap() {
            Ok(n) if id >= FAST => slow_total += n,
            Ok(_) => {}
            Err(e) => {
                eprintln!("{e}");
                failed = true;
            }
        }
    }

    // Publishers blocked on a full inbox when the broker shuts down.
    let blocked: Vec<_> = (0..32)
        .map(|p| {
            let tx = pub_tx.clone();
            gort::spawn(async move {
                let mut sent = 0;
                while tx
                    .send(Msg {
                        publisher: p,
                        seq: sent,
                    })
                    .await
                    .is_ok()
                {
                    sent += 1;
                }
                sent
            })
        })
        .collect();
    gort::time::sleep(Duration::from_millis(20)).await;
    cancel.cancel();
    let (delivered, dropped) = broker.await.unwrap();
    for b in blocked {
        if gort::time::timeout(Duration::from_secs(2), b)
            .await
            .is_err()
        {
            eprintln!("a publisher stayed blocked after the shutdown");
            failed = true;
        }
    }
    println!(
        "{delivered} deliveries, slow subscribers {dropped:?} dropped after {slow_total} messages; {:?}",
        started.elapsed()
    );
    let want: Vec<u64> = (FAST as u64..(FAST + SLOW) as u64).collect();
    if failed || dropped != want {
        eprintln!("FAILED");
        std::process::exit(1);
    }
}
