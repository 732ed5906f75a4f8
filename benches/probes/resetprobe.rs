//! The cost of one reset to an hour ahead, per kind of timer, at W = 1 and W = 2: a channel
//! `Timer` (no receiver waiting, as in a `select!` loop between receives), a pinned `Sleep`
//! that has registered, an `AfterFunc`, and Tokio's `Sleep::reset` for comparison. Each of W
//! tasks resets its own timer N/W times (N = 2,000,000); the kinds take turns for several rounds and the
//! median ns per reset is printed (T2_chan and T2_sleep of benches/SHAPES.md, in one process
//! so that `perf record` or callgrind can look at one of them: `-- timer 1`).
//!
//! `cargo run --release --example resetprobe [-- KIND|all W|all [ROUNDS [N]]]`
//! (design/PERFORMANCE-LOG.md).

use std::future::Future;
use std::pin::{pin, Pin};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

const HOUR: Duration = Duration::from_secs(3600);
const KINDS: [&str; 4] = ["timer", "sleep", "after_func", "tokio_sleep"];

/// Polls `fut` once (so a sleep registers), whatever it returns.
async fn poll_once<F: Future + ?Sized>(mut fut: Pin<&mut F>) {
    std::future::poll_fn(move |cx: &mut Context<'_>| {
        let _ = fut.as_mut().poll(cx);
        Poll::Ready(())
    })
    .await
}

/// `per` resets of one timer of `kind`, on a gort runtime's task.
async fn gort_resets(kind: &'static str, per: usize) {
    match kind {
        "timer" => {
            let t = gort::time::Timer::new(HOUR);
            for _ in 0..per {
                t.reset(HOUR);
            }
            assert!(t.stop(), "the reset timer was not active");
        }
        "sleep" => {
            let mut s = pin!(gort::time::sleep(HOUR));
            poll_once(s.as_mut()).await;
            for _ in 0..per {
                s.as_mut().reset(gort::time::Instant::now() + HOUR);
            }
        }
        "after_func" => {
            let t = gort::time::after_func(HOUR, || {});
            for _ in 0..per {
                t.reset(HOUR);
            }
            assert!(t.stop(), "the reset timer was not active");
        }
        _ => unreachable!("not a gort kind: {kind}"),
    }
}

/// ns per reset of `kind` with `w` workers, each resetting its own timer n/w times.
fn measure(kind: &'static str, w: usize, n: usize) -> f64 {
    let per = n / w;
    if kind == "tokio_sleep" {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(w)
            .enable_all()
            .build()
            .expect("build the tokio runtime");
        return rt.block_on(async move {
            let t0 = Instant::now();
            let tasks: Vec<_> = (0..w)
                .map(|_| {
                    tokio::spawn(tokio::task::unconstrained(async move {
                        let mut s = pin!(tokio::time::sleep(HOUR));
                        poll_once(s.as_mut()).await;
                        for _ in 0..per {
                            s.as_mut().reset(tokio::time::Instant::now() + HOUR);
                        }
                    }))
                })
                .collect();
            for t in tasks {
                t.await.expect("a reset task panicked");
            }
            t0.elapsed().as_nanos() as f64 / (per * w) as f64
        });
    }
    let rt = gort::Builder::new()
        .procs(w)
        .build()
        .expect("build the gort runtime");
    let ns = rt.block_on(async move {
        let t0 = Instant::now();
        let tasks: Vec<_> = (0..w)
            .map(|_| gort::spawn(gort_resets(kind, per)))
            .collect();
        for t in tasks {
            t.await.expect("a reset task panicked");
        }
        t0.elapsed().as_nanos() as f64 / (per * w) as f64
    });
    rt.shutdown_timeout(Duration::from_millis(100));
    ns
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let kinds: Vec<&'static str> = match args.first().filter(|k| *k != "all") {
        Some(k) => vec![*KINDS
            .iter()
            .find(|&&x| x == k)
            .unwrap_or_else(|| panic!("KIND is one of {KINDS:?}"))],
        None => KINDS.to_vec(),
    };
    let ws: Vec<usize> = match args.get(1).filter(|w| *w != "all") {
        Some(w) => vec![w.parse().expect("W is a number")],
        None => vec![1, 2],
    };
    let rounds: usize = args.get(2).map_or(7, |r| r.parse().expect("ROUNDS"));
    let n: usize = args.get(3).map_or(2_000_000, |r| r.parse().expect("N"));
    for &w in &ws {
        let mut samples = vec![Vec::new(); kinds.len()];
        for round in 0..rounds {
            // Rotate the order each round, so a noisy spell falls on every kind.
            for i in 0..kinds.len() {
                let k = (i + round) % kinds.len();
                samples[k].push(measure(kinds[k], w, n));
            }
        }
        for (kind, s) in kinds.iter().zip(samples) {
            let lo = s.iter().cloned().fold(f64::MAX, f64::min);
            println!(
                "W={w} {kind:<12} median {:6.1} ns  min {lo:6.1} ns",
                median(s)
            );
        }
    }
}
