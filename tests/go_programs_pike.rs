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

use std::sync::Arc;
use std::time::Duration;

use gort::chan::{bounded, Receiver};
use gort::select;
use support::{paused, rt, wait_tasks, within};

/// FNV-1a of the parts: the fake backends' latency and crashes are a function of the query,
/// so that on the paused clock every query's outcome is known in advance, whatever the load
/// and the interleaving.
fn fnv(parts: &[&str]) -> u64 {
    let mut h: u64 = 0xcbf29ce484222325;
    for p in parts {
        for b in p.bytes().chain([0]) {
            h ^= b as u64;
            h = h.wrapping_mul(0x100000001b3);
        }
    }
    h
}

/// Go's `rand.Intn(100)` milliseconds for this replica and query; never exactly the 80 ms
/// timeout, so that no answer ties with it.
fn latency_ms(kind: &str, query: &str) -> u64 {
    match fnv(&[kind, query]) % 100 {
        80 => 81,
        ms => ms,
    }
}

/// Whether this replica crashes on this query (one query in three, for crashing replicas).
fn crashes(kind: &str, query: &str, crashing: bool) -> bool {
    crashing && fnv(&[kind, query, "crash"]) % 3 == 0
}

/// Go's `type Search func(query string) Result`.
type Search = Arc<dyn Fn(String) -> futures::future::BoxFuture<'static, String> + Send + Sync>;

/// Go's `fakeSearch(kind)`: sleeps 0-99 ms, then answers. A `crashing` replica panics on a
/// third of the queries (a backend bug), which Go would not survive and gort confines to the
/// replica's task.
fn fake_search(kind: &'static str, crashing: bool) -> Search {
    Arc::new(move |query: String| {
        Box::pin(async move {
            let delay = latency_ms(kind, &query);
            gort::time::sleep(Duration::from_millis(delay)).await;
            if crashes(kind, &query, crashing) {
                panic!("{kind} backend crashed on {query:?}");
            }
            format!("{kind} result for {query:?}")
        })
    })
}

const KINDS: [[&str; 2]; 3] = [["web1", "web2"], ["image1", "image2"], ["video1", "video2"]];
/// The replicas that crash now and then, in `backends(true)`.
const CRASHING: [&str; 3] = ["web1", "image1", "video2"];

/// What `google(query)` must return on the paused clock: the replicas that may have
/// answered, whether it timed out, and how long it took in virtual time.
fn expected(query: &str, crashing: bool) -> (Vec<Vec<&'static str>>, bool, u64) {
    let mut answers = Vec::new(); // per backend: (time, the replicas answering then)
    let mut ends = Vec::new(); // per backend: when its task ends
    for pair in KINDS {
        let alive: Vec<(u64, &'static str)> = pair
            .iter()
            .filter(|k| !crashes(k, query, crashing && CRASHING.contains(k)))
            .map(|k| (latency_ms(k, query), *k))
            .collect();
        match alive.iter().map(|a| a.0).min() {
            Some(t) => {
                let who: Vec<&'static str> =
                    alive.iter().filter(|a| a.0 == t).map(|a| a.1).collect();
                answers.push(Some((t, who)));
                ends.push(t);
            }
            None => {
                answers.push(None);
                ends.push(pair.iter().map(|k| latency_ms(k, query)).max().unwrap());
            }
        }
    }
    let in_time: Vec<Vec<&str>> = answers
        .iter()
        .flatten()
        .filter(|a| a.0 < 80)
        .map(|a| a.1.clone())
        .collect();
    if answers.iter().all(|a| matches!(a, Some((t, _)) if *t < 80)) {
        let took = answers.iter().flatten().map(|a| a.0).max().unwrap();
        (in_time, false, took)
    } else if ends.iter().all(|&t| t < 80) {
        (in_time, false, *ends.iter().max().unwrap()) // a backend died: the loop ends early
    } else {
        (in_time, true, 80)
    }
}

/// Runs `google(query)` and checks it against [`expected`] (on the paused clock).
async fn google_checked(query: String, b: Arc<Backends>, crashing: bool) -> bool {
    let start = gort::time::Instant::now();
    let (results, timed_out) = google(&query, &b).await;
    let took = start.elapsed();
    check_results(&query, &results);
    let (want, want_timed_out, want_ms) = expected(&query, crashing);
    assert_eq!(timed_out, want_timed_out, "{query}: {results:?}");
    assert_eq!(took, Duration::from_millis(want_ms), "{query}");
    assert_eq!(
        results.len(),
        want.len(),
        "{query}: {results:?} vs {want:?}"
    );
    for r in &results {
        let kind = r.split(' ').next().unwrap();
        assert!(
            want.iter().any(|w| w.contains(&kind)),
            "{query}: {kind} answered"
        );
    }
    !timed_out && results.len() == 3
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

fn backends(crashing: bool) -> Arc<Backends> {
    let k = |kind: &'static str| fake_search(kind, crashing && CRASHING.contains(&kind));
    Arc::new(Backends {
        web: [k("web1"), k("web2")],
        image: [k("image1"), k("image2")],
        video: [k("video1"), k("video2")],
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

/// 300 concurrent queries on the paused clock (so the machine's load changes nothing): each
/// ends exactly when it must, complete or timed out at 80 ms, with the replicas that must
/// have answered, never one backend twice; afterwards no task is left (the losers' sends
/// failed instead of blocking forever as Go's do).
#[test]
fn google_search_replicated_with_timeout() {
    for procs in [1, 4] {
        within(move || {
            let rt = paused(procs);
            let base = rt.metrics().tasks_alive;
            let complete = rt.block_on(async {
                let b = backends(false);
                let handles: Vec<_> = (0..300)
                    .map(|i| gort::spawn(google_checked(format!("golang {i}"), b.clone(), false)))
                    .collect();
                let mut complete = 0;
                for h in handles {
                    complete += h.await.unwrap() as usize;
                }
                complete
            });
            // Two replicas under 0-99 ms: P(min > 80 ms) = 4 % a backend.
            assert!(complete > 200, "procs {procs}: only {complete} complete");
            wait_tasks(&rt, base);
        });
    }
}

/// Backends whose replicas panic on a third of the queries (paused clock): a query still
/// gets the other replica's answer; when both replicas of a backend crash the search ends
/// without it, exactly when the last one died. Nothing hangs, no panic escapes the tasks,
/// no task is left.
#[test]
fn google_search_with_crashing_replicas() {
    for procs in [1, 4] {
        within(move || {
            let rt = paused(procs);
            let base = rt.metrics().tasks_alive;
            rt.block_on(async {
                let b = backends(true);
                let handles: Vec<_> = (0..200)
                    .map(|i| gort::spawn(google_checked(format!("crash {i}"), b.clone(), true)))
                    .collect();
                for h in handles {
                    h.await.unwrap();
                }
            });
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
                let b = backends(false);
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
