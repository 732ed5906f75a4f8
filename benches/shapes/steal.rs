//! Time the hypervisor took from this machine's vCPUs while a child ran ("steal", the 8th
//! figure of `/proc/stat`'s `cpu` line), so that a round of children a noisy neighbour
//! disturbed can be told apart and run again.
//!
//! On the VMs this is measured on, steal comes in spells: 2-second runs of T5 saw from 0 to
//! 560 ms of it, and every tick lateness tail above ~1 ms came with it (a vCPU that is not
//! running cannot take the timer interrupt, whatever the runtime). The runtimes take turns
//! within a round, so re-running a disturbed round favours none of them.

use crate::report::Outcome;

/// A round is quiet when no child in it lost more than this share of the machine's CPU
/// time (its duration x the number of CPUs) to steal.
pub const QUIET_PERCENT: f64 = 2.0;

/// `/proc/stat` counts in USER_HZ ticks, 100 a second on every Linux architecture.
const MS_PER_TICK: f64 = 10.0;

/// The machine's total steal so far, in ticks; `None` where there is no `/proc/stat`.
fn steal_ticks() -> Option<u64> {
    let stat = std::fs::read_to_string("/proc/stat").ok()?;
    let cpu = stat.lines().find(|l| l.starts_with("cpu "))?;
    cpu.split_whitespace().nth(8)?.parse().ok()
}

/// Steal over an interval.
#[derive(Debug)]
pub struct Meter(Option<u64>);

impl Meter {
    /// Starts measuring.
    pub fn start() -> Meter {
        Meter(steal_ticks())
    }

    /// Milliseconds of steal (summed over the CPUs) since `start`; 0 where unknown.
    pub fn ms(&self) -> f64 {
        match (self.0, steal_ticks()) {
            (Some(a), Some(b)) => b.saturating_sub(a) as f64 * MS_PER_TICK,
            _ => 0.0,
        }
    }
}

/// The share of the machine's CPU time that `o`'s child lost to steal, in percent (0 for a
/// failed child, so that a failure is never discarded as noise).
fn percent(o: &Outcome) -> f64 {
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get()) as f64;
    match &o.figures {
        Ok(f) => f
            .iter()
            .find(|(k, _)| k == "steal_ms")
            .map_or(0.0, |&(_, ms)| {
                100.0 * ms / (o.secs * 1000.0 * cpus).max(1.0)
            }),
        Err(_) => 0.0,
    }
}

/// Whether no child of `round` lost more than `QUIET_PERCENT` to steal.
pub fn quiet(round: &[Outcome]) -> bool {
    round.iter().all(|o| percent(o) <= QUIET_PERCENT)
}

/// The round's worst steal share, in hundredths of a percent (a sort key).
pub fn worst(round: &[Outcome]) -> u64 {
    round
        .iter()
        .map(|o| (percent(o) * 100.0) as u64)
        .max()
        .unwrap_or(0)
}
