use super::*;

fn timer() -> TimerBook {
    // Armed by a call between t=0 and t=10_000 with d=1_000_000: due in [1_000_000, 1_010_000].
    TimerBook::new(7, 0, 10_000, 1_000_000, 0)
}

#[test]
fn one_shot_that_fires_once_is_clean() {
    let v = Violations::default();
    let mut b = timer();
    assert!(b.expects_value());
    assert_eq!(b.on_value(1_005_000, b.ops(), &v), Attribution::Arming(0));
    assert!(!b.expects_value());
    b.finish(5_000_000, &v);
    assert_eq!(v.count(), 0, "{:?}", v.messages());
}

#[test]
fn lost_fire_is_reported() {
    let v = Violations::default();
    timer().finish(5_000_000, &v);
    assert_eq!(v.count(), 1);
    assert!(v.messages()[0].contains("lost"));
}

#[test]
fn value_after_successful_stop_is_reported() {
    let v = Violations::default();
    let mut b = timer();
    b.on_stop(Some(true), 500_000, &v);
    assert!(!b.expects_value());
    assert_eq!(b.on_value(1_005_000, 0, &v), Attribution::Violation);
    assert!(v.messages()[0].contains("successful"), "{:?}", v.messages());
}

#[test]
fn stop_false_without_any_value_is_reported_at_finish() {
    let v = Violations::default();
    let mut b = timer();
    b.on_stop(Some(false), 500_000, &v);
    assert_eq!(v.count(), 0);
    b.finish(5_000_000, &v);
    assert!(
        v.messages()[0].contains("returned false"),
        "{:?}",
        v.messages()
    );
}

#[test]
fn stop_true_after_the_value_was_received_is_reported() {
    let v = Violations::default();
    let mut b = timer();
    b.on_value(1_002_000, 0, &v);
    b.on_stop(Some(true), 2_000_000, &v);
    assert_eq!(v.count(), 1);
}

#[test]
fn stop_true_on_stopped_timer_is_reported() {
    let v = Violations::default();
    let mut b = timer();
    b.on_stop(Some(true), 100_000, &v);
    b.on_stop(Some(false), 200_000, &v);
    assert_eq!(v.count(), 0);
    b.on_stop(Some(true), 300_000, &v);
    assert_eq!(v.count(), 1);
}

#[test]
fn reset_attributes_values_by_window() {
    let v = Violations::default();
    let mut b = timer();
    b.on_reset(Some(true), 100_000, 110_000, 5_000_000, 0, &v); // arming 1 due in [5_100_000, 5_110_000]
    assert_eq!(b.armings.len(), 2);
    assert_eq!(b.on_value(5_104_000, b.ops(), &v), Attribution::Arming(1));
    b.finish(9_000_000, &v);
    assert_eq!(v.count(), 0, "{:?}", v.messages());
}

#[test]
fn stale_value_of_a_cancelled_arming_is_reported() {
    let v = Violations::default();
    let mut b = timer();
    b.on_reset(Some(true), 100_000, 110_000, 5_000_000, 0, &v);
    assert_eq!(b.on_value(1_004_000, b.ops(), &v), Attribution::Violation);
}

#[test]
fn value_dequeued_before_a_racing_reset_is_legal() {
    let v = Violations::default();
    let mut b = timer();
    let ops_before = b.ops();
    // The receiver took arming 0's value, then the reset ran (returning false) before the
    // receiver got the lock to record it.
    b.on_reset(Some(false), 1_100_000, 1_110_000, 5_000_000, 0, &v);
    assert_eq!(
        b.on_value(1_003_000, ops_before, &v),
        Attribution::Arming(0)
    );
    assert_eq!(b.on_value(6_105_000, b.ops(), &v), Attribution::Arming(1));
    b.finish(9_000_000, &v);
    assert_eq!(v.count(), 0, "{:?}", v.messages());
}

#[test]
fn value_of_an_arming_ended_before_the_receive_started_is_reported() {
    let v = Violations::default();
    let mut b = timer();
    b.on_reset(Some(false), 1_100_000, 1_110_000, 5_000_000, 0, &v);
    // Reset returned false, so the value was received already; receiving it again after the
    // reset returned is both stale and a duplicate.
    assert_eq!(b.on_value(1_003_000, b.ops(), &v), Attribution::Violation);
}

#[test]
fn duplicate_and_unknown_values_are_reported() {
    let v = Violations::default();
    let mut b = timer();
    b.on_value(1_003_000, 0, &v);
    assert_eq!(b.on_value(1_003_000, 0, &v), Attribution::Violation); // not increasing
    assert_eq!(b.on_value(3_000_000, 0, &v), Attribution::Violation); // no arming admits it
    assert_eq!(v.count(), 2);
}

#[test]
fn overlapping_windows_fall_back_to_counting() {
    let v = Violations::default();
    let mut b = timer();
    b.on_reset(Some(true), 100_000, 110_000, 905_000, 0, &v); // due in [1_005_000, 1_015_000]: overlaps arming 0
    assert!(b.expects_value());
    assert_eq!(b.on_value(1_008_000, b.ops(), &v), Attribution::Ambiguous);
    assert!(!b.expects_value(), "one uncancelled arming, one value");
    b.finish(9_000_000, &v);
    assert_eq!(v.count(), 0, "{:?}", v.messages());
    let mut lost = timer();
    lost.on_reset(Some(true), 100_000, 110_000, 905_000, 0, &v);
    lost.finish(9_000_000, &v);
    assert_eq!(v.count(), 1);
}

fn ticker() -> TimerBook {
    // First tick due in [1_000_000, 1_010_000], then every 1_000_000.
    TimerBook::new(3, 0, 10_000, 1_000_000, 1_000_000)
}

#[test]
fn ticker_phase_and_skips_are_legal() {
    let v = Violations::default();
    let mut b = ticker();
    for t in [1_004_000, 2_004_000, 5_004_000, 9_004_000] {
        assert_eq!(b.on_value(t, b.ops(), &v), Attribution::Arming(0), "{t}");
    }
    b.finish(10_000_000, &v);
    assert_eq!(v.count(), 0, "{:?}", v.messages());
}

#[test]
fn misaligned_tick_is_reported() {
    let v = Violations::default();
    let mut b = ticker();
    assert_eq!(b.on_value(2_500_000, 0, &v), Attribution::Violation);
}

#[test]
fn tick_after_ticker_stop_is_reported() {
    let v = Violations::default();
    let mut b = ticker();
    b.on_stop(None, 6_000_000, &v);
    assert_eq!(b.on_value(7_004_000, b.ops(), &v), Attribution::Violation);
    // A tick due before the stop, dequeued before the stop ran, is fine.
    let mut c = ticker();
    let ops = c.ops();
    c.on_stop(None, 6_000_000, &v);
    assert_eq!(c.on_value(5_004_000, ops, &v), Attribution::Arming(0));
    assert_eq!(v.count(), 1);
}

#[test]
fn ticker_reset_switches_phase() {
    let v = Violations::default();
    let mut b = ticker();
    b.on_value(1_005_000, 0, &v);
    b.on_reset(None, 1_500_000, 1_510_000, 300_000, 300_000, &v); // due 1_800_000.., every 300_000
    assert_eq!(b.on_value(2_105_000, b.ops(), &v), Attribution::Arming(1));
    // An old-phase tick after the reset returned: stale.
    assert_eq!(b.on_value(4_004_000, b.ops(), &v), Attribution::Violation);
}

#[test]
fn too_many_ticks_are_reported() {
    let v = Violations::default();
    let mut b = TimerBook::new(1, 0, 0, 1_000_000, 1_000_000);
    // Attribute by hand-crafted values each legal by phase, but more than time allows.
    for t in [1_000_000, 2_000_000, 3_000_000] {
        b.on_value(t, 0, &v);
    }
    b.finish(2_500_000, &v);
    assert_eq!(v.count(), 1, "{:?}", v.messages());
}

#[test]
fn count_book_balances() {
    let v = Violations::default();
    let b = CountBook::armed();
    b.fires.fetch_add(1, Relaxed);
    b.on_reset(false, 1, &v); // fired already, re-armed
    b.on_stop(true, 1, &v); // cancelled the re-arming
    b.on_reset(false, 1, &v); // re-armed from stopped
    assert_eq!(b.outstanding(), 1);
    b.fires.fetch_add(1, Relaxed);
    b.finish(1, &v);
    assert_eq!(v.count(), 0, "{:?}", v.messages());
}

#[test]
fn count_book_catches_lost_and_extra_fires_and_bad_results() {
    let v = Violations::default();
    let lost = CountBook::armed();
    lost.finish(1, &v);
    assert_eq!(v.count(), 1);
    let extra = CountBook::armed();
    extra.on_stop(true, 2, &v);
    extra.fires.fetch_add(1, Relaxed);
    extra.finish(2, &v);
    assert_eq!(v.count(), 2);
    let bad = CountBook::armed();
    bad.on_stop(false, 3, &v);
    bad.on_stop(true, 3, &v);
    bad.on_reset(true, 3, &v);
    assert_eq!(v.count(), 4);
}

#[test]
fn violations_keep_a_bounded_list() {
    let v = Violations::default();
    for i in 0..100 {
        v.report(format!("v{i}"));
    }
    let m = v.messages();
    assert_eq!(v.count(), 100);
    assert_eq!(m.len(), KEEP + 1);
    assert_eq!(m.last().unwrap(), "... and 75 more");
}
