//! Loom models of the park/unpark/poller hand-off (`src/park.rs` over `src/idle.rs`): the
//! real source, compiled here against loom's atomics, mutex and condition variable
//! (`gort_loom` under `--cfg loom`).
//!
//! Behind the hand-off's two traits sit a model scheduler ([`World`]: a global queue that is
//! a count of tasks, one P, one heap summary, threads started as loom threads) and a model
//! poller ([`ModelPoller`]). loom has no clock, so a poll ends at its deadline only when no
//! timer earlier than that deadline is pending; otherwise only a break ends it. The M loop's
//! phases 1-4 (finding work on a held P) are modelled as taking a queued task; phases 5-7 and
//! the submitter's `wakep`/`startm`/`wake_netpoller` are the real ones. Each model ends, once
//! the task ran or the timer's deadline came, by the runtime's shutdown path (every idle M
//! handed `shutdown`, the poller broken).
//!
//! A lost wake-up shows up as a loom deadlock (an M parked, or a poller asleep past a pending
//! timer, forever; loom's timed waits never time out, so the park backstop cannot hide one)
//! or a failed assertion.
//!
//! Run: `RUSTFLAGS="--cfg loom" LOOM_MAX_PREEMPTIONS=2 cargo test --release -p gort-sched --test loom_park`
#![cfg(loom)]

#[allow(dead_code)]
#[path = "../src/idle.rs"]
mod idle;
#[allow(dead_code)]
#[path = "../src/park.rs"]
mod park;

use gort_loom::{Condvar, Mutex};
use gort_timer::Nanos;
use idle::{Idle, IdleP, MHandle};
use loom::sync::atomic::{AtomicBool, AtomicI64, AtomicUsize, Ordering::Release, Ordering::SeqCst};
use loom::thread;
use park::{Back, Poll, Polled, Sched};
use std::sync::Arc;

/// A P: only its status word, which the idle lists keep.
struct ModelP {
    idle: AtomicBool,
}

impl IdleP for ModelP {
    fn id(&self) -> usize {
        0
    }

    fn set_idle(&self, idle: bool) {
        self.idle.store(idle, SeqCst);
    }
}

/// A poller over one heap summary: `poll(until)` returns once a `wake` came (before or during
/// it), or when `until` is reached with no timer pending before it; sleeping past a pending
/// earlier timer blocks until a `wake`.
struct ModelPoller {
    /// The earliest pending timer (0 = none): one P's `timer0_when`.
    timer0: Arc<AtomicI64>,
    woken: Mutex<bool>,
    cv: Condvar,
    /// Set when a poll reached its deadline: the timer ran then, on time.
    deadline_came: AtomicBool,
    /// Whether a task waits on a socket: a poll without a deadline then blocks until a `wake`.
    sockets: AtomicBool,
}

impl Poll for ModelPoller {
    fn poll(&self, until: Nanos, _latest: Nanos, _readied: &mut Vec<std::task::Waker>) {
        let mut woken = self.woken.lock();
        loop {
            if std::mem::take(&mut *woken) {
                return;
            }
            let t = self.timer0.load(SeqCst);
            if until == 0 && t == 0 && self.sockets.load(SeqCst) {
                woken = self.cv.wait(woken);
                continue;
            }
            if t == 0 || t >= until {
                self.deadline_came.store(true, SeqCst);
                return;
            }
            woken = self.cv.wait(woken);
        }
    }

    fn wake(&self) {
        *self.woken.lock() = true;
        self.cv.notify_one();
    }
}

/// The model scheduler.
struct World {
    idle: Idle<ModelP>,
    poller: ModelPoller,
    /// Tasks in the global queue.
    queue: AtomicUsize,
    shutdown: AtomicBool,
    /// Ms started by `startm` (the submitter joins them).
    started: std::sync::Mutex<Vec<thread::JoinHandle<()>>>,
    /// Set when an M took on the `wakep` of a timer for its own task (`owe_timer_wakep`).
    owed: AtomicBool,
}

impl World {
    fn new() -> Arc<World> {
        Arc::new(World {
            idle: Idle::new(),
            poller: ModelPoller {
                timer0: Arc::new(AtomicI64::new(0)),
                woken: Mutex::new(false),
                cv: Condvar::new(),
                deadline_came: AtomicBool::new(false),
                sockets: AtomicBool::new(false),
            },
            queue: AtomicUsize::new(0),
            shutdown: AtomicBool::new(false),
            started: std::sync::Mutex::new(Vec::new()),
            owed: AtomicBool::new(false),
        })
    }

    fn held_p() -> Arc<ModelP> {
        Arc::new(ModelP {
            idle: AtomicBool::new(false),
        })
    }

    /// Phases 1-4 of the M loop: takes a queued task if there is one.
    fn take_task(&self) -> bool {
        let mut n = self.queue.load(SeqCst);
        while n > 0 {
            match self.queue.compare_exchange(n, n - 1, SeqCst, SeqCst) {
                Ok(_) => return true,
                Err(actual) => n = actual,
            }
        }
        false
    }

    /// The model is over: the runtime's shutdown path (runtime.rs).
    fn end(&self) {
        self.shutdown.store(true, SeqCst);
        for m in self.idle.take_all_ms() {
            m.shutdown();
        }
        self.poller.wake();
    }

    /// Joins every M that `startm` started.
    fn join_started(&self) {
        loop {
            let Some(h) = self.started.lock().unwrap().pop() else {
                return;
            };
            h.join().unwrap();
        }
    }
}

impl Sched for Arc<World> {
    type P = ModelP;
    type Poller = ModelPoller;

    fn idle(&self) -> &Idle<ModelP> {
        &self.idle
    }

    fn poller(&self) -> &ModelPoller {
        &self.poller
    }

    fn is_shutdown(&self) -> bool {
        self.shutdown.load(SeqCst)
    }

    fn now(&self) -> Nanos {
        1
    }

    fn net_waiting(&self) -> bool {
        self.poller.sockets.load(SeqCst)
    }

    fn global_has_work(&self) -> bool {
        self.queue.load(SeqCst) > 0
    }

    fn work_queued(&self) -> bool {
        self.queue.load(SeqCst) > 0
    }

    fn run_idle_timers(&self, poll_until: Nanos, _now: Nanos) -> (Nanos, Nanos) {
        let t = self.poller.timer0.load(SeqCst);
        let until = match (poll_until, t) {
            (0, x) | (x, 0) => x,
            (a, b) => a.min(b),
        };
        (until, t)
    }

    fn timers_due(&self, _now: Nanos) -> bool {
        false
    }

    /// The models call `wake_netpoller` with `own` only from an M that holds a P.
    fn owe_timer_wakep(&self) -> bool {
        self.owed.store(true, SeqCst);
        true
    }

    fn start_m(&self, p: Arc<ModelP>, spinning: bool) {
        let w = self.clone();
        let h = thread::spawn(move || m_loop(w, Arc::new(MHandle::default()), (p, spinning)));
        self.started.lock().unwrap().push(h);
    }
}

/// An M holding a P: the M loop, phases 1-4 modelled, 5-7 real. Returns at shutdown.
fn m_loop(w: Arc<World>, me: Arc<MHandle<ModelP>>, (mut p, mut spinning): Back<ModelP>) {
    loop {
        if w.is_shutdown() {
            return;
        }
        if w.take_task() {
            w.end();
            return;
        }
        let was_spinning = match park::release_and_recheck(&w, p, spinning) {
            Ok(was_spinning) => was_spinning,
            Err(back) => {
                (p, spinning) = back;
                continue;
            }
        };
        match park::poll(&w, 0, was_spinning, &mut Vec::new()) {
            Polled::Holds(back) => {
                (p, spinning) = back;
                if w.poller.deadline_came.load(SeqCst) {
                    w.end();
                    return;
                }
                continue;
            }
            Polled::Shutdown => return,
            Polled::Park => {}
        }
        match park::stopm(&w, &me) {
            Some(back) => (p, spinning) = back,
            None => return,
        }
    }
}

/// `push_task` from a thread without a P: publish the task, then `wakep`.
fn submit(w: &Arc<World>) {
    w.queue.fetch_add(1, SeqCst);
    park::wakep(w);
}

/// A spinning M giving up its P races with a task submitted from outside: the task always
/// runs (no M parks forever while it sits in the queue).
#[test]
fn spinner_going_idle_vs_submit() {
    loom::model(|| {
        let w = World::new();
        w.idle.inc_spinning();
        let w1 = w.clone();
        let m = thread::spawn(move || {
            m_loop(w1, Arc::new(MHandle::default()), (World::held_p(), true))
        });
        submit(&w);
        m.join().unwrap();
        w.join_started();
        assert_eq!(w.queue.load(SeqCst), 0, "the submitted task never ran");
    });
}

/// Same with an M that was not spinning (it reached the idle path directly) and a second M
/// parking without a P. With Go's rule (only spinners re-check after releasing their P) the
/// task is lost: the non-spinner's check of the global queue under the scheduler lock races
/// with the lock-free push.
#[test]
fn idle_m_vs_submit_with_a_parked_m() {
    loom::model(|| {
        let w = World::new();
        let w1 = w.clone();
        let m = thread::spawn(move || {
            m_loop(w1, Arc::new(MHandle::default()), (World::held_p(), false))
        });
        let w2 = w.clone();
        let parked = thread::spawn(move || {
            let me = Arc::new(MHandle::default());
            if let Some(back) = park::stopm(&w2, &me) {
                m_loop(w2, me, back);
            }
        });
        submit(&w);
        m.join().unwrap();
        parked.join().unwrap();
        w.join_started();
        assert_eq!(w.queue.load(SeqCst), 0, "the submitted task never ran");
    });
}

/// A timer added earlier than the one an M is about to poll for, while that M gives up its P
/// and enters the poller: `wake_netpoller` breaks the poll or starts an M, or the poller's
/// scan sees the new timer; the poller never sleeps past it (that would be a deadlock here).
#[test]
fn timer_added_while_m_enters_poller() {
    loom::model(|| {
        let w = World::new();
        w.poller.timer0.store(10, SeqCst);
        let w1 = w.clone();
        let m = thread::spawn(move || {
            m_loop(w1, Arc::new(MHandle::default()), (World::held_p(), false))
        });
        // Timers::add of a timer at 5 (its summary store is `Release`, as
        // `update_timer0_when`'s), then Host::wake_netpoller(5), whose fence is the hand-off.
        w.poller.timer0.store(5, Release);
        park::wake_netpoller(&w, 5, false);
        m.join().unwrap();
        w.join_started();
        assert!(
            w.poller.deadline_came.load(SeqCst),
            "no poll reached its deadline"
        );
    });
}

/// A task on an M that holds a P arms a timer for itself (a `Sleep`) while nobody polls and
/// another M is parked: the arming M owes the `wakep` instead of making it
/// (`owe_timer_wakep`), runs no other task and goes idle itself; its own poll phase sees the
/// timer and polls for it (a parked M and nobody polling past the timer would deadlock here).
#[test]
fn own_timer_owed_by_an_m_that_goes_idle() {
    loom::model(|| {
        let w = World::new();
        let w2 = w.clone();
        let parked = thread::spawn(move || {
            let me = Arc::new(MHandle::default());
            if let Some(back) = park::stopm(&w2, &me) {
                m_loop(w2, me, back);
            }
        });
        w.poller.timer0.store(5, Release);
        park::wake_netpoller(&w, 5, true);
        assert!(
            w.owed.load(SeqCst),
            "nobody polled, yet the arming M owed nothing"
        );
        m_loop(
            w.clone(),
            Arc::new(MHandle::default()),
            (World::held_p(), false),
        );
        parked.join().unwrap();
        w.join_started();
        assert!(
            w.poller.deadline_came.load(SeqCst),
            "no poll reached its deadline"
        );
    });
}

/// The same, but the arming M runs another task (one that never reaches the scheduler in
/// the model) instead of going idle: it pays the owed `wakep` before that task
/// (`worker.rs`), and the other M, or one it starts, polls with the timer in view.
#[test]
fn own_timer_owed_by_an_m_that_runs_another_task() {
    loom::model(|| {
        let w = World::new();
        w.poller.timer0.store(10, SeqCst);
        let w1 = w.clone();
        let m = thread::spawn(move || {
            m_loop(w1, Arc::new(MHandle::default()), (World::held_p(), false))
        });
        w.poller.timer0.store(5, Release);
        park::wake_netpoller(&w, 5, true);
        if w.owed.load(SeqCst) {
            park::wakep(&w);
        }
        // This M now runs a task that keeps its P past the end of the model.
        m.join().unwrap();
        w.join_started();
        assert!(
            w.poller.deadline_came.load(SeqCst),
            "no poll reached its deadline"
        );
    });
}

/// A task submitted while the idle M blocks in the poller on sockets (no deadline), racing
/// with a socket event that ends that poll: the submitter's `wakep` passes its spinner to the
/// poller M (which takes the idle P), takes it back if the poller left first and starts an M,
/// or the M's re-check sees the task. The task always runs, and no passed spinner is left
/// for nobody to take.
#[test]
fn submit_vs_an_m_in_the_poller_on_sockets() {
    loom::model(|| {
        let w = World::new();
        w.poller.sockets.store(true, SeqCst);
        let w1 = w.clone();
        let m = thread::spawn(move || {
            m_loop(w1, Arc::new(MHandle::default()), (World::held_p(), false))
        });
        let w2 = w.clone();
        let event = thread::spawn(move || w2.poller.wake());
        submit(&w);
        m.join().unwrap();
        event.join().unwrap();
        w.join_started();
        assert_eq!(w.queue.load(SeqCst), 0, "the submitted task never ran");
        assert!(
            !w.idle.poller_spinner.load(SeqCst),
            "a spinner passed to the poller was left for nobody"
        );
    });
}

/// sysmon parking (sysmon.rs, "Parking") races with an M taking the last idle P: sysmon
/// publishes `parked`, then looks at `npidle` once more; the taker updates `npidle`, then
/// loads `parked` (`Idle::alert_sysmon`). Either sysmon's look sees the P taken (and it stays
/// up) or the taker alerts it: never a parked sysmon that nobody alerts while a P runs.
#[test]
fn sysmon_parking_vs_a_p_take() {
    loom::model(|| {
        let idle = Arc::new(Idle::<ModelP>::new());
        idle.pidleput(World::held_p());
        let alerted = Arc::new(AtomicBool::new(false));
        let a = alerted.clone();
        idle.set_sysmon_alert(Box::new(move || a.store(true, SeqCst)));
        let i1 = idle.clone();
        let sysmon = thread::spawn(move || {
            i1.set_sysmon_parked(true);
            let parks = i1.npidle() >= 1;
            if !parks {
                i1.set_sysmon_parked(false);
            }
            parks
        });
        let taken = idle.pidleget();
        assert!(taken.is_some());
        let parked = sysmon.join().unwrap();
        assert!(
            !parked || alerted.load(SeqCst),
            "sysmon parked with a P running and nobody alerted it"
        );
    });
}
