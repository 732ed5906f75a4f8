//! Cancelling a subtree (Go's `cancelCtx.cancel`, [`Node::cancel`]): one cancel's walk down
//! it from a work list, and what makes a cancel return only once its whole subtree is done
//! ([`Walk`]). The node and its state are `ctx.rs`'s; the lock order is in its module docs.

use std::cell::Cell;
use std::collections::HashMap;
use std::sync::Arc;

use parking_lot::{Condvar, Mutex};

use crate::after_func::Slot;
use crate::cause::Cause;
use crate::ctx::{key, Node};
use crate::deadline::DeadlineTimer;
use crate::Error;

/// What a cancel took from a node it marked: its children, timer and `after_func`s, and
/// whether its deadline was in the orphanage.
type Taken = (
    HashMap<usize, Arc<Node>>,
    Option<DeadlineTimer>,
    HashMap<usize, Arc<Slot>>,
    bool,
);

/// The outcome of [`Node::mark`].
enum Mark {
    /// Marked by this cancel.
    Now(Taken),
    /// Done already, by the walk given (none if the node had no children then).
    Before(Option<Arc<Walk>>),
}

/// One cancel's walk down a subtree (Go holds the node's lock for as long): finished once
/// every node it marked is done and so is every subtree it found marked by another walk. A
/// cancel that finds a node already done waits for the walk that marked it, so that, as in
/// Go, once any cancel of a context returns, that context and all its descendants are done.
///
/// Why the waits cannot deadlock: a walk waits only in its step 2, holding no lock, for walks
/// that marked a child of one of its own nodes first. That child is not the walk's start and
/// the walk never went below it, so the walk waited for starts strictly deeper in the tree
/// than its own; waits go down the tree and cannot close a cycle. A late canceller marked
/// nothing, so nothing waits for it. What a walk does before it finishes never blocks: node
/// locks one at a time (never two, never with this lock), and closing `done` channels, whose
/// wakers only schedule. Timers are stopped in step 3 only, and a deadline's cancel runs in
/// its timer's run with no heap lock held (gort-timer runs a payload after unlocking), or on
/// the orphanage's thread without the orphanage's lock: a waiting M blocks nothing a walk
/// needs. User code that could cancel (a waker of one's own, the drop of a
/// stopped timer's or a started `after_func`'s captures, an `after_func` run in place when
/// no thread can be made) runs either in step 3, after the walk finished, or, for a waker
/// woken in step 1, with this thread counted in [`WALKING`], where a cancel never waits
/// (it could be waiting for the very walk that woke it).
#[derive(Default)]
pub(crate) struct Walk {
    finished: Mutex<bool>,
    finished_cv: Condvar,
}

impl Walk {
    fn wait(&self) {
        let mut finished = self.finished.lock();
        while !*finished {
            self.finished_cv.wait(&mut finished);
        }
    }

    fn finish(&self) {
        *self.finished.lock() = true;
        self.finished_cv.notify_all();
    }
}

thread_local! {
    /// How many walks on this thread are in their steps 1 and 2 (more than one: a waker
    /// woken by one cancels again). A cancel of a node without children has no walk: no
    /// other cancel waits for it, so the wakers it wakes may wait.
    static WALKING: Cell<u32> = const { Cell::new(0) };
}

/// Whether this thread is inside a walk's steps 1 and 2, where a cancel must not wait: that
/// walk may be the one to wait for, or wait for this one.
fn nested() -> bool {
    WALKING.with(Cell::get) > 0
}

/// A walk in its steps 1 and 2 on this thread: counted in [`WALKING`]; when dropped (also
/// by a panic in a waker), uncounted and finished, so late cancellers never wait for ever.
struct Walking(Arc<Walk>);

impl Walking {
    fn enter(walk: Arc<Walk>) -> Walking {
        WALKING.with(|w| w.set(w.get() + 1));
        Walking(walk)
    }
}

impl Drop for Walking {
    fn drop(&mut self) {
        WALKING.with(|w| w.set(w.get() - 1));
        self.0.finish();
    }
}

/// What a walk's steps 1 and 2 leave to its step 3, from below its first node.
#[derive(Default)]
struct Below {
    /// The nodes gone through, dropped in step 3.
    marked: Vec<Arc<Node>>,
    timers: Vec<DeadlineTimer>,
    slots: Vec<Arc<Slot>>,
    /// The walks waited for.
    others: Vec<Arc<Walk>>,
    /// How many of the nodes marked had their deadline in the orphanage.
    adopted: usize,
}

impl Below {
    /// Its part of step 3: stops the timers, starts the functions, drops the nodes; returns
    /// how many nodes had their deadline in the orphanage.
    fn finish(self) -> usize {
        for timer in &self.timers {
            timer.stop();
        }
        for slot in self.slots {
            slot.start();
        }
        drop((self.timers, self.marked, self.others));
        self.adopted
    }
}

impl Node {
    /// Go's `cancelCtx.cancel(removeFromParent, err, cause)`, with the descendants canceled
    /// from a work list rather than by recursion (Go's recursion grows a goroutine's stack;
    /// here a chain of 10,000 contexts would overflow an M's). Returns only once this node
    /// and every descendant are done, as Go's does (see [`Walk`]): a cancel that finds the
    /// node already done by another waits for that one's walk to finish.
    ///
    /// In three steps. 1: mark, one node at a time under its own lock: set the error and the
    /// cause, take the children (which join the list), the timer and the `after_func`s; and
    /// close the node's `done` after its lock. A child found done already, by a cancel of its
    /// own or of its subtree, is not gone through: its walk is waited for in step 2. 2: wait
    /// for those walks, then finish this one (its late cancellers return). 3: unregister from
    /// the parent, stop the timers, start the `after_func`s, drop what was taken.
    pub(crate) fn cancel(
        self: &Arc<Self>,
        remove_from_parent: bool,
        err: Error,
        cause: Option<Cause>,
    ) {
        if !self.cancelable {
            return;
        }
        let mut walk = None;
        let (children, timer, funcs, adopted) = match self.mark(err, &cause, &mut walk) {
            Mark::Now(taken) => taken,
            Mark::Before(walking) => {
                // A late cancel: done once the walk that marked the node is.
                self.close_done();
                if let (Some(walking), false) = (walking, nested()) {
                    walking.wait();
                }
                return;
            }
        };
        // No walk: the node had no children (else `mark` made one), nothing to go through.
        let below = walk.map(|walk| self.walk_down(walk, children, err, &cause));
        if below.is_none() {
            self.close_done();
        }
        // Step 3.
        if remove_from_parent {
            if let Some(parent) = &self.parent {
                let removed = parent.state.lock().children.remove(&key(self));
                drop(removed); // outside the parent's lock
            }
        }
        if let Some(timer) = timer {
            timer.stop();
        }
        for slot in funcs.into_values() {
            slot.start();
        }
        let adopted = usize::from(adopted) + below.map_or(0, Below::finish);
        if adopted > 0 {
            crate::orphanage::forget(adopted);
        }
    }

    /// Steps 1 and 2 below this node, just marked by `walk` with `children` taken: marks the
    /// descendants not done yet, waits for the walks that marked the others, and finishes
    /// `walk`. Returns what step 3 needs.
    fn walk_down(
        &self,
        walk: Arc<Walk>,
        children: HashMap<usize, Arc<Node>>,
        err: Error,
        cause: &Option<Cause>,
    ) -> Below {
        let nested = nested();
        let finishing = Walking::enter(walk.clone());
        let mut walk = Some(walk);
        self.close_done();
        let mut pending: Vec<Arc<Node>> = children.into_values().collect();
        let mut below = Below {
            marked: Vec::with_capacity(pending.len()),
            ..Below::default()
        };
        while let Some(child) = pending.pop() {
            match child.mark(err, cause, &mut walk) {
                Mark::Now((grandchildren, timer, funcs, adopted)) => {
                    pending.extend(grandchildren.into_values());
                    below.timers.extend(timer);
                    below.slots.extend(funcs.into_values());
                    below.adopted += usize::from(adopted);
                }
                Mark::Before(walking) => below.others.extend(walking),
            }
            child.close_done();
            below.marked.push(child); // dropped in step 3: a last drop runs the cause's drop
        }
        if !nested {
            for other in &below.others {
                other.wait();
            }
        }
        drop(finishing);
        below
    }

    /// Step 1 of a cancel for this node: unless it is done already, sets the error and the
    /// cause, records `walk` (made here if need be) if it has children, and takes out the
    /// children (so they need no removal from it), the timer and the `after_func`s. Closing
    /// `done` is the caller's, after the lock. The cause is only cloned under the lock (an
    /// `Arc`): its drop, user code, happens outside.
    fn mark(&self, err: Error, cause: &Option<Cause>, walk: &mut Option<Arc<Walk>>) -> Mark {
        let mut s = self.state.lock();
        if s.err.is_some() {
            return Mark::Before(s.walk.clone());
        }
        s.err = Some(err);
        s.cause = cause.clone();
        if !s.children.is_empty() {
            // A node without children is done with its error set (and `done` closed, which a
            // late canceller does itself): it needs no walk to wait for.
            s.walk = Some(walk.get_or_insert_with(Default::default).clone());
        }
        let s = &mut *s;
        Mark::Now((
            std::mem::take(&mut s.children),
            s.timer.take(),
            std::mem::take(&mut s.after_funcs),
            std::mem::take(&mut s.adopted), // the orphanage is told once: now, not at the drop
        ))
    }
}
