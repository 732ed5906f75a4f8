//! The orphanage: a thread that keeps the deadlines no runtime keeps.
//!
//! A context's deadline is a timer in a runtime's heaps. When that runtime shuts down first,
//! the timer goes unrun, but the context may live on: waited on by a task of another runtime,
//! by a blocking closure that the shutdown itself waits for, or looked at later from a new
//! runtime. And a deadline set on a thread of no runtime (a plain `main` making its context
//! before `Runtime::block_on`, as Go code does) has no heap to go to. Such a node is adopted
//! here, and canceled with `DeadlineExceeded` when the deadline comes, as the timer would
//! have. Rare, so one plain thread serves them all: started by the first adoption, gone once
//! none is left. Deadlines that never come (`Instant::NEVER`, from a `Duration::MAX`
//! timeout) are not adopted.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{Arc, Weak};
use std::time::Duration;

use gort_time::Instant;
use parking_lot::{Condvar, Mutex};

use crate::ctx::Node;

/// An adopted deadline. The node is weak: a context nobody holds any more needs no cancel.
struct Orphan {
    deadline: Instant,
    node: Weak<Node>,
}

impl PartialEq for Orphan {
    fn eq(&self, other: &Orphan) -> bool {
        self.deadline == other.deadline
    }
}
impl Eq for Orphan {}
impl PartialOrd for Orphan {
    fn partial_cmp(&self, other: &Orphan) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Orphan {
    fn cmp(&self, other: &Orphan) -> std::cmp::Ordering {
        self.deadline.cmp(&other.deadline)
    }
}

struct Orphans {
    /// Earliest deadline on top.
    heap: BinaryHeap<Reverse<Orphan>>,
    /// Whether the thread runs (it clears this, under the lock, as it leaves).
    running: bool,
}

static ORPHANS: Mutex<Orphans> = Mutex::new(Orphans {
    heap: BinaryHeap::new(),
    running: false,
});
/// Rung when an earlier deadline arrives.
static ARRIVED: Condvar = Condvar::new();

/// Keeps `node`'s `deadline` until it comes, then cancels the node.
pub(crate) fn adopt(node: &Arc<Node>, deadline: Instant) {
    if deadline.is_never() {
        return;
    }
    // Declared before the guard, so dropped after it: the nodes a purge looked at.
    let mut purged = Vec::new();
    let mut o = ORPHANS.lock();
    if o.heap.len() >= PURGE_FROM && o.heap.len().is_power_of_two() {
        purge(&mut o, &mut purged);
    }
    o.heap.push(Reverse(Orphan {
        deadline,
        node: Arc::downgrade(node),
    }));
    if o.running {
        ARRIVED.notify_one();
        return;
    }
    let spawned = std::thread::Builder::new()
        .name("gort-context-orphanage".into())
        .spawn(run);
    // Without a thread (the process is out of them) the deadlines wait for the next adoption.
    o.running = spawned.is_ok();
}

/// The heap's size from which [`adopt`] purges it, at each power of two: contexts canceled
/// early or dropped leave their entries until their deadline (an hour, say, for contexts
/// made per request off the runtime), and each entry keeps its node's memory.
const PURGE_FROM: usize = 1024;

/// Drops the entries of nodes canceled or gone. Amortized O(1) per adoption: a purge at
/// size `n` runs only when the heap reached `n` from below. The nodes looked at go to
/// `purged`, to be dropped after the lock (a node's last drop runs its `after_func`s'
/// drops, user code).
fn purge(o: &mut Orphans, purged: &mut Vec<Arc<Node>>) {
    o.heap
        .retain(|Reverse(orphan)| match orphan.node.upgrade() {
            Some(node) => {
                let live = !node.is_done();
                purged.push(node);
                live
            }
            None => false,
        });
}

/// The thread: cancels each node when its deadline comes; leaves once none is left.
fn run() {
    let mut o = ORPHANS.lock();
    loop {
        let Some(Reverse(first)) = o.heap.peek() else {
            o.running = false;
            return;
        };
        let now = Instant::now();
        if first.deadline > now {
            let wait = first.deadline.duration_since(now);
            // At most an hour at a time: Condvar takes any Duration, but a far deadline
            // re-checked now and then costs nothing.
            ARRIVED.wait_for(&mut o, wait.min(Duration::from_secs(3600)));
            continue;
        }
        let Some(Reverse(due)) = o.heap.pop() else {
            continue;
        };
        drop(o);
        // A cancel closes `done` (waking wakers), starts `after_func`s on threads, and the
        // node's last reference may drop here with its captures: user code, so caught; a
        // panic in it is that code's, and the other orphans still get their cancel.
        let _ = catch_unwind(AssertUnwindSafe(|| {
            if let Some(node) = due.node.upgrade() {
                node.expire();
            }
        }));
        o = ORPHANS.lock();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Contexts canceled long before their deadline do not pile up in the heap.
    #[test]
    fn canceled_orphans_are_purged() {
        for _ in 0..4 * PURGE_FROM {
            let (ctx, cancel) =
                crate::with_timeout(&crate::Context::background(), Duration::from_secs(3600));
            cancel.cancel();
            drop(ctx);
        }
        let len = ORPHANS.lock().heap.len();
        assert!(len <= 2 * PURGE_FROM, "{len} entries for canceled contexts");
    }
}
