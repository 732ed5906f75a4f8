//! Cost of one `nanotime` (extrapolated where the machine allows, see clock/tsc.rs) against
//! std's `Instant::now`: `cargo run --release --example clockprobe`.
use std::time::{Duration, Instant};

fn main() {
    let _ = gort_timer::nanotime();
    std::thread::sleep(Duration::from_millis(30));
    let n = 20_000_000u32;
    for _ in 0..2 {
        let t = Instant::now();
        let mut x = 0i64;
        for _ in 0..n {
            x = x.wrapping_add(std::hint::black_box(gort_timer::nanotime()));
        }
        let gort = t.elapsed().as_nanos() as f64 / n as f64;
        let t = Instant::now();
        for _ in 0..n {
            std::hint::black_box(Instant::now());
        }
        let std = t.elapsed().as_nanos() as f64 / n as f64;
        println!(
            "nanotime {gort:.1} ns, Instant::now {std:.1} ns ({})",
            x & 1
        );
    }
}
