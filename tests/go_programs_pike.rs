//! Go Concurrency Patterns (Rob Pike, Google I/O 2012), ported to gort as a Go programmer
//! writes them: the fake Google search ("Google Search 3.0": `First` of two replicas per
//! backend, the three backends in flight at once, one 80 ms timeout for the whole query in a
//! `select` loop) and the daisy chain of 100,000 goroutines.
//!
//! Hostile twists: replicas that panic, queries dropped (cancelled) mid-flight, a runtime
//! dropped while 100,000 tasks wait in the chain. Run on 1 and 4 Ps. Where gort differs from
//! Go on purpose, the test says so: the losing replica's send fails once `First` has returned
//! and dropped its channel, so the losers end instead of leaking blocked forever as in Go.

mod support;

use std::sync::atomic::{AtomicU64, Ordering::SeqCst};
use std::sync::Arc;
use std::time::{Duration, Instant};

use gort::chan::{bounded, Receiver};
use gort::select;
use support::within;

fn rt(procs: usize) -> gort::Runtime {
    gort::Builder::new().procs(procs).build().unwrap()
}

/// A small xorshift generator (Go's `rand.Intn`), seeded per call site.
fn rand_below(state: &AtomicU64, n: u64) -> u64 {
    let mut x = state.load(SeqCst);
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    state.store(x, SeqCst);
    x % n
}

/// Go's `type Search func(query string) Result`.
type Search = Arc<dyn Fn(String) -> futures::future::BoxFuture<'static, String> + Send + Sync>;

/// Go's `fakeSearch(kind)`: sleeps a random 0-99 ms, then answers. `panic_every` > 0 makes
/// every n-th call panic (a backend bug), which Go would not survive and gort confines to
/// the replica's task.
fn fake_search(kind: &'static str, seed: u64, panic_every: u64) -> Search {
    let rng = Arc::new(AtomicU64::new(seed | 1));
    let calls = Arc::new(AtomicU64::new(0));
    Arc::new(move |query: String| {
        let delay = rand_below(&rng, 100);
        let n = calls.fetch_add(1, SeqCst) + 1;
        Box::pin(async move {
            gort::time::sleep(Duration::from_millis(delay)).await;
            if panic_every > 0 && n % panic_every == 0 {
                panic!("{kind} backend crashed on {query:?}");
            }
            format!("{kind} result for {query:?}")
        })
    })
}

/// Go's `First(query, replicas...)`: asks every replica, returns the first answer. The
/// channel is unbuffered as in the talk; the losers' sends fail once it is dropped.
async fn first(query: String, replicas: &[Search]) -> Option<String> {
    let (tx, rx) = bounded(0);
    for replica in replicas {
        let (tx, replica, query) = (tx.clone(), replica.clone(), query.clone());
        gort::spawn(async move {
            let _ = tx.send(replica(query).await).await;
        });
    }
    drop(tx);
    // None only if every replica panicked (their senders dropped while unwinding).
    rx.recv().await
}

struct Backends {
    web: [Search; 2],
    image: [Search; 2],
    video: [Search; 2],
}

fn backends(panic_every: u64) -> Arc<Backends> {
    Arc::new(Backends {
        web: [
            fake_search("web1", 1, panic_every),
            fake_search("web2", 2, 0),
        ],
        image: [
            fake_search("image1", 3, panic_every),
            fake_search("image2", 4, 0),
        ],
        video: [
            fake_search("video1", 5, 0),
            fake_search("video2", 6, panic_every),
        ],
    })
}

/// Go's `Google(query)` (3.0): the three `First`s in flight, an 80 ms overall timeout.
async fn google(query: &str, b: &Arc<Backends>) -> (Vec<String>, bool) {
    let (tx, rx) = bounded::<String>(0);
    for kind in 0..3 {
        let (tx, b, q) = (tx.clone(), b.clone(), query.to_string());
        gort::spawn(async move {
            let replicas = match kind {
                0 => &b.web,
                1 => &b.image,
                _ => &b.video,
            };
            if let Some(r) = first(q, replicas).await {
                let _ = tx.send(r).await;
            }
        });
    }
    drop(tx);
    let timeout = gort::time::after(Duration::from_millis(80));
    let mut results = Vec::new();
    for _ in 0..3 {
        select! {
            r = rx.recv() => match r {
                Some(r) => results.push(r),
                None => break, // every replica of some backend panicked
            },
            _ = timeout.recv() => return (results, true),
        }
    }
    (results, false)
}

fn check_results(query: &str, results: &[String]) {
    let mut kinds: Vec<&str> = results
        .iter()
        .map(|r| {
            assert!(r.ends_with(&format!("result for {query:?}")), "{r}");
            r.split(' ')
                .next()
                .unwrap()
                .trim_end_matches(char::is_numeric)
        })
        .collect();
    kinds.sort_unstable();
    kinds.dedup();
    assert_eq!(
        kinds.len(),
        results.len(),
        "a backend answered twice: {results:?}"
    );
}

/// 300 concurrent queries, every one done within 80 ms plus scheduling slack, complete or
/// timed out, never a duplicate backend; afterwards no task is left (the losers' sends
/// failed instead of blocking forever as Go's do).
#[test]
fn google_search_replicated_with_timeout() {
    for procs in [1, 4] {
        within(move || {
            let rt = rt(procs);
            let base = rt.metrics().tasks_alive;
            let (complete, timed_out) = rt.block_on(async {
                let b = backends(0);
                let (tx, rx) = bounded(0);
                for i in 0..300 {
                    let (tx, b) = (tx.clone(), b.clone());
                    gort::spawn(async move {
                        let query = format!("golang {i}");
                        let start = Instant::now();
                        let (results, timed_out) = google(&query, &b).await;
                        let took = start.elapsed();
                        assert!(took < Duration::from_millis(80 + 1500), "{took:?}");
                        check_results(&query, &results);
                        tx.send((results.len(), timed_out)).await.unwrap();
                    });
                }
                drop(tx);
                let (mut complete, mut timed_out) = (0, 0);
                while let Some((n, t)) = rx.recv().await {
                    if t {
                        timed_out += 1;
                    } else {
                        assert_eq!(n, 3);
                        complete += 1;
                    }
                }
                (complete, timed_out)
            });
            assert_eq!(complete + timed_out, 300);
            // Two replicas each under a uniform 0-99 ms: P(min > 80 ms) = 4 %, for one of
            // three backends ~12 %; loose bounds, this is no timing test.
            assert!(complete > 100, "procs {procs}: only {complete} complete");
            wait_tasks(&rt, base);
        });
    }
}

/// Polls until the runtime's live task count is back to `base` (losers finish their sleep
/// first: up to 100 ms).
fn wait_tasks(rt: &gort::Runtime, base: u64) {
    let start = Instant::now();
    loop {
        let alive = rt.metrics().tasks_alive;
        if alive <= base {
            return;
        }
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "{alive} tasks still alive (base {base}): leaked"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Backends whose replicas panic now and then: a query still gets the other replica's
/// answer; only when both replicas of a backend crash does the search end early. Nothing
/// hangs, no panic escapes the tasks, no task is left.
#[test]
fn google_search_with_crashing_replicas() {
    for procs in [1, 4] {
        within(move || {
            let rt = rt(procs);
            let base = rt.metrics().tasks_alive;
            let answered = rt.block_on(async {
                let b = backends(3);
                let mut handles = Vec::new();
                for i in 0..200 {
                    let b = b.clone();
                    handles.push(gort::spawn(async move {
                        let query = format!("crash {i}");
                        let (results, _) = google(&query, &b).await;
                        check_results(&query, &results);
                        results.len()
                    }));
                }
                let mut answered = 0;
                for h in handles {
                    answered += h.await.unwrap();
                }
                answered
            });
            assert!(answered > 200, "procs {procs}: {answered} answers of 600");
            wait_tasks(&rt, base);
        });
    }
}

/// Queries dropped mid-flight (a caller that gives up: `timeout` of 30 ms around the 80 ms
/// search, and whole query tasks aborted), then the runtime itself dropped while replicas
/// sleep: nothing hangs, nothing panics.
#[test]
fn google_search_cancelled_and_runtime_dropped() {
    for procs in [1, 4] {
        within(move || {
            let rt = rt(procs);
            rt.block_on(async {
                let b = backends(0);
                let mut handles = Vec::new();
                for i in 0..100 {
                    let b = b.clone();
                    handles.push(gort::spawn(async move {
                        let q = format!("q{i}");
                        gort::time::timeout(Duration::from_millis(30), google(&q, &b)).await
                    }));
                }
                for h in handles.iter().step_by(2) {
                    h.abort();
                }
                for (i, h) in handles.into_iter().enumerate() {
                    match h.await {
                        Ok(Ok((results, _))) => check_results(&format!("q{i}"), &results),
                        Ok(Err(_elapsed)) => {}
                        Err(e) => assert!(i % 2 == 0 && e.is_cancelled(), "{i}: {e:?}"),
                    }
                }
                // Leave 100 more in flight for the drop below.
                for i in 0..100 {
                    let b = b.clone();
                    gort::spawn(async move { google(&format!("late{i}"), &b).await });
                }
                gort::time::sleep(Duration::from_millis(10)).await;
            });
            support::drop_within(rt, Duration::from_secs(10), "runtime drop hung");
        });
    }
}

/// Go's `f(left, right chan int) { left <- 1 + <-right }`.
async fn whisper(left: gort::chan::Sender<u64>, right: Receiver<u64>) {
    if let Some(v) = right.recv().await {
        let _ = left.send(v + 1).await;
    }
}

/// Builds the chain of `n` tasks; returns the leftmost receiver and the rightmost sender.
fn daisy_chain(n: usize) -> (Receiver<u64>, gort::chan::Sender<u64>) {
    let (leftmost_tx, leftmost) = bounded(0);
    let mut left = leftmost_tx;
    for _ in 0..n {
        let (right_tx, right) = bounded(0);
        gort::spawn(whisper(left, right));
        left = right_tx;
    }
    (leftmost, left)
}

/// The daisy chain: 100,000 tasks, each passing 1 + what it got to its left; prints 100001.
#[test]
fn daisy_chain_100k() {
    const N: usize = 100_000;
    for procs in [1, 4] {
        within(move || {
            let rt = rt(procs);
            let base = rt.metrics().tasks_alive;
            let got = rt.block_on(async {
                let (leftmost, right) = daisy_chain(N);
                gort::spawn(async move { right.send(1).await.unwrap() });
                leftmost.recv().await
            });
            assert_eq!(got, Some(N as u64 + 1));
            wait_tasks(&rt, base);
        });
    }
}

/// The chain cut in the middle of the whisper: the leftmost receiver is dropped while the
/// value travels, so the task holding it fails its send and every task ends (Go's would
/// leak the chain); then a second chain of 100,000 tasks is left waiting and the runtime is
/// dropped under it.
#[test]
fn daisy_chain_cut_and_runtime_dropped() {
    const N: usize = 100_000;
    for procs in [1, 4] {
        within(move || {
            let rt = rt(procs);
            let base = rt.metrics().tasks_alive;
            rt.block_on(async {
                let (leftmost, right) = daisy_chain(N);
                gort::spawn(async move { right.send(1).await.unwrap() });
                gort::yield_now().await;
                drop(leftmost);
            });
            wait_tasks(&rt, base);
            let leftmost = rt.block_on(async {
                let (leftmost, right) = daisy_chain(N);
                // Part of the chain has the value when the runtime goes.
                gort::spawn(async move { right.send(1).await.unwrap() });
                leftmost // nobody reads it: the chain stays blocked
            });
            support::drop_within(rt, Duration::from_secs(20), "runtime drop hung");
            assert_eq!(leftmost.try_recv().ok(), None);
        });
    }
}
