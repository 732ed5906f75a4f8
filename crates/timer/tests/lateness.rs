//! The lateness histogram: every callback the run path runs lands in the bucket of its
//! `now - when`, on a fake clock so the buckets are exact.
#![cfg(not(loom))]

mod common;

use common::{armed, Log};
use gort_timer::*;

/// Guards that each fired timer is counted once, in its log2 bucket, and that stopped timers
/// (which never run) are not counted.
#[test]
fn lateness_histogram_counts_each_fired_timer_in_its_bucket() {
    let ts = Timers::new(0);
    let log = Log::new();
    // Due at 1_000_000 ns; run at `now` = 1_000_000 + 1_000 * micros_late.
    let on_time = armed(&ts, &log, 0, 1_000_000);
    let stopped = armed(&ts, &log, 1, 1_000_000);
    assert!(del(&stopped));
    assert_eq!(ts.check(1_000_000, true).ran, 1);
    let _three_us = armed(&ts, &log, 2, 2_000_000);
    assert_eq!(ts.check(2_003_000, true).ran, 1);
    let _one_s = armed(&ts, &log, 3, 3_000_000);
    let _also_one_s = armed(&ts, &log, 4, 3_000_000);
    assert_eq!(ts.check(1_003_000_000, true).ran, 2);
    drop(on_time);

    let mut want = [0u64; LATENESS_BUCKETS];
    want[0] = 1; // on time
    want[2] = 1; // 3 µs: [2, 4)
    want[LATENESS_BUCKETS - 1] = 2; // 1 s: the open last bucket
    let stats = ts.stats();
    assert_eq!(stats.lateness, want);
    assert_eq!(stats.lateness.iter().sum::<u64>(), stats.fired);
}

#[test]
fn lateness_buckets_are_log2_microseconds() {
    assert_eq!(lateness_bucket(10, 5), 0, "early runs count as on time");
    assert_eq!(lateness_bucket(0, 999), 0);
    assert_eq!(lateness_bucket(0, 1_000), 1);
    assert_eq!(lateness_bucket(0, 1_999), 1);
    assert_eq!(lateness_bucket(0, 2_000), 2);
    assert_eq!(lateness_bucket(0, (1 << 13) * 1_000), 14);
    assert_eq!(lateness_bucket(0, (1 << 14) * 1_000 - 1_000), 14);
    assert_eq!(lateness_bucket(0, (1 << 14) * 1_000), 15);
    assert_eq!(lateness_bucket(0, i64::MAX), 15);
}
