//! The registry of live tasks (Tokio's OwnedTasks): what lets a runtime shutdown drop every
//! task's future even when the task sits in no queue (parked on a timer or a channel, where
//! a waker -> task -> future -> timer -> waker cycle would otherwise leak it).
//!
//! Sharded by the inserting thread so that spawns on different Ps rarely share a lock.

use super::Task;
use parking_lot::Mutex;
use std::cell::Cell;

const SHARDS: usize = 32;
const SHARD_BITS: u32 = SHARDS.trailing_zeros();

#[derive(Default)]
struct Shard {
    slots: Vec<Option<Task>>,
    free: Vec<u32>,
    spawned: u64,
}

pub(crate) struct Registry {
    shards: Box<[Mutex<Shard>]>,
}

thread_local! {
    static SHARD_HINT: Cell<usize> = const { Cell::new(usize::MAX) };
}

impl Registry {
    pub(crate) fn new() -> Registry {
        Registry {
            shards: (0..SHARDS).map(|_| Mutex::new(Shard::default())).collect(),
        }
    }

    fn home_shard() -> usize {
        SHARD_HINT.with(|h| {
            if h.get() == usize::MAX {
                // Spread threads over shards by the address of a thread-local: cheap and stable.
                h.set((h as *const Cell<usize> as usize >> 6) % SHARDS);
            }
            h.get()
        })
    }

    /// Registers a live task; returns its slot key.
    pub(crate) fn insert(&self, task: Task) -> usize {
        let shard = Self::home_shard();
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
    pub(crate) fn drain(&self) -> Vec<Task> {
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
