//! How many Ps by default: the CPUs this process may use, capped by a cgroup CPU quota the way
//! Go 1.25 does (`ceil(quota / period)`, at least 1; v2 `cpu.max`, v1 `cfs_quota_us`).

use std::fs;

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
    fn default_is_positive() {
        assert!(default_procs() >= 1);
    }
}
