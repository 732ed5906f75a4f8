//! Command line: the options and the humane duration parser.

use clap::{Parser, ValueEnum};
use std::path::PathBuf;
use std::time::Duration;

/// Every scenario, in run order (the registry in `scenarios` must match; a test checks it).
pub const SCENARIO_NAMES: [&str; 15] = [
    "timer-storm",
    "ticker-churn",
    "after-func-storm",
    "sleep-fanout",
    "channel-mesh",
    "resize",
    "poller-wakeups",
    "blocking-handoffs",
    "net-deadlines",
    "faults",
    "coarse-load",
    "paused-clock",
    "context-trees",
    "rate-and-ticks",
    "task-sets",
];

/// gort's scheduler and timer stress suite: each scenario runs on its own runtime and checks
/// invariants (every timer fires exactly once unless stopped, no value after a successful
/// stop/reset, stop/reset results agree with what happened, every task joins, lateness bounds,
/// timer counts and memory return to baseline). Exit code 1 when any invariant broke.
#[derive(Debug, Parser)]
#[command(name = "gort-stress", version)]
pub struct Args {
    /// Scenario to run; repeat for several. Default: all, in the order of --list.
    #[arg(long = "scenario", short = 's', value_name = "NAME", value_parser = clap::builder::PossibleValuesParser::new(SCENARIO_NAMES))]
    pub scenarios: Vec<String>,

    /// Target wall time of the whole run (e.g. `5s`, `500ms`, `1m30s`), shared among the
    /// scenarios; loads scale with it. Drain and idle checks add a little on top.
    #[arg(long, short = 'd', default_value = "60s", value_parser = parse_duration)]
    pub duration: Duration,

    /// Ps per runtime (default: the number of CPUs).
    #[arg(long, short = 'p', value_parser = clap::value_parser!(u16).range(1..=1024))]
    pub procs: Option<u16>,

    /// Seed of every random choice; the same seed replays the same choices (default: random,
    /// printed at start).
    #[arg(long)]
    pub seed: Option<u64>,

    /// Print the results as JSON on stdout (the table goes to stderr).
    #[arg(long)]
    pub json: bool,

    /// Run the whole selection N times in a row, each run with a fresh seed (or every run
    /// with `--seed`), printing each run's table and then a summary (per scenario the median
    /// and worst lateness over the runs); exit 1 if any run broke an invariant.
    #[arg(long, value_name = "N", default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..))]
    pub repeat: u32,

    /// Write an HTML report with lateness histograms, timelines and runtime metrics: to the
    /// file itself when the path ends in `.html` or `.htm`, else to PATH/index.html.
    #[arg(long, value_name = "PATH")]
    pub report: Option<PathBuf>,

    /// List the scenarios with what they exercise, and exit.
    #[arg(long)]
    pub list: bool,

    /// Test-only: break the suite's own bookkeeping on purpose to prove the checks bite.
    #[arg(long, value_enum, value_name = "FAULT")]
    pub inject_fault: Option<Fault>,
}

/// A deliberate bookkeeping fault (`--inject-fault`), for testing the suite itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Fault {
    /// timer-storm forgets one observed expiry, which must surface as a violation.
    DropFire,
}

impl Fault {
    /// The flag's spelling.
    pub fn name(self) -> &'static str {
        match self {
            Fault::DropFire => "drop-fire",
        }
    }
}

/// Parses `1h2m3s`, `1.5s`, `250ms`, `40us`/`40µs`, `7ns`; a bare `0` is zero.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let s = text.trim();
    if s == "0" {
        return Ok(Duration::ZERO);
    }
    if s.is_empty() {
        return Err("empty duration".into());
    }
    let mut total = 0f64;
    let mut rest = s;
    while !rest.is_empty() {
        let num_len = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        if num_len == 0 {
            return Err(format!("expected a number in `{text}`"));
        }
        let value: f64 = rest[..num_len]
            .parse()
            .map_err(|_| format!("bad number in `{text}`"))?;
        rest = &rest[num_len..];
        let unit_len = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let nanos_per = match &rest[..unit_len] {
            "h" => 3.6e12,
            "m" | "min" => 6e10,
            "s" => 1e9,
            "ms" => 1e6,
            "us" | "µs" => 1e3,
            "ns" => 1.0,
            "" => {
                return Err(format!(
                    "missing unit in `{text}` (use h, m, s, ms, us or ns)"
                ))
            }
            u => return Err(format!("unknown unit `{u}` in `{text}`")),
        };
        total += value * nanos_per;
        rest = &rest[unit_len..];
    }
    if !total.is_finite() || total > 1e18 {
        return Err(format!("duration `{text}` is too long"));
    }
    Ok(Duration::from_nanos(total.round() as u64))
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn durations() {
        let ms = Duration::from_millis;
        assert_eq!(parse_duration("10s"), Ok(ms(10_000)));
        assert_eq!(parse_duration("500ms"), Ok(ms(500)));
        assert_eq!(parse_duration("1m30s"), Ok(ms(90_000)));
        assert_eq!(parse_duration("1.5s"), Ok(ms(1_500)));
        assert_eq!(parse_duration("1h"), Ok(ms(3_600_000)));
        assert_eq!(parse_duration("40us"), Ok(Duration::from_micros(40)));
        assert_eq!(parse_duration("40µs"), Ok(Duration::from_micros(40)));
        assert_eq!(parse_duration(" 0 "), Ok(Duration::ZERO));
        for bad in ["", "10", "s", "5 parsecs", "1.2.3s", "-1s", "99999999999h"] {
            assert!(parse_duration(bad).is_err(), "{bad:?} parsed");
        }
    }

    #[test]
    fn clap_definition_is_valid() {
        Args::command().debug_assert();
    }

    #[test]
    fn parses_a_full_command_line() {
        let a = Args::try_parse_from([
            "gort-stress",
            "--scenario",
            "timer-storm",
            "-s",
            "faults",
            "--duration",
            "5s",
            "--procs",
            "4",
            "--seed",
            "42",
            "--json",
            "--report",
            "out",
            "--inject-fault",
            "drop-fire",
            "--repeat",
            "3",
        ])
        .unwrap();
        assert_eq!(a.repeat, 3);
        assert_eq!(a.scenarios, ["timer-storm", "faults"]);
        assert_eq!(a.duration, Duration::from_secs(5));
        assert_eq!((a.procs, a.seed, a.json), (Some(4), Some(42), true));
        assert_eq!(a.report, Some(PathBuf::from("out")));
        assert_eq!(a.inject_fault, Some(Fault::DropFire));
        let d = Args::try_parse_from(["gort-stress"]).unwrap();
        assert_eq!(d.duration, Duration::from_secs(60));
        assert!(d.scenarios.is_empty() && d.inject_fault.is_none());
        assert_eq!(d.repeat, 1);
    }

    #[test]
    fn rejects_unknown_scenario_and_zero_procs() {
        assert!(Args::try_parse_from(["gort-stress", "--scenario", "nope"]).is_err());
        assert!(Args::try_parse_from(["gort-stress", "--procs", "0"]).is_err());
        assert!(Args::try_parse_from(["gort-stress", "--duration", "10"]).is_err());
        assert!(Args::try_parse_from(["gort-stress", "--repeat", "0"]).is_err());
    }
}
