//! The blocking pool behind `spawn_blocking`: a bounded set of threads, started on demand,
//! that exit after an idle timeout (Go has no such pool: a goroutine in a syscall simply
//! holds its M while `handoffp` gives its P away; here closures that block get threads of
//! their own so that Ms stay free for tasks).
//!
//! Under a paused clock (`paused.rs`) a closure counts as a task: queued, it is counted in
//! `queued`; running, its thread holds the clock as a thread running user code without a P
//! (`context::enter_holding_clock`), taken before it leaves the queue's count, so the clock
//! never sees it as neither. A `block_on` in the closure lends that hold out while it parks
//! (`block_on.rs`): the thread then waits on the runtime, as a task awaiting would.

use crate::context;
use crate::shared::Shared;
use crate::task::{catch_user_here, Schedule, Task};
use crate::threads::{join_until, ThreadConfig};
use parking_lot::{Condvar, Mutex};
use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{
    AtomicU64, AtomicUsize,
    Ordering::{Relaxed, SeqCst},
};
use std::sync::{Arc, Weak};
use std::task::{Context, Poll};
use std::thread::JoinHandle;
use std::time::Instant;

#[derive(Default)]
struct State {
    queue: VecDeque<Task>,
    threads: usize,
    /// The threads started and not yet known to have ended, joined at shutdown.
    handles: Vec<JoinHandle<()>>,
    /// Threads waiting for work that no push has claimed yet.
    idle: usize,
    /// Waiting threads a push claimed (moved out of `idle` as it notified): each is owed to
    /// one queued closure. Counting a notified thread as idle until it woke let a second push
    /// notify nobody and start no thread, so its closure waited behind a long one (Tokio's
    /// tokio#8056, `issue_8056_regression_test` in tests/tokio_rt_misc.rs, which hung).
    notified: usize,
    shutdown: bool,
}

pub(crate) struct Blocking {
    state: Mutex<State>,
    cv: Condvar,
    all_exited: Condvar,
    /// The runtime, for the context of blocking threads (so `spawn` works in them).
    runtime: Mutex<Weak<Shared>>,
    panics: AtomicU64,
    /// Closures queued and not yet started: they hold a paused clock (module docs).
    queued: AtomicUsize,
    /// Thread names, hooks, the pool's size limit and keep-alive (`Builder`).
    threads: ThreadConfig,
}

impl Blocking {
    pub(crate) fn new(threads: ThreadConfig) -> Arc<Blocking> {
        Arc::new(Blocking {
            state: Mutex::new(State::default()),
            cv: Condvar::new(),
            all_exited: Condvar::new(),
            runtime: Mutex::new(Weak::new()),
            panics: AtomicU64::new(0),
            queued: AtomicUsize::new(0),
            threads,
        })
    }

    pub(crate) fn set_runtime(&self, shared: &Arc<Shared>) {
        *self.runtime.lock() = Arc::downgrade(shared);
    }

    pub(crate) fn panics(&self) -> u64 {
        self.panics.load(Relaxed)
    }

    /// Closures queued and not yet started.
    pub(crate) fn queued(&self) -> usize {
        self.queued.load(SeqCst)
    }

    /// A closure left the queue unrun (shutdown); the last one may leave a paused runtime
    /// quiescent.
    fn dequeued_unrun(&self) {
        if self.queued.fetch_sub(1, SeqCst) == 1 {
            let shared = self.runtime.lock().upgrade();
            if let Some(shared) = shared {
                shared.may_be_quiescent();
            }
        }
    }

    fn push(self: &Arc<Self>, task: Task) {
        self.queued.fetch_add(1, SeqCst);
        let mut s = self.state.lock();
        if s.shutdown {
            drop(s);
            // `self` may live in the task's cell, which its shutdown can free (`Schedule`'s
            // rule): the pool is reached through an `Arc` of its own.
            let pool = Arc::clone(self);
            task.shutdown();
            pool.dequeued_unrun();
            return;
        }
        s.queue.push_back(task);
        if s.idle > 0 {
            s.idle -= 1;
            s.notified += 1;
            self.cv.notify_one();
        } else if s.threads < self.threads.max_blocking {
            s.threads += 1;
            drop(s);
            self.start_thread();
        }
        // Else every thread is busy and the pool is full: the task waits in the queue.
    }

    /// Starts a thread, counted in `threads` by the caller. Outside the pool's lock: naming
    /// it runs the user's `thread_name_fn`, which may itself spawn a blocking closure.
    fn start_thread(self: &Arc<Self>) {
        let pool = self.clone();
        let runtime = self.runtime.lock().clone();
        match self
            .threads
            .spawn(|| "gort-blocking".into(), runtime, move || pool.worker())
        {
            Ok(handle) => {
                let mut s = self.state.lock();
                // Threads that left on their keep-alive are forgotten here, keeping the list
                // short.
                s.handles.retain(|t| !t.is_finished());
                s.handles.push(handle);
            }
            Err(e) => {
                // Uncounted, or shutdown would wait for a thread that never ran.
                let mut s = self.state.lock();
                s.threads -= 1;
                self.all_exited.notify_all();
                drop(s);
                panic!("gort: cannot start a blocking thread: {e}")
            }
        }
    }

    fn worker(self: Arc<Self>) {
        let shared = self.runtime.lock().upgrade();
        let _ctx = shared.clone().map(context::enter_blocking_pool);
        let mut s = self.state.lock();
        loop {
            if let Some(task) = s.queue.pop_front() {
                drop(s);
                self.run_job(task, shared.as_ref());
                s = self.state.lock();
                continue;
            }
            if s.shutdown {
                break;
            }
            s.idle += 1;
            let timed_out = self
                .cv
                .wait_for(&mut s, self.threads.keep_alive)
                .timed_out();
            // Leave the waiters: with a claim a push made, if any is left (whichever waiter
            // wakes takes it; every waiter then looks at the queue), else with this thread's
            // own place in `idle`. `idle + notified` stays the number of waiting threads.
            if s.notified > 0 {
                s.notified -= 1;
            } else {
                s.idle -= 1;
            }
            if timed_out && s.queue.is_empty() {
                break;
            }
        }
        s.threads -= 1;
        self.all_exited.notify_all();
    }

    /// Runs a closure taken from the queue, holding `shared`'s clock meanwhile (module docs).
    fn run_job(&self, task: Task, shared: Option<&Arc<Shared>>) {
        let _running = shared.map(RunningJob::start);
        // Its hold is out: leaving the queue's count cannot make the runtime quiescent.
        self.queued.fetch_sub(1, SeqCst);
        // The task catches its own panics; this catches what escapes anyway (a panicking
        // `Drop` of a panic's payload, say), so that `threads` stays true and shutdown does
        // not wait for a thread that is gone.
        catch_user_here(|| task.run());
        // A closure that left another runtime entered (a leaked `Handle::enter` guard) would
        // send the spawns of every later closure on this thread there: put the thread back,
        // and say so (as the M loop does after a task, worker.rs).
        if let Some(shared) = shared.filter(|s| !context::is_current(s)) {
            context::restore_runtime(shared);
            catch_user_here(|| panic!("{}", crate::worker::LEFT_ENTERED));
        }
    }

    /// Stops accepting work and waits up to `deadline` for running closures to return, then
    /// for their threads to end. Queued closures that never started are dropped.
    pub(crate) fn shutdown(&self, deadline: Option<Instant>) {
        let mut s = self.state.lock();
        s.shutdown = true;
        let queued: Vec<Task> = s.queue.drain(..).collect();
        self.cv.notify_all();
        drop(s);
        for t in queued {
            catch_user_here(|| t.shutdown());
            self.dequeued_unrun();
        }
        let mut s = self.state.lock();
        while s.threads > 0 {
            match deadline {
                Some(d) => {
                    if self.all_exited.wait_until(&mut s, d).timed_out() {
                        break;
                    }
                }
                None => self.all_exited.wait(&mut s),
            }
        }
        // A thread uncounts itself before it drops its references to the runtime (which keep
        // the poller's descriptors open) and runs its stop hook: wait for those too, so that
        // the runtime's drop returns with its threads gone.
        let all_exited = s.threads == 0;
        let handles = std::mem::take(&mut s.handles);
        drop(s);
        for t in handles {
            if all_exited {
                join_until(t, deadline);
            } else if t.is_finished() {
                let _ = t.join();
            }
        }
    }
}

/// A closure running on this thread: it holds the paused clock, and a `block_on` in it may
/// lend the hold out. Dropped once the closure returned or unwound and its join handle has
/// the result (the woken waiter is queued by then): gives the hold back, which may leave a
/// paused runtime quiescent.
struct RunningJob<'a> {
    shared: &'a Arc<Shared>,
    _holding: context::HoldingGuard,
}

impl<'a> RunningJob<'a> {
    fn start(shared: &'a Arc<Shared>) -> Self {
        shared.clock.hold();
        RunningJob {
            shared,
            _holding: context::enter_holding_clock(shared),
        }
    }
}

impl Drop for RunningJob<'_> {
    fn drop(&mut self) {
        self.shared.release_clock_hold();
    }
}

impl Schedule for Arc<Blocking> {
    fn schedule(&self, task: Task) {
        self.push(task);
    }
    fn yield_task(&self, task: Task) {
        self.push(task);
    }
    fn release(&self, _slot: usize) {}
    fn on_panic(&self) {
        self.panics.fetch_add(1, Relaxed);
    }
}

/// The future a blocking closure runs as: ready on its first (and only) poll.
pub(crate) struct BlockingTask<F>(Option<F>);

impl<F> BlockingTask<F> {
    pub(crate) fn new(f: F) -> Self {
        BlockingTask(Some(f))
    }
}

impl<F> Unpin for BlockingTask<F> {}

impl<F: FnOnce() -> R, R> Future for BlockingTask<F> {
    type Output = R;
    fn poll(mut self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<R> {
        let f = self
            .0
            .take()
            .expect("gort: a blocking task was polled after it completed");
        Poll::Ready(f())
    }
}
