//! Rob Pike's fake Google search ("Go Concurrency Patterns", Google I/O 2012, "Google Search
//! 3.0"), as a Go programmer writes it on gort: each backend (web, image, video) has two
//! replicas and `first` takes whichever answers first; the three backends are asked at once;
//! one 80 ms timeout covers the whole query in a `select!` loop.
//!
//! Then 1,000 queries at once, and the daisy chain of 100,000 tasks from the same talk.
//!
//! Checked: every query ends within its 80 ms (plus scheduling slack), complete or timed out,
//! never with one backend twice; most are complete (two replicas under a 0-99 ms latency
//! miss 80 ms 4 % of the time each); the chain passes 100,001 to its left end; afterwards no
//! task is left: where Go's losing replicas stay blocked forever on their unbuffered send,
//! gort's fail it once `first` has returned and dropped the channel.
//!
//! `cargo run --release --example google_search`

use std::sync::atomic::{AtomicU64, Ordering::SeqCst};
use std::sync::Arc;
use std::time::Duration;

use gort::chan::{bounded, Receiver, Sender};
use gort::time::Instant;

/// Go's `type Search func(query string) Result`: a backend replica.
#[derive(Clone)]
struct Search {
    kind: &'static str,
    rng: Arc<AtomicU64>,
}

impl Search {
    fn new(kind: &'static str, seed: u64) -> Search {
        Search {
            kind,
            rng: Arc::new(AtomicU64::new(seed)),
        }
    }

    /// Go's `fakeSearch`: a random 0-99 ms, then the result.
    async fn search(&self, query: &str) -> String {
        let delay = self.next_random() % 100;
        gort::time::sleep(Duration::from_millis(delay)).await;
        format!("{} result for {query:?}", self.kind)
    }

    /// xorshift64 (Go's `rand.Intn`).
    fn next_random(&self) -> u64 {
        let mut x = self.rng.load(SeqCst);
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.rng.store(x, SeqCst);
        x
    }
}

/// Go's `First(query, replicas...)`: the first replica's answer.
async fn first(query: &str, replicas: &[Search]) -> String {
    let (c, results) = bounded(0); // unbuffered, as in the talk
    for replica in replicas {
        let (c, replica, query) = (c.clone(), replica.clone(), query.to_string());
        gort::spawn(async move {
            // A loser's send fails once `first` has returned: the task ends.
            let _ = c.send(replica.search(&query).await).await;
        });
    }
    results.recv().await.expect("a replica answers")
}

/// Go's `Google(query)`, version 3.0.
async fn google(query: &str, backends: &Arc<[[Search; 2]; 3]>) -> Option<Vec<String>> {
    let (c, results) = bounded(0);
    for b in 0..3 {
        let (c, backends, query) = (c.clone(), backends.clone(), query.to_string());
        gort::spawn(async move {
            let _ = c.send(first(&query, &backends[b]).await).await;
        });
    }
    let timeout = gort::time::after(Duration::from_millis(80));
    let mut got = Vec::new();
    for _ in 0..3 {
        gort::select! {
            r = results.recv() => got.push(r.expect("a backend answers")),
            _ = timeout.recv() => return None, // "timed out"
        }
    }
    Some(got)
}

/// Go's `f(left, right chan int) { left <- 1 + <-right }`.
async fn whisper(left: Sender<u64>, right: Receiver<u64>) {
    if let Some(v) = right.recv().await {
        let _ = left.send(v + 1).await;
    }
}

#[gort::main]
async fn main() {
    let backends = Arc::new([
        [Search::new("web1", 1), Search::new("web2", 2)],
        [Search::new("image1", 3), Search::new("image2", 4)],
        [Search::new("video1", 5), Search::new("video2", 6)],
    ]);

    let start = Instant::now();
    let results = google("golang", &backends).await;
    println!("{results:#?} in {:?}", start.elapsed());

    const QUERIES: usize = 1_000;
    let (done, outcomes) = bounded(QUERIES);
    for i in 0..QUERIES {
        let (done, backends) = (done.clone(), backends.clone());
        gort::spawn(async move {
            let query = format!("golang {i}");
            let start = Instant::now();
            let results = google(&query, &backends).await;
            let took = start.elapsed();
            assert!(
                took < Duration::from_millis(80 + 1_000),
                "{query}: {took:?}"
            );
            if let Some(results) = &results {
                let mut kinds: Vec<&str> = results
                    .iter()
                    .map(|r| &r[..r.find(|c: char| c.is_ascii_digit()).unwrap()])
                    .collect();
                kinds.sort_unstable();
                kinds.dedup();
                assert_eq!(kinds.len(), 3, "a backend answered twice: {results:?}");
                assert!(results.iter().all(|r| r.ends_with(&format!("{query:?}"))));
            }
            done.send(results.is_some()).await.unwrap();
        });
    }
    drop(done);
    let (mut complete, mut timed_out) = (0, 0);
    while let Some(ok) = outcomes.recv().await {
        if ok {
            complete += 1;
        } else {
            timed_out += 1;
        }
    }
    println!("{QUERIES} queries: {complete} complete, {timed_out} timed out");
    assert_eq!(complete + timed_out, QUERIES);
    assert!(complete > QUERIES / 2, "too many timeouts: {timed_out}");

    const CHAIN: usize = 100_000;
    let start = Instant::now();
    let (leftmost_tx, leftmost) = bounded(0);
    let mut left = leftmost_tx;
    for _ in 0..CHAIN {
        let (right_tx, right) = bounded(0);
        gort::spawn(whisper(left, right));
        left = right_tx;
    }
    gort::spawn(async move { left.send(1).await.unwrap() });
    let got = leftmost.recv().await;
    println!("daisy chain of {CHAIN}: {got:?} in {:?}", start.elapsed());
    assert_eq!(got, Some(CHAIN as u64 + 1));

    // Every loser, every backend task and every link has ended (losers sleep up to 99 ms).
    let deadline = Instant::now() + Duration::from_secs(10);
    let handle = gort::Handle::current();
    while handle.metrics().tasks_alive > 0 {
        assert!(
            Instant::now() < deadline,
            "tasks left: {}",
            handle.metrics().tasks_alive
        );
        gort::time::sleep(Duration::from_millis(5)).await;
    }
    println!("ok: no task left");
}
