//! Where and how a run ran, for the report's header: the commit, the build profile, rustc,
//! the host, its cores, and the CPU the hypervisor stole during the run (`/proc/stat`).

use serde::Serialize;
use std::process::Command;
use std::time::Duration;

/// The run's machine and build. Every field reads "unknown" (or 0) where it cannot be found.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct HostInfo {
    /// `git rev-parse --short HEAD` in the working directory, or "unknown".
    pub commit: String,
    /// "release" or "debug" (a debug build's lateness bounds are scaled).
    pub profile: String,
    /// The factor the lateness bounds were multiplied by (1 in release builds).
    pub bound_scale: u64,
    /// `rustc --version`, or "unknown".
    pub rustc: String,
    /// The host name, or "unknown".
    pub host: String,
    /// CPUs online.
    pub cores: u64,
    /// CPU time stolen from this machine's virtual CPUs during the run (all CPUs summed).
    pub steal_ms: f64,
    /// Wall-clock time the steal was measured over.
    pub wall_ms: f64,
}

impl HostInfo {
    /// Gathers everything; `steal` is the stolen time measured over `wall`
    /// (see [`StealClock`]).
    pub fn gather(steal: Duration, wall: Duration) -> HostInfo {
        let debug = cfg!(debug_assertions);
        HostInfo {
            commit: command_line("git", &["rev-parse", "--short", "HEAD"]),
            profile: if debug { "debug" } else { "release" }.into(),
            bound_scale: crate::scenarios::bound_scale(),
            rustc: command_line("rustc", &["--version"]),
            host: std::fs::read_to_string("/proc/sys/kernel/hostname")
                .ok()
                .map(|h| h.trim().to_string())
                .filter(|h| !h.is_empty())
                .unwrap_or_else(|| "unknown".into()),
            cores: crate::stats::online_cpus(),
            steal_ms: steal.as_secs_f64() * 1e3,
            wall_ms: wall.as_secs_f64() * 1e3,
        }
    }

    /// Stolen time as a share of the machine's CPU time over the run (0..1).
    pub fn steal_share(&self) -> f64 {
        let capacity = self.wall_ms * self.cores.max(1) as f64;
        if capacity > 0.0 {
            self.steal_ms / capacity
        } else {
            0.0
        }
    }
}

/// The first line of a command's standard output, or "unknown" when it cannot run or fails
/// (not a git checkout, no rustc on the PATH).
fn command_line(program: &str, args: &[&str]) -> String {
    Command::new(program)
        .args(args)
        .output()
        .ok()
        .filter(|o| o.status.success())
        .and_then(|o| {
            String::from_utf8(o.stdout)
                .ok()
                .and_then(|s| s.lines().next().map(|l| l.trim().to_string()))
        })
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "unknown".into())
}

/// The machine's stolen CPU time so far, from the `steal` column of `/proc/stat`'s `cpu`
/// line (zero where it is unreadable).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StealClock {
    stolen: Duration,
}

impl StealClock {
    /// Now.
    pub fn now() -> StealClock {
        StealClock {
            stolen: crate::stats::read_proc_stat(parse_steal),
        }
    }

    /// Stolen time since `earlier`.
    pub fn since(self, earlier: StealClock) -> Duration {
        self.stolen.saturating_sub(earlier.stolen)
    }
}

/// The 8th number of the aggregate `cpu` line (user nice system idle iowait irq softirq
/// steal), in ticks of `hz`.
fn parse_steal(text: &str, hz: u64) -> Duration {
    let ticks = text
        .lines()
        .find(|l| l.starts_with("cpu "))
        .and_then(|l| l.split_whitespace().nth(8))
        .and_then(|v| v.parse::<u64>().ok())
        .unwrap_or(0);
    Duration::from_secs_f64(ticks as f64 / hz as f64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn steal_is_the_eighth_cpu_column() {
        let stat = "cpu  100 5 50 1000 20 3 2 7 0 0\ncpu0 50 2 25 500 10 1 1 3 0 0\n";
        assert_eq!(parse_steal(stat, 100), Duration::from_millis(70));
        assert_eq!(parse_steal("", 100), Duration::ZERO);
    }

    #[test]
    fn gather_fills_every_field() {
        let h = HostInfo::gather(Duration::from_millis(50), Duration::from_secs(1));
        assert!(!h.commit.is_empty() && !h.rustc.is_empty() && !h.host.is_empty());
        assert_eq!(h.profile == "debug", cfg!(debug_assertions));
        assert_eq!(h.bound_scale > 1, cfg!(debug_assertions));
        assert!(h.cores >= 1);
        assert!((h.steal_ms - 50.0).abs() < 1e-9);
        assert!(h.steal_share() > 0.0 && h.steal_share() <= 0.05);
    }

    #[test]
    fn a_failing_command_reads_unknown() {
        assert_eq!(
            command_line("/nonexistent/gort-no-such-tool", &[]),
            "unknown"
        );
        assert_eq!(command_line("false", &[]), "unknown");
    }
}
