//! Loom models of the poll descriptor (`gort_net::desc`, the real source through
//! `gort_loom`): one direction's edge count and waiter list against the poller's
//! readiness, a deadline timer's expiry, a deadline change and a close, in every
//! interleaving. Invariants:
//!
//! - no lost wake-up: a task left `Pending` has its waker woken by whatever made it able to
//!   go on (readiness, expiry, close), and on its next poll it goes on;
//! - a stale deadline fire (the deadline was cleared or moved) never times an operation out;
//! - the runtime-wide waiter count never goes below zero and is back to zero when every
//!   waiter has been released.
//!
//! The task's syscall is modelled by an atomic "data arrived" flag that the poller sets
//! before it reports readiness (the kernel's order). `op` below is `Io::poll_op`'s loop
//! (crates/net/src/io.rs) over the real `prepare`/`wait`.
//!
//! Run: `RUSTFLAGS="--cfg loom" LOOM_MAX_PREEMPTIONS=2 cargo test --release -p gort-net --test loom_desc`
#![cfg(loom)]

use gort_loom::atomic::{AtomicBool, AtomicIsize, Ordering::SeqCst};
use gort_loom::thread;
use gort_net::desc::{Arm, Count, Fail, Half, Reg, Wait};
use std::sync::Arc;
use std::task::{Wake, Waker};

#[derive(Default)]
struct Waiters(AtomicIsize);

impl Count for Waiters {
    fn add(&self) {
        self.0.fetch_add(1, SeqCst);
    }
    fn remove(&self) {
        let before = self.0.fetch_sub(1, SeqCst);
        assert!(before > 0, "waiter count went below zero");
    }
}

#[derive(Default)]
struct Flag(AtomicBool);

impl Wake for Flag {
    fn wake(self: Arc<Self>) {
        self.0.store(true, SeqCst);
    }
}

#[derive(Debug, PartialEq, Eq)]
enum Outcome {
    Done,
    Pending,
    Failed(Fail),
}

/// One poll of an operation in this direction (`Io::poll_op`): the syscall succeeds once
/// `data` is set.
fn op(half: &Half, data: &AtomicBool, waker: &Waker, count: &Waiters) -> Outcome {
    loop {
        let seen = match half.prepare() {
            Ok(seen) => seen,
            Err(f) => return Outcome::Failed(f),
        };
        if data.load(SeqCst) {
            return Outcome::Done;
        }
        match half.wait(seen, waker, count) {
            Wait::Retry => continue,
            Wait::Pending => return Outcome::Pending,
            Wait::Fail(f) => return Outcome::Failed(f),
        }
    }
}

/// One poll of an operation future that owns its registration (`Io::op`'s `Op`): as
/// [`op`], registering as `reg`.
fn op_as(
    half: &Half,
    data: &AtomicBool,
    waker: &Waker,
    count: &Waiters,
    reg: &mut Option<Reg>,
) -> Outcome {
    loop {
        let seen = match half.prepare() {
            Ok(seen) => seen,
            Err(f) => return Outcome::Failed(f),
        };
        if data.load(SeqCst) {
            return Outcome::Done;
        }
        match half.wait_as(seen, waker, count, reg) {
            Wait::Retry => continue,
            Wait::Pending => return Outcome::Pending,
            Wait::Fail(f) => return Outcome::Failed(f),
        }
    }
}

/// One poll of a stream transfer (`Io::poll_transfer`): as [`op`], but the syscall is
/// skipped while the direction is drained at the ticket (a short transfer came before).
fn transfer(half: &Half, data: &AtomicBool, waker: &Waker, count: &Waiters) -> Outcome {
    loop {
        let seen = match half.prepare() {
            Ok(seen) => seen,
            Err(f) => return Outcome::Failed(f),
        };
        if !half.drained_at(seen) && data.load(SeqCst) {
            return Outcome::Done;
        }
        match half.wait(seen, waker, count) {
            Wait::Retry => continue,
            Wait::Pending => return Outcome::Pending,
            Wait::Fail(f) => return Outcome::Failed(f),
        }
    }
}

/// A model's end: a task left `Pending` by its first poll was woken (else `lost`), and its
/// next poll, `again`, goes on; one that was not left `Pending` went on at once.
fn assert_goes_on(first: Outcome, flag: &Flag, lost: &str, again: impl FnOnce() -> Outcome) {
    if first == Outcome::Pending {
        assert!(flag.0.load(SeqCst), "{lost}");
        assert_eq!(again(), Outcome::Done);
    } else {
        assert_eq!(first, Outcome::Done);
    }
}

fn wake_all(out: Vec<Waker>) {
    out.into_iter().for_each(Waker::wake);
}

struct Setup {
    half: Half,
    data: AtomicBool,
    count: Waiters,
}

impl Setup {
    /// The peer's data arrives and the poller reports the edge, waking what it released.
    fn data_arrives(&self) {
        self.data.store(true, SeqCst);
        let mut out = Vec::new();
        self.half.set_ready(&mut out, &self.count);
        wake_all(out);
    }
}

/// A poller thread running [`Setup::data_arrives`].
fn spawn_poller(s: &Arc<Setup>) -> thread::JoinHandle<()> {
    let s = s.clone();
    thread::spawn(move || s.data_arrives())
}

fn setup() -> Arc<Setup> {
    Arc::new(Setup {
        half: Half::default(),
        data: AtomicBool::new(false),
        count: Waiters::default(),
    })
}

/// The poller reports readiness while the task tries its syscall and registers.
///
/// Guards the waiter handshake resting on the edge count, bumped under the descriptor's lock
/// and compared with the ticket the task took before its syscall: when it rested on an
/// atomic `ready` flag alone (set by the poller, re-read by the task under the
/// lock), loom found interleavings where the task registered after the poller had released
/// an empty list, and stayed `Pending` with nobody to wake it.
#[test]
fn readiness_is_never_lost() {
    loom::model(|| {
        let s = setup();
        let flag = Arc::new(Flag::default());
        let waker = Waker::from(flag.clone());
        let poller = spawn_poller(&s);
        let first = op(&s.half, &s.data, &waker, &s.count);
        poller.join().unwrap();
        let lost = "lost wake-up: readiness came, nobody woke the task";
        assert_goes_on(first, &flag, lost, || {
            op(&s.half, &s.data, &waker, &s.count)
        });
        assert_eq!(s.count.0.load(SeqCst), 0);
    });
}

/// A short read takes what is there and leaves the direction drained at its ticket; the
/// next read skips its syscall, while the poller reports new data: data that came after the
/// short read must reach the reader.
///
/// Guards the skip's ticket: a drained mark names the edge count taken before the short
/// transfer, so any edge counted after it makes the wait retry or release.
#[test]
fn a_read_that_skips_its_syscall_after_a_short_one_gets_later_data() {
    loom::model(|| {
        let s = setup();
        let flag = Arc::new(Flag::default());
        let waker = Waker::from(flag.clone());
        let poller = spawn_poller(&s);
        let short = s.half.prepare().unwrap();
        s.data.swap(false, SeqCst); // the short read: everything there, maybe nothing
        s.half.note_drained(short);
        let first = transfer(&s.half, &s.data, &waker, &s.count);
        poller.join().unwrap();
        if first == Outcome::Pending && s.data.load(SeqCst) {
            assert!(flag.0.load(SeqCst), "lost wake-up after a skipped syscall");
            assert_eq!(transfer(&s.half, &s.data, &waker, &s.count), Outcome::Done);
        }
    });
}

/// A mark that stops a read's syscall skip for good once the poller stored it before the
/// edge that brought it (`Half::set_hung_up`, `Half::set_urgent`), raced against a short
/// read and the read after it: the second read must not wait for an edge that came before
/// its ticket. `lost` says what a failure means.
fn a_read_after_a_short_one_sees_an_earlier_mark(mark: fn(&Half), lost: &'static str) {
    loom::model(move || {
        let s = setup();
        let flag = Arc::new(Flag::default());
        let waker = Waker::from(flag.clone());
        let poller = {
            let s = s.clone();
            thread::spawn(move || {
                s.data.store(true, SeqCst); // what the mark stands for: never consumed
                mark(&s.half);
                let mut out = Vec::new();
                s.half.set_ready(&mut out, &s.count);
                wake_all(out);
            })
        };
        let short = s.half.prepare().unwrap();
        s.half.note_drained(short);
        let first = transfer(&s.half, &s.data, &waker, &s.count);
        poller.join().unwrap();
        let lost = "a read waits for an end of stream that came";
        assert_goes_on(first, &flag, lost, || {
            transfer(&s.half, &s.data, &waker, &s.count)
        });
    });
}

/// The peer's end of stream (a final state: every read returns it at once) comes before or
/// while a short read drains the data: the next read must not wait for an edge that will
/// never come.
///
/// Guards the hang-up mark: when the end of stream's edge was counted before the short
/// read's ticket, only the mark (stored before that edge) stops the skip; this hung
/// tokio's `io::copy` through gort's `AsyncRead` before the mark existed.
#[test]
fn a_read_after_a_short_one_sees_an_earlier_end_of_stream() {
    a_read_after_a_short_one_sees_an_earlier_mark(
        Half::set_hung_up,
        "a read waits for an end of stream that came",
    );
}

/// The same race with urgent data in place of the end of stream: a read stops short at the
/// urgent mark with bytes queued behind it, and when the edge that brought them was counted
/// before the short read's ticket, only the urgent mark (stored before that edge) stops
/// the skip. Guards `Half::set_urgent`: without it a stream with `MSG_OOB` data in its
/// middle hung (`abuse_compat.rs`, `urgent_data_in_the_middle_of_a_stream`).
#[test]
fn a_read_after_a_short_one_sees_earlier_urgent_data() {
    a_read_after_a_short_one_sees_an_earlier_mark(
        Half::set_urgent,
        "a read waits for bytes queued behind an urgent mark",
    );
}

/// An edge with no task waiting takes no lock (`WAITING` clear); a release by expiry clears
/// the bit while the task, its deadline cleared, registers again and the poller reports
/// readiness: the re-registered task is still woken.
///
/// Guards the lock-free path of `set_ready`: the bit that a release clears and a
/// registration sets again must be seen by every edge that comes after the registration.
#[test]
fn a_waiter_released_by_expiry_and_registered_again_gets_the_next_edge() {
    loom::model(|| {
        let s = setup();
        let mut out = Vec::new();
        // An edge with nobody waiting: counted, nothing released.
        s.half.set_ready(&mut out, &s.count);
        assert!(out.is_empty());
        s.half.set_deadline(10, 0, &mut out, &s.count, |_| {});
        let flag = Arc::new(Flag::default());
        let waker = Waker::from(flag.clone());
        assert_eq!(op(&s.half, &s.data, &waker, &s.count), Outcome::Pending);
        let timer = {
            let s = s.clone();
            thread::spawn(move || {
                let mut out = Vec::new();
                s.half.expire(10, &mut out, &s.count, |_| {});
                wake_all(out);
            })
        };
        let poller = spawn_poller(&s);
        // The task clears its deadline and polls again: it may still be registered (the fire
        // has not come), time out (it has; clearing the deadline came after), or register anew.
        let mut out = Vec::new();
        s.half.set_deadline(0, 5, &mut out, &s.count, |_| {});
        wake_all(out);
        let again = Arc::new(Flag::default());
        let second = op(&s.half, &s.data, &Waker::from(again.clone()), &s.count);
        timer.join().unwrap();
        poller.join().unwrap();
        if second == Outcome::Pending {
            assert!(
                again.0.load(SeqCst),
                "lost wake-up: the re-registered task missed the edge"
            );
        }
        assert_eq!(op(&s.half, &s.data, &waker, &s.count), Outcome::Done);
        assert_eq!(s.count.0.load(SeqCst), 0);
    });
}

/// The deadline timer fires while the task blocks: the task times out (now or when woken).
#[test]
fn deadline_expiry_wakes_the_blocked_task() {
    loom::model(|| {
        let s = setup();
        let mut out = Vec::new();
        let mut armed = None;
        s.half
            .set_deadline(10, 0, &mut out, &s.count, |a| armed = Some(a));
        assert_eq!(armed, Some(Arm::At(10)));
        let flag = Arc::new(Flag::default());
        let waker = Waker::from(flag.clone());
        let timer = {
            let s = s.clone();
            thread::spawn(move || {
                let mut out = Vec::new();
                assert!(s.half.expire(10, &mut out, &s.count, |_| {}));
                wake_all(out);
            })
        };
        let first = op(&s.half, &s.data, &waker, &s.count);
        timer.join().unwrap();
        if first == Outcome::Pending {
            assert!(
                flag.0.load(SeqCst),
                "lost wake-up: the deadline passed silently"
            );
        }
        let timed_out = Outcome::Failed(Fail::TimedOut);
        assert_eq!(op(&s.half, &s.data, &waker, &s.count), timed_out);
        assert_eq!(s.count.0.load(SeqCst), 0);
    });
}

/// A deadline cleared while its timer fires: whichever comes first, the fire of the
/// cleared arming leaves the direction usable, and readiness still reaches the task.
#[test]
fn a_cleared_deadline_makes_its_fire_harmless() {
    loom::model(|| {
        let s = setup();
        let mut out = Vec::new();
        s.half.set_deadline(10, 0, &mut out, &s.count, |_| {});
        let flag = Arc::new(Flag::default());
        let waker = Waker::from(flag.clone());
        let timer = {
            let s = s.clone();
            thread::spawn(move || {
                let mut out = Vec::new();
                s.half.expire(10, &mut out, &s.count, |_| {});
                wake_all(out);
            })
        };
        let clearer = {
            let s = s.clone();
            thread::spawn(move || {
                let mut out = Vec::new();
                s.half.set_deadline(0, 5, &mut out, &s.count, |_| {});
                wake_all(out);
            })
        };
        let first = op(&s.half, &s.data, &waker, &s.count);
        timer.join().unwrap();
        clearer.join().unwrap();
        assert!(
            !s.half.is_expired(),
            "a cleared deadline left the direction timed out"
        );
        s.data_arrives();
        if first == Outcome::Pending {
            assert!(flag.0.load(SeqCst));
        }
        assert_eq!(op(&s.half, &s.data, &waker, &s.count), Outcome::Done);
        assert_eq!(s.count.0.load(SeqCst), 0);
    });
}

/// A deadline moved later while its old timer fires: either the move comes first and is
/// only recorded (the fire then re-arms the timer for it instead of expiring), or the fire
/// comes first and expires the old deadline (the move then re-arms and clears the expiry).
/// Either way the timer ends armed exactly once for the new deadline, the direction is not
/// timed out, and that arming's fire expires it.
#[test]
fn a_moved_deadline_makes_the_old_fire_follow_it() {
    loom::model(|| {
        let s = setup();
        let armings = Arc::new(std::sync::Mutex::new(Vec::new()));
        let mut out = Vec::new();
        s.half.set_deadline(10, 0, &mut out, &s.count, |_| {});
        let timer = {
            let (s, armings) = (s.clone(), armings.clone());
            thread::spawn(move || {
                let mut out = Vec::new();
                s.half
                    .expire(10, &mut out, &s.count, |a| armings.lock().unwrap().push(a));
                wake_all(out);
            })
        };
        let mut out = Vec::new();
        s.half.set_deadline(20, 5, &mut out, &s.count, |a| {
            armings.lock().unwrap().push(a)
        });
        wake_all(out);
        timer.join().unwrap();
        assert_eq!(*armings.lock().unwrap(), vec![Arm::At(20)]);
        assert!(
            !s.half.is_expired(),
            "the old fire timed out the moved deadline"
        );
        let mut out = Vec::new();
        assert!(s.half.expire(20, &mut out, &s.count, |_| {}));
        assert!(s.half.is_expired());
    });
}

/// The socket is closed while the task blocks: the task fails (now or when woken).
#[test]
fn close_wakes_the_blocked_task() {
    loom::model(|| {
        let s = setup();
        let flag = Arc::new(Flag::default());
        let waker = Waker::from(flag.clone());
        let closer = {
            let s = s.clone();
            thread::spawn(move || {
                let mut out = Vec::new();
                s.half.close(&mut out, &s.count);
                wake_all(out);
            })
        };
        let first = op(&s.half, &s.data, &waker, &s.count);
        closer.join().unwrap();
        if first == Outcome::Pending {
            assert!(
                flag.0.load(SeqCst),
                "lost wake-up: closed under a blocked task"
            );
        }
        let closed = Outcome::Failed(Fail::Closed);
        assert_eq!(op(&s.half, &s.data, &waker, &s.count), closed);
        assert_eq!(s.count.0.load(SeqCst), 0);
    });
}

/// Readiness and expiry race each other and a blocked task: the task is woken, and on its
/// next poll it times out (Go checks the deadline before the syscall).
#[test]
fn readiness_and_expiry_together_wake_the_task_once_released() {
    loom::model(|| {
        let s = setup();
        let mut out = Vec::new();
        s.half.set_deadline(10, 0, &mut out, &s.count, |_| {});
        let flag = Arc::new(Flag::default());
        let waker = Waker::from(flag.clone());
        let first = op(&s.half, &s.data, &waker, &s.count);
        assert_eq!(first, Outcome::Pending);
        let poller = spawn_poller(&s);
        let mut out = Vec::new();
        s.half.expire(10, &mut out, &s.count, |_| {});
        wake_all(out);
        poller.join().unwrap();
        assert!(flag.0.load(SeqCst));
        let timed_out = Outcome::Failed(Fail::TimedOut);
        assert_eq!(op(&s.half, &s.data, &waker, &s.count), timed_out);
        assert_eq!(s.count.0.load(SeqCst), 0);
    });
}

/// The deadline in effect is set again (the lock-free path) while its timer fires: the
/// outcome is one of the two orders, never a mix: set first, then the fire expires it; or the
/// fire first, then the set clears `expired` and re-arms the timer.
#[test]
fn setting_the_deadline_in_effect_again_races_its_fire() {
    loom::model(|| {
        let s = setup();
        let mut out = Vec::new();
        s.half.set_deadline(10, 0, &mut out, &s.count, |_| {});
        let timer = {
            let s = s.clone();
            thread::spawn(move || {
                let mut out = Vec::new();
                s.half.expire(10, &mut out, &s.count, |_| {});
                wake_all(out);
            })
        };
        let armings = std::sync::Mutex::new(Vec::new());
        s.half.set_deadline(10, 0, &mut out, &s.count, |a| {
            armings.lock().unwrap().push(a)
        });
        timer.join().unwrap();
        let armings = armings.into_inner().unwrap();
        if s.half.is_expired() {
            assert!(
                armings.is_empty(),
                "expired, yet the set re-armed: {armings:?}"
            );
        } else {
            assert_eq!(armings, vec![Arm::At(10)], "cleared without re-arming");
        }
    });
}

/// A task gives its blocked read up (its future dropped: `Half::cancel`) while another task
/// registers on the same direction and the poller reports readiness: the other task is
/// still woken (a cancel never empties a slot that a release handed to a later
/// registration), and the waiter count ends at zero once both futures are gone.
///
/// Guards the release count in each registration: a cancel that went by slot alone, after
/// a release, could take the waker of the task that reused the slot.
#[test]
fn a_waiter_giving_up_never_takes_another_tasks_wake_up() {
    loom::model(|| {
        let s = setup();
        let a_waker = Waker::from(Arc::new(Flag::default()));
        let mut a_reg = None;
        let a = op_as(&s.half, &s.data, &a_waker, &s.count, &mut a_reg);
        assert_eq!(a, Outcome::Pending);
        let b = {
            let s = s.clone();
            thread::spawn(move || {
                let flag = Arc::new(Flag::default());
                let mut reg = None;
                let first = op_as(
                    &s.half,
                    &s.data,
                    &Waker::from(flag.clone()),
                    &s.count,
                    &mut reg,
                );
                (first, flag, reg)
            })
        };
        let poller = spawn_poller(&s);
        drop(s.half.cancel(a_reg.unwrap(), &s.count));
        poller.join().unwrap();
        let (first, flag, mut b_reg) = b.join().unwrap();
        let waker = Waker::from(flag.clone());
        let lost = "lost wake-up: a waiter that gave up took another's";
        assert_goes_on(first, &flag, lost, || {
            op_as(&s.half, &s.data, &waker, &s.count, &mut b_reg)
        });
        if let Some(r) = b_reg {
            drop(s.half.cancel(r, &s.count));
        }
        assert_eq!(s.count.0.load(SeqCst), 0);
    });
}
