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
//! timeout) are not adopted, nor is a node nothing can observe any more (`Node::orphan`).
//!
//! The orphanage holds a node weakly: one that nobody holds any more needs no cancel. Unless
//! it has `after_func`s registered, which wait for the cancel with no handle held (as the
//! timer would, the orphanage then holds it, until it is done). An adopted node's cancel or
//! drop tells the orphanage ([`forget`]), which then drops the entries of nodes done or
//! gone, and its thread leaves when none is left: it is not kept until the deadline of a
//! context nobody can observe.
//!
//! Locks: the orphanage's lock may be held while taking a node's (to see whether it is
//! done), never the other way; no node is dropped under it (a node's drop tells the
//! orphanage, and runs user code).

use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{Arc, Weak};
use std::time::Duration;

use gort_time::Instant;
use parking_lot::{Condvar, Mutex};

use crate::ctx::{key, Node};

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
    /// Adopted nodes canceled or dropped since the last purge: their entries can go.
    stale: usize,
    /// The adopted nodes with `after_func`s registered, held until they are done (a purge
    /// lets them go), by address.
    kept: BTreeMap<usize, Arc<Node>>,
}

static ORPHANS: Mutex<Orphans> = Mutex::new(Orphans {
    heap: BinaryHeap::new(),
    running: false,
    stale: 0,
    kept: BTreeMap::new(),
});
/// Rung when an earlier deadline arrives.
static ARRIVED: Condvar = Condvar::new();

/// Keeps `node`'s `deadline` until it comes, then cancels the node; holds the node too if
/// `hold` (it has `after_func`s registered). Called with no lock held.
pub(crate) fn adopt(node: &Arc<Node>, deadline: Instant, hold: bool) {
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
    if hold {
        purged.extend(o.kept.insert(key(node), node.clone()));
    }
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

/// An `after_func` was registered on the adopted `node`: holds it until it is done. Called
/// with no lock held.
pub(crate) fn hold(node: &Arc<Node>) {
    let mut o = ORPHANS.lock();
    // Not once done: the cancel that did it has told `forget`, whose purge may be over.
    let old = (!node.is_done()).then(|| o.kept.insert(key(node), node.clone()));
    drop(o);
    drop(old); // the same node: never its last reference, but outside the lock all the same
}

/// `n` adopted nodes were canceled or dropped: once they may be half the heap, the thread
/// purges it (so a purge's cost is at most twice the count that led to it), and leaves if
/// nothing is left. Called with no lock held.
pub(crate) fn forget(n: usize) {
    let mut o = ORPHANS.lock();
    o.stale += n;
    if o.running && o.stale * 2 >= o.heap.len() {
        ARRIVED.notify_one();
    }
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
    o.stale = 0;
    let done: Vec<usize> = (o.kept.iter())
        .filter(|(_, node)| node.is_done())
        .map(|(&k, _)| k)
        .collect();
    for k in done {
        purged.extend(o.kept.remove(&k));
    }
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

/// The thread: cancels each node when its deadline comes, purges the heap when [`forget`]
/// says so; leaves once none is left.
fn run() {
    let mut o = ORPHANS.lock();
    loop {
        if o.stale > 0 && o.stale * 2 >= o.heap.len() {
            let mut purged = Vec::new();
            purge(&mut o, &mut purged);
            if !purged.is_empty() {
                drop(o);
                drop(purged); // outside the lock: a last reference's drop runs user code
                o = ORPHANS.lock();
            }
            continue;
        }
        let Some(Reverse(first)) = o.heap.peek() else {
            // A held node is done once its entry is popped (it was canceled then), unless
            // its entry is yet to come (`hold` ran between its adoption's mark and its
            // entry, `Node::adopt`): leaves once none is held, else waits for the entry.
            let mut purged = Vec::new();
            purge(&mut o, &mut purged);
            let leave = o.kept.is_empty();
            o.running = !leave;
            drop(o);
            drop(purged);
            if leave {
                return;
            }
            o = ORPHANS.lock();
            if o.heap.is_empty() {
                ARRIVED.wait_for(&mut o, Duration::from_millis(10));
            }
            continue;
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
