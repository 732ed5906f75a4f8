//! Loom models of the channel-timer core (`gort_time::arming`): a fire in flight vs `stop`
//! vs `reset` vs a receiver, checking Go 1.23's contract (go#37196, go#69312, go#80760) in
//! every interleaving:
//!
//! - `stop()`/`reset()` return true exactly when no value of the current arming was or will
//!   be received;
//! - no value of an earlier arming is received after they return;
//! - a reset arming delivers exactly one value.
//!
//! The runtime timer is faked by an atomic deadline (0 = not pending). The fake scheduler
//! claims it like gort-timer's `runtimer` does (observe the clock past the deadline, take the
//! timer, *then* call the callback with no lock held), so `del` can miss a fire that is
//! in flight. The clock is logical: a claim pushes it to the deadline it ran; `reset` reads it
//! after `del`, as the real code does.
//!
//! Run: `RUSTFLAGS="--cfg loom" LOOM_MAX_PREEMPTIONS=2 cargo test --release -p gort-time --test loom_arming`
#![cfg(loom)]

use gort_loom::atomic::{AtomicUsize, Ordering::SeqCst};
use gort_loom::{thread, Arc, Mutex};
use gort_time::arming::{Arming, Sink};
use gort_time::Instant;

/// The first arming is due this long after the start of the logical clock.
const FIRST: i64 = 10;

/// A capacity-1 channel that remembers whether a value was put in after the last drain
/// (`sealed`), so the model can tell when a send happened relative to `stop`/`reset`.
#[derive(Default)]
struct FakeChan {
    inner: Mutex<Chan>,
}

#[derive(Default)]
struct Chan {
    buf: Option<(i64, bool)>,
    sealed: bool,
}

impl Sink for FakeChan {
    fn try_send(&self, v: Instant) -> bool {
        let mut c = self.inner.lock();
        if c.buf.is_some() {
            return false;
        }
        c.buf = Some((v.as_nanos(), c.sealed));
        true
    }
    fn take_buffered(&self) -> usize {
        let mut c = self.inner.lock();
        c.sealed = true;
        usize::from(c.buf.take().is_some())
    }
}

impl FakeChan {
    /// (value, sent after the drain of stop/reset).
    fn recv(&self) -> Option<(i64, bool)> {
        self.inner.lock().buf.take()
    }
}

struct World {
    arming: Arming<FakeChan>,
    /// The fake runtime timer and the logical clock, under one lock: the model is about the
    /// arming core, not about the timer's own atomics (gort-timer's loom models cover those).
    rt: Mutex<FakeRt>,
    period: i64,
}

struct FakeRt {
    /// The pending deadline, 0 if none.
    timer: i64,
    /// Logical now; like `nanotime()` it is never 0.
    clock: i64,
}

impl World {
    fn new(period: i64) -> Arc<World> {
        let w = Arc::new(World {
            arming: Arming::new(FakeChan::default()),
            rt: Mutex::new(FakeRt { timer: 0, clock: 1 }),
            period,
        });
        // The first arming (its reset returns false: nothing was armed).
        assert!(!w.arming.reset(|| {}, || arm(&w, FIRST)));
        // Its seal is not a stop/reset under test.
        w.arming.sink().inner.lock().sealed = false;
        w
    }

    /// One pass of the fake scheduler: run the timer if it is pending. Like `runtimer`, it
    /// sees the clock reach the deadline and claims the timer (a one-shot leaves it, a
    /// periodic one re-arms it), and only then runs the callback, with nothing locked.
    fn run_timer(&self) {
        let when = {
            let mut rt = self.rt.lock();
            let when = rt.timer;
            if when == 0 {
                return;
            }
            rt.clock = rt.clock.max(when);
            rt.timer = if self.period > 0 {
                when + self.period
            } else {
                0
            };
            when
        };
        self.arming.fire(when, self.period > 0);
    }

    fn del(&self) {
        self.rt.lock().timer = 0;
    }
}

/// The `arm` closure of a reset due `d` after the clock: reads the clock (after `del`).
fn arm(w: &World, d: i64) -> i64 {
    let mut rt = w.rt.lock();
    let start = rt.clock + d;
    rt.timer = start;
    start
}

/// Runs the model: the fake scheduler, a receiver, and `op` (a stop or reset returning
/// `(result, start of the new arming or None)`), then checks the contract.
fn model(period: i64, op: fn(&World) -> (bool, Option<i64>)) {
    loom::model(move || {
        let w = World::new(period);
        let runner = {
            let w = w.clone();
            thread::spawn(move || w.run_timer())
        };
        let receiver = {
            let w = w.clone();
            thread::spawn(move || w.arming.sink().recv())
        };
        let (was, start) = op(&w);
        runner.join().unwrap();
        let early = receiver.join().unwrap();

        // Afterwards: let the current arming fire (if any) and receive what is left.
        w.run_timer();
        let late = w.arming.sink().recv();
        let got: Vec<(i64, bool)> = early.into_iter().chain(late).collect();

        // A value sent before stop/reset drained the channel belongs to the old arming (and
        // if it was received, that was before the drain). One sent after the drain must belong
        // to the new arming: due at or after its start. (Telling them apart by value alone
        // fails for a zero-duration reset, whose start may equal the old deadline.)
        let old: Vec<_> = got.iter().filter(|(_, after_drain)| !after_drain).collect();
        let fresh: Vec<_> = got.iter().filter(|(_, after_drain)| *after_drain).collect();
        for (v, _) in &fresh {
            assert!(
                start.is_some_and(|s| *v >= s),
                "value {v} sent after stop/reset drained, not of a new arming (start {start:?}): {got:?}"
            );
        }
        assert!(old.len() <= 1, "two values of one arming: {got:?}");
        if period == 0 {
            // (A ticker's stop/reset report nothing; only the no-stale-tick rule applies.)
            assert_eq!(
                was,
                old.is_empty(),
                "stop/reset returned {was} but old values received were {old:?} (start {start:?})"
            );
        }
        if let Some(s) = start {
            let fresh = fresh.len();
            if period == 0 {
                assert_eq!(
                    fresh,
                    1,
                    "the new arming (start {s}) delivered {got:?}; state {:?}",
                    w.arming.state(),
                );
            } else {
                assert!(
                    fresh >= 1,
                    "the new ticker arming delivered nothing: {got:?}"
                );
            }
        }
    });
}

fn stop(w: &World) -> (bool, Option<i64>) {
    (w.arming.stop(|| w.del()), None)
}

fn reset_later(w: &World) -> (bool, Option<i64>) {
    let mut start = None;
    let was = w.arming.reset(|| w.del(), || *start.insert(arm(w, 5)));
    (was, start)
}

fn reset_zero(w: &World) -> (bool, Option<i64>) {
    let mut start = None;
    let was = w.arming.reset(|| w.del(), || *start.insert(arm(w, 0)));
    (was, start)
}

#[test]
fn one_shot_fire_vs_stop_vs_receive() {
    model(0, stop);
}

#[test]
fn one_shot_fire_vs_reset_vs_receive() {
    model(0, reset_later);
}

/// The tie case: a zero-duration reset whose start equals the late fire's deadline.
#[test]
fn one_shot_fire_vs_zero_reset_vs_receive() {
    model(0, reset_zero);
}

/// A ticker: the runtime timer stays pending while its callback is in flight, so `del`
/// "succeeds" and the late tick must still be dropped.
#[test]
fn periodic_fire_vs_reset_vs_receive() {
    model(3, reset_later);
}

#[test]
fn periodic_fire_vs_stop_vs_receive() {
    model(3, stop);
}

/// Two stoppers race: exactly one of them may report that it stopped the timer (or none, if
/// the value was received), and nothing is received after both.
#[test]
fn one_shot_stop_vs_stop_vs_fire() {
    loom::model(|| {
        let w = World::new(0);
        let wins = Arc::new(AtomicUsize::new(0));
        let runner = {
            let w = w.clone();
            thread::spawn(move || w.run_timer())
        };
        let other = {
            let (w, wins) = (w.clone(), wins.clone());
            thread::spawn(move || {
                if w.arming.stop(|| w.del()) {
                    wins.fetch_add(1, SeqCst);
                }
            })
        };
        if w.arming.stop(|| w.del()) {
            wins.fetch_add(1, SeqCst);
        }
        runner.join().unwrap();
        other.join().unwrap();
        w.run_timer();
        // Nobody receives here, so exactly one stop reports the (unreceived) value stopped.
        assert_eq!(wins.load(SeqCst), 1);
        assert_eq!(w.arming.sink().recv(), None);
    });
}

/// A ticker whose next tick is run on another thread while the previous tick's callback is
/// still on its way (gort-timer re-arms a periodic timer before calling back): the ticks a
/// receiver sees are strictly increasing, the older one is dropped if it arrives second.
#[test]
fn periodic_overlapping_fires_stay_ordered() {
    loom::model(|| {
        let w = World::new(3);
        let runners: Vec<_> = (0..2)
            .map(|_| {
                let w = w.clone();
                thread::spawn(move || w.run_timer())
            })
            .collect();
        let first = w.arming.sink().recv();
        for r in runners {
            r.join().unwrap();
        }
        let second = w.arming.sink().recv();
        if let (Some((a, _)), Some((b, _))) = (first, second) {
            assert!(b > a, "tick {b} received after tick {a}");
        }
        assert!(first.is_some() || second.is_some(), "no tick delivered");
    });
}
