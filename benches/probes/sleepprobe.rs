//! A task that sleeps 1 ms in a loop, 2,000 times, on an otherwise idle runtime of 2 workers:
//! the process's CPU time over the loop, the sleeps' lateness (wake-up minus deadline), and
//! for gort the parked Ms woken (`Metrics::ms_woken`). T5_idle's ticker re-arms its timer in
//! the timer run; a sleep is armed by the task, on the M that just came back from the poller.
//!
//! ```sh
//! cargo run --release --example sleepprobe            # gort
//! cargo run --release --example sleepprobe -- tokio   # Tokio, tokio::time::sleep
//! ```

use std::time::{Duration, Instant};

const SLEEPS: usize = 2000;
const PERIOD: Duration = Duration::from_millis(1);

/// User + system CPU time of the process.
fn cpu() -> Duration {
    // SAFETY: `getrusage` writes into the zeroed struct we pass and reads nothing else.
    let ru = unsafe {
        let mut ru: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_SELF, &mut ru);
        ru
    };
    let tv = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
    tv(ru.ru_utime) + tv(ru.ru_stime)
}

fn report(what: &str, cpu: Duration, mut lates: Vec<Duration>, extra: &str) {
    lates.sort();
    let at = |q: usize| lates[(lates.len() * q / 100).min(lates.len() - 1)];
    println!(
        "{what}: cpu {:.1} ms  late p50 {:?}  p99 {:?}  max {:?}{extra}",
        cpu.as_secs_f64() * 1e3,
        at(50),
        at(99),
        lates[lates.len() - 1]
    );
}

fn main() {
    if std::env::args().nth(1).as_deref() == Some("tokio") {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .expect("build the tokio runtime");
        let (cpu, lates) = rt
            .block_on(rt.spawn(async {
                tokio::time::sleep(Duration::from_millis(20)).await;
                let c0 = cpu();
                let mut lates = Vec::with_capacity(SLEEPS);
                for _ in 0..SLEEPS {
                    let due = Instant::now() + PERIOD;
                    tokio::time::sleep_until(due.into()).await;
                    lates.push(Instant::now() - due);
                }
                (cpu() - c0, lates)
            }))
            .expect("the probe task panicked");
        report("tokio", cpu, lates, "");
        return;
    }
    let rt = gort::Builder::new()
        .procs(2)
        .build()
        .expect("build the runtime");
    let (cpu, lates, woken) = rt
        .block_on(rt.spawn(async {
            gort::time::sleep(Duration::from_millis(20)).await;
            let h = gort::Handle::current();
            let (c0, w0) = (cpu(), h.metrics().ms_woken);
            let mut lates = Vec::with_capacity(SLEEPS);
            for _ in 0..SLEEPS {
                let due = Instant::now() + PERIOD;
                gort::time::sleep_until(due.into()).await;
                lates.push(Instant::now() - due);
            }
            (cpu() - c0, lates, h.metrics().ms_woken - w0)
        }))
        .expect("the probe task panicked");
    report("gort", cpu, lates, &format!("  parked Ms woken {woken}"));
}
