//! Loom models of the channel-timer core (`gort_time::arming`): a fire in flight vs `stop`
//! vs `reset` vs a receiver, checking Go 1.23's contract (go#37196, go#69312, go#80760) in
//! every interleaving:
//!
//! - `stop()`/`reset()` return true exactly when no value of the current arming was or will
//!   be received;
//! - no value of an earlier arming is received after they return;
//! - a reset arming delivers exactly one value;
//! - the timer is in a heap only while a receiver waits (Go 1.23's lazy timer channels), and
//!   a receiver that arrives after the deadline gets the value at once (`maybe_run`).
//!
//! The receiver follows gort-chan's receive with the arming's hooks: it looks (`maybe_run`,
//! which may send a due value itself), and if nothing is there parks (`block`, which puts the
//! timer in a heap) and leaves (`unblock`). The runtime timer is faked by a deadline (0 = in
//! no heap). The fake scheduler
//! claims it like gort-timer's `runtimer` does (observe the clock past the deadline, take the
//! timer, *then* call the callback with no lock held), so `del` can miss a fire that is
//! in flight. The clock is logical: a claim pushes it to the deadline it ran; `reset` reads it
//! after `del`, as the real code does.
//!
//! Run: `RUSTFLAGS="--cfg loom" LOOM_MAX_PREEMPTIONS=2 cargo test --release -p gort-time --test loom_arming`
#![cfg(loom)]

use gort_loom::atomic::{AtomicUsize, Ordering::SeqCst};
use gort_loom::{thread, Arc, Mutex};
use gort_time::arming::{Arming, Heap, OneShot, Periodic, Sink, Ticks};
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
    type Wakes = ();
    type Chan = ();
    fn try_send(&self, _: &(), v: Instant, _: &mut ()) -> bool {
        let mut c = self.inner.lock();
        if c.buf.is_some() {
            return false;
        }
        c.buf = Some((v.as_nanos(), c.sealed));
        true
    }
    fn take_buffered(&self, _: &(), maybe_buffered: bool, _: &mut ()) -> usize {
        let mut c = self.inner.lock();
        c.sealed = true;
        let taken = c.buf.take();
        // The arming's "nothing sent since the last drain" must be true: then it may skip
        // the channel (the real sink does).
        assert!(
            maybe_buffered || taken.is_none(),
            "the arming said nothing was sent since the last drain, but {taken:?} was buffered"
        );
        usize::from(taken.is_some())
    }
}

/// The arming's end of the fake channel (the model's receivers hold the channel too).
struct ChanEnd(Arc<FakeChan>);

impl Sink for ChanEnd {
    type Wakes = ();
    type Chan = ();
    fn try_send(&self, _: &(), v: Instant, _: &mut ()) -> bool {
        self.0.try_send(&(), v, &mut ())
    }
    fn take_buffered(&self, _: &(), maybe_buffered: bool, _: &mut ()) -> usize {
        self.0.take_buffered(&(), maybe_buffered, &mut ())
    }
}

impl FakeChan {
    /// (value, sent after the drain of stop/reset).
    fn recv(&self) -> Option<(i64, bool)> {
        self.inner.lock().buf.take()
    }
}

/// `P`: what the arming keeps of its period, as in gort::time: [`OneShot`] for the one-shot
/// models (a `Timer`'s), [`Periodic`] for the ticker ones.
struct World<P> {
    arming: Arming<ChanEnd, (), P>,
    chan: Arc<FakeChan>,
    /// The fake runtime timer and the logical clock.
    rt: FakeRt,
    period: i64,
}

/// The fake runtime timer and the logical clock, under one lock: the model is about the
/// arming core, not about the timer's own atomics (gort-timer's loom models cover those).
struct FakeRt(Mutex<RtState>);

struct RtState {
    /// The pending deadline, 0 if none (not in a heap).
    timer: i64,
    period: i64,
    /// Logical now; like `nanotime()` it is never 0.
    clock: i64,
}

impl Heap for FakeRt {
    type Rt = ();
    type Chan = ();

    fn chan(&self) -> &() {
        &()
    }

    fn now(&self) -> i64 {
        self.0.lock().clock
    }
    /// One logical clock for every thread: no reading trails another.
    fn now_exact(&self) -> i64 {
        self.now()
    }
    fn add(&self, _rt: &mut (), when: i64, period: i64) {
        let mut rt = self.0.lock();
        rt.timer = when;
        rt.period = period;
    }
    fn del(&self, _rt: &mut ()) {
        self.0.lock().timer = 0;
    }
}

impl<P: Ticks> World<P> {
    /// A world whose first arming is due at `FIRST`, with the clock at `clock`.
    fn new(period: i64, clock: i64) -> Arc<World<P>> {
        let chan = Arc::new(FakeChan::default());
        let w = Arc::new(World {
            arming: Arming::new(ChanEnd(chan.clone()), ()),
            chan,
            rt: FakeRt(Mutex::new(RtState {
                timer: 0,
                period: 0,
                clock: 1,
            })),
            period,
        });
        // The first arming (its reset returns false: nothing was armed).
        assert!(!w.arming.reset(&w.rt, |now| now + FIRST - 1, period));
        w.rt.0.lock().clock = clock;
        // Its seal is not a stop/reset under test.
        w.chan.inner.lock().sealed = false;
        w
    }

    /// One pass of the fake scheduler: run the timer if it is in a heap. Like `runtimer`, it
    /// sees the clock reach the deadline and claims the timer (a one-shot leaves it, a
    /// periodic one re-arms it), and only then runs the callback, with nothing locked.
    fn run_timer(&self) {
        let when = {
            let mut rt = self.rt.0.lock();
            let when = rt.timer;
            if when == 0 {
                return;
            }
            rt.clock = rt.clock.max(when);
            rt.timer = if rt.period > 0 { when + rt.period } else { 0 };
            when
        };
        self.arming.fire(when, &self.rt);
    }

    /// A receiver arrives (as gort-chan's receive does with the arming's hooks): it looks
    /// (`maybe_run`), and if nothing is there it parks (`block`: the timer enters a heap),
    /// takes what a fire sent meanwhile, and leaves (`unblock`).
    fn receive(&self) -> Option<(i64, bool)> {
        self.arming.maybe_run(&self.rt);
        if let Some(v) = self.chan.recv() {
            return Some(v);
        }
        self.arming.block(&self.rt);
        let v = self.chan.recv();
        self.arming.unblock(&self.rt);
        v
    }

    /// Time passes far beyond every deadline and a receiver looks (the receiver-arrives path:
    /// nothing is in a heap then).
    fn late_receive(&self) -> Option<(i64, bool)> {
        self.rt.0.lock().clock += 100;
        self.arming.maybe_run(&self.rt);
        self.chan.recv()
    }
}

/// The `start` of a reset due `d` after the clock (read after `del`, by the arming).
fn after(d: i64) -> impl FnOnce(i64) -> i64 {
    move |now| now + d
}

/// Runs the model: the fake scheduler, a receiver, and `op` (a stop or reset returning
/// `(result, start of the new arming or None)`), then checks the contract. With `due`, the
/// first arming is already due when the model starts (so the receiver's look may send it).
fn model<P: Ticks>(period: i64, due: bool, op: fn(&World<P>) -> (bool, Option<i64>)) {
    loom::model(move || {
        let w = World::<P>::new(period, if due { FIRST } else { 1 });
        let runner = {
            let w = w.clone();
            thread::spawn(move || w.run_timer())
        };
        let receiver = {
            let w = w.clone();
            thread::spawn(move || w.receive())
        };
        let (was, start) = op(&w);
        runner.join().unwrap();
        let early = receiver.join().unwrap();
        assert!(!w.arming.is_heaped(), "in a heap with no receiver waiting");

        // Afterwards: a receiver arrives after every deadline and takes what is left.
        let late = w.late_receive();
        let got: Vec<(i64, bool)> = early.into_iter().chain(late).collect();
        check(period, was, start, &got, &w);
    });
}

/// The contract, from what was received (`(value, sent after the drain of stop/reset)`).
fn check<P: Ticks>(period: i64, was: bool, start: Option<i64>, got: &[(i64, bool)], w: &World<P>) {
    // A value sent before stop/reset drained the channel belongs to the old arming (and if it
    // was received, that was before the drain). One sent after the drain must belong to the
    // new arming: due at or after its start. (Telling them apart by value alone fails for a
    // zero-duration reset, whose start may equal the old deadline.)
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
}

fn stop<P: Ticks>(w: &World<P>) -> (bool, Option<i64>) {
    (w.arming.stop(&w.rt), None)
}

fn reset_later<P: Ticks>(w: &World<P>) -> (bool, Option<i64>) {
    reset_after(w, 5)
}

fn reset_zero<P: Ticks>(w: &World<P>) -> (bool, Option<i64>) {
    reset_after(w, 0)
}

fn reset_after<P: Ticks>(w: &World<P>, d: i64) -> (bool, Option<i64>) {
    let mut start = None;
    let was = w
        .arming
        .reset(&w.rt, |now| *start.insert(after(d)(now)), w.period);
    (was, start)
}

/// The receiver parks (the timer enters a heap), the heap fires, and a stop races both.
#[test]
fn one_shot_fire_vs_stop_vs_receive() {
    model::<OneShot>(0, false, stop);
}

#[test]
fn one_shot_fire_vs_reset_vs_receive() {
    model::<OneShot>(0, false, reset_later);
}

/// The tie case: a zero-duration reset whose start equals the late fire's deadline.
#[test]
fn one_shot_fire_vs_zero_reset_vs_receive() {
    model::<OneShot>(0, false, reset_zero);
}

/// A ticker: the runtime timer stays pending while its callback is in flight, so `del`
/// "succeeds" and the late tick must still be dropped.
#[test]
fn periodic_fire_vs_reset_vs_receive() {
    model::<Periodic>(3, false, reset_later);
}

#[test]
fn periodic_fire_vs_stop_vs_receive() {
    model::<Periodic>(3, false, stop);
}

/// The receiver-arrives path: the timer is due but in no heap, so the receiver's look sends
/// the value itself (Go 1.23's `maybeRunChan`), racing a stop.
#[test]
fn one_shot_due_receiver_arrives_vs_stop() {
    model::<OneShot>(0, true, stop);
}

#[test]
fn one_shot_due_receiver_arrives_vs_reset() {
    model::<OneShot>(0, true, reset_later);
}

#[test]
fn one_shot_due_receiver_arrives_vs_zero_reset() {
    model::<OneShot>(0, true, reset_zero);
}

#[test]
fn periodic_due_receiver_arrives_vs_reset() {
    model::<Periodic>(3, true, reset_later);
}

#[test]
fn periodic_due_receiver_arrives_vs_stop() {
    model::<Periodic>(3, true, stop);
}

/// Two stoppers race: exactly one of them may report that it stopped the timer (or none, if
/// the value was received), and nothing is received after both.
#[test]
fn one_shot_stop_vs_stop_vs_fire() {
    loom::model(|| {
        let w = World::<OneShot>::new(0, FIRST);
        w.arming.block(&w.rt); // a receiver waits elsewhere: the timer is in a heap
        let wins = Arc::new(AtomicUsize::new(0));
        let runner = {
            let w = w.clone();
            thread::spawn(move || w.run_timer())
        };
        let other = {
            let (w, wins) = (w.clone(), wins.clone());
            thread::spawn(move || {
                if w.arming.stop(&w.rt) {
                    wins.fetch_add(1, SeqCst);
                }
            })
        };
        if w.arming.stop(&w.rt) {
            wins.fetch_add(1, SeqCst);
        }
        runner.join().unwrap();
        other.join().unwrap();
        w.run_timer();
        // Nobody receives here, so exactly one stop reports the (unreceived) value stopped.
        assert_eq!(wins.load(SeqCst), 1);
        assert_eq!(w.chan.recv(), None);
    });
}

/// A ticker whose next tick is run on another thread while the previous tick's callback is
/// still on its way (gort-timer re-arms a periodic timer before calling back): the ticks a
/// receiver sees are strictly increasing, the older one is dropped if it arrives second.
#[test]
fn periodic_overlapping_fires_stay_ordered() {
    loom::model(|| {
        let w = World::<Periodic>::new(3, 1);
        w.arming.block(&w.rt); // a receiver waits: the ticker is in a heap
        let runners: Vec<_> = (0..2)
            .map(|_| {
                let w = w.clone();
                thread::spawn(move || w.run_timer())
            })
            .collect();
        let first = w.chan.recv();
        for r in runners {
            r.join().unwrap();
        }
        let second = w.chan.recv();
        if let (Some((a, _)), Some((b, _))) = (first, second) {
            assert!(b > a, "tick {b} received after tick {a}");
        }
        assert!(first.is_some() || second.is_some(), "no tick delivered");
    });
}
