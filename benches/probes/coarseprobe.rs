//! T10 tick by tick: which spinner's yield each tick waited for, and how the spinners' yields
//! drift against the ticker's grid (the finding behind T10_1ms's p50, PERFORMANCE-LOG.md).
//!
//! Two tasks spin `slice` (1 ms unless given, in µs) then `yield_now`, on 2 Ps, while a task
//! reads a 1 ms `Ticker` for 2 s. Each spinner records when it yields; the reader records
//! when each tick arrives. Printed: the lateness quantiles (as T10 measures them), how many
//! ticks arrived before the second yield of either spinner after their deadline (a tick
//! that waited for one particular spinner would often arrive later), the lateness and each
//! spinner's next yield after every 50th deadline (the phase drift), and how far apart the
//! two spinners' yields are.
//!
//! ```sh
//! cargo run --release --example coarseprobe          # 1 ms slices (T10_1ms)
//! cargo run --release --example coarseprobe -- 5000  # 5 ms slices
//! ```

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use gort::time::Ticker;

/// (spinner, when it yielded)
type Yields = Arc<Mutex<Vec<(usize, Instant)>>>;

fn spin_for(d: Duration) {
    let end = Instant::now() + d;
    while Instant::now() < end {
        std::hint::spin_loop();
    }
}

fn main() {
    let slice_us: u64 = std::env::args()
        .nth(1)
        .map_or(1000, |s| s.parse().expect("µs"));
    let slice = Duration::from_micros(slice_us);
    let rt = gort::Builder::new().procs(2).build().expect("runtime");
    let yields: Yields = Arc::new(Mutex::new(Vec::with_capacity(1 << 16)));
    let y = yields.clone();
    let (t0, receipts) = rt
        .block_on(rt.spawn(async move {
            let stop = Arc::new(AtomicBool::new(false));
            for i in 0..2 {
                let (stop, y) = (stop.clone(), y.clone());
                gort::spawn(async move {
                    while !stop.load(Ordering::Relaxed) {
                        spin_for(slice);
                        y.lock().unwrap().push((i, Instant::now()));
                        gort::yield_now().await;
                    }
                });
            }
            let t0 = Instant::now();
            let ticker = Ticker::new(Duration::from_millis(1));
            let mut got = Vec::with_capacity(4096);
            while t0.elapsed() < Duration::from_secs(2) {
                ticker.c().recv().await.expect("ticker closed");
                got.push(Instant::now());
            }
            stop.store(true, Ordering::Relaxed);
            (t0, got)
        }))
        .expect("root task");
    drop(rt);
    report(t0, &receipts, &yields.lock().unwrap());
}

/// The first entry of sorted `v` at or after `t`.
fn first_at<T: Copy>(v: &[T], t: Instant, at: impl Fn(&T) -> Instant) -> Option<T> {
    v.get(v.partition_point(|x| at(x) < t)).copied()
}

fn us(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

fn report(t0: Instant, receipts: &[Instant], yields: &[(usize, Instant)]) {
    let last = *receipts.last().expect("no tick");
    let mine =
        |i: usize| -> Vec<Instant> { yields.iter().filter(|y| y.0 == i).map(|y| y.1).collect() };
    let (y0, y1) = (mine(0), mine(1));
    let (mut late, mut before_second, mut gaps, mut n) = (Vec::new(), 0, Vec::new(), 0);
    println!("deadline  lateness  spinner 0 next  spinner 1 next  (µs after the deadline)");
    for k in 1.. {
        let due = t0 + Duration::from_millis(k);
        if due > last {
            break;
        }
        let got = first_at(receipts, due, |&t| t).expect("a receipt after it");
        late.push(us(got - due));
        let i = yields.partition_point(|y| y.1 < due);
        if let Some(second) = yields.get(i + 1) {
            n += 1;
            before_second += usize::from(got < second.1);
        }
        let (a, b) = (first_at(&y0, due, |&t| t), first_at(&y1, due, |&t| t));
        if let (Some(a), Some(b)) = (a, b) {
            gaps.push(us(if a > b { a - b } else { b - a }));
            if k % 50 == 0 {
                let f = |t: Instant| us(t - due);
                println!(
                    "{k:8} {:9.0} {:15.0} {:15.0}",
                    late[late.len() - 1],
                    f(a),
                    f(b)
                );
            }
        }
    }
    let q = |v: &mut Vec<f64>, p: f64| {
        v.sort_by(f64::total_cmp);
        v[((v.len() - 1) as f64 * p).round() as usize]
    };
    println!(
        "lateness p50 {:.0} µs, p99 {:.0}, max {:.0}; {} of {n} ticks arrived before the second \
         yield of either spinner after their deadline",
        q(&mut late, 0.5),
        q(&mut late, 0.99),
        q(&mut late, 1.0),
        before_second
    );
    println!(
        "spinners' next yields after a deadline, how far apart: p10 {:.0} µs, p50 {:.0}, p90 {:.0}",
        q(&mut gaps, 0.1),
        q(&mut gaps, 0.5),
        q(&mut gaps, 0.9)
    );
}
