//! gort's streams and sinks with `futures`' combinators: `Interval`, `Ticker` (and its
//! receiver), `Receiver` as a `Stream`, `Sender` as a `Sink`.

use std::time::Duration;

use futures::{SinkExt, StreamExt};

fn rt() -> gort::Runtime {
    gort::Builder::new().procs(2).build().unwrap()
}

#[test]
fn interval_is_a_stream_of_due_instants() {
    rt().block_on(async {
        let period = Duration::from_millis(2);
        let start = gort::time::Instant::now();
        let ticks: Vec<_> = gort::time::interval(period).take(4).collect().await;
        assert_eq!(ticks.len(), 4);
        // Due instants, one period apart (the first immediately).
        for w in ticks.windows(2) {
            assert_eq!(w[1] - w[0], period);
        }
        assert!(ticks[0] >= start);
    });
}

#[test]
fn ticker_and_its_receiver_are_streams() {
    rt().block_on(async {
        let mut ticker = gort::time::Ticker::new(Duration::from_millis(1));
        let got: Vec<_> = ticker.by_ref().take(3).collect().await;
        assert!(got.windows(2).all(|w| w[0] < w[1]));
        let from_c: Vec<_> = ticker.c().clone().take(2).collect().await;
        assert_eq!(from_c.len(), 2);
        ticker.stop();
        let tick: Vec<_> = gort::time::tick(Duration::from_millis(1))
            .take(2)
            .collect()
            .await;
        assert_eq!(tick.len(), 2);
    });
}

/// `send_all` through a rendezvous channel, read by a task on another P.
#[test]
fn sender_is_a_sink() {
    rt().block_on(async {
        let (mut tx, rx) = gort::chan::bounded::<u32>(0);
        let reader = gort::spawn(async move { rx.collect::<Vec<_>>().await });
        let mut items = futures::stream::iter(0..100).map(Ok);
        tx.send_all(&mut items).await.unwrap();
        SinkExt::close(&mut tx).await.unwrap(); // flushes; the channel closes when `tx` drops
        drop(tx);
        assert_eq!(reader.await.unwrap(), (0..100).collect::<Vec<_>>());
    });
}

/// A closed channel's sink fails and gives the value back.
#[test]
fn sink_send_to_closed_channel_returns_the_value() {
    rt().block_on(async {
        let (mut tx, rx) = gort::chan::bounded::<String>(1);
        rx.close();
        // `SinkExt::send`, not the inherent `Sender::send`.
        let err = SinkExt::send(&mut tx, "lost?".to_string())
            .await
            .unwrap_err();
        assert_eq!(err.into_inner(), "lost?");
    });
}

/// A sink send that cannot complete, dropped with its sender, is withdrawn: the receiver
/// never sees it and nothing leaks (the parked slot is unlinked).
#[test]
fn unflushed_sink_value_is_withdrawn_on_drop() {
    rt().block_on(async {
        let (tx, rx) = gort::chan::bounded::<u32>(0);
        let keep = tx.clone();
        let mut sink = tx;
        let r = gort::time::timeout(Duration::from_millis(5), SinkExt::send(&mut sink, 7)).await;
        assert!(r.is_err(), "no receiver: the send cannot complete");
        drop(sink);
        assert!(rx.try_recv().is_err(), "a withdrawn value was received");
        keep.try_send(8).unwrap_err(); // still a rendezvous with nobody waiting
    });
}
