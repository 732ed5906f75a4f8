//! The registry of live tasks (Tokio's OwnedTasks): what lets a runtime shutdown drop every
//! task's future even when the task sits in no queue (parked on a timer or a channel, where
//! a waker -> task -> future -> timer -> waker cycle would otherwise leak it).
//!
//! ## Who touches a shard
//!
//! A spawn on a P inserts into that P's home shard, whose lock and lines then stay in the
//! spawning core's cache. A task finished on a P leaves its key in the P's [`Releases`]
//! (owner-only, no lock), and the P takes a whole batch out of the registry at once
//! ([`Registry::remove_batch`]): one lock per shard the batch touches. A spawn loop's tasks
//! all live in the spawner's home shard, so the Ms that finish them take its lock once per
//! [`RELEASE_BATCH`] tasks, not once per task. Threads without a P (block_on, the blocking
//! pool, a drop on a user thread) insert round-robin and remove at once. (Round-robin for
//! every insert, and a remove per task, made each spawn and each finish miss on a shard
//! that another core had just written: a third of R1's samples; design/PERFORMANCE-LOG.md.)

use super::RawTask;
use crossbeam_utils::CachePadded;
use parking_lot::Mutex;
use std::cell::Cell;

const SHARDS: usize = 32;
const SHARD_BITS: u32 = SHARDS.trailing_zeros();
/// Finished tasks a P keeps before it takes them out of the registry in one batch.
pub(crate) const RELEASE_BATCH: usize = 64;

#[derive(Default)]
struct Shard {
    slots: Vec<Option<RawTask>>,
    free: Vec<u32>,
    spawned: u64,
    /// Tasks taken out (finished or drained); with `spawned`, what `Runtime::metrics`
    /// counts as alive.
    removed: u64,
}

pub(crate) struct Registry {
    shards: Box<[CachePadded<Mutex<Shard>>]>,
}

thread_local! {
    /// This thread's next shard for inserts without a P (`usize::MAX` until its first).
    static NEXT_SHARD: Cell<usize> = const { Cell::new(usize::MAX) };
}

/// A P's finished tasks still in the registry (their keys), owned by the P's holder.
pub(crate) struct Releases {
    keys: [usize; RELEASE_BATCH],
    len: usize,
}

impl Default for Releases {
    fn default() -> Self {
        Releases {
            keys: [0; RELEASE_BATCH],
            len: 0,
        }
    }
}

impl Releases {
    /// Notes that the task at `key` finished. Returns the full batch (emptying this) when it
    /// holds [`RELEASE_BATCH`] keys: the caller takes them out of the registry.
    pub(crate) fn push(&mut self, key: usize) -> Option<[usize; RELEASE_BATCH]> {
        self.keys[self.len] = key;
        self.len += 1;
        if self.len < RELEASE_BATCH {
            return None;
        }
        self.len = 0;
        Some(self.keys)
    }

    /// Empties this; returns the keys it held.
    pub(crate) fn take(&mut self) -> ([usize; RELEASE_BATCH], usize) {
        (self.keys, std::mem::take(&mut self.len))
    }

    /// Keys held.
    pub(crate) fn len(&self) -> usize {
        self.len
    }
}

impl Registry {
    pub(crate) fn new() -> Registry {
        Registry {
            shards: (0..SHARDS)
                .map(|_| CachePadded::new(Mutex::new(Shard::default())))
                .collect(),
        }
    }

    /// The shard for an insert from a thread without a P: round-robin, from a per-thread
    /// start, so that the Ms finishing a P-less spawner's tasks do not all queue on one lock.
    fn next_shard() -> usize {
        NEXT_SHARD.with(|n| {
            let mut s = n.get();
            if s == usize::MAX {
                // Start threads at different shards by the address of a thread-local.
                s = (n as *const Cell<usize> as usize) >> 6;
            }
            n.set(s.wrapping_add(1));
            s % SHARDS
        })
    }

    /// Registers a live task spawned on P `home` (`None`: on a thread without a P); returns
    /// its slot key.
    pub(crate) fn insert(&self, task: RawTask, home: Option<usize>) -> usize {
        let shard = home.map_or_else(Self::next_shard, |id| id % SHARDS);
        let mut s = self.shards[shard].lock();
        s.spawned += 1;
        let idx = match s.free.pop() {
            Some(i) => {
                s.slots[i as usize] = Some(task);
                i as usize
            }
            None => {
                s.slots.push(Some(task));
                s.slots.len() - 1
            }
        };
        (idx << SHARD_BITS) | shard
    }

    /// Forgets a completed task.
    pub(crate) fn remove(&self, key: usize) {
        let task = Self::take_slot(&mut self.shards[key & (SHARDS - 1)].lock(), key);
        // Drop outside the lock: this may be the last reference.
        drop(task);
    }

    /// Forgets the completed tasks at `keys`, taking each shard's lock once; hands each
    /// task's reference to `drop_task` after the locks are released (it may be the last one,
    /// whose drop runs the output's `Drop`, user code).
    pub(crate) fn remove_batch(&self, keys: &mut [usize], mut drop_task: impl FnMut(RawTask)) {
        debug_assert!(keys.len() <= RELEASE_BATCH);
        keys.sort_unstable_by_key(|k| k & (SHARDS - 1));
        let mut taken: [Option<RawTask>; RELEASE_BATCH] = [const { None }; RELEASE_BATCH];
        let mut i = 0;
        while i < keys.len() {
            let shard = keys[i] & (SHARDS - 1);
            let mut s = self.shards[shard].lock();
            while i < keys.len() && keys[i] & (SHARDS - 1) == shard {
                taken[i] = Self::take_slot(&mut s, keys[i]);
                i += 1;
            }
        }
        for t in taken.iter_mut().filter_map(Option::take) {
            drop_task(t);
        }
    }

    /// Empties the slot of `key` in its (locked) shard.
    fn take_slot(s: &mut Shard, key: usize) -> Option<RawTask> {
        let idx = key >> SHARD_BITS;
        let t = s.slots.get_mut(idx).and_then(Option::take);
        if t.is_some() {
            s.free.push(idx as u32);
            s.removed += 1;
        }
        t
    }

    /// A reference to every registered task, leaving them registered (runtime teardown
    /// while Ms still run: `Runtime`'s early drop of idle tasks).
    pub(crate) fn snapshot(&self) -> Vec<RawTask> {
        let mut out = Vec::new();
        for shard in self.shards.iter() {
            out.extend(shard.lock().slots.iter().flatten().cloned());
        }
        out
    }

    /// Takes every registered task (runtime teardown).
    pub(crate) fn drain(&self) -> Vec<RawTask> {
        let mut out = Vec::new();
        for shard in self.shards.iter() {
            let mut s = shard.lock();
            let before = out.len();
            out.extend(s.slots.drain(..).flatten());
            s.removed += (out.len() - before) as u64;
            s.free.clear();
        }
        out
    }

    /// How many tasks are registered, the finished ones whose removal a P still holds
    /// included (for tests: `Runtime::metrics` counts from `spawned` and `removed`).
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.shards
            .iter()
            .map(|s| {
                let s = s.lock();
                s.slots.len() - s.free.len()
            })
            .sum()
    }

    /// How many tasks were ever registered.
    pub(crate) fn spawned(&self) -> u64 {
        self.shards.iter().map(|s| s.lock().spawned).sum()
    }

    /// How many tasks were ever taken out (finished, or drained at teardown).
    pub(crate) fn removed(&self) -> u64 {
        self.shards.iter().map(|s| s.lock().removed).sum()
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::task::{Cell, Schedule, Task};
    use std::collections::HashSet;

    /// A scheduler that never runs anything: the registry only holds references.
    struct Idle;
    impl Schedule for Idle {
        fn schedule(&self, _: Task) {}
        fn yield_task(&self, _: Task) {}
        fn release(&self, _: usize) {}
        fn on_panic(&self) {}
    }

    fn task() -> RawTask {
        Cell::spawn(std::future::pending::<()>(), Idle)
    }

    /// One P-less thread's tasks spread over every shard, so the Ms that finish them do
    /// not all queue on one lock; removal by key forgets exactly that task.
    #[test]
    fn one_threads_inserts_spread_over_every_shard() {
        let reg = Registry::new();
        let keys: Vec<usize> = (0..2 * SHARDS).map(|_| reg.insert(task(), None)).collect();
        let shards: HashSet<usize> = keys.iter().map(|k| k & (SHARDS - 1)).collect();
        assert_eq!(shards.len(), SHARDS, "inserts from one thread share shards");
        assert_eq!(keys.iter().collect::<HashSet<_>>().len(), keys.len());
        assert_eq!((reg.len(), reg.spawned()), (2 * SHARDS, 2 * SHARDS as u64));
        for &k in &keys[..SHARDS] {
            reg.remove(k);
        }
        reg.remove(keys[0]); // a second removal is a no-op
        assert_eq!(reg.len(), SHARDS);
        assert_eq!(reg.drain().len(), SHARDS);
        assert_eq!(reg.len(), 0);
    }

    /// A P's spawns share its home shard; a batch from several shards removes exactly its
    /// keys and hands over each task once, and a full `Releases` hands its batch over.
    #[test]
    fn a_batch_removes_exactly_its_keys_across_shards() {
        let reg = Registry::new();
        let home: Vec<usize> = (0..40).map(|_| reg.insert(task(), Some(3))).collect();
        assert!(home.iter().all(|k| k & (SHARDS - 1) == 3));
        let other: Vec<usize> = (0..40).map(|_| reg.insert(task(), Some(35))).collect();
        assert!(
            other.iter().all(|k| k & (SHARDS - 1) == 3),
            "P 35 wraps to shard 3"
        );
        let stray: Vec<usize> = (0..8).map(|_| reg.insert(task(), None)).collect();
        let mut releases = Releases::default();
        let mut batch = None;
        let picked: Vec<usize> = home[..30]
            .iter()
            .chain(&stray)
            .chain(&other[..26])
            .copied()
            .collect();
        for (i, &k) in picked.iter().enumerate() {
            let full = releases.push(k);
            assert_eq!(full.is_some(), i == RELEASE_BATCH - 1);
            batch = batch.or(full);
        }
        assert_eq!(releases.len(), 0);
        let mut keys = batch.unwrap();
        let mut handed = 0;
        reg.remove_batch(&mut keys, |_| handed += 1);
        assert_eq!(handed, RELEASE_BATCH);
        assert_eq!(reg.len(), 88 - RELEASE_BATCH);
        reg.remove_batch(&mut keys, |_| handed += 1); // already gone: nothing handed
        assert_eq!(handed, RELEASE_BATCH);
        for &k in home[30..].iter().chain(&other[26..]) {
            reg.remove(k);
        }
        assert_eq!(reg.len(), 0);
        assert_eq!(reg.spawned(), 88);
    }
}
