//! The poll descriptor's handshake without loom (`gort_net::desc`): the cases the loom
//! models (`loom_desc.rs`) do not count, such as how many syscalls a blocking read costs.

use gort_net::desc::{Arm, Count, Half, Wait};
use std::sync::Arc;
use std::task::{Wake, Waker};

struct NoCount;

/// A waker that does nothing (`Waker::noop` is newer than the MSRV).
struct Noop;

impl Wake for Noop {
    fn wake(self: Arc<Self>) {}
}

impl Count for NoCount {
    fn add(&self) {}
    fn remove(&self) {}
}

/// An edge that a read already consumed must not make the next read that would block try
/// its syscall again: on a connection in a request/response loop that was one extra
/// `recvfrom` (`EAGAIN`) per message, a third of the reads (shape N1).
#[test]
fn a_consumed_edge_does_not_make_a_read_that_would_block_retry() {
    let half = Half::default();
    let waker = &Waker::from(Arc::new(Noop));
    let mut out = Vec::new();
    // Data arrives: the poller counts the edge (nobody waits yet).
    half.set_ready(&mut out, &NoCount);
    // A read takes its ticket and its syscall consumes the data.
    half.prepare().unwrap();
    // The next read's syscall would block: it registers at once.
    let seen = half.prepare().unwrap();
    assert_eq!(half.wait(seen, waker, &NoCount), Wait::Pending);
}

/// An edge after the ticket was taken (data the syscall may have missed) makes it retry.
#[test]
fn an_edge_after_the_ticket_makes_the_read_retry() {
    let half = Half::default();
    let waker = &Waker::from(Arc::new(Noop));
    let mut out = Vec::new();
    let seen = half.prepare().unwrap();
    half.set_ready(&mut out, &NoCount);
    assert_eq!(half.wait(seen, waker, &NoCount), Wait::Retry);
    // Once registered, the next edge releases the waker instead.
    let seen = half.prepare().unwrap();
    assert_eq!(half.wait(seen, waker, &NoCount), Wait::Pending);
    half.set_ready(&mut out, &NoCount);
    assert_eq!(out.len(), 1);
}

/// Setting the deadline in effect again, or clearing a clear one, changes nothing (and
/// takes the lock-free path); after an expiry the same deadline is a change again.
#[test]
fn an_unchanged_deadline_changes_nothing() {
    let half = Half::default();
    let mut out = Vec::new();
    let mut armings = Vec::new();
    half.set_deadline(100, 0, &mut out, &NoCount, |a| armings.push(a));
    half.set_deadline(100, 10, &mut out, &NoCount, |a| armings.push(a));
    assert_eq!(armings, vec![Arm::At(100)]);
    assert!(!half.is_expired());
    // The fire expires it; the same instant, now passed, leaves it expired.
    assert!(half.expire(100, &mut out, &NoCount, |a| armings.push(a)));
    half.set_deadline(100, 200, &mut out, &NoCount, |a| armings.push(a));
    assert!(half.is_expired());
    // Cleared, then cleared again: nothing armed or stopped the second time.
    half.set_deadline(0, 0, &mut out, &NoCount, |a| armings.push(a));
    half.set_deadline(0, 0, &mut out, &NoCount, |a| armings.push(a));
    assert!(!half.is_expired());
    assert_eq!(armings, vec![Arm::At(100)]);
}

/// Go's idle-timeout idiom: a pending deadline pushed later before every read is only
/// recorded (the lock-free compare-and-swap: no timer change); the first arming's fire
/// re-arms for the latest, and a move earlier than the armed instant re-arms at once.
#[test]
fn a_deadline_moved_later_is_followed_by_the_fire() {
    let half = Half::default();
    let mut out = Vec::new();
    let mut armings = Vec::new();
    half.set_deadline(100, 0, &mut out, &NoCount, |a| armings.push(a));
    for (now, later) in (1..50).map(|k| (k, 100 + k)) {
        half.set_deadline(later, now, &mut out, &NoCount, |a| armings.push(a));
    }
    assert_eq!(armings, vec![Arm::At(100)]);
    // The fire at 100 finds 149 in effect: it re-arms instead of expiring.
    assert!(!half.expire(100, &mut out, &NoCount, |a| armings.push(a)));
    assert!(!half.is_expired());
    assert_eq!(armings, vec![Arm::At(100), Arm::At(149)]);
    // Moved earlier than the armed instant: re-armed at once; the old fire is stale.
    half.set_deadline(120, 110, &mut out, &NoCount, |a| armings.push(a));
    assert_eq!(armings.last(), Some(&Arm::At(120)));
    assert!(!half.expire(149, &mut out, &NoCount, |_| {}));
    assert!(half.expire(120, &mut out, &NoCount, |_| {}));
    assert!(half.is_expired());
    // A move later of an expired deadline is a change: it re-arms and clears the expiry.
    half.set_deadline(300, 200, &mut out, &NoCount, |a| armings.push(a));
    assert_eq!(armings.last(), Some(&Arm::At(300)));
    assert!(!half.is_expired());
}

/// A short transfer marks its direction drained at the ticket it took: the next one skips
/// its syscall (it would say `EAGAIN`) and waits, until an edge comes after that ticket.
#[test]
fn a_short_read_lets_the_next_wait_without_a_syscall_until_an_edge() {
    let half = Half::default();
    let waker = &Waker::from(Arc::new(Noop));
    let mut out = Vec::new();
    let first = half.prepare().unwrap();
    assert!(!half.drained_at(first), "a new socket is not drained");
    // The read returns less than asked: the receive queue is empty now.
    half.note_drained(first);
    let seen = half.prepare().unwrap();
    assert!(half.drained_at(seen), "no edge since: skip the syscall");
    assert_eq!(half.wait(seen, waker, &NoCount), Wait::Pending);
    // Data arrives: the edge releases the waiter, and the next read tries its syscall.
    half.set_ready(&mut out, &NoCount);
    assert_eq!(out.len(), 1);
    assert!(!half.drained_at(half.prepare().unwrap()));
}

/// Data that arrived before the skipping task took its ticket but after the short read came
/// with an edge the poller may not have counted yet: the wait must end when it is counted.
#[test]
fn an_edge_counted_after_a_skipped_syscall_releases_the_waiter() {
    let half = Half::default();
    let waker = &Waker::from(Arc::new(Noop));
    let mut out = Vec::new();
    let seen = half.prepare().unwrap();
    half.note_drained(seen);
    let seen = half.prepare().unwrap();
    assert!(half.drained_at(seen));
    // The poller counts the edge between the skip and the wait: the wait retries.
    half.set_ready(&mut out, &NoCount);
    assert_eq!(half.wait(seen, waker, &NoCount), Wait::Retry);
}

/// Counts the directions with waiters, as the runtime's `netpollWaiters`.
#[derive(Default)]
struct Waiting(std::sync::atomic::AtomicIsize);

impl Count for Waiting {
    fn add(&self) {
        self.0.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    }
    fn remove(&self) {
        self.0.fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
    }
}

/// Several tasks blocked in one direction (the first waker is kept inline, the others
/// apart): each is registered once however often it waits, the direction counts once, and
/// one edge releases them all, then the next waits alone.
#[test]
fn every_task_blocked_in_a_direction_is_released_once() {
    let half = Half::default();
    let count = Waiting::default();
    let wakers: Vec<Waker> = (0..3).map(|_| Waker::from(Arc::new(Noop))).collect();
    let seen = half.prepare().unwrap();
    for w in wakers.iter().chain(&wakers) {
        assert_eq!(half.wait(seen, w, &count), Wait::Pending);
    }
    assert_eq!(count.0.load(std::sync::atomic::Ordering::SeqCst), 1);
    let mut out = Vec::new();
    half.set_ready(&mut out, &count);
    assert_eq!(out.len(), 3);
    for w in &wakers {
        assert!(out.iter().any(|o| o.will_wake(w)));
    }
    assert_eq!(count.0.load(std::sync::atomic::Ordering::SeqCst), 0);
    let seen = half.prepare().unwrap();
    assert_eq!(half.wait(seen, &wakers[1], &count), Wait::Pending);
    out.clear();
    half.set_ready(&mut out, &count);
    assert_eq!(out.len(), 1);
    assert!(out[0].will_wake(&wakers[1]));
}
