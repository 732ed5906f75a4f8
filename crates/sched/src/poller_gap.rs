//! The poller's coalescing gap (poller.rs, "Coalescing"): when the poller M sleeps to a
//! deadline, and how far past it a dense stream of long timers lets it sleep.

use gort_timer::Nanos;

/// The shortest interval between two timer wake-ups of the poller (ns).
pub(super) const MIN_GAP: i64 = 100_000;
/// The longest the gap grows to under a dense stream of deadlines (ns).
pub(super) const MAX_GAP: i64 = 1_000_000;
/// A deadline this long after the previous wake-up is sparse: wake early and spin.
pub(super) const SPARSE: i64 = 500_000;

/// The coalescing state: only the poller M touches it.
#[derive(Debug)]
pub(super) struct Gap {
    /// The deadline the last timer wake-up slept to.
    last_target: Nanos,
    /// The current minimum distance between two timer wake-ups' deadlines.
    gap: i64,
    /// The runtime's `fired` count when the last timer wake-up returned; `None` once that
    /// wake-up was judged.
    mark: Option<u64>,
}

impl Gap {
    pub(super) const fn new() -> Gap {
        Gap {
            last_target: 0,
            gap: MIN_GAP,
            mark: None,
        }
    }

    /// Judges the last timer wake-up by how many timers have run since it (`fired` is the
    /// runtime's running count): a batch of two or more means a dense stream.
    pub(super) fn judge(&mut self, fired: u64) {
        if let Some(mark) = self.mark.take() {
            self.gap = if fired.wrapping_sub(mark) >= 2 {
                (self.gap * 2).min(MAX_GAP)
            } else {
                (self.gap / 2).max(MIN_GAP)
            };
        }
    }

    /// What to sleep to for a deadline `until` (> 0) whose timer tolerates running as late
    /// as `latest` (>= `until`; its slack): never before `until`; up to `MIN_GAP` after the
    /// last target whatever the slack; beyond that, up to the adaptive gap but not past
    /// `latest`. And whether the deadline is sparse (wake early and spin).
    pub(super) fn target(&self, until: Nanos, latest: Nanos) -> (Nanos, bool) {
        let sparse = self.gap == MIN_GAP && until.saturating_sub(self.last_target) >= SPARSE;
        let floor = self.last_target.saturating_add(MIN_GAP);
        let coalesced = self
            .last_target
            .saturating_add(self.gap)
            .min(latest.max(floor));
        (until.max(coalesced), sparse)
    }

    /// What a break can do to a poll for `target` (from [`Gap::target`]): any deadline
    /// sooner than the returned instant would move the poll sooner. That is `target` itself,
    /// unless the minimum gap alone set it: no deadline moves a poll before `MIN_GAP` after
    /// the last target, so none would gain by a break, and the last target (already past) is
    /// returned.
    pub(super) fn breakable(&self, target: Nanos) -> Nanos {
        if target > self.last_target.saturating_add(MIN_GAP) {
            target
        } else {
            self.last_target
        }
    }

    /// A poll for `target` returned at or after it.
    pub(super) fn woke(&mut self, target: Nanos, fired: u64) {
        self.last_target = target;
        self.mark = Some(fired);
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    const MS: i64 = 1_000_000;

    /// Drives `g` through a stream of `deadlines`, each with `slack`: a wake-up runs every
    /// deadline up to its target. Returns the targets.
    fn run(g: &mut Gap, deadlines: impl Iterator<Item = Nanos>, slack: Nanos) -> Vec<Nanos> {
        let mut fired = 0;
        let mut targets: Vec<Nanos> = Vec::new();
        for d in deadlines {
            if targets.last().is_some_and(|&t| d <= t) {
                fired += 1; // ran in the last wake-up's batch
                continue;
            }
            g.judge(fired);
            let (t, _) = g.target(d, d + slack);
            assert!(t >= d && t <= (d + slack).max(g.last_target + MIN_GAP));
            g.woke(t, fired);
            fired += 1;
            targets.push(t);
        }
        targets
    }

    #[test]
    fn coalescing_never_defers_a_timer_past_its_slack_beyond_the_minimum_gap() {
        let mut g = Gap::new();
        g.woke(10 * MS, 0);
        g.judge(100);
        g.woke(10 * MS, 100);
        g.judge(200);
        assert_eq!(g.gap, 4 * MIN_GAP);
        // A 50 µs timer (slack ~3 µs) right after the last wake-up: only MIN_GAP applies.
        let d = 10 * MS + 10_000;
        assert_eq!(g.target(d, d + 3_000).0, 10 * MS + MIN_GAP);
        // A long timer (slack 1 ms): the whole gap.
        assert_eq!(g.target(d, d + MS).0, 10 * MS + 4 * MIN_GAP);
        // Slack in between: up to the slack.
        assert_eq!(g.target(d, d + 200_000).0, d + 200_000);
        // Never before the deadline.
        assert_eq!(g.target(20 * MS, 20 * MS).0, 20 * MS);
    }

    #[test]
    fn lone_ticker_keeps_the_minimum_gap_and_never_drifts() {
        let mut g = Gap::new();
        // A 150 µs ticker: one timer per wake-up, every target exactly its deadline.
        let ticks: Vec<Nanos> = (1..1000).map(|k| 10 * MS + k * 150_000).collect();
        assert_eq!(run(&mut g, ticks.iter().copied(), 9_000), ticks);
        assert_eq!(g.gap, MIN_GAP);
    }

    #[test]
    fn dense_stream_grows_the_gap_to_the_maximum_then_sparse_shrinks_it() {
        let mut g = Gap::new();
        // Long timers due 10 µs apart: each wake-up runs several.
        let targets = run(&mut g, (1..10_000).map(|k| MS + k * 10_000), MS);
        assert_eq!(g.gap, MAX_GAP);
        for w in targets.windows(2).skip(10) {
            assert!(w[1] - w[0] >= MAX_GAP, "wake-ups {w:?} closer than the gap");
        }
        // The stream thins out to one timer per wake-up: back to full precision.
        let t0 = *targets.last().unwrap() + 10 * MS;
        run(&mut g, (0..10).map(|k| t0 + k * 2 * MS), MS);
        assert_eq!(g.gap, MIN_GAP);
        // Short timers due 10 µs apart (slack < 1 µs) are batched by MIN_GAP only.
        let t1 = t0 + 100 * MS;
        let targets = run(&mut g, (1..10_000).map(|k| t1 + k * 10_000), 600);
        for w in targets.windows(2) {
            assert!(
                w[1] - w[0] <= MIN_GAP + 10_000,
                "short timers deferred: {w:?}"
            );
        }
    }

    #[test]
    fn a_poll_set_by_the_minimum_gap_alone_publishes_a_past_instant() {
        let mut g = Gap::new();
        g.woke(5 * MS, 0);
        // A deadline just past the last target: the minimum gap sets the target, and no new
        // deadline could move it sooner.
        let t = g.target(5 * MS + 1, 5 * MS + 1).0;
        assert_eq!(t, 5 * MS + MIN_GAP);
        assert_eq!(g.breakable(t), 5 * MS);
        // A deadline past the floor sets the target: anything sooner would move it.
        let t = g.target(7 * MS, 7 * MS).0;
        assert_eq!(g.breakable(t), 7 * MS);
        // Coalesced past the floor by a grown gap and a long slack: the target too.
        g.judge(2);
        assert_eq!(g.gap, 2 * MIN_GAP);
        let t = g.target(5 * MS + 1, 9 * MS).0;
        assert_eq!(t, 5 * MS + 2 * MIN_GAP);
        assert_eq!(g.breakable(t), t);
    }

    #[test]
    fn a_target_is_never_before_its_deadline_and_sparse_needs_the_minimum_gap() {
        let mut g = Gap::new();
        let (t, sparse) = g.target(5 * MS, 6 * MS);
        assert_eq!(t, 5 * MS);
        assert!(sparse, "a deadline long after the last wake-up is sparse");
        g.woke(5 * MS, 0);
        assert_eq!(g.target(5 * MS + 1, 5 * MS + 1).0, 5 * MS + MIN_GAP);
        g.judge(2);
        assert_eq!(g.gap, 2 * MIN_GAP);
        assert!(
            !g.target(50 * MS, 50 * MS).1,
            "no early spin while coalescing a dense stream"
        );
    }
}
