//! The registry of live tasks (Tokio's OwnedTasks): what lets a runtime shutdown drop every
//! task's future even when the task sits in no queue (parked on a timer or a channel, where
//! a waker -> task -> future -> timer -> waker cycle would otherwise leak it).
//!
//! Sharded by task: each thread deals its inserts round-robin over the shards, so that the
//! thread that spawns and the threads that finish (which remove) rarely want the same lock at
//! once. Sharding by the inserting thread put every task of a spawn loop in one shard, whose
//! lock the spawner and every finishing M then fought over.

use super::RawTask;
use parking_lot::Mutex;
use std::cell::Cell;

const SHARDS: usize = 32;
const SHARD_BITS: u32 = SHARDS.trailing_zeros();

#[derive(Default)]
struct Shard {
    slots: Vec<Option<RawTask>>,
    free: Vec<u32>,
    spawned: u64,
}

pub(crate) struct Registry {
    shards: Box<[Mutex<Shard>]>,
}

thread_local! {
    /// This thread's next shard (`usize::MAX` until its first insert).
    static NEXT_SHARD: Cell<usize> = const { Cell::new(usize::MAX) };
}

impl Registry {
    pub(crate) fn new() -> Registry {
        Registry {
            shards: (0..SHARDS).map(|_| Mutex::new(Shard::default())).collect(),
        }
    }

    /// The shard for this thread's next insert: round-robin, from a per-thread start.
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

    /// Registers a live task; returns its slot key.
    pub(crate) fn insert(&self, task: RawTask) -> usize {
        let shard = Self::next_shard();
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
        let (idx, shard) = (key >> SHARD_BITS, key & (SHARDS - 1));
        let task = {
            let mut s = self.shards[shard].lock();
            let t = s.slots.get_mut(idx).and_then(Option::take);
            if t.is_some() {
                s.free.push(idx as u32);
            }
            t
        };
        // Drop outside the lock: this may be the last reference.
        drop(task);
    }

    /// Takes every registered task (runtime teardown).
    pub(crate) fn drain(&self) -> Vec<RawTask> {
        let mut out = Vec::new();
        for shard in self.shards.iter() {
            let mut s = shard.lock();
            out.extend(s.slots.drain(..).flatten());
            s.free.clear();
        }
        out
    }

    /// How many tasks are alive.
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

    /// One spawning thread's tasks spread over every shard, so the Ms that finish them do
    /// not all queue on one lock; removal by key forgets exactly that task.
    #[test]
    fn one_threads_inserts_spread_over_every_shard() {
        let reg = Registry::new();
        let keys: Vec<usize> = (0..2 * SHARDS)
            .map(|_| reg.insert(Cell::spawn(std::future::pending::<()>(), Idle)))
            .collect();
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
}
