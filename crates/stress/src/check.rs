//! Invariant bookkeeping: what each timer was asked to do, what it did, and the violations.
//!
//! Times here are nanoseconds since the scenario's epoch (`u64`), so the bookkeeping does not
//! depend on the runtime's clock type. The scenarios convert at the edges.
//!
//! # Arming windows
//! `Timer::reset(d)` computes its deadline inside the call, so the book only knows it lies in
//! the *window* `[before + d, after + d]`, where `before`/`after` are clock readings around
//! the call (made under the book's lock, so they are microseconds apart). A value received
//! from the channel is the instant the timer was due, which names the arming it came from:
//! the arming whose window contains it (for a ticker: contains it after subtracting whole
//! periods). When two windows of one timer overlap, attribution is ambiguous; the book then
//! falls back to counting (fires == armings - successful stops) for that timer.
//!
//! # Ordering of operations and receives
//! Every stop/reset runs under the book's lock and bumps `ops` when it returns. A receiver
//! reads `ops` (as `ops_before`) under the lock just before it starts to receive. If the op
//! that ended an arming completed at or before `ops_before`, the receive began after that
//! stop/reset returned, and Go 1.23 promises it can no longer yield a value of that arming.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Mutex;

/// Messages kept per scenario; later violations are only counted.
const KEEP: usize = 25;
/// Slack for phase arithmetic in nanoseconds (clock conversions may round to 1 µs).
const SLACK_NS: u64 = 1_000;

/// The violations one scenario found.
#[derive(Debug, Default)]
pub struct Violations {
    count: AtomicU64,
    messages: Mutex<Vec<String>>,
}

impl Violations {
    /// Records a violation.
    pub fn report(&self, message: impl Into<String>) {
        let n = self.count.fetch_add(1, Relaxed);
        if (n as usize) < KEEP {
            self.messages
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .push(message.into());
        }
    }

    /// Records a violation when `ok` is false.
    pub fn check(&self, ok: bool, message: impl FnOnce() -> String) {
        if !ok {
            self.report(message());
        }
    }

    /// Violations found so far.
    pub fn count(&self) -> u64 {
        self.count.load(Relaxed)
    }

    /// The first messages (at most 25), plus a line for any that were only counted.
    pub fn messages(&self) -> Vec<String> {
        let mut m = self
            .messages
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        let n = self.count();
        if n as usize > m.len() {
            m.push(format!("... and {} more", n as usize - m.len()));
        }
        m
    }
}

/// One arming of a timer: from `new`/`reset` until the stop/reset that ends it.
#[derive(Debug, Clone)]
struct Arming {
    /// Earliest and latest possible first due instant.
    lo: u64,
    hi: u64,
    /// 0 for a one-shot timer, else the ticker period.
    period: u64,
    /// `ops` value of the stop/reset that ended this arming, and when that call returned.
    ended: Option<(u64, u64)>,
    /// The ending stop/reset returned true (one-shot: the arming was cancelled unfired).
    ended_true: bool,
    /// Values received that belong to this arming.
    fires: u32,
}

impl Arming {
    /// Whether `v` can be a due instant of this arming (ignoring receive ordering).
    fn admits(&self, v: u64) -> bool {
        if v + SLACK_NS < self.lo {
            return false;
        }
        if self.period == 0 {
            return v <= self.hi + SLACK_NS;
        }
        // Due instants are `first + k * period`, first in [lo, hi]; a legitimate tick was due
        // no later than the ending call returned.
        if self.ended.is_some_and(|(_, at)| v > at + SLACK_NS) {
            return false;
        }
        let k = v.saturating_sub(self.lo) / self.period;
        let base = self.lo + k * self.period;
        v <= base + (self.hi - self.lo) + 2 * SLACK_NS || v + SLACK_NS >= base + self.period
    }

    fn overlaps(&self, lo: u64, hi: u64) -> bool {
        lo <= self.hi + SLACK_NS && self.lo <= hi + SLACK_NS
    }
}

/// What a received value turned out to be (for the caller's lateness statistics).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Attribution {
    /// The value belongs to arming `n` (0-based) and is legal.
    Arming(usize),
    /// Several armings admit the value; it was counted but not attributed.
    Ambiguous,
    /// A violation was reported.
    Violation,
}

/// The book of one channel timer or ticker (keep it under a mutex shared by its users).
#[derive(Debug)]
pub struct TimerBook {
    id: u64,
    armings: Vec<Arming>,
    ops: u64,
    last_value: Option<u64>,
    /// Windows of two armings overlapped: only the totals are checked.
    ambiguous: bool,
    values: u64,
}

impl TimerBook {
    /// A timer (`period == 0`) or ticker armed by a call between `before` and `after` with
    /// duration `d` (all in nanoseconds).
    pub fn new(id: u64, before: u64, after: u64, d: u64, period: u64) -> Self {
        let first = Arming {
            lo: before.saturating_add(d),
            hi: after.saturating_add(d),
            period,
            ended: None,
            ended_true: false,
            fires: 0,
        };
        TimerBook {
            id,
            armings: vec![first],
            ops: 0,
            last_value: None,
            ambiguous: false,
            values: 0,
        }
    }

    /// `ops` to pass to [`TimerBook::on_value`] for a receive that starts now.
    pub fn ops(&self) -> u64 {
        self.ops
    }

    fn current(&mut self) -> Option<&mut Arming> {
        self.armings.last_mut().filter(|a| a.ended.is_none())
    }

    /// Whether a value is still owed to the receiver (one-shot timers only): the current
    /// arming was not ended by a stop/reset and nothing of it was received. When attribution
    /// is ambiguous: fewer values arrived than there were uncancelled armings.
    pub fn expects_value(&self) -> bool {
        let Some(last) = self.armings.last() else {
            return false;
        };
        if last.period != 0 {
            return false;
        }
        if self.ambiguous {
            let cancelled = self.armings.iter().filter(|a| a.ended_true).count() as u64;
            return self.values < self.armings.len() as u64 - cancelled;
        }
        last.ended.is_none() && last.fires == 0
    }

    /// The latest instant the current arming may be due (to bound the final wait).
    pub fn current_due_hi(&self) -> u64 {
        self.armings.last().map_or(0, |a| a.hi)
    }

    fn end_current(&mut self, result: Option<bool>, after: u64, v: &Violations, what: &str) {
        self.ops += 1;
        let (id, ops) = (self.id, self.ops);
        match self.current() {
            None => v.check(result != Some(true), || {
                format!("timer {id}: {what} returned true on a timer that was already stopped")
            }),
            Some(a) => {
                if result == Some(true) && a.period == 0 && a.fires > 0 {
                    v.report(format!(
                        "timer {id}: {what} returned true although the arming's value was already received"
                    ));
                }
                a.ended = Some((ops, after));
                a.ended_true = result == Some(true);
            }
        }
    }

    /// Records a `stop()` that ran between `before` and `after` and returned `result`
    /// (`None` for a ticker, whose stop returns nothing).
    pub fn on_stop(&mut self, result: Option<bool>, after: u64, v: &Violations) {
        self.end_current(result, after, v, "stop");
    }

    /// Records a `reset(d)` (a ticker's reset passes the new period as `period`).
    pub fn on_reset(
        &mut self,
        result: Option<bool>,
        before: u64,
        after: u64,
        d: u64,
        period: u64,
        v: &Violations,
    ) {
        self.end_current(result, after, v, "reset");
        let (lo, hi) = (before.saturating_add(d), after.saturating_add(d));
        if period == 0 && self.armings.iter().any(|a| a.overlaps(lo, hi)) {
            self.ambiguous = true;
        }
        if period > 0 {
            // Tick trains of different armings interleave in time; rely on the phase check and
            // the "ended before the receive began" rule, which need no unique windows.
            self.ambiguous |= self.armings.iter().any(|a| a.overlaps(lo, hi));
        }
        self.armings.push(Arming {
            lo,
            hi,
            period,
            ended: None,
            ended_true: false,
            fires: 0,
        });
    }

    /// Records a value `value` received by a receive that started when `ops()` was
    /// `ops_before`. Reports and returns a violation for stale, unknown, repeated or
    /// out-of-order values.
    pub fn on_value(&mut self, value: u64, ops_before: u64, v: &Violations) -> Attribution {
        let id = self.id;
        self.values += 1;
        if let Some(last) = self.last_value {
            if value <= last {
                v.report(format!(
                    "timer {id}: value {value} ns not after the previous value {last} ns"
                ));
                return Attribution::Violation;
            }
        }
        self.last_value = Some(value);
        let candidates: Vec<usize> = (0..self.armings.len())
            .filter(|&i| self.armings[i].admits(value))
            .collect();
        if candidates.is_empty() {
            v.report(format!(
                "timer {id}: value due at {value} ns belongs to no arming (stale or corrupt)"
            ));
            return Attribution::Violation;
        }
        let legal = self.legal(&candidates, ops_before);
        if legal.is_empty() {
            self.report_after_end(*candidates.last().expect("non-empty"), v);
            return Attribution::Violation;
        }
        if legal.len() > 1 || self.ambiguous {
            self.ambiguous = true;
            return Attribution::Ambiguous;
        }
        self.book_fire(legal[0], v)
    }

    /// The `candidates` that may still deliver to a receive that started when `ops()` was
    /// `ops_before`: not ended by a call that returned before this receive started, and
    /// (one-shot) not cancelled by a stop/reset that returned true.
    fn legal(&self, candidates: &[usize], ops_before: u64) -> Vec<usize> {
        candidates
            .iter()
            .copied()
            .filter(|&i| {
                let a = &self.armings[i];
                let ended_before = a.ended.is_some_and(|(op, _)| op <= ops_before);
                let cancelled = a.period == 0 && a.ended_true;
                !(ended_before || cancelled)
            })
            .collect()
    }

    /// Reports a value whose only possible armings had ended before the receive began,
    /// naming the latest of them, `i`.
    fn report_after_end(&self, i: usize, v: &Violations) {
        let a = &self.armings[i];
        v.report(format!(
            "timer {}: received a value of arming {i} after its {} returned{}",
            self.id,
            if a.ended_true {
                "successful stop/reset"
            } else {
                "stop/reset"
            },
            if a.ended_true { " true" } else { "" }
        ));
    }

    /// Counts a value against arming `i`, its one legal arming: a one-shot arming delivers
    /// at most one value.
    fn book_fire(&mut self, i: usize, v: &Violations) -> Attribution {
        let id = self.id;
        let a = &mut self.armings[i];
        a.fires += 1;
        if a.period == 0 && a.fires > 1 {
            v.report(format!(
                "timer {id}: arming {i} delivered {} values",
                a.fires
            ));
            return Attribution::Violation;
        }
        Attribution::Arming(i)
    }

    /// Final checks once nothing can arrive any more; `now` is the time of the check.
    /// One-shot: every arming fired exactly once unless a stop/reset returned true.
    /// Ticker: no arming delivered more ticks than its lifetime allows.
    pub fn finish(&self, now: u64, v: &Violations) {
        let id = self.id;
        let one_shot = self.armings.iter().all(|a| a.period == 0);
        if one_shot && self.ambiguous {
            let cancelled = self.armings.iter().filter(|a| a.ended_true).count() as u64;
            let expected = self.armings.len() as u64 - cancelled;
            v.check(self.values == expected, || {
                format!(
                    "timer {id}: {} values for {expected} uncancelled armings",
                    self.values
                )
            });
            return;
        }
        for (i, a) in self.armings.iter().enumerate() {
            if a.period == 0 {
                let want = u32::from(!a.ended_true);
                v.check(a.fires == want, || match (a.fires, a.ended) {
                    (0, Some(_)) => format!(
                        "timer {id}: arming {i} never fired but its stop/reset returned false"
                    ),
                    (0, None) => format!("timer {id}: arming {i} never fired (lost)"),
                    (n, _) => format!("timer {id}: arming {i} fired {n} times, expected {want}"),
                });
            } else if !self.ambiguous {
                let end = a.ended.map_or(now, |(_, at)| at.min(now));
                let max = end.saturating_sub(a.lo) / a.period + 1;
                v.check(u64::from(a.fires) <= max, || {
                    format!(
                        "ticker {id}: arming {i} delivered {} ticks, at most {max} were due",
                        a.fires
                    )
                });
            }
        }
    }
}

/// Counting book of a callback timer (`after_func`), whose firings carry no value.
///
/// The invariant is `fires == armings - successful stops/resets`, plus: a stop or reset of a
/// timer whose last call was a stop must return false (nothing is armed).
#[derive(Debug, Default)]
pub struct CountBook {
    /// Callbacks run (updated by the callback).
    pub fires: AtomicU64,
    armings: AtomicU64,
    cancelled: AtomicU64,
    armed: std::sync::atomic::AtomicBool,
}

impl CountBook {
    /// A book for a timer armed once at creation.
    pub fn armed() -> Self {
        let b = CountBook::default();
        b.armings.store(1, Relaxed);
        b.armed.store(true, Relaxed);
        b
    }

    /// Records `stop()`'s result (calls on one timer must not overlap).
    pub fn on_stop(&self, stopped: bool, id: u64, v: &Violations) {
        let was_armed = self.armed.swap(false, Relaxed);
        v.check(was_armed || !stopped, || {
            format!("after_func {id}: stop returned true on a stopped timer")
        });
        if stopped {
            self.cancelled.fetch_add(1, Relaxed);
        }
    }

    /// Records `reset()`'s result.
    pub fn on_reset(&self, active: bool, id: u64, v: &Violations) {
        let was_armed = self.armed.swap(true, Relaxed);
        v.check(was_armed || !active, || {
            format!("after_func {id}: reset returned true on a stopped timer")
        });
        if active {
            self.cancelled.fetch_add(1, Relaxed);
        }
        self.armings.fetch_add(1, Relaxed);
    }

    /// Callbacks still owed.
    pub fn outstanding(&self) -> i64 {
        self.expected() as i64 - self.fires.load(Relaxed) as i64
    }

    fn expected(&self) -> u64 {
        self.armings.load(Relaxed) - self.cancelled.load(Relaxed)
    }

    /// Final check once every uncancelled arming is due and the callbacks had time to run.
    pub fn finish(&self, id: u64, v: &Violations) {
        let (fires, want) = (self.fires.load(Relaxed), self.expected());
        v.check(fires == want, || {
            format!(
                "after_func {id}: {fires} callbacks for {} armings with {} successful stop/reset (expected {want})",
                self.armings.load(Relaxed),
                self.cancelled.load(Relaxed)
            )
        });
    }
}

#[cfg(test)]
#[path = "check_tests.rs"]
mod tests;
