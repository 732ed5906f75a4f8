//! Measurements: lateness histograms and timelines, peak RSS and CPU time.
//!
//! Everything that tasks record into is lock-free (atomic counters), so that recording a sample
//! costs a few uncontended atomic adds and does not serialise the tasks under test.

use serde::Serialize;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

/// Linear sub-buckets per power of two: relative error of a bucket bound is at most 1/32 (3 %).
const SUB_BITS: u32 = 5;
const SUB: u64 = 1 << SUB_BITS;
/// Buckets for the whole `u64` range: 32 exact values, then 32 per remaining power of two.
const BUCKETS: usize = ((64 - SUB_BITS as usize) + 1) * SUB as usize;

/// Bucket of `v` in a log-linear layout (the HdrHistogram idea with 5 significant bits).
fn bucket_of(v: u64) -> usize {
    if v < SUB {
        return v as usize;
    }
    let exp = 63 - v.leading_zeros(); // >= SUB_BITS
    let shift = exp - SUB_BITS;
    let mantissa = (v >> shift) & (SUB - 1);
    ((exp - SUB_BITS + 1) as u64 * SUB + mantissa) as usize
}

/// Smallest and largest value that fall into bucket `b`.
fn bucket_bounds(b: usize) -> (u64, u64) {
    let b = b as u64;
    if b < SUB {
        return (b, b);
    }
    let exp = b / SUB - 1 + u64::from(SUB_BITS);
    let shift = exp - u64::from(SUB_BITS);
    let lo = (SUB + b % SUB) << shift;
    (lo, lo + ((1u64 << shift) - 1))
}

/// A concurrent histogram of microsecond values (lateness), with exact max and count.
#[derive(Debug)]
pub struct Histogram {
    buckets: Box<[AtomicU64]>,
    count: AtomicU64,
    sum: AtomicU64,
    max: AtomicU64,
}

impl Default for Histogram {
    fn default() -> Self {
        Histogram {
            buckets: (0..BUCKETS).map(|_| AtomicU64::new(0)).collect(),
            count: AtomicU64::new(0),
            sum: AtomicU64::new(0),
            max: AtomicU64::new(0),
        }
    }
}

/// A histogram's numbers at one moment, in microseconds.
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct HistSummary {
    /// Samples recorded.
    pub count: u64,
    /// Mean.
    pub mean_us: f64,
    /// Median (upper bound of its bucket: at most 3 % above the true value).
    pub p50_us: u64,
    /// 90th percentile (bucket upper bound).
    pub p90_us: u64,
    /// 99th percentile (bucket upper bound).
    pub p99_us: u64,
    /// 99.9th percentile (bucket upper bound).
    pub p999_us: u64,
    /// Exact maximum.
    pub max_us: u64,
    /// Non-empty buckets as `(low, high, count)`, for plotting.
    #[serde(skip)]
    pub buckets: Vec<(u64, u64, u64)>,
}

impl Histogram {
    /// Records one value in microseconds.
    pub fn record(&self, us: u64) {
        self.buckets[bucket_of(us)].fetch_add(1, Relaxed);
        self.count.fetch_add(1, Relaxed);
        self.sum.fetch_add(us, Relaxed);
        self.max.fetch_max(us, Relaxed);
    }

    /// Percentiles and buckets. Call it once recording has stopped for exact numbers; while
    /// tasks still record, the figures are a consistent-enough approximation.
    pub fn summary(&self) -> HistSummary {
        let counts: Vec<u64> = self.buckets.iter().map(|b| b.load(Relaxed)).collect();
        let total: u64 = counts.iter().sum();
        let max = self.max.load(Relaxed);
        if total == 0 {
            return HistSummary::default();
        }
        let quantile = |q: f64| -> u64 {
            // The sample of rank ceil(q * total), 1-based.
            let rank = ((q * total as f64).ceil() as u64).clamp(1, total);
            let mut seen = 0;
            for (b, &n) in counts.iter().enumerate() {
                seen += n;
                if seen >= rank {
                    return bucket_bounds(b).1.min(max);
                }
            }
            max
        };
        let buckets = counts
            .iter()
            .enumerate()
            .filter(|(_, &n)| n > 0)
            .map(|(b, &n)| {
                let (lo, hi) = bucket_bounds(b);
                (lo, hi, n)
            })
            .collect();
        HistSummary {
            count: total,
            mean_us: self.sum.load(Relaxed) as f64 / total as f64,
            p50_us: quantile(0.50),
            p90_us: quantile(0.90),
            p99_us: quantile(0.99),
            p999_us: quantile(0.999),
            max_us: max,
            buckets,
        }
    }
}

/// Bins of a [`Timeline`].
const TIMELINE_BINS: usize = 400;

/// Events over time: per time bin, how many samples landed and their max and total lateness.
#[derive(Debug)]
pub struct Timeline {
    bin_ns: u64,
    count: Box<[AtomicU64]>,
    max_us: Box<[AtomicU64]>,
    sum_us: Box<[AtomicU64]>,
}

/// One bin of a timeline snapshot.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct TimelineBin {
    /// Bin start, milliseconds since the scenario started.
    pub t_ms: f64,
    /// Samples in the bin.
    pub count: u64,
    /// Largest lateness in the bin, microseconds.
    pub max_us: u64,
    /// Mean lateness in the bin, microseconds.
    pub mean_us: f64,
}

impl Timeline {
    /// A timeline spanning `span` (samples after it land in the last bin).
    pub fn new(span: Duration) -> Self {
        let span_ns = u64::try_from(span.as_nanos()).unwrap_or(u64::MAX).max(1);
        let zeros = || (0..TIMELINE_BINS).map(|_| AtomicU64::new(0)).collect();
        Timeline {
            bin_ns: span_ns.div_ceil(TIMELINE_BINS as u64).max(1),
            count: zeros(),
            max_us: zeros(),
            sum_us: zeros(),
        }
    }

    /// Records a sample taken `at_ns` after the scenario start with lateness `late_us`.
    pub fn record(&self, at_ns: u64, late_us: u64) {
        let bin = ((at_ns / self.bin_ns) as usize).min(TIMELINE_BINS - 1);
        self.count[bin].fetch_add(1, Relaxed);
        self.sum_us[bin].fetch_add(late_us, Relaxed);
        self.max_us[bin].fetch_max(late_us, Relaxed);
    }

    /// The bins up to the last non-empty one.
    pub fn snapshot(&self) -> Vec<TimelineBin> {
        let last = (0..TIMELINE_BINS)
            .rev()
            .find(|&i| self.count[i].load(Relaxed) > 0);
        let Some(last) = last else { return Vec::new() };
        (0..=last)
            .map(|i| {
                let n = self.count[i].load(Relaxed);
                TimelineBin {
                    t_ms: (i as u64 * self.bin_ns) as f64 / 1e6,
                    count: n,
                    max_us: self.max_us[i].load(Relaxed),
                    mean_us: if n == 0 {
                        0.0
                    } else {
                        self.sum_us[i].load(Relaxed) as f64 / n as f64
                    },
                }
            })
            .collect()
    }
}

/// Resident set size numbers from `/proc/self/status`, in bytes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Rss {
    /// `VmRSS`: resident now.
    pub current: u64,
    /// `VmHWM`: peak resident since start or since the last [`reset_peak_rss`].
    pub peak: u64,
}

/// Reads `VmRSS` and `VmHWM`; zeros where the file or a field is missing (non-Linux).
pub fn rss() -> Rss {
    let text = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    parse_status(&text)
}

fn parse_status(text: &str) -> Rss {
    let field = |name: &str| -> u64 {
        text.lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|rest| {
                rest.trim()
                    .trim_end_matches("kB")
                    .trim()
                    .parse::<u64>()
                    .ok()
            })
            .map_or(0, |kb| kb * 1024)
    };
    Rss {
        current: field("VmRSS:"),
        peak: field("VmHWM:"),
    }
}

/// Resets `VmHWM` to the current RSS (writes `5` to `/proc/self/clear_refs`, Linux >= 4.0).
/// Returns whether the kernel accepted it; if not, only sampled peaks are available.
pub fn reset_peak_rss() -> bool {
    std::fs::write("/proc/self/clear_refs", "5").is_ok()
}

/// The C allocator's own books over every arena, in bytes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct HeapStats {
    /// Bytes handed out and not yet freed (small chunks and mapped blocks).
    pub in_use: u64,
    /// Bytes the allocator holds free; some stay resident after [`trim_heap`].
    pub free: u64,
}

/// The allocator's books where it keeps them (glibc's `mallinfo2`); `None` elsewhere.
pub fn heap_stats() -> Option<HeapStats> {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        // SAFETY: mallinfo2 only reads glibc's statistics under each arena's lock.
        let mi = unsafe { libc::mallinfo2() };
        Some(HeapStats {
            in_use: (mi.uordblks + mi.hblkhd) as u64,
            free: mi.fordblks as u64,
        })
    }
    #[cfg(not(all(target_os = "linux", target_env = "gnu")))]
    None
}

/// Returns freed heap memory to the OS where the allocator supports it (glibc), so that RSS
/// after a scenario measures what is still in use rather than the allocator's cache. Not all
/// of it: glibc's `malloc_trim` gives back the free pages inside every arena but shrinks only
/// the main arena's top chunk, so the top of each worker thread's arena (up to the dynamic
/// trim threshold, 64 MiB at most, each) stays resident; [`heap_stats`] sees through it.
pub fn trim_heap() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only walks glibc's own arenas; it has no preconditions.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// Samples `VmRSS` on a thread, to catch the peak when `VmHWM` cannot be reset.
#[derive(Debug)]
pub struct RssSampler {
    stop: Arc<AtomicBool>,
    peak: Arc<AtomicU64>,
    thread: Option<JoinHandle<()>>,
}

impl RssSampler {
    /// Starts sampling every `every`.
    pub fn start(every: Duration) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let peak = Arc::new(AtomicU64::new(rss().current));
        let (s, p) = (stop.clone(), peak.clone());
        let thread = std::thread::Builder::new()
            .name("rss-sampler".into())
            .spawn(move || {
                while !s.load(Relaxed) {
                    p.fetch_max(rss().current, Relaxed);
                    std::thread::sleep(every);
                }
            })
            .ok();
        RssSampler { stop, peak, thread }
    }

    /// Stops the thread and returns the largest sample.
    pub fn finish(mut self) -> u64 {
        self.stop.store(true, Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        self.peak.load(Relaxed).max(rss().current)
    }
}

/// User and system CPU time of the whole process.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CpuTime {
    /// Time in user mode.
    pub user: Duration,
    /// Time in the kernel.
    pub system: Duration,
}

impl CpuTime {
    /// `getrusage(RUSAGE_SELF)` now.
    pub fn now() -> Self {
        // SAFETY: rusage is plain old data, valid when zeroed.
        let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
        // SAFETY: `ru` is a valid, writable rusage for the duration of the call.
        let rc = unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
        if rc != 0 {
            return CpuTime::default();
        }
        let tv = |t: libc::timeval| {
            Duration::from_secs(t.tv_sec.max(0) as u64)
                + Duration::from_micros(t.tv_usec.max(0) as u64)
        };
        CpuTime {
            user: tv(ru.ru_utime),
            system: tv(ru.ru_stime),
        }
    }

    /// CPU time spent since `earlier`.
    pub fn since(self, earlier: CpuTime) -> CpuTime {
        CpuTime {
            user: self.user.saturating_sub(earlier.user),
            system: self.system.saturating_sub(earlier.system),
        }
    }
}

/// Busy CPU time of the whole machine (all processes), from `/proc/stat`.
///
/// With [`CpuTime`] it tells how much CPU *other* processes took during a scenario: on a
/// shared machine that, not the runtime, may explain lateness.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MachineCpu {
    busy: Duration,
}

impl MachineCpu {
    /// Now; zero where `/proc/stat` is unreadable.
    pub fn now() -> Self {
        MachineCpu {
            busy: read_proc_stat(parse_stat_busy),
        }
    }

    /// Busy time since `earlier`.
    pub fn since(self, earlier: MachineCpu) -> Duration {
        self.busy.saturating_sub(earlier.busy)
    }
}

/// `parse` of `/proc/stat`'s text ("" where it is unreadable) and of the clock ticks a
/// second (100 where `sysconf` does not say).
pub fn read_proc_stat(parse: impl FnOnce(&str, u64) -> Duration) -> Duration {
    let text = std::fs::read_to_string("/proc/stat").unwrap_or_default();
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    parse(&text, if hz > 0 { hz as u64 } else { 100 })
}

/// Busy time in the aggregate `cpu` line: everything but idle and iowait (guest time is
/// already inside user/nice, so it is skipped).
fn parse_stat_busy(text: &str, hz: u64) -> Duration {
    let Some(line) = text.lines().find(|l| l.starts_with("cpu ")) else {
        return Duration::ZERO;
    };
    let f: Vec<u64> = line
        .split_whitespace()
        .skip(1)
        .filter_map(|x| x.parse().ok())
        .collect();
    let busy: u64 = f
        .iter()
        .take(8)
        .enumerate()
        .filter(|(i, _)| *i != 3 && *i != 4)
        .map(|(_, v)| v)
        .sum();
    Duration::from_secs_f64(busy as f64 / hz as f64)
}

/// CPUs the machine has online.
pub fn online_cpus() -> u64 {
    // SAFETY: sysconf has no preconditions.
    let n = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) };
    if n > 0 {
        n as u64
    } else {
        1
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_cover_values_in_order() {
        let mut prev_hi = None;
        for b in 0..BUCKETS {
            let (lo, hi) = bucket_bounds(b);
            assert!(lo <= hi);
            if let Some(p) = prev_hi {
                assert_eq!(lo, p + 1, "bucket {b} leaves a gap");
            }
            assert_eq!(bucket_of(lo), b);
            assert_eq!(bucket_of(hi), b);
            prev_hi = Some(hi);
        }
        assert_eq!(prev_hi, Some(u64::MAX));
    }

    #[test]
    fn bucket_relative_error_is_small() {
        for v in [33u64, 1000, 12_345, 999_999, 1 << 40] {
            let (lo, hi) = bucket_bounds(bucket_of(v));
            assert!(
                (hi - lo) as f64 / lo as f64 <= 1.0 / 32.0 + 1e-9,
                "{v}: {lo}..{hi}"
            );
        }
    }

    #[test]
    fn percentiles_of_uniform_values() {
        let h = Histogram::default();
        for v in 1..=10_000u64 {
            h.record(v);
        }
        let s = h.summary();
        assert_eq!(s.count, 10_000);
        assert_eq!(s.max_us, 10_000);
        assert!((s.mean_us - 5000.5).abs() < 1e-6);
        // Bucket upper bounds: at most 1/32 above the exact rank value, never below it.
        for (got, exact) in [(s.p50_us, 5000u64), (s.p99_us, 9900), (s.p999_us, 9990)] {
            assert!(
                got >= exact && got as f64 <= exact as f64 * (1.0 + 1.0 / 32.0),
                "{got} vs {exact}"
            );
        }
        assert_eq!(s.buckets.iter().map(|b| b.2).sum::<u64>(), 10_000);
    }

    #[test]
    fn percentile_never_exceeds_max_and_empty_is_zero() {
        let h = Histogram::default();
        assert_eq!(h.summary(), HistSummary::default());
        h.record(1_000_001);
        let s = h.summary();
        assert_eq!(
            (s.p50_us, s.p99_us, s.max_us),
            (1_000_001, 1_000_001, 1_000_001)
        );
    }

    #[test]
    fn histogram_is_exact_under_concurrent_recording() {
        let h = Arc::new(Histogram::default());
        let threads: Vec<_> = (0..4)
            .map(|_| {
                let h = h.clone();
                std::thread::spawn(move || (0..10_000).for_each(|v| h.record(v)))
            })
            .collect();
        threads.into_iter().for_each(|t| t.join().unwrap());
        assert_eq!(h.summary().count, 40_000);
    }

    #[test]
    fn timeline_bins_and_trims() {
        let t = Timeline::new(Duration::from_millis(400)); // 1 ms bins
        t.record(0, 10);
        t.record(500_000, 30);
        t.record(2_500_000, 7);
        t.record(u64::MAX, 1); // clamps into the last bin
        let s = t.snapshot();
        assert_eq!(s.len(), TIMELINE_BINS);
        assert_eq!((s[0].count, s[0].max_us, s[0].mean_us), (2, 30, 20.0));
        assert_eq!(s[2].count, 1);
        assert_eq!(s[2].t_ms, 2.0);
        assert_eq!(s[TIMELINE_BINS - 1].count, 1);
        assert!(Timeline::new(Duration::from_secs(1)).snapshot().is_empty());
    }

    #[test]
    fn parses_proc_status() {
        let text = "Name:\tx\nVmHWM:\t  2048 kB\nVmRSS:\t  1024 kB\n";
        assert_eq!(
            parse_status(text),
            Rss {
                current: 1024 * 1024,
                peak: 2048 * 1024
            }
        );
        assert_eq!(parse_status(""), Rss::default());
    }

    #[test]
    fn live_process_has_rss_and_cpu_time() {
        let r = rss();
        assert!(r.current > 0 && r.peak >= r.current);
        let before = CpuTime::now();
        let mut x = 0u64;
        let start = std::time::Instant::now();
        while start.elapsed() < Duration::from_millis(30) {
            x = x.wrapping_add(std::hint::black_box(1));
        }
        std::hint::black_box(x);
        let spent = CpuTime::now().since(before);
        assert!(spent.user + spent.system > Duration::ZERO);
    }

    #[test]
    fn parses_proc_stat() {
        let text = "cpu  100 5 50 1000 20 3 2 7 0 0\ncpu0 1 2 3 4 5 6 7 8 0 0\n";
        // user+nice+system+irq+softirq+steal = 100+5+50+3+2+7 = 167 ticks at 100 Hz.
        assert_eq!(parse_stat_busy(text, 100), Duration::from_millis(1670));
        assert_eq!(parse_stat_busy("", 100), Duration::ZERO);
        assert!(online_cpus() >= 1);
        let a = MachineCpu::now();
        assert!(MachineCpu::now().since(a) < Duration::from_secs(60));
    }

    #[test]
    fn sampler_sees_growth() {
        let s = RssSampler::start(Duration::from_millis(1));
        let base = rss().current;
        let v = vec![1u8; 64 << 20];
        std::thread::sleep(Duration::from_millis(30));
        std::hint::black_box(&v);
        let peak = s.finish();
        drop(v);
        assert!(peak >= base + (48 << 20), "peak {peak} base {base}");
    }
}
