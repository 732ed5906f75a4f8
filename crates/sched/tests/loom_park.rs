//! Loom models of the scheduler's park/unpark protocol (`src/idle.rs`, `src/worker.rs`
//! `find_runnable`/`stopm`, `src/shared.rs` `wakep`/`startm`/`wake_netpoller_arc`).
//!
//! These are models of the protocol, step for step in the same order and with the same
//! orderings as the real code, written with loom's primitives because the real M loop runs
//! through the mio poller and its timerfd, which loom cannot instrument (the run queues
//! themselves are modelled from their real source in `loom_runq.rs`). A lost wake-up shows up as a loom
//! deadlock (an M parked forever while work is queued) or a failed assertion.
//!
//! Run: `RUSTFLAGS="--cfg loom" LOOM_MAX_PREEMPTIONS=2 cargo test --release -p gort-sched --test loom_park`
#![cfg(loom)]

use loom::sync::atomic::{fence, AtomicBool, AtomicI64, AtomicUsize, Ordering::*};
use loom::sync::{Arc, Condvar, Mutex};
use loom::thread;

/// An M's hand-off slot (`MHandle`).
#[derive(Default)]
struct Slot {
    state: Mutex<(bool /* handed a P */, bool /* shutdown */)>,
    cv: Condvar,
}

#[derive(Default)]
struct Lists {
    pidle: usize,
    midle: Vec<Arc<Slot>>,
}

#[derive(Default)]
struct Sched {
    queue: AtomicUsize, // queued tasks (the global queue / a P's queue)
    taken: AtomicBool,  // the task ran
    lists: Mutex<Lists>,
    npidle: AtomicUsize,
    nmspinning: AtomicUsize,
}

impl Sched {
    fn take_task(&self) -> bool {
        let mut n = self.queue.load(SeqCst);
        while n > 0 {
            match self.queue.compare_exchange(n, n - 1, SeqCst, SeqCst) {
                Ok(_) => {
                    self.taken.store(true, SeqCst);
                    // The model ends: release every parked M (the runtime's shutdown path).
                    let ms = std::mem::take(&mut self.lists.lock().unwrap().midle);
                    for m in ms {
                        m.state.lock().unwrap().1 = true;
                        m.cv.notify_one();
                    }
                    return true;
                }
                Err(actual) => n = actual,
            }
        }
        false
    }

    fn pidleget(&self) -> bool {
        let mut l = self.lists.lock().unwrap();
        if l.pidle == 0 {
            return false;
        }
        l.pidle -= 1;
        self.npidle.fetch_sub(1, SeqCst);
        true
    }

    /// `find_runnable` + `stopm` of one M that holds a P and is spinning; returns when the
    /// task ran (by anyone).
    fn m_loop(this: Arc<Sched>, me: Arc<Slot>, mut spinning: bool) {
        let s = &*this;
        loop {
            if s.taken.load(SeqCst) || s.take_task() {
                return;
            }
            // release_p: under the lock, refuse if the global queue has work.
            {
                let mut l = s.lists.lock().unwrap();
                if s.queue.load(SeqCst) > 0 {
                    continue;
                }
                l.pidle += 1;
                s.npidle.fetch_add(1, SeqCst);
            }
            // Every M, spinning or not, re-checks after publishing its idle P: the global queue is
            // pushed to without the lock, so the check under the lock above is not enough
            // (this model found that lost wake-up in an earlier version of find_runnable).
            let was_spinning = std::mem::take(&mut spinning);
            if was_spinning {
                s.nmspinning.fetch_sub(1, SeqCst);
            }
            fence(SeqCst); // Idle::dec_spinning / Idle::idle_fence
            if s.queue.load(SeqCst) > 0 && s.pidleget() {
                if was_spinning {
                    spinning = true;
                    s.nmspinning.fetch_add(1, SeqCst);
                }
                continue;
            }
            // stopm: mput, then re-check shutdown (the model's end), then wait.
            s.lists.lock().unwrap().midle.push(me.clone());
            if s.taken.load(SeqCst) {
                return;
            }
            let mut s = me.state.lock().unwrap();
            while !s.0 && !s.1 {
                s = me.cv.wait(s).unwrap();
            }
            if s.1 {
                return;
            }
            s.0 = false;
            spinning = true; // startm(None, true) hands a spinning M
        }
    }

    /// `push_task` from a thread without a P, then `wakep` -> `startm`.
    fn submit(this: Arc<Sched>) -> Option<thread::JoinHandle<()>> {
        let s = &*this;
        s.queue.fetch_add(1, SeqCst);
        // Idle::wakep_gate
        fence(SeqCst);
        if s.npidle.load(SeqCst) == 0
            || s.nmspinning.load(SeqCst) != 0
            || s.nmspinning.compare_exchange(0, 1, SeqCst, SeqCst).is_err()
        {
            return None;
        }
        // startm_pick
        let m = {
            let mut l = s.lists.lock().unwrap();
            if l.pidle == 0 {
                drop(l);
                s.nmspinning.fetch_sub(1, SeqCst);
                return None;
            }
            l.pidle -= 1;
            s.npidle.fetch_sub(1, SeqCst);
            l.midle.pop()
        };
        match m {
            Some(m) => {
                m.state.lock().unwrap().0 = true;
                m.cv.notify_one();
                None
            }
            None => {
                // spawn_m: a new M starts with the P, spinning.
                let s2 = this.clone();
                Some(thread::spawn(move || {
                    Sched::m_loop(s2, Arc::new(Slot::default()), true)
                }))
            }
        }
    }
}

/// A spinning M giving up its P races with a task submitted from outside: the task always
/// runs (no M parks forever while it sits in the queue).
#[test]
fn spinner_going_idle_vs_submit() {
    loom::model(|| {
        let s = Arc::new(Sched::default());
        s.nmspinning.store(1, SeqCst);
        let s1 = s.clone();
        let m = thread::spawn(move || Sched::m_loop(s1, Arc::new(Slot::default()), true));
        let extra = Sched::submit(s.clone());
        m.join().unwrap();
        if let Some(e) = extra {
            e.join().unwrap();
        }
        assert!(s.taken.load(SeqCst), "the submitted task never ran");
    });
}

/// Same with an M that was not spinning (it reached the idle path directly) and a second
/// parked M already in the idle list.
#[test]
fn idle_m_vs_submit_with_a_parked_m() {
    loom::model(|| {
        let s = Arc::new(Sched::default());
        let parked = Arc::new(Slot::default());
        s.lists.lock().unwrap().midle.push(parked.clone());
        let s1 = s.clone();
        let m = thread::spawn(move || Sched::m_loop(s1, Arc::new(Slot::default()), false));
        let s2 = s.clone();
        let p = thread::spawn(move || {
            // The parked M, woken by a hand-off, runs the M loop.
            let mut st = parked.state.lock().unwrap();
            while !st.0 && !st.1 {
                st = parked.cv.wait(st).unwrap();
            }
            let handed = st.0;
            st.0 = false;
            drop(st);
            if handed {
                Sched::m_loop(s2.clone(), parked.clone(), true);
            }
        });
        let extra = Sched::submit(s.clone());
        m.join().unwrap();
        p.join().unwrap();
        if let Some(e) = extra {
            e.join().unwrap();
        }
        assert!(s.taken.load(SeqCst));
    });
}

/// `wake_netpoller` vs an M entering the poller: a timer added earlier than anything the
/// poller saw is noticed: the poller saw it, or the adder broke the poll, or it woke an M.
#[test]
fn timer_added_while_m_enters_poller() {
    loom::model(|| {
        let timer0 = Arc::new(AtomicI64::new(0)); // a P's wake_time (0 = none)
        let lastpoll = Arc::new(AtomicI64::new(1));
        let poll_until = Arc::new(AtomicI64::new(0));
        let broken = Arc::new(AtomicBool::new(false));
        let woke_m = Arc::new(AtomicBool::new(false));

        let (t, lp, pu) = (timer0.clone(), lastpoll.clone(), poll_until.clone());
        let poller = thread::spawn(move || {
            // find_runnable: the earliest timer over all Ps, then claim the poller role.
            fence(SeqCst);
            let seen = t.load(SeqCst);
            if lp.swap(0, SeqCst) != 0 {
                pu.store(if seen == 0 { 0 } else { seen }, SeqCst);
            }
            seen
        });
        // The adder (Timers::add -> Host::wake_netpoller with when = 5).
        timer0.store(5, SeqCst);
        fence(SeqCst);
        if lastpoll.load(SeqCst) == 0 {
            let until = poll_until.load(SeqCst);
            if until == 0 || until > 5 {
                broken.store(true, SeqCst);
            }
        } else {
            woke_m.store(true, SeqCst);
        }
        let seen = poller.join().unwrap();
        let poller_will_wake_in_time = seen != 0 && seen <= 5;
        assert!(
            poller_will_wake_in_time || broken.load(SeqCst) || woke_m.load(SeqCst),
            "a timer added during the poller's entry was lost"
        );
    });
}
