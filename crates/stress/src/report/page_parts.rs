//! Parts of the HTML report that are not charts: the run's header (machine and build), the
//! explanation of the summary table's columns, and each scenario's runtime metrics (steals,
//! poller wake-ups by cause, each P's busy time, the runtime's own timer lateness histogram).

use super::host::HostInfo;
use super::html::esc;
use super::{fmt_count, fmt_us};
use crate::scenarios::{BUSY_KEY, LATENESS_KEY};
use std::collections::BTreeMap;
use std::fmt::Write as _;

/// What the summary table's columns mean.
pub const COLUMNS: &str = "<dl>\
<dt>ops</dt><dd>operations the scenario performed (timer calls, messages, spawns ...).</dd>\
<dt>started</dt><dd>timers, tickers, sleeps and callbacks armed (first arming only).</dd>\
<dt>fired</dt><dd>expiries observed: values received, callbacks run, sleeps woken.</dd>\
<dt>stopped</dt><dd>stop calls.</dd>\
<dt>reset</dt><dd>reset calls (re-arms).</dd>\
<dt>p50 / p99 / max</dt><dd>lateness of the observed expiries (observed minus due).</dd>\
<dt>bound</dt><dd>the lateness bounds the scenario is held to (p99 / max); a debug build \
multiplies them (see the header).</dd>\
<dt>peak RSS</dt><dd>the process's peak resident memory while the scenario ran.</dd>\
<dt>CPU</dt><dd>user plus system CPU time the process used during the scenario.</dd>\
<dt>violations</dt><dd>invariants broken (each is listed in the scenario's section).</dd>\
</dl>\n";

/// The header line with the machine and build.
pub fn host_header(host: Option<&HostInfo>) -> String {
    let Some(h) = host else {
        return "<p>machine and build: not recorded</p>\n".into();
    };
    let mut s = format!(
        "<p>commit <b>{}</b>, <b>{}</b> build, {}; host <b>{}</b>, {} cores; CPU stolen by \
         the hypervisor during the run: {:.0} ms ({:.1} % of the machine)</p>\n",
        esc(&h.commit),
        esc(&h.profile),
        esc(&h.rustc),
        esc(&h.host),
        h.cores,
        h.steal_ms,
        h.steal_share() * 100.0,
    );
    if h.bound_scale > 1 {
        let _ = writeln!(
            s,
            "<p class=\"bad\">Debug build: every lateness bound is scaled x{}; figures are \
             not comparable with a release build's.</p>",
            h.bound_scale
        );
    }
    s
}

/// The runtime counters of one scenario's runtime at its end (from `gort::Metrics`).
pub fn runtime_metrics(m: &BTreeMap<String, u64>) -> String {
    let get = |k: &str| m.get(k).copied();
    let Some(stolen) = get("tasks_stolen") else {
        return String::new();
    };
    let mut h = format!(
        "<p>runtime: tasks stolen {}; poller wake-ups {} (deadline reached {}, I/O {}, \
         break {})</p>\n",
        fmt_count(stolen),
        fmt_count(get("poller_wakeups").unwrap_or(0)),
        fmt_count(get("poller_wakeups_timer").unwrap_or(0)),
        fmt_count(get("poller_wakeups_io").unwrap_or(0)),
        fmt_count(get("poller_wakeups_break").unwrap_or(0)),
    );
    let busy: Vec<String> = (0..)
        .map_while(|i| get(&format!("{BUSY_KEY}{i:02}")))
        .map(|ms| format!("{ms} ms"))
        .collect();
    if !busy.is_empty() {
        let _ = writeln!(
            h,
            "<p>time each P was held by a thread (busy, P 0 first): {}</p>",
            busy.join(", ")
        );
    }
    let buckets: Vec<u64> = (0..16)
        .map_while(|i| get(&format!("{LATENESS_KEY}{i:02}")))
        .collect();
    if buckets.iter().any(|&n| n > 0) {
        h.push_str(
            "<div class=\"wide\"><table><caption>runtime timer lateness, deadline to callback \
             (a column counts runs from its lateness up to twice it)</caption><tr><th></th>",
        );
        for i in 0..buckets.len() {
            let _ = write!(h, "<th>{}</th>", bucket_label(i, buckets.len()));
        }
        h.push_str("</tr><tr><th>timers run</th>");
        for n in &buckets {
            let _ = write!(h, "<td>{}</td>", fmt_count(*n));
        }
        h.push_str("</tr></table></div>\n");
    }
    h
}

/// `< 1µs`, `1µs`, `2µs`, ... `≥ 16.38ms`: the lower end of bucket `i` of `n` log2 buckets
/// (short, so that the sixteen columns fit a narrow window).
fn bucket_label(i: usize, n: usize) -> String {
    match i {
        0 => "&lt; 1µs".into(),
        _ if i == n - 1 => format!("≥ {}", fmt_us(1 << (i - 1))),
        _ => fmt_us(1 << (i - 1)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn header_names_commit_profile_rustc_host_cores_and_steal() {
        let mut h = HostInfo::gather(Duration::from_millis(30), Duration::from_secs(1));
        h.commit = "abc1234".into();
        h.host = "box".into();
        h.rustc = "rustc 1.80.0".into();
        h.cores = 2;
        h.bound_scale = 4;
        h.profile = "debug".into();
        let s = host_header(Some(&h));
        for want in [
            "abc1234",
            "debug",
            "rustc 1.80.0",
            "box",
            "2 cores",
            "30 ms",
            "1.5 %",
        ] {
            assert!(s.contains(want), "{want} missing from {s}");
        }
        assert!(s.contains("scaled x4"));
        h.bound_scale = 1;
        assert!(!host_header(Some(&h)).contains("scaled"));
        assert!(host_header(None).contains("not recorded"));
    }

    #[test]
    fn metrics_show_steals_wakeups_busy_time_and_the_lateness_buckets() {
        let mut m: BTreeMap<String, u64> = [
            ("tasks_stolen", 7),
            ("poller_wakeups", 9),
            ("poller_wakeups_timer", 5),
            ("poller_wakeups_io", 3),
            ("poller_wakeups_break", 1),
            ("busy_ms_p00", 812),
            ("busy_ms_p01", 35),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect();
        for i in 0..16 {
            m.insert(format!("{LATENESS_KEY}{i:02}"), i as u64 * 10);
        }
        let s = runtime_metrics(&m);
        assert!(s.contains("tasks stolen 7") && s.contains("wake-ups 9"));
        assert!(s.contains("deadline reached 5, I/O 3, break 1"));
        assert!(s.contains("(busy, P 0 first): 812 ms, 35 ms</p>"));
        assert!(s.contains("&lt; 1µs") && s.contains("<th>2µs</th>") && s.contains("≥ 16.38ms"));
        assert!(s.contains("<td>150</td>"));
        assert_eq!(runtime_metrics(&BTreeMap::new()), "");
    }
}
