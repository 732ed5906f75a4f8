//! The lead of the poller's early wake-up: how long before a sparse deadline it arms its
//! timer, so that the thread is running again when the deadline comes.
//!
//! A thread woken by its timer runs tens of microseconds after the expiry (the wake-up of
//! a sleeping thread; more under virtualisation), and that delay varies from machine to
//! machine and from minute to minute. A fixed lead either spins the difference away on every
//! wake-up (most of an idle ticker's CPU) or leaves the timer late. So the lead tracks the
//! wake-up delay itself: it is a running estimate of the delay's lower quartile (the
//! stochastic quantile estimate: a wake-up that came before its deadline steps the lead down
//! by `DOWN`, one that came after it steps it up by `UP`, so that it settles where
//! `UP / (UP + DOWN)` of the wake-ups come early). A quarter of the wake-ups then spin for
//! the few microseconds by which they beat the deadline, the rest run a few microseconds
//! late, and the spin never exceeds `MAX_LEAD`.

use gort_timer::Nanos;

/// The longest lead, so the most a sparse wake-up spins (ns).
pub(crate) const MAX_LEAD: i64 = 50_000;
/// The lead a poller starts with (ns): about the wake-up delay of a virtual machine.
const START: i64 = 25_000;
/// The step down after a wake-up that came before its deadline (ns).
const DOWN: i64 = 3_000;
/// The step up after a wake-up that came at or after its deadline (ns).
const UP: i64 = 1_000;

/// The early wake-up's lead; only the poller M touches it.
#[derive(Debug)]
pub(crate) struct Lead {
    lead: i64,
}

impl Lead {
    pub(crate) const fn new() -> Lead {
        Lead { lead: START }
    }

    /// How long before a sparse deadline to arm the timer (ns, `0..=MAX_LEAD`).
    pub(crate) fn get(&self) -> i64 {
        self.lead
    }

    /// Learns from a wake-up by the timer armed the current lead before `deadline`: the
    /// thread ran again at `woke`.
    pub(crate) fn learn(&mut self, deadline: Nanos, woke: Nanos) {
        let step = if woke < deadline { -DOWN } else { UP };
        self.lead = (self.lead + step).clamp(0, MAX_LEAD);
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    /// Feeds `lead` wake-up delays from `delays`, one per deadline 1 ms apart; returns how
    /// many wake-ups came early.
    fn feed(lead: &mut Lead, delays: impl Iterator<Item = i64>) -> usize {
        let mut early = 0;
        for (k, delay) in delays.enumerate() {
            let deadline = 1_000_000 * (k as i64 + 1);
            let woke = deadline - lead.get() + delay;
            early += usize::from(woke < deadline);
            lead.learn(deadline, woke);
        }
        early
    }

    #[test]
    fn the_lead_settles_at_the_lower_quartile_of_the_wake_up_delay() {
        let mut lead = Lead::new();
        // Delays uniform over 30..70 µs (a xorshift sequence): the lower quartile is 40 µs.
        let mut x = 0x9e37_79b9_7f4a_7c15_u64;
        let mut delays = std::iter::from_fn(move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            Some(30_000 + (x % 40_000) as i64)
        });
        feed(&mut lead, delays.by_ref().take(4000));
        assert!((34_000..=46_000).contains(&lead.get()), "{lead:?}");
        let early = feed(&mut lead, delays.take(4000));
        assert!((800..=1200).contains(&early), "{early} of 4000 early");
    }

    #[test]
    fn the_lead_stays_within_zero_and_the_maximum() {
        let mut lead = Lead::new();
        feed(&mut lead, std::iter::repeat(5_000_000).take(1000));
        assert_eq!(
            lead.get(),
            MAX_LEAD,
            "a slow machine spins at most MAX_LEAD"
        );
        feed(&mut lead, std::iter::repeat(0).take(1000));
        assert!(
            lead.get() <= UP,
            "an instant wake-up needs no lead: {lead:?}"
        );
    }
}
