//! Timers kept for reuse: a per-thread list of [`Timer`]s that nothing references any more,
//! so that [`Timer::new`] after a sleep skips the allocator.
//!
//! Every `gort::time::Sleep` that waits needs a timer, and in a sleep fan-out (T3: a million
//! tasks, each one sleep) the allocation and the free were a fifth of the CPU: the free goes
//! to the fast bins of the arena that allocated the timer, which the M that runs timers then
//! merges (design/ARCHITECTURE.md, "The C allocator"). Go has no such cost (`time.Sleep` uses
//! the goroutine's own timer). Here a timer whose last reference is given back to
//! [`Timer::recycle`] (by its user) or let go by a heap is reset to exactly the state
//! [`Timer::new`] makes and kept on its thread's list, up to [`KEEP`] timers per thread; the
//! next `Timer::new` on that thread takes it. Only a timer whose `Arc` is unique (no other
//! strong or weak reference, so in no heap, no modified-earlier list, no run in progress) is
//! kept. Under loom nothing is kept.

use gort_loom::Arc;

use crate::timer::{Target, Timer};

/// Timers kept per thread at most (each a 96-byte chunk with its `Arc` counts: 24 KiB a thread).
#[cfg_attr(loom, allow(dead_code))] // nothing is kept under loom
pub(crate) const KEEP: usize = 256;

#[cfg(not(loom))]
std::thread_local! {
    static KEPT: std::cell::RefCell<Vec<Arc<Timer>>> = const {
        std::cell::RefCell::new(Vec::new())
    };
}

/// A kept timer of this thread, if any (already reset).
#[cfg(not(loom))]
pub(crate) fn take() -> Option<Arc<Timer>> {
    KEPT.try_with(|k| k.try_borrow_mut().ok()?.pop())
        .ok()
        .flatten()
}

#[cfg(loom)]
pub(crate) fn take() -> Option<Arc<Timer>> {
    None
}

/// Resets `t` (unique) to a fresh timer's state, handing the payload it held, if any, to
/// `payload` (for the caller to drop where user code may run), and keeps it if this thread's
/// list has room. Returns the timer back if it was not kept (the caller drops it). The
/// payload goes to a callback, not back in the result: a `Target` returned by value through
/// memory right after it was written cost T1 a store-forwarding stall per timer.
#[inline]
pub(crate) fn keep(mut t: Arc<Timer>, payload: impl FnOnce(Target)) -> Option<Arc<Timer>> {
    // A plain load first: a timer its heap or its user still holds (the common case for a
    // one-shot run's own reference) skips the atomic read-modify-write of `get_mut`.
    if Arc::strong_count(&t) != 1 || !has_room() {
        return Some(t); // freed as before, with no reset spent on it
    }
    let Some(inner) = Arc::get_mut(&mut t) else {
        return Some(t);
    };
    inner.refresh(payload);
    put(t)
}

/// Whether this thread's list has room for one more timer.
#[cfg(not(loom))]
fn has_room() -> bool {
    KEPT.try_with(|k| k.try_borrow().is_ok_and(|k| k.len() < KEEP))
        .unwrap_or(false)
}

#[cfg(loom)]
fn has_room() -> bool {
    false
}

/// Puts a reset, unique timer on this thread's list; gives it back if the list is full or
/// the thread is exiting.
#[cfg(not(loom))]
fn put(t: Arc<Timer>) -> Option<Arc<Timer>> {
    let mut t = Some(t);
    let _ = KEPT.try_with(|k| {
        if let Ok(mut k) = k.try_borrow_mut() {
            if k.len() < KEEP {
                if k.capacity() == 0 {
                    k.reserve_exact(KEEP);
                }
                k.extend(t.take());
            }
        }
    });
    t
}

#[cfg(loom)]
fn put(t: Arc<Timer>) -> Option<Arc<Timer>> {
    Some(t)
}

/// How many timers this thread keeps now.
#[cfg(all(test, not(loom)))]
pub(crate) fn kept_on_this_thread() -> usize {
    KEPT.try_with(|k| k.borrow().len()).unwrap_or(0)
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::entry::UNINDEXED;
    use crate::{del, modify, Fire, Nanos, Status, Timers};
    use gort_loom::atomic::Ordering::Relaxed;
    use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};

    fn quiet() -> impl crate::Host {
        |_| {}
    }

    /// Counts its drops.
    struct Counted(std::sync::Arc<AtomicUsize>);

    impl Fire for Counted {
        fn fire(self: std::sync::Arc<Self>, _when: Nanos) {}
    }

    impl Drop for Counted {
        fn drop(&mut self) {
            self.0.fetch_add(1, SeqCst);
        }
    }

    /// Every field of `t` is what `Timer::fresh` makes.
    fn assert_fresh(t: &Timer) {
        assert_eq!(t.status(), Status::NoStatus);
        assert_eq!(t.index.load(Relaxed), UNINDEXED, "heap index");
        assert!(t.owner.load(Relaxed).is_null(), "owner");
        assert_eq!(t.when.load(Relaxed), 0, "when");
        assert_eq!(t.nextwhen.load(Relaxed), 0, "nextwhen");
        assert_eq!(t.period.load(Relaxed), 0, "period");
        assert!(!t.queued().load(Relaxed), "queued");
        assert_eq!(t.slack(), 0, "slack");
        assert!(t.take_target().is_none(), "payload");
    }

    /// A timer that was promoted (heap index), periodic, slackened and fired, then given
    /// back, comes out of the next `Timer::new` on this thread with none of that state.
    #[test]
    fn a_reused_timer_carries_no_state_of_its_last_use() {
        let ts = Timers::new(0);
        let front = Timer::new();
        ts.add(&front, 500, 0, &quiet());
        let t = Timer::new();
        t.set_slack(7);
        ts.add(&t, 1000, 10, &quiet());
        assert!(modify(&t, 100, 10, &ts, &quiet())); // modified earlier: promoted
        assert_eq!(ts.check(100, false).ran, 1);
        assert_ne!(t.index.load(Relaxed), UNINDEXED);
        assert!(del(&t));
        let drops = std::sync::Arc::new(AtomicUsize::new(0));
        t.set_fire(std::sync::Arc::new(Counted(drops.clone())));
        drop(ts); // the heap lets go of every entry of `t`
        let addr = Arc::as_ptr(&t);
        Timer::recycle(t);
        assert_eq!(
            drops.load(SeqCst),
            1,
            "the payload is dropped at the hand-back"
        );
        let u = Timer::new();
        assert_eq!(
            Arc::as_ptr(&u),
            addr,
            "the timer given back is the one reused"
        );
        assert_fresh(&u);
    }

    /// A timer still in a heap (stopped, removed lazily) is not kept when its user gives it
    /// back; the heap's removal, which drops the last reference, keeps it.
    #[test]
    fn a_timer_in_a_heap_is_kept_only_once_the_heap_lets_go() {
        let ts = Timers::new(0);
        let t = Timer::new();
        let start = kept_on_this_thread();
        ts.add(&t, 100, 0, &quiet());
        assert!(del(&t)); // Deleted, still in the heap
        Timer::recycle(t);
        assert_eq!(kept_on_this_thread(), start, "kept while a heap held it");
        assert_eq!(ts.check(200, true).ran, 0); // removes the deleted root
        assert_eq!(kept_on_this_thread(), start + 1);
        assert_fresh(&Timer::new());
    }

    /// A thread keeps at most `KEEP` timers; the rest are freed.
    #[test]
    fn a_thread_keeps_at_most_its_bound() {
        let timers: Vec<_> = (0..KEEP + 50).map(|_| Timer::new()).collect();
        for t in timers {
            Timer::recycle(t);
        }
        assert_eq!(kept_on_this_thread(), KEEP);
        let again: Vec<_> = (0..KEEP + 50).map(|_| Timer::new()).collect();
        assert_eq!(kept_on_this_thread(), 0);
        drop(again); // plain drops keep nothing
        assert_eq!(kept_on_this_thread(), 0);
    }
}
