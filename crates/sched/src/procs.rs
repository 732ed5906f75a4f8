//! How many Ps by default: `GORT_MAXPROCS` if set (Go's `GOMAXPROCS`), else the CPUs this
//! process may use, capped by a cgroup CPU quota the way Go 1.25 does (`ceil(quota / period)`,
//! at least 1; v2 `cpu.max`, v1 `cfs_quota_us`).

use crate::shared::MAX_PROCS;
use std::ffi::OsStr;
use std::{fs, io};

/// The environment variable that sets the number of Ps of a runtime built without
/// `Builder::procs` (Go's `GOMAXPROCS`).
pub(crate) const MAXPROCS_ENV: &str = "GORT_MAXPROCS";

/// The number of Ps of a runtime built without `Builder::procs`: `GORT_MAXPROCS` when it is
/// set and not empty, else [`default_procs`]. A value that is not an integer in
/// `1..=MAX_PROCS` is an error (Go ignores such a value; a typo that silently ran a server
/// on every CPU would be found late).
pub(crate) fn procs_from_env_or_default() -> io::Result<usize> {
    match std::env::var_os(MAXPROCS_ENV) {
        Some(value) => Ok(parse_maxprocs(&value)?.unwrap_or_else(default_procs)),
        None => Ok(default_procs()),
    }
}

/// Parses a `GORT_MAXPROCS` value: `None` for an empty one (as if unset), the number for an
/// integer in `1..=MAX_PROCS` (surrounding whitespace allowed), an `InvalidInput` error
/// naming the variable and the valid range otherwise.
pub(crate) fn parse_maxprocs(value: &OsStr) -> io::Result<Option<usize>> {
    let text = value.to_str().map(str::trim);
    if text == Some("") {
        return Ok(None);
    }
    match text.and_then(|t| t.parse::<usize>().ok()) {
        Some(n) if (1..=MAX_PROCS).contains(&n) => Ok(Some(n)),
        _ => Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "gort: {MAXPROCS_ENV}={value:?}: the number of Ps must be an integer in \
                 1..={MAX_PROCS} (MAX_PROCS), or the variable unset or empty for the default"
            ),
        )),
    }
}

/// The default number of Ps.
pub fn default_procs() -> usize {
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    match cgroup_limit() {
        Some(limit) => cpus.min(limit).max(1),
        None => cpus,
    }
}

/// The CPU limit of this process's cgroup, rounded up, if it has one.
fn cgroup_limit() -> Option<usize> {
    let own = fs::read_to_string("/proc/self/cgroup").ok()?;
    // cgroup v2: one line "0::/path".
    if let Some(path) = own.lines().find_map(|l| l.strip_prefix("0::")) {
        let text = fs::read_to_string(format!("/sys/fs/cgroup{path}/cpu.max"))
            .or_else(|_| fs::read_to_string("/sys/fs/cgroup/cpu.max"))
            .ok()?;
        return parse_cpu_max(&text);
    }
    // cgroup v1: the cpu controller's quota and period.
    let path = own.lines().find_map(|l| {
        let mut parts = l.splitn(3, ':');
        let (_, ctrls, path) = (parts.next()?, parts.next()?, parts.next()?);
        ctrls.split(',').any(|c| c == "cpu").then_some(path)
    })?;
    for base in [
        format!("/sys/fs/cgroup/cpu{path}"),
        "/sys/fs/cgroup/cpu".to_string(),
    ] {
        let quota = fs::read_to_string(format!("{base}/cpu.cfs_quota_us"));
        let period = fs::read_to_string(format!("{base}/cpu.cfs_period_us"));
        if let (Ok(q), Ok(p)) = (quota, period) {
            return quota_to_cpus(q.trim().parse().ok()?, p.trim().parse().ok()?);
        }
    }
    None
}

/// Parses cgroup v2 `cpu.max` ("max 100000" or "150000 100000").
pub(crate) fn parse_cpu_max(text: &str) -> Option<usize> {
    let mut it = text.split_whitespace();
    let quota = it.next()?;
    let period: i64 = it.next().unwrap_or("100000").parse().ok()?;
    if quota == "max" {
        return None;
    }
    quota_to_cpus(quota.parse().ok()?, period)
}

fn quota_to_cpus(quota: i64, period: i64) -> Option<usize> {
    if quota <= 0 || period <= 0 {
        return None;
    }
    Some(((quota + period - 1) / period).max(1) as usize)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_max_parsing() {
        assert_eq!(parse_cpu_max("max 100000\n"), None);
        assert_eq!(parse_cpu_max("150000 100000\n"), Some(2));
        assert_eq!(parse_cpu_max("100000 100000"), Some(1));
        assert_eq!(parse_cpu_max("50000 100000"), Some(1));
        assert_eq!(parse_cpu_max("-1 100000"), None);
        assert_eq!(parse_cpu_max("garbage"), None);
    }

    #[test]
    fn maxprocs_values() {
        let parse = |s: &str| parse_maxprocs(OsStr::new(s)).map_err(|e| e.kind());
        assert_eq!(parse("4"), Ok(Some(4)));
        assert_eq!(parse(" 2\n"), Ok(Some(2)));
        assert_eq!(parse(&MAX_PROCS.to_string()), Ok(Some(MAX_PROCS)));
        assert_eq!(parse(""), Ok(None));
        assert_eq!(parse("  "), Ok(None));
        for bad in [
            "0",
            "-1",
            "four",
            "2.5",
            "4 cpus",
            "99999999999999999999999",
        ] {
            assert_eq!(parse(bad), Err(io::ErrorKind::InvalidInput), "{bad:?}");
        }
        assert_eq!(
            parse(&(MAX_PROCS + 1).to_string()),
            Err(io::ErrorKind::InvalidInput)
        );
        let msg = parse_maxprocs(OsStr::new("four")).unwrap_err().to_string();
        assert!(msg.contains("GORT_MAXPROCS=\"four\""), "{msg}");
    }

    #[test]
    fn default_is_positive() {
        assert!(default_procs() >= 1);
    }
}
