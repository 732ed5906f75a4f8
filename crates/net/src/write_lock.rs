//! Go's `fd.writeLock` (`internal/poll/fd_mutex.go`): a stream's `write_all` and `write` run
//! one at a time, in the order they asked, so that two tasks writing to one connection never
//! interleave their bytes (a `write_all` that the kernel takes in several pieces would
//! otherwise let another task's bytes in between, where Go's `Write` does not).
//!
//! One atomic word says whether the lock is held (`LOCKED`) and whether writers wait
//! (`QUEUED`). Uncontended, taking and releasing the lock is one compare-and-swap each.
//! Waiters queue in arrival order under a mutex; only the first may take the lock, and a
//! newcomer cannot take it past them (it sees `QUEUED`), so no writer starves. Wakers are
//! woken after the mutex is released.
//!
//! The rule that keeps wake-ups from being lost: `QUEUED` is set, under the mutex, whenever
//! the queue is not empty, before the waiter parks; a release that sees it takes the mutex
//! and wakes the first waiter, and so does a waiter that leaves the queue while the lock is
//! free. A first waiter that set `QUEUED` just after a release that did not see it finds
//! `LOCKED` clear and tries again instead of parking.

use gort_loom::atomic::{AtomicUsize, Ordering::*};
use gort_loom::{Mutex, MutexGuard};
use std::collections::VecDeque;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, Waker};

/// The lock is held.
const LOCKED: usize = 1;
/// The queue of waiters is not empty (changed only under the mutex).
const QUEUED: usize = 2;

/// The write lock of one stream.
#[derive(Default)]
pub struct WriteLock {
    state: AtomicUsize,
    waiters: Mutex<Waiters>,
}

#[derive(Default)]
struct Waiters {
    /// Writers waiting, in arrival order, each with its ticket and waker.
    queue: VecDeque<(u64, Waker)>,
    next_ticket: u64,
}

impl fmt::Debug for WriteLock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WriteLock")
            .field("held", &(self.state.load(Relaxed) & LOCKED != 0))
            .finish_non_exhaustive()
    }
}

impl WriteLock {
    /// Whether nobody holds the lock or waits for it (the models' end state).
    pub fn is_free_and_unqueued(&self) -> bool {
        self.state.load(Acquire) == 0 && self.waiters.lock().queue.is_empty()
    }

    /// Waits for the lock; it is held until the returned guard drops. Dropping the future
    /// while it waits gives its place up.
    pub fn lock(&self) -> Acquire<'_> {
        Acquire {
            lock: self,
            ticket: None,
        }
    }

    /// Wakes the first waiter if the lock is free, after the mutex is released.
    fn wake_first(&self, w: MutexGuard<'_, Waiters>) {
        let first = match self.state.load(Acquire) & LOCKED {
            0 => w.queue.front().map(|(_, waker)| waker.clone()),
            _ => None,
        };
        drop(w);
        if let Some(waker) = first {
            waker.wake();
        }
    }
}

/// [`WriteLock::lock`]'s future.
pub struct Acquire<'a> {
    lock: &'a WriteLock,
    /// Our place in the queue, once we had to wait.
    ticket: Option<u64>,
}

impl<'a> Acquire<'a> {
    /// The slow path, under the mutex: take the lock if it is free and we are first, else
    /// queue (or refresh our waker) with `QUEUED` set.
    fn poll_queued(&mut self, cx: &mut Context<'_>) -> Poll<WriteGuard<'a>> {
        let lock = self.lock;
        let mut w = lock.waiters.lock();
        loop {
            let first = match self.ticket {
                None => w.queue.is_empty(),
                Some(t) => w.queue.front().is_some_and(|(front, _)| *front == t),
            };
            let s = lock.state.load(Acquire);
            if s & LOCKED == 0 && first {
                if self.ticket.take().is_some() {
                    w.queue.pop_front();
                }
                let queued = if w.queue.is_empty() { 0 } else { QUEUED };
                // Only the mutex holder changes QUEUED, and LOCKED is clear: no one else
                // can change the word now but a fast-path lock, which needs it 0.
                if lock
                    .state
                    .compare_exchange(s, LOCKED | queued, Acquire, Relaxed)
                    .is_ok()
                {
                    return Poll::Ready(WriteGuard { lock });
                }
                continue;
            }
            match self.ticket {
                Some(t) => {
                    let (_, waker) = w.queue.iter_mut().find(|(id, _)| *id == t).unwrap();
                    if !waker.will_wake(cx.waker()) {
                        waker.clone_from(cx.waker());
                    }
                }
                None => {
                    let t = w.next_ticket;
                    w.next_ticket += 1;
                    w.queue.push_back((t, cx.waker().clone()));
                    self.ticket = Some(t);
                }
            }
            let was = lock.state.fetch_or(QUEUED, AcqRel);
            let first = w
                .queue
                .front()
                .is_some_and(|(front, _)| Some(*front) == self.ticket);
            if was & LOCKED != 0 || !first {
                // Held: its release sees QUEUED and wakes the first waiter. Free with others
                // ahead of us: whoever freed it woke the first of them.
                return Poll::Pending;
            }
            // Released before it could see QUEUED, and we are first: look again.
        }
    }
}

impl<'a> Future for Acquire<'a> {
    type Output = WriteGuard<'a>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<WriteGuard<'a>> {
        let lock = self.lock;
        if self.ticket.is_none()
            && lock
                .state
                .compare_exchange(0, LOCKED, Acquire, Relaxed)
                .is_ok()
        {
            return Poll::Ready(WriteGuard { lock });
        }
        self.poll_queued(cx)
    }
}

impl Drop for Acquire<'_> {
    fn drop(&mut self) {
        let Some(t) = self.ticket else { return };
        let mut w = self.lock.waiters.lock();
        w.queue.retain(|(id, _)| *id != t);
        if w.queue.is_empty() {
            self.lock.state.fetch_and(!QUEUED, AcqRel);
        }
        // We may have been the one woken for a free lock: pass the wake-up on.
        self.lock.wake_first(w);
    }
}

/// Holds a [`WriteLock`] until dropped.
pub struct WriteGuard<'a> {
    lock: &'a WriteLock,
}

impl Drop for WriteGuard<'_> {
    fn drop(&mut self) {
        let state = &self.lock.state;
        if state.compare_exchange(LOCKED, 0, Release, Relaxed).is_ok() {
            return;
        }
        // Writers wait: release under the mutex, so the first one is woken.
        let w = self.lock.waiters.lock();
        state.fetch_and(!LOCKED, Release);
        self.lock.wake_first(w);
    }
}
