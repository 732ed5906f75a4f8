//! Property test: two `Timers` driven by random add/del/modify/check/move/drain sequences on
//! a fake clock, checked step by step against a plain model (a `BTreeMap` of deadlines).
//!
//! Checked: every timer fires exactly once per due deadline at the first check whose `now`
//! reaches it, unless `del` returned true; in deadline order within a check; `del`/`modify`
//! return values; statuses and pending-ness; `check`'s `next` and `wake_time` never overstate;
//! `verify()` after every step.
#![cfg(not(loom))]

mod common;

use std::collections::BTreeMap;

use common::{quiet, Log};
use gort_timer::*;
use proptest::prelude::*;

const TIMERS: usize = 6;

#[derive(Clone, Debug)]
enum Op {
    Add {
        t: usize,
        delta: i64,
        period: i64,
        heap: usize,
    },
    Del {
        t: usize,
    },
    Modify {
        t: usize,
        delta: i64,
        period: i64,
        home: usize,
    },
    Check {
        heap: usize,
        advance: i64,
        local: bool,
    },
    Move {
        from: usize,
    },
    Drain {
        heap: usize,
    },
}

fn op() -> impl Strategy<Value = Op> {
    let t = 0..TIMERS;
    let delta = -20i64..120;
    let period = prop_oneof![4 => Just(0i64), 1 => 1i64..40];
    prop_oneof![
        4 => (t.clone(), delta.clone(), period.clone(), 0..2usize)
            .prop_map(|(t, delta, period, heap)| Op::Add { t, delta, period, heap }),
        3 => t.clone().prop_map(|t| Op::Del { t }),
        5 => (t, delta, period, 0..2usize)
            .prop_map(|(t, delta, period, home)| Op::Modify { t, delta, period, home }),
        5 => (0..2usize, 0i64..60, any::<bool>())
            .prop_map(|(heap, advance, local)| Op::Check { heap, advance, local }),
        1 => (0..2usize).prop_map(|from| Op::Move { from }),
        1 => (0..2usize).prop_map(|heap| Op::Drain { heap }),
    ]
}

/// The model of one timer.
#[derive(Clone, Copy, Debug, Default)]
struct Mt {
    /// Armed and not stopped: (deadline, period).
    pending: Option<(Nanos, Nanos)>,
    /// The heap it was last put in; meaningful while pending or while really `Deleted`.
    heap: Option<usize>,
    /// Expect `Status::NoStatus` (never armed, or a one-shot that ran).
    fresh: bool,
}

struct World {
    heaps: [Timers; 2],
    timers: Vec<gort_loom::Arc<Timer>>,
    model: Vec<Mt>,
    log: std::sync::Arc<Log>,
    now: Nanos,
    fired_total: u64,
}

impl World {
    fn new() -> World {
        World {
            heaps: [Timers::new(0), Timers::new(1)],
            timers: (0..TIMERS).map(|_| Timer::new()).collect(),
            model: vec![
                Mt {
                    fresh: true,
                    ..Mt::default()
                };
                TIMERS
            ],
            log: Log::new(),
            now: 1_000,
            fired_total: 0,
        }
    }

    fn when(&self, delta: i64) -> Nanos {
        (self.now + delta).max(1)
    }

    fn step(&mut self, op: &Op) {
        match *op {
            Op::Add {
                t,
                delta,
                period,
                heap,
            } => {
                if !self.model[t].fresh {
                    return; // add accepts only fresh timers (tested elsewhere)
                }
                let when = self.when(delta);
                self.timers[t].set_fire(self.log.fire_for(t));
                self.heaps[heap].add(&self.timers[t], when, period, &quiet());
                self.model[t] = Mt {
                    pending: Some((when, period)),
                    heap: Some(heap),
                    fresh: false,
                };
            }
            Op::Del { t } => {
                let m = &mut self.model[t];
                assert_eq!(del(&self.timers[t]), m.pending.is_some(), "del({t}) result");
                m.pending = None;
                m.fresh = m.fresh && self.timers[t].status() == Status::NoStatus;
            }
            Op::Modify {
                t,
                delta,
                period,
                home,
            } => {
                let when = self.when(delta);
                let status = self.timers[t].status();
                let m = self.model[t];
                let heap = match (m.pending, status) {
                    (Some(_), _) => m.heap,
                    (None, Status::Deleted) => {
                        assert!(m.heap.is_some(), "deleted timer {t} with no model heap");
                        m.heap
                    }
                    (None, Status::NoStatus | Status::Removed) => Some(home),
                    (None, s) => panic!("timer {t} not pending but {s:?}"),
                };
                self.timers[t].set_fire(self.log.fire_for(t));
                let was = modify(&self.timers[t], when, period, &self.heaps[home], &quiet());
                assert_eq!(was, m.pending.is_some(), "modify({t}) result");
                self.model[t] = Mt {
                    pending: Some((when, period)),
                    heap,
                    fresh: false,
                };
            }
            Op::Check {
                heap,
                advance,
                local,
            } => {
                self.now += advance;
                let now = self.now;
                let mut expect = BTreeMap::new();
                for (i, m) in self.model.iter_mut().enumerate() {
                    match m.pending {
                        Some((when, period)) if m.heap == Some(heap) && when <= now => {
                            expect.insert((when, i), ());
                            if period > 0 {
                                let k = 1 + (now - when) / period;
                                m.pending = Some((when + period * k, period));
                            } else {
                                *m = Mt {
                                    pending: None,
                                    heap: None,
                                    fresh: true,
                                };
                            }
                        }
                        _ => {}
                    }
                }
                let c = self.heaps[heap].check(now, local);
                let got = self.log.take();
                let whens: Vec<_> = got.iter().map(|&(_, w)| w).collect();
                assert!(
                    whens.windows(2).all(|w| w[0] <= w[1]),
                    "fired out of order: {got:?}"
                );
                let mut got_sorted: Vec<_> = got.iter().map(|&(i, w)| (w, i)).collect();
                got_sorted.sort();
                let want: Vec<_> = expect.keys().copied().collect();
                assert_eq!(got_sorted, want, "fired set at now={now} on heap {heap}");
                assert_eq!(c.ran, want.len());
                self.fired_total += want.len() as u64;
                match self.min_pending(heap) {
                    Some(min) => assert!(
                        c.next > now && c.next <= min,
                        "next {} with now {now}, earliest pending {min}",
                        c.next
                    ),
                    None => assert!(c.next == 0 || c.next > now, "next {} <= now {now}", c.next),
                }
            }
            Op::Move { from } => {
                let to = 1 - from;
                let (a, b) = (&self.heaps[from], &self.heaps[to]);
                drop(a.move_to(b, &quiet()));
                for m in self.model.iter_mut().filter(|m| m.heap == Some(from)) {
                    m.heap = m.pending.map(|_| to);
                }
            }
            Op::Drain { heap } => {
                self.heaps[heap].drain();
                for (i, m) in self.model.iter_mut().enumerate() {
                    if m.heap == Some(heap) {
                        let was_heaped =
                            m.pending.is_some() || self.timers[i].status() == Status::Removed;
                        assert!(was_heaped, "timer {i} left behind by drain");
                        m.pending = None;
                        m.heap = None;
                    }
                }
            }
        }
    }

    fn min_pending(&self, heap: usize) -> Option<Nanos> {
        self.model
            .iter()
            .filter(|m| m.heap == Some(heap))
            .filter_map(|m| m.pending.map(|p| p.0))
            .min()
    }

    fn check_invariants(&self) {
        for (h, ts) in self.heaps.iter().enumerate() {
            ts.verify();
            if let Some(min) = self.min_pending(h) {
                let w = ts.wake_time();
                assert!(
                    w != 0 && w <= min,
                    "heap {h}: wake_time {w} overstates {min}"
                );
            }
        }
        for (i, (t, m)) in self.timers.iter().zip(&self.model).enumerate() {
            assert_eq!(
                t.is_pending(),
                m.pending.is_some(),
                "timer {i}: {t:?} vs {m:?}"
            );
            if let Some((when, period)) = m.pending {
                assert_eq!((t.when(), t.period()), (when, period), "timer {i} deadline");
            }
            assert_eq!(
                t.status() == Status::NoStatus,
                m.fresh,
                "timer {i}: {t:?} vs {m:?}"
            );
        }
        let fired: u64 = self.heaps.iter().map(|h| h.stats().fired).sum();
        assert_eq!(fired, self.fired_total, "stats.fired");
    }
}

proptest! {
    // 512 cases unless PROPTEST_CASES says otherwise.
    #![proptest_config(ProptestConfig {
        cases: std::env::var("PROPTEST_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(512),
        ..ProptestConfig::default()
    })]

    #[test]
    fn heaps_match_the_model(ops in proptest::collection::vec(op(), 1..120)) {
        let mut w = World::new();
        for op in &ops {
            w.step(op);
            w.check_invariants();
        }
        // Run everything out: each pending timer fires once more at most, at its deadline.
        w.step(&Op::Check { heap: 0, advance: 1_000_000, local: true });
        w.step(&Op::Check { heap: 1, advance: 0, local: true });
        w.check_invariants();
    }
}
