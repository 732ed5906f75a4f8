//! The bucket's state and the operations on it (Go's `reserveN`, `advance`, `CancelAt`),
//! always under the limiter's lock.
//!
//! Beyond Go: the reservations still to come are kept in order (`pending`), so that when the
//! last one is canceled, the canceled ones just before it give back the tokens Go's rule made
//! them keep for it (see [`Bucket::cancel`]).

use std::collections::VecDeque;
use std::time::Duration;

use super::Limit;
use crate::Instant;

/// What Go's `Limiter` holds under its mutex, and the reservations still to come.
#[derive(Debug)]
pub(super) struct Bucket {
    pub(super) limit: Limit,
    pub(super) burst: u32,
    /// The tokens at `last` (negative while reservations wait for tokens to come).
    pub(super) tokens: f64,
    /// The last instant `tokens` was counted at.
    pub(super) last: Instant,
    /// The latest instant any reservation acts at (past or future): how a cancel knows how
    /// many tokens later reservations counted on.
    last_event: Instant,
    /// Reservations granted for later than when they were made, in the order made (and so
    /// of time to act, unless the limit was raised in between), until a reservation made
    /// after their time to act has passed forgets them.
    pending: VecDeque<Pending>,
    next_id: u64,
}

/// A reservation that was granted for later.
#[derive(Clone, Copy, Debug)]
struct Pending {
    id: u64,
    grant: Grant,
    /// Canceled: only the tokens of `restored` came back so far.
    canceled: bool,
    restored: f64,
}

/// A new limiter counts its (full) bucket from so long ago that any refill is capped.
const LONG_AGO: Instant = Instant::from_nanos(i64::MIN);

/// Tokens granted by a reservation, and when they may be used.
#[derive(Clone, Copy, Debug)]
pub(super) struct Grant {
    pub(super) tokens: u32,
    pub(super) time_to_act: Instant,
    /// The limit when granted: cancel gives back what this rate would have refilled.
    pub(super) limit: Limit,
    /// Its entry in `pending`, if it was granted for later.
    id: Option<u64>,
}

/// Why a reservation was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Refusal {
    /// More tokens than the burst: the bucket never holds that many.
    Burst,
    /// The tokens never come: a zero limit (or a wait too long to represent).
    Never,
    /// The tokens come after the longest wait the caller accepts.
    TooLate,
}

impl Bucket {
    /// A full bucket.
    pub(super) fn new(limit: Limit, burst: u32) -> Bucket {
        Bucket {
            limit,
            burst,
            tokens: f64::from(burst),
            last: LONG_AGO,
            last_event: LONG_AGO,
            pending: VecDeque::new(),
            next_id: 0,
        }
    }

    /// The tokens at `now`: those at `last` plus the refill since, capped at the burst
    /// (Go's `advance`). A `now` before `last` (an explicit instant from the past) counts no
    /// refill, and the caller then moves `last` back to it, as Go does.
    pub(super) fn tokens_at(&self, now: Instant) -> f64 {
        let refill = self.limit.tokens_between(self.last.min(now), now);
        (self.tokens + refill).min(f64::from(self.burst))
    }

    /// Brings the count up to `now` (before a change of limit, burst or tokens).
    pub(super) fn advance(&mut self, now: Instant) {
        self.tokens = self.tokens_at(now);
        self.last = now;
    }

    /// Go's `SetBurstAt`: the count brought up to `now`, then the bucket resized; tokens
    /// above the new size are dropped.
    pub(super) fn set_burst(&mut self, now: Instant, burst: u32) {
        self.advance(now);
        self.burst = burst;
        self.tokens = self.tokens.min(f64::from(burst));
    }

    /// Go's `reserveN`: takes `n` tokens at `now`, to be used once they have all come, if
    /// that is within `max_wait`; refuses and changes nothing otherwise. Inlined, so that
    /// `allow_n`'s zero `max_wait` folds into the comparison.
    #[inline]
    pub(super) fn reserve(
        &mut self,
        now: Instant,
        n: u32,
        max_wait: Duration,
    ) -> Result<Grant, Refusal> {
        if self.limit.is_inf() {
            // Nothing is counted under an infinite limit, and the burst does not apply.
            return Ok(Grant {
                tokens: n,
                time_to_act: now,
                limit: self.limit,
                id: None,
            });
        }
        if n > self.burst {
            return Err(Refusal::Burst);
        }
        let left = self.tokens_at(now) - f64::from(n);
        let wait = if left < 0.0 {
            self.limit.nanos_for(-left).ok_or(Refusal::Never)?
        } else {
            0
        };
        if u128::from(wait.unsigned_abs()) > max_wait.as_nanos() {
            return Err(Refusal::TooLate);
        }
        let mut grant = Grant {
            tokens: n,
            time_to_act: Instant::from_nanos(now.as_nanos().saturating_add(wait)),
            limit: self.limit,
            id: None,
        };
        self.tokens = left;
        self.last = now;
        self.last_event = grant.time_to_act;
        if !self.pending.is_empty() {
            self.prune(now);
        }
        if wait != 0 {
            grant.id = Some(self.track(grant));
        }
        Ok(grant)
    }

    /// Forgets the pending reservations whose time has passed: used, or canceled too late to
    /// give anything back. Out of line, like [`track`](Bucket::track).
    #[inline(never)]
    fn prune(&mut self, now: Instant) {
        while self
            .pending
            .front()
            .is_some_and(|p| p.grant.time_to_act < now)
        {
            self.pending.pop_front();
        }
    }

    /// Keeps `grant`, granted for later, in `pending`; returns its id. Out of line: `allow`
    /// and waits that need not sleep never come here.
    #[inline(never)]
    fn track(&mut self, grant: Grant) -> u64 {
        let id = self.next_id;
        self.next_id += 1;
        self.pending.push_back(Pending {
            id,
            grant,
            canceled: false,
            restored: 0.0,
        });
        id
    }

    /// Go's `CancelAt`: gives back the tokens of `grant` that no later reservation counted
    /// on, unless its time to act has passed (the tokens are taken as used then).
    ///
    /// Beyond Go: once the last reservation still to come is canceled, the canceled ones
    /// just before it (whose tokens Go's rule kept for it) are now last in turn, and give
    /// back the rest of their tokens as Go gives back a last reservation's. Go's rule alone
    /// loses those tokens for good: a spike of waits that all give up leaves the bucket in
    /// debt (TIMERS.md, "gort::time::rate").
    pub(super) fn cancel(&mut self, grant: &Grant, now: Instant) {
        if self.limit.is_inf() || grant.limit.is_inf() || grant.tokens == 0 {
            return; // nothing was counted
        }
        if grant.time_to_act < now {
            return; // too late: the holder may have acted
        }
        let Some(at) = grant.id.and_then(|id| self.find(id)) else {
            // Granted at once and canceled at that same instant: Go's rule alone.
            if self.give_back(grant, 0.0, now).1 {
                self.step_back_from(grant, now);
            }
            return;
        };
        self.pending[at].canceled = true;
        self.settle(at, now);
        while let Some(last) = self.pending.len().checked_sub(1) {
            if !self.pending[last].canceled || !self.settle(last, now) {
                break;
            }
        }
    }

    /// The index of the pending reservation `id`.
    fn find(&self, id: u64) -> Option<usize> {
        let at = self.pending.partition_point(|p| p.id < id);
        (self.pending.get(at)?.id == id).then_some(at)
    }

    /// Gives back what the canceled pending reservation at `at` still can; if it was the
    /// latest reservation, removes it and moves `last_event` back. Whether it was removed.
    fn settle(&mut self, at: usize, now: Instant) -> bool {
        let p = self.pending[at];
        if p.grant.time_to_act < now {
            return false; // its time has passed: taken as used
        }
        let (restored, was_latest) = self.give_back(&p.grant, p.restored, now);
        self.pending[at].restored += restored;
        if !was_latest {
            return false;
        }
        self.pending.remove(at);
        match self.pending.back() {
            // The latest event is now that of the reservation made last of those still
            // pending (Go's `lastEvent` is that of the one made last: with a limit raised in
            // between, not always the latest instant).
            Some(latest) => self.last_event = latest.grant.time_to_act,
            None => self.step_back_from(&p.grant, now),
        }
        true
    }

    /// Go's `CancelAt` for `grant`, of which `restored` tokens came back already: gives back
    /// the tokens no later reservation counted on. Returns them, and whether `grant` was the
    /// latest reservation (nothing counted on its tokens).
    fn give_back(&mut self, grant: &Grant, restored: f64, now: Instant) -> (f64, bool) {
        // Reservations made after this one act up to `last_event`, and were granted the
        // tokens that refill between this one's time to act and theirs: those stay taken.
        let counted_on = grant
            .limit
            .tokens_between(grant.time_to_act, self.last_event);
        let restore = f64::from(grant.tokens) - counted_on - restored;
        let was_latest = self.last_event <= grant.time_to_act;
        if restore <= 0.0 {
            return (0.0, was_latest);
        }
        self.advance(now);
        self.tokens = (self.tokens + restore).min(f64::from(self.burst));
        (restore, was_latest)
    }

    /// The latest reservation, `grant`, is gone: the latest event is the one just before it
    /// (Go's `prevEvent`), if that is still to come.
    fn step_back_from(&mut self, grant: &Grant, now: Instant) {
        let prev = grant
            .limit
            .nanos_for(f64::from(grant.tokens))
            .and_then(|back| grant.time_to_act.as_nanos().checked_sub(back))
            .map(Instant::from_nanos);
        if let Some(prev) = prev.filter(|&p| p >= now) {
            self.last_event = prev;
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    const MS: i64 = 1_000_000;

    fn at(ms: i64) -> Instant {
        Instant::from_nanos(1_000_000 * MS + ms * MS)
    }

    #[test]
    fn pending_holds_only_reservations_still_to_come() {
        let mut b = Bucket::new(Limit::per_second(10.0), 1);
        let grants: Vec<Grant> = (0..100)
            .map(|_| b.reserve(at(0), 1, Duration::MAX).unwrap())
            .collect();
        assert_eq!(b.pending.len(), 99); // the first was granted at once
        b.reserve(at(5_000), 1, Duration::MAX).unwrap(); // 4.9 s in: the first 49 are past
        assert_eq!(b.pending.len(), 99 - 49 + 1);
        b.reserve(at(5_000), 1, Duration::ZERO).unwrap_err();
        assert_eq!(b.pending.len(), 51, "a refused reservation changes nothing");
        let _ = grants;
    }

    #[test]
    fn canceling_every_reservation_in_the_order_made_empties_pending_and_the_debt() {
        let mut b = Bucket::new(Limit::per_second(10.0), 1);
        b.reserve(at(0), 1, Duration::MAX).unwrap();
        let grants: Vec<Grant> = (0..20)
            .map(|_| b.reserve(at(0), 1, Duration::MAX).unwrap())
            .collect();
        for g in &grants {
            b.cancel(g, at(10));
        }
        assert!(b.pending.is_empty());
        assert!(
            (b.tokens_at(at(10)) - 0.1).abs() < 1e-9,
            "{}",
            b.tokens_at(at(10))
        );
        // As if none of them had been made: the next token at 100 ms.
        let next = b.reserve(at(10), 1, Duration::MAX).unwrap();
        assert_eq!(next.time_to_act, at(100));
    }
}
