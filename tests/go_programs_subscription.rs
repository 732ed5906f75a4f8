//! Advanced Go Concurrency Patterns (Sameer Ajmani, Google I/O 2013), ported to gort: the RSS
//! `Subscription` whose `loop` is one `select` over a fetch timer that exists only when a
//! fetch may start (`startFetch`, nil otherwise), a `fetchDone` channel that is nil unless a
//! fetch runs, a send arm on `updates` that is disabled while nothing is pending, a pending
//! queue bounded at 10, deduplication by GUID, and `Close` sending a reply channel on
//! `closing` and waiting for the loop's last error. And `Merge` of several subscriptions.
//!
//! Go's nil channel in a `select` is `Option<&Receiver<T>>` as an arm (never ready when
//! `None`), and a nil send arm is a guarded arm (`, if !pending.is_empty()`). Twists: a fetcher
//! that fails or panics (Go's program would die; here the fetch task's sender is dropped and
//! the loop sees `None` on `fetchDone`), `Close` while a fetch is in flight and while the
//! consumer is blocked on `updates`, `Close` twice, consumers that never read, the runtime
//! dropped with subscriptions open. Run on 1 and 4 Ps.

mod support;

use std::collections::{HashSet, VecDeque};
use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering::SeqCst};
use std::sync::Arc;
use std::time::Duration;

use gort::chan::{bounded, Receiver, Sender};
use gort::select;
use support::{rt, wait_tasks, within};

#[derive(Clone, Debug, PartialEq, Eq)]
struct Item {
    channel: String,
    guid: String,
}

/// Go's `fakeFetcher`: every fetch returns the next few items of its feed, re-sending the
/// last two of the previous fetch (which dedup must drop), and a `next` time 0-4 ms ahead.
/// Every `fail_every`-th fetch fails, every `panic_every`-th panics.
struct FakeFetcher {
    channel: String,
    fetches: AtomicU64,
    fail_every: u64,
    panic_every: u64,
}

impl FakeFetcher {
    fn new(channel: &str, fail_every: u64, panic_every: u64) -> Arc<FakeFetcher> {
        Arc::new(FakeFetcher {
            channel: channel.to_string(),
            fetches: AtomicU64::new(0),
            fail_every,
            panic_every,
        })
    }

    async fn fetch(&self) -> Result<(Vec<Item>, gort::time::Instant), String> {
        let n = self.fetches.fetch_add(1, SeqCst) + 1;
        gort::time::sleep(Duration::from_micros(200 * (n % 5))).await;
        if self.panic_every > 0 && n % self.panic_every == 0 {
            panic!("fetcher {} crashed", self.channel);
        }
        if self.fail_every > 0 && n % self.fail_every == 0 {
            return Err(format!("fetch {n} of {} failed", self.channel));
        }
        // Items (n-1)*3 - 2 .. n*3: two repeats of the previous fetch, three new ones.
        let lo = ((n - 1) * 3).saturating_sub(2);
        let items = (lo..n * 3)
            .map(|i| Item {
                channel: self.channel.clone(),
                guid: format!("{}#{i}", self.channel),
            })
            .collect();
        let next = gort::time::Instant::now() + Duration::from_millis(n % 5);
        Ok((items, next))
    }
}

/// Go's `Subscription` interface, as a struct: `updates()` and `close()`.
struct Sub {
    updates: Receiver<Item>,
    closing: Sender<Sender<Option<String>>>,
}

/// Go's `Subscribe(fetcher)`.
fn subscribe(fetcher: Arc<FakeFetcher>) -> Sub {
    let (updates_tx, updates) = bounded(0);
    let (closing, closing_rx) = bounded(0);
    gort::spawn(sub_loop(fetcher, updates_tx, closing_rx));
    Sub { updates, closing }
}

impl Sub {
    fn updates(&self) -> &Receiver<Item> {
        &self.updates
    }

    /// Go's `Close`: hands the loop a reply channel and returns its last fetch error. A
    /// second `Close` finds the loop gone (in Go it blocks forever).
    async fn close(&self) -> Result<(), String> {
        let (errc_tx, errc) = bounded(0);
        if self.closing.send(errc_tx).await.is_err() {
            return Err("already closed".into());
        }
        match errc.recv().await {
            Some(None) => Ok(()),
            Some(Some(e)) => Err(e),
            None => Err("loop died".into()),
        }
    }
}

type FetchResult = Result<(Vec<Item>, gort::time::Instant), String>;

/// Go's `(*sub).loop`, the talk's final version.
async fn sub_loop(
    fetcher: Arc<FakeFetcher>,
    updates: Sender<Item>,
    closing: Receiver<Sender<Option<String>>>,
) {
    const MAX_PENDING: usize = 10;
    let mut fetch_done: Option<Receiver<FetchResult>> = None; // non-None while Fetch runs
    let mut pending: VecDeque<Item> = VecDeque::new();
    let mut next = gort::time::Instant::now();
    let mut err: Option<String> = None;
    let mut seen = HashSet::new();
    loop {
        let fetch_delay = next.saturating_duration_since(gort::time::Instant::now());
        let start_fetch = (fetch_done.is_none() && pending.len() < MAX_PENDING)
            .then(|| gort::time::after(fetch_delay));
        let first = pending.front().cloned();
        select! {
            _ = start_fetch.as_ref() => {
                let (tx, rx) = bounded(1);
                fetch_done = Some(rx);
                let fetcher = fetcher.clone();
                gort::spawn(async move {
                    let r = fetcher.fetch().await;
                    let _ = tx.send(r).await;
                });
            }
            result = fetch_done.as_ref() => {
                fetch_done = None;
                match result {
                    Some(Ok((fetched, n))) => {
                        next = n;
                        err = None;
                        for item in fetched {
                            if seen.insert(item.guid.clone()) {
                                pending.push_back(item);
                            }
                        }
                    }
                    // A failed fetch, or one that panicked (its sender dropped unsent): back
                    // off, as the talk's 10 s (shortened here).
                    failed => {
                        err = Some(failed.map_or("fetcher panicked".into(), |r| r.unwrap_err()));
                        next = gort::time::Instant::now() + Duration::from_millis(2);
                    }
                }
            }
            errc = closing.recv() => {
                if let Some(errc) = errc {
                    let _ = errc.send(err).await;
                }
                updates.close();
                return;
            }
            r = updates.send(first.clone().unwrap_or_else(empty)), if first.is_some() => {
                match r {
                    Ok(()) => { pending.pop_front(); }
                    // Every consumer is gone: Go's loop would block here forever; ours
                    // waits only for `Close`.
                    Err(_) => pending.clear(),
                }
            }
        }
    }
}

fn empty() -> Item {
    Item {
        channel: String::new(),
        guid: String::new(),
    }
}

/// Go's `Merge(subs...)`: a forwarding task per subscription, `quit` closed by `Close`, the
/// subscriptions' `Close` errors collected on `errs`.
struct Merged {
    updates: Receiver<Item>,
    quit: Sender<()>,
    errs: Receiver<Result<(), String>>,
    n: usize,
}

fn merge(subs: Vec<Sub>) -> Merged {
    let (updates_tx, updates) = bounded(0);
    let (quit, quit_rx) = bounded::<()>(0);
    let (errs_tx, errs) = bounded(subs.len());
    let n = subs.len();
    for sub in subs {
        let (updates_tx, quit_rx, errs_tx) = (updates_tx.clone(), quit_rx.clone(), errs_tx.clone());
        gort::spawn(async move {
            loop {
                let it = select! {
                    it = sub.updates().recv() => it,
                    _ = quit_rx.recv() => break,
                };
                let Some(it) = it else {
                    // The subscription closed on its own: wait for quit.
                    let _ = quit_rx.recv().await;
                    break;
                };
                select! {
                    _ = updates_tx.send(it) => {}
                    _ = quit_rx.recv() => break,
                }
            }
            let _ = errs_tx.send(sub.close().await).await;
        });
    }
    Merged {
        updates,
        quit,
        errs,
        n,
    }
}

impl Merged {
    async fn close(&self) -> Result<(), String> {
        self.quit.close();
        let mut res = Ok(());
        for _ in 0..self.n {
            if let Some(Err(e)) = self.errs.recv().await {
                res = Err(e);
            }
        }
        self.updates.close();
        res
    }
}

fn check_no_duplicates(items: &[Item]) {
    let mut seen = HashSet::new();
    for it in items {
        assert!(seen.insert(&it.guid), "{} delivered twice", it.guid);
    }
}

/// Three feeds merged; the consumer reads 300 items, then closes: no duplicate, each feed's
/// items in order, every task gone.
#[test]
fn merged_subscriptions_dedup_and_close() {
    for procs in [1, 4] {
        within(move || {
            let rt = rt(procs);
            let base = rt.metrics().tasks_alive;
            let items = rt.block_on(async {
                let m = merge(vec![
                    subscribe(FakeFetcher::new("blog.golang.org", 0, 0)),
                    subscribe(FakeFetcher::new("googleblog.blogspot.com", 0, 0)),
                    subscribe(FakeFetcher::new("googledevelopers.blogspot.com", 0, 0)),
                ]);
                let mut items = Vec::new();
                while items.len() < 300 {
                    items.push(m.updates.recv().await.unwrap());
                }
                m.close().await.unwrap();
                items
            });
            check_no_duplicates(&items);
            for feed in ["blog.golang.org", "googleblog.blogspot.com"] {
                let nums: Vec<u64> = items
                    .iter()
                    .filter(|it| it.channel == feed)
                    .map(|it| it.guid.rsplit('#').next().unwrap().parse().unwrap())
                    .collect();
                assert!(
                    nums.windows(2).all(|w| w[1] == w[0] + 1),
                    "{feed}: {nums:?}"
                );
                assert_eq!(nums.first(), Some(&0));
            }
            wait_tasks(&rt, base);
        });
    }
}

/// Fetches that fail and panic: the loop backs off and goes on; `Close` reports the last
/// fetch's error (or none); items still arrive exactly once.
#[test]
fn subscription_survives_failing_and_panicking_fetches() {
    for procs in [1, 4] {
        within(move || {
            let rt = rt(procs);
            let base = rt.metrics().tasks_alive;
            rt.block_on(async {
                let fetcher = FakeFetcher::new("flaky", 3, 4);
                let sub = subscribe(fetcher.clone());
                let mut items = Vec::new();
                while items.len() < 100 {
                    items.push(sub.updates().recv().await.unwrap());
                }
                check_no_duplicates(&items);
                assert!(fetcher.fetches.load(SeqCst) >= 40);
                let _ = sub.close().await; // Ok or the last error, never a hang
                assert_eq!(sub.close().await, Err("already closed".into()));
                assert_eq!(sub.updates().recv().await, None);
            });
            wait_tasks(&rt, base);
        });
    }
}

/// A consumer that never reads: the pending queue fills to 10 and fetching stops (no
/// unbounded growth); `Close` still answers at once, from another task while a third one is
/// blocked on `updates` (it sees the channel closed).
#[test]
fn subscription_backpressure_and_close_with_blocked_reader() {
    for procs in [1, 4] {
        within(move || {
            let rt = rt(procs);
            let base = rt.metrics().tasks_alive;
            rt.block_on(async {
                let fetcher = FakeFetcher::new("slowreader", 0, 0);
                let sub = Arc::new(subscribe(fetcher.clone()));
                gort::time::sleep(Duration::from_millis(50)).await;
                // 10 pending at most: at most 4 fetches (3 new items each, and one more
                // that may start while 9 were pending).
                let fetched = fetcher.fetches.load(SeqCst);
                assert!(fetched <= 5, "{fetched} fetches with nobody reading");
                let reader = {
                    let sub = sub.clone();
                    gort::spawn(async move {
                        let mut n = 0;
                        while sub.updates().recv().await.is_some() {
                            n += 1;
                            gort::time::sleep(Duration::from_millis(1)).await;
                        }
                        n
                    })
                };
                gort::time::sleep(Duration::from_millis(5)).await;
                let closer = {
                    let sub = sub.clone();
                    gort::spawn(async move { sub.close().await })
                };
                assert_eq!(closer.await.unwrap(), Ok(()));
                let n = reader.await.unwrap();
                assert!(n >= 1, "{n}");
            });
            wait_tasks(&rt, base);
        });
    }
}

/// Many subscriptions closed at random points (some mid-fetch, some never read, some
/// closed by dropping the `Sub` without `Close`), and finally the runtime dropped with 50
/// open: no hang, no panic escaping, no task left after the orderly part.
#[test]
fn subscriptions_closed_and_dropped_mid_flight() {
    for procs in [1, 4] {
        within(move || {
            let rt = rt(procs);
            let base = rt.metrics().tasks_alive;
            rt.block_on(async {
                let mut handles = Vec::new();
                for i in 0..200u64 {
                    handles.push(gort::spawn(async move {
                        let sub = subscribe(FakeFetcher::new(&format!("feed{i}"), 5, 7));
                        for _ in 0..i % 13 {
                            if sub.updates().recv().await.is_none() {
                                break;
                            }
                        }
                        gort::time::sleep(Duration::from_micros(100 * (i % 7))).await;
                        if i % 3 == 0 {
                            drop(sub); // no Close: the loop sees `closing` disconnected
                        } else {
                            let _ = sub.close().await;
                        }
                    }));
                }
                for h in handles {
                    h.await.unwrap();
                }
            });
            wait_tasks(&rt, base);
            let mut subs = Vec::new();
            rt.block_on(async {
                for i in 0..50 {
                    subs.push(subscribe(FakeFetcher::new(&format!("late{i}"), 0, 3)));
                }
                gort::time::sleep(Duration::from_millis(5)).await;
            });
            support::drop_within(rt, Duration::from_secs(10), "runtime drop hung");
            drop(subs);
        });
    }
}

/// `Close` itself dropped midway (a caller's `timeout` of 0-3 polls around it): its reply
/// channel may be in the loop's hands or not yet; either way the loop never blocks on a
/// reply nobody waits for, and a later `Close` answers (or finds the loop gone), never
/// hangs.
#[test]
fn close_dropped_midway_then_closed_again() {
    for procs in [1, 4] {
        within(move || {
            let rt = rt(procs);
            let base = rt.metrics().tasks_alive;
            rt.block_on(async {
                for i in 0..300u64 {
                    let sub = subscribe(FakeFetcher::new(&format!("c{i}"), 4, 9));
                    for _ in 0..i % 4 {
                        let _ = sub.updates().recv().await;
                    }
                    // Polled a few times, then dropped (at the end of this block: a pinned
                    // future lives as long as its scope).
                    {
                        let mut close = std::pin::pin!(sub.close());
                        for _ in 0..i % 3 {
                            let waker = futures::task::noop_waker();
                            let mut cx = std::task::Context::from_waker(&waker);
                            if close.as_mut().poll(&mut cx).is_ready() {
                                break;
                            }
                            gort::yield_now().await;
                        }
                    }
                    let again = gort::time::timeout(Duration::from_secs(5), sub.close()).await;
                    match again.expect("a second Close hung") {
                        Ok(()) | Err(_) => {}
                    }
                    assert_eq!(
                        gort::time::timeout(Duration::from_secs(5), sub.updates().recv())
                            .await
                            .expect("updates never closed"),
                        None
                    );
                }
            });
            wait_tasks(&rt, base);
        });
    }
}
