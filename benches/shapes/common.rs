//! Pieces shared by every shape and both Rust runtimes: run parameters, a seeded RNG (the
//! same SplitMix64 as `benches/go/main.go`, so every runtime sees the same deadlines),
//! runtime-neutral wake-up primitives, lateness statistics and `getrusage`.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

/// Seed of every random draw; each shape xors in its own constant.
pub const SEED: u64 = 0x5EED_0060_4723_0001;

/// A deadline far enough away that it never fires during a run.
pub const HOUR: Duration = Duration::from_secs(3600);

/// The figures one shape produced for one runtime: metric key and value.
pub type Figures = Vec<(&'static str, f64)>;

/// Records a failed correctness check of a shape: the message goes to stderr and a
/// `check_failed` figure makes the parent report the run as failed.
pub fn check(figures: &mut Figures, ok: bool, what: impl FnOnce() -> String) {
    if !ok {
        eprintln!("check failed: {}", what());
        figures.push(("check_failed", 1.0));
    }
}

/// What every shape needs to know about the run.
#[derive(Clone, Copy, Debug)]
pub struct Params {
    /// `--quick`: counts scaled down about 10x (CI smoke run).
    pub quick: bool,
    /// Worker threads W (gort procs, Tokio workers, GOMAXPROCS).
    pub workers: usize,
}

impl Params {
    /// `full` in a full run, a tenth of it with `--quick`.
    pub fn n(&self, full: usize) -> usize {
        if self.quick {
            (full / 10).max(1)
        } else {
            full
        }
    }

    /// `full` in a full run, `quick` with `--quick` (for time windows and counts that are not
    /// simply divided by ten).
    pub fn pick<T>(&self, full: T, quick: T) -> T {
        if self.quick {
            quick
        } else {
            full
        }
    }

    /// Splits `n` operations over the W workers: (per worker, total actually run).
    pub fn split(&self, n: usize) -> (usize, usize) {
        let per = (n / self.workers).max(1);
        (per, per * self.workers)
    }
}

/// SplitMix64 (Steele, Lea, Flood, "Fast splittable pseudorandom number generators", 2014);
/// `benches/go/main.go` has the same generator.
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    /// A generator starting from `seed`.
    pub fn new(seed: u64) -> Self {
        Rng(seed)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (modulo bias is irrelevant here and identical in Go).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n
    }
}

/// `count` durations uniform in `[lo, hi]` (nanosecond grain) drawn from `seed`.
pub fn durations(seed: u64, count: usize, lo: Duration, hi: Duration) -> Vec<Duration> {
    let lo = lo.as_nanos() as u64;
    let span = hi.as_nanos() as u64 - lo + 1;
    let mut rng = Rng::new(seed);
    (0..count)
        .map(|_| Duration::from_nanos(lo + rng.below(span)))
        .collect()
}

/// Counts down from `n`; `wait` completes once it reaches zero. Runtime-neutral (wakers
/// under a mutex), so gort and Tokio pay the same for it.
#[derive(Debug)]
pub struct Latch {
    left: AtomicUsize,
    wakers: Mutex<Vec<Waker>>,
}

impl Latch {
    /// A latch that opens after `n` calls of `arrive`.
    pub fn new(n: usize) -> Self {
        Latch {
            left: AtomicUsize::new(n),
            wakers: Mutex::new(Vec::new()),
        }
    }

    /// Counts one arrival; the last one wakes every waiter.
    pub fn arrive(&self) {
        // AcqRel: the last arrival sees every earlier arrival's writes and publishes them to
        // the waiters, which load `left` with Acquire.
        if self.left.fetch_sub(1, Ordering::AcqRel) == 1 {
            let wakers = std::mem::take(&mut *self.wakers.lock().unwrap());
            wakers.into_iter().for_each(Waker::wake);
        }
    }

    /// Completes once every arrival happened.
    pub fn wait(&self) -> impl Future<Output = ()> + '_ {
        std::future::poll_fn(move |cx| {
            if self.left.load(Ordering::Acquire) == 0 {
                return Poll::Ready(());
            }
            let mut wakers = self.wakers.lock().unwrap();
            if !wakers.iter().any(|w| w.will_wake(cx.waker())) {
                wakers.push(cx.waker().clone());
            }
            drop(wakers);
            // The last arrival decrements before it takes the wakers under the same mutex,
            // so either it saw our waker or this load sees zero.
            if self.left.load(Ordering::Acquire) == 0 {
                Poll::Ready(())
            } else {
                Poll::Pending
            }
        })
    }
}

/// A reusable one-waiter notification (a binary semaphore), for callbacks that must wake
/// the task that armed them.
#[derive(Debug, Default)]
pub struct Signal {
    set: AtomicBool,
    waker: Mutex<Option<Waker>>,
}

impl Signal {
    /// Sets the signal and wakes the waiter.
    pub fn notify(&self) {
        self.set.store(true, Ordering::Release);
        if let Some(w) = self.waker.lock().unwrap().take() {
            w.wake();
        }
    }

    /// Completes once the signal is set, and clears it.
    pub fn wait(&self) -> impl Future<Output = ()> + '_ {
        std::future::poll_fn(move |cx| {
            if self.set.swap(false, Ordering::Acquire) {
                return Poll::Ready(());
            }
            *self.waker.lock().unwrap() = Some(cx.waker().clone());
            // Same argument as `Latch::wait`: `notify` sets before it takes the waker.
            if self.set.swap(false, Ordering::Acquire) {
                Poll::Ready(())
            } else {
                Poll::Pending
            }
        })
    }
}

/// Polls `fut` exactly once (so a lazily registered timer registers) and returns.
pub async fn poll_once<F: Future + ?Sized>(mut fut: Pin<&mut F>) {
    std::future::poll_fn(move |cx: &mut Context<'_>| {
        let _ = fut.as_mut().poll(cx);
        Poll::Ready(())
    })
    .await
}

/// One lateness slot per timer, written once by whoever observes the expiry.
#[derive(Debug)]
pub struct Samples(Vec<AtomicU64>);

impl Samples {
    /// `n` empty slots.
    pub fn new(n: usize) -> Self {
        Samples((0..n).map(|_| AtomicU64::new(0)).collect())
    }

    /// Records that timer `i` expired at `now` although it was due at `deadline`.
    pub fn record(&self, i: usize, deadline: Instant, now: Instant) {
        let late = now.saturating_duration_since(deadline).as_nanos() as u64;
        self.0[i].store(late, Ordering::Relaxed);
    }

    /// p50, p99 and max lateness in µs.
    pub fn percentiles_us(&self) -> [f64; 3] {
        percentiles_us(self.0.iter().map(|a| a.load(Ordering::Relaxed)).collect())
    }
}

/// p50, p99 and max of nanosecond samples, in µs (nearest rank).
pub fn percentiles_us(mut ns: Vec<u64>) -> [f64; 3] {
    if ns.is_empty() {
        return [0.0; 3];
    }
    ns.sort_unstable();
    let at = |q: f64| ns[((ns.len() - 1) as f64 * q).round() as usize] as f64 / 1e3;
    [at(0.50), at(0.99), at(1.0)]
}

/// Lateness figures of ticker receipts. `t0` is taken just before the ticker starts, so the
/// ideal schedule is `t0 + k * period`. Lateness is measured from the schedule, not from the
/// value delivered: for each grid point up to the last receipt, the time from it to the
/// first receipt at or after it. That needs no value (Go 1.19 sends the send instant, not
/// the due instant) and charges a tick that was dropped or delivered late the same way in
/// every runtime. Returns p50/p99/max of that, and the ticks dropped: grid points between
/// the first and the last receipt that no delivered value (due instant, or send instant)
/// falls on.
pub fn tick_figures(t0: Instant, period: Duration, recs: &[(Instant, Instant)]) -> Figures {
    let p = period.as_nanos() as u64;
    let grid = |due: Instant| due.saturating_duration_since(t0).as_nanos() as u64 / p;
    let mut late = Vec::with_capacity(recs.len());
    if let Some(&(_, last)) = recs.last() {
        let mut next = recs.iter().map(|r| r.1).peekable();
        for k in 1.. {
            let ideal = t0 + period * k;
            if ideal > last {
                break;
            }
            // Receipts are in order (one receiver): skip those before this grid point.
            while next.next_if(|&got| got < ideal).is_some() {}
            let got = *next
                .peek()
                .expect("the last receipt is at or after this point");
            late.push(got.saturating_duration_since(ideal).as_nanos() as u64);
        }
    }
    let [p50, p99, max] = percentiles_us(late);
    let dropped = match (recs.first(), recs.last()) {
        (Some(a), Some(b)) => (grid(b.0) - grid(a.0) + 1).saturating_sub(recs.len() as u64),
        _ => 0,
    };
    vec![
        ("late_p50_us", p50),
        ("late_p99_us", p99),
        ("late_max_us", max),
        ("dropped", dropped as f64),
    ]
}

/// T10's figures: T5's lateness quantiles and how many ticks arrived in the window (a runtime
/// that lets the ticker's task wait behind spinners receives few; `dropped` says less here,
/// since the window, not a tick count, ends the run).
pub fn coarse_tick_figures(t0: Instant, period: Duration, recs: &[(Instant, Instant)]) -> Figures {
    let mut f = tick_figures(t0, period, recs);
    f.retain(|(k, _)| *k != "dropped");
    f.push(("received", recs.len() as f64));
    f
}

/// T10's window: the ticker is read for 2 s (0.4 s quick).
pub fn coarse_window(p: &Params) -> Duration {
    Duration::from_millis(p.pick(2000, 400))
}

/// Busy CPU work for `d` (the spinning tasks of T5 and T10).
pub fn spin_for(d: Duration) {
    let end = Instant::now() + d;
    let mut x = 1u64;
    while Instant::now() < end {
        for _ in 0..64 {
            x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(1));
        }
    }
}

/// Wall and CPU clocks started together.
#[derive(Debug)]
pub struct Meter {
    wall: Instant,
    cpu: Duration,
}

impl Meter {
    /// Starts both clocks.
    pub fn start() -> Self {
        Meter {
            wall: Instant::now(),
            cpu: rusage().0,
        }
    }

    /// Wall time since start.
    pub fn wall(&self) -> Duration {
        self.wall.elapsed()
    }

    /// Process CPU time (user + system, all threads) since start.
    pub fn cpu(&self) -> Duration {
        rusage().0.saturating_sub(self.cpu)
    }

    /// Wall nanoseconds per operation.
    pub fn ns_per(&self, ops: usize) -> f64 {
        self.wall().as_nanos() as f64 / ops as f64
    }
}

/// Milliseconds of a duration, as a figure.
pub fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// Microseconds of a duration, as a figure.
pub fn us(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

/// Median of a few values.
pub fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// Peak resident set size of this process so far, in MiB.
pub fn peak_rss_mib() -> f64 {
    // Linux reports ru_maxrss in KiB.
    rusage().1 / 1024.0
}

/// (user + system CPU time, ru_maxrss) of this process.
#[cfg(unix)]
fn rusage() -> (Duration, f64) {
    use std::os::raw::{c_int, c_long};

    #[repr(C)]
    struct Timeval {
        sec: c_long,
        usec: c_long,
    }
    /// `struct rusage` of Linux: two timevals, then 14 longs starting with ru_maxrss.
    #[repr(C)]
    struct Rusage {
        utime: Timeval,
        stime: Timeval,
        maxrss: c_long,
        rest: [c_long; 13],
    }
    extern "C" {
        fn getrusage(who: c_int, usage: *mut Rusage) -> c_int;
    }
    const RUSAGE_SELF: c_int = 0;

    let mut ru = std::mem::MaybeUninit::<Rusage>::zeroed();
    // SAFETY: `ru` is a writable, properly aligned `struct rusage` (layout above matches
    // the Linux/glibc definition), which getrusage fills completely on success.
    let rc = unsafe { getrusage(RUSAGE_SELF, ru.as_mut_ptr()) };
    assert_eq!(rc, 0, "getrusage failed");
    // SAFETY: zero-initialised and then filled by getrusage; every bit pattern is valid.
    let ru = unsafe { ru.assume_init() };
    let tv = |t: &Timeval| Duration::new(t.sec as u64, t.usec as u32 * 1000);
    (tv(&ru.utime) + tv(&ru.stime), ru.maxrss as f64)
}

/// Without getrusage the CPU and RSS figures read zero.
#[cfg(not(unix))]
fn rusage() -> (Duration, f64) {
    (Duration::ZERO, 0.0)
}

/// A Unix socket's path in the temporary directory (`tag` names the runtime), fresh (nothing
/// left at it by an earlier run) and removed when dropped.
#[derive(Debug)]
pub struct UnixPath(pub std::path::PathBuf);

impl UnixPath {
    pub fn fresh(tag: &str) -> UnixPath {
        let name = format!("gort-shapes-{tag}-{}.sock", std::process::id());
        let path = std::env::temp_dir().join(name);
        let _ = std::fs::remove_file(&path);
        UnixPath(path)
    }
}

impl Drop for UnixPath {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// The echo fan-in of N2, N4 and N6: C = 256 clients at once, each the future
/// `client(rounds)` (1,000 round trips; a tenth with `--quick`), started with `spawn`.
pub async fn fanin_clients<C, Fut>(
    p: &Params,
    spawn: impl Fn(Pin<Box<dyn Future<Output = ()> + Send>>),
    client: C,
) -> Figures
where
    C: Fn(usize) -> Fut,
    Fut: Future<Output = ()> + Send + 'static,
{
    let (conns, rounds) = (256, p.n(1_000));
    let done = Arc::new(Latch::new(conns));
    let m = Meter::start();
    for _ in 0..conns {
        let (done, client) = (done.clone(), client(rounds));
        spawn(Box::pin(async move {
            client.await;
            done.arrive();
        }));
    }
    done.wait().await;
    vec![
        ("per_round_trip_ns", m.ns_per(conns * rounds)),
        ("cpu_ms", ms(m.cpu())),
    ]
}
