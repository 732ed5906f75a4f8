//! Run queues: each P's fixed ring (Go's `p.runq`) and the global queue (Go's `sched.runq`).
//!
//! Neither allocates once warm. The local ring holds [`LOCAL_CAP`] tasks inline; when it is
//! full its owner moves half of it, plus the task in hand, to the global queue in one batch
//! (Go's `runqputslow`). The global queue is two `VecDeque`s behind one mutex that keep their
//! capacity, touched in batches (overflow, refill), so its lock is rarely contended.
//!
//! ## Two lanes in the global queue
//!
//! Go's global queue is one FIFO. Under overload that makes a task woken by a timer or a
//! message wait behind every task spawned before it that has not started yet: one task
//! spawning a million sleepers on two cores (T3 of SHAPES.md) left sleepers that fired
//! waiting a second behind half a million unstarted ones. gort keeps two FIFOs, the
//! [`Lane`]s: `Ready` for tasks woken or yielding, `Fresh` for tasks pushed out by a `spawn`.
//! Refills take `Ready` first: work already started finishes before new work is admitted,
//! the usual answer to overload (it bounds the latency of started work and the number of
//! half-done tasks holding memory). New tasks never starve: every other global-queue
//! fairness check of a P (one round in 122) takes `Fresh` first, and either lane is taken
//! when the other is empty.
//! (gort first used crossbeam-deque here: its growable buffers resized every time a timer batch
//! filled a queue past 64 tasks and shrank it again as it drained, and each resize's large
//! allocation made glibc consolidate every freed timer and task, up to 15 % of the CPU of
//! the after_func storm T4; see design/PERFORMANCE.md.)
//!
//! ## The ring
//!
//! Only the owner (the M holding the P) pushes and pops; any M may steal half. `tail` is
//! written by the owner alone. `head` packs two indices: `real`, the next task to take, and
//! `steal`, the first slot a thief may still be copying out. They are equal except while a
//! thief copies: it first moves `real` past the tasks it claims (a CAS, so the owner's pops
//! and other thieves see them gone), copies them into its own ring, and only then moves
//! `steal` up to `real` (Tokio's scheme, `runtime/scheduler/multi_thread/queue.rs`). The owner
//! writes a slot only when `tail - steal < LOCAL_CAP`, so it never overwrites a slot being
//! copied; one thief at a time (a second one sees `steal != real` and backs off). Go can copy
//! racily and let the CAS decide because its slots are plain pointers; a moved Rust value
//! cannot be read twice, so the claim comes before the copy here.
//!
//! Indices are `u32` counters that wrap; a slot is `index % LOCAL_CAP`.

use gort_loom::atomic::{AtomicU32, AtomicU64, AtomicUsize, Ordering::*};
use gort_loom::{Arc, Mutex, UnsafeCell};
use std::collections::VecDeque;
use std::mem::MaybeUninit;
use std::ptr;

/// Slots in a P's ring: four times Go's `len(p.runq)` (256), so that a thousand runnable
/// tasks fit in two rings instead of overflowing into the global queue, which a busy P serves
/// once per 61 rounds: there they waited ~100 ms while ring tasks waited ~5 (a hyper server
/// under 1,000 keep-alive clients: p99 110 → 20 ms; R3 -14 %; design/ARCHITECTURE.md, "A P's
/// ring"). 4 under loom, so that overflow is reached in a few steps.
#[cfg(not(loom))]
pub(crate) const LOCAL_CAP: usize = 1024;
#[cfg(loom)]
pub(crate) const LOCAL_CAP: usize = 4;

const MASK: usize = LOCAL_CAP - 1;
const HALF: u32 = (LOCAL_CAP / 2) as u32;

/// Which lanes a refill takes from, in which order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Take {
    /// This lane, then the other.
    First(Lane),
    /// This lane alone.
    Only(Lane),
}

/// Which FIFO of the global queue a task goes to (module docs, "Two lanes").
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Lane {
    /// Woken, yielding, or readied off a P: started work, taken first.
    Ready,
    /// Pushed out of a ring by a `spawn`: new work, admitted when `Ready` is empty (or
    /// by the fairness check).
    Fresh,
}

impl Lane {
    fn other(self) -> Lane {
        match self {
            Lane::Ready => Lane::Fresh,
            Lane::Fresh => Lane::Ready,
        }
    }
}

struct Ring<T> {
    /// `steal << 32 | real`.
    head: AtomicU64,
    tail: AtomicU32,
    slots: Box<[UnsafeCell<MaybeUninit<T>>]>,
}

// SAFETY: a slot's value is accessed by one thread at a time, handed over through `head` and
// `tail` (module docs); the values are `Send`.
unsafe impl<T: Send> Send for Ring<T> {}
// SAFETY: as above.
unsafe impl<T: Send> Sync for Ring<T> {}

fn pack(steal: u32, real: u32) -> u64 {
    (u64::from(steal) << 32) | u64::from(real)
}

fn unpack(head: u64) -> (u32, u32) {
    ((head >> 32) as u32, head as u32)
}

impl<T> Ring<T> {
    /// Moves the value out of slot `i`.
    ///
    /// # Safety
    ///
    /// The slot holds a value that the caller has claimed (popped, stolen, or owns at drop).
    unsafe fn take(&self, i: u32) -> T {
        // SAFETY: by the caller's claim the slot is initialised and nobody else reads it.
        self.slots[i as usize & MASK].with(|p| unsafe { ptr::read(p).assume_init() })
    }

    /// Writes `value` into slot `i`.
    ///
    /// # Safety
    ///
    /// The slot is free (outside `steal..tail`) and only the caller may write it.
    unsafe fn put(&self, i: u32, value: T) {
        // SAFETY: by the caller's claim no other thread accesses the slot.
        self.slots[i as usize & MASK]
            .with_mut(|p| unsafe { ptr::write(p, MaybeUninit::new(value)) })
    }

    /// Tasks queued (racy for anyone but the owner).
    fn len(&self) -> usize {
        // Head first: tail only grows past it, so the difference cannot go negative.
        let (_, real) = unpack(self.head.load(Acquire));
        self.tail.load(Acquire).wrapping_sub(real) as usize
    }
}

impl<T> Drop for Ring<T> {
    fn drop(&mut self) {
        let (_, real) = unpack(self.head.load(Relaxed));
        let tail = self.tail.load(Relaxed);
        let mut i = real;
        while i != tail {
            // SAFETY: `&mut self`: no thief or owner is left, and `real..tail` is initialised.
            drop(unsafe { self.take(i) });
            i = i.wrapping_add(1);
        }
    }
}

/// The owner's handle of a P's ring. Not `Clone`: exactly one M holds it at a time (it lives
/// in the P's owner-only state).
pub(crate) struct Local<T> {
    ring: Arc<Ring<T>>,
    /// Ring positions `ready_from..ready_to` may hold `Ready` tasks (started work): a full
    /// ring that moves any of them sends its batch to the `Ready` lane, not behind a burst
    /// of spawns in the `Fresh` lane. Stolen tasks are not counted (a thief takes them only
    /// into a ring at most half full, and runs them first).
    ready_from: u32,
    ready_to: u32,
}

/// Anyone's handle of a P's ring: length and stealing.
pub(crate) struct Stealer<T> {
    ring: Arc<Ring<T>>,
}

/// A new empty ring: its owner's handle and its stealers' handle.
pub(crate) fn local<T>() -> (Local<T>, Stealer<T>) {
    let ring = Arc::new(Ring {
        head: AtomicU64::new(0),
        tail: AtomicU32::new(0),
        slots: (0..LOCAL_CAP)
            .map(|_| UnsafeCell::new(MaybeUninit::uninit()))
            .collect(),
    });
    let local = Local {
        ring: ring.clone(),
        ready_from: 0,
        ready_to: 0,
    };
    (local, Stealer { ring })
}

impl<T> Local<T> {
    /// Go's `runqput` (at the tail): on a full ring, half of it and `task` go to `global`'s
    /// `lane` (the lane of what caused the push: a spawn, or a wake-up).
    pub(crate) fn push(&mut self, mut task: T, global: &Global<T>, lane: Lane) {
        let r = &*self.ring;
        loop {
            let (steal, real) = unpack(r.head.load(Acquire));
            // Only we write `tail`.
            let tail = r.tail.load(Relaxed);
            if tail.wrapping_sub(steal) < LOCAL_CAP as u32 {
                // SAFETY: `tail` is outside `steal..tail` and only the owner writes slots.
                unsafe { r.put(tail, task) };
                // Release: a thief that reads the new tail sees the slot written.
                r.tail.store(tail.wrapping_add(1), Release);
                if lane == Lane::Ready {
                    self.note_ready(real, tail, tail.wrapping_add(1));
                }
                return;
            }
            if steal != real {
                // A thief is copying out and will free room; don't wait for it.
                global.push(task, lane);
                return;
            }
            let batch_lane = self.batch_lane(real, lane);
            match self.push_overflow(task, real, tail, global, batch_lane) {
                Ok(()) => {
                    self.moved_out(real.wrapping_add(HALF));
                    return;
                }
                // A thief claimed tasks between our load and our claim: there is room now.
                Err(t) => task = t,
            }
        }
    }

    /// Go's `runqputslow`: claims the older half of the full ring and moves it, then `task`,
    /// to the global queue in one batch.
    fn push_overflow(
        &self,
        task: T,
        head: u32,
        tail: u32,
        global: &Global<T>,
        lane: Lane,
    ) -> Result<(), T> {
        let r = &*self.ring;
        debug_assert_eq!(tail.wrapping_sub(head) as usize, LOCAL_CAP);
        let to = head.wrapping_add(HALF);
        // Claim the slots as a thief would (`steal` and `real` both move: we copy at once).
        // Release is not needed for the slots (we wrote them ourselves); Relaxed on failure.
        if r.head
            .compare_exchange(pack(head, head), pack(to, to), Release, Relaxed)
            .is_err()
        {
            return Err(task);
        }
        // SAFETY: the CAS claimed `head..to`, which the owner had filled.
        let batch = (0..HALF).map(|i| unsafe { r.take(head.wrapping_add(i)) });
        global.push_batch(batch.chain(std::iter::once(task)), lane);
        Ok(())
    }

    /// The lane of an overflow batch that moves the older half from `head`, pushed by a
    /// `lane` push: `Ready` if the half may hold started work (a batch has one lane: telling
    /// each task's origin apart would cost a cache miss per task).
    fn batch_lane(&self, head: u32, lane: Lane) -> Lane {
        let to = head.wrapping_add(HALF);
        if before(head, self.ready_to) && before(self.ready_from, to) {
            Lane::Ready
        } else {
            lane
        }
    }

    /// Positions before `to` left the ring in an overflow batch.
    fn moved_out(&mut self, to: u32) {
        if before(self.ready_from, to) {
            self.ready_from = to;
        }
    }

    /// Notes that ring positions `from..to` may hold `Ready` tasks; `head` is the oldest
    /// position still queued.
    fn note_ready(&mut self, head: u32, from: u32, to: u32) {
        if !before(head, self.ready_to) {
            self.ready_from = from;
        }
        self.ready_to = to;
    }

    /// Whether the ring is empty (exact for the owner, who alone adds tasks).
    pub(crate) fn is_empty(&self) -> bool {
        self.ring.len() == 0
    }

    /// Go's `runqget`: the oldest task. A CAS, because thieves move `real` too.
    pub(crate) fn pop(&mut self) -> Option<T> {
        let r = &*self.ring;
        let mut head = r.head.load(Acquire);
        let real = loop {
            let (steal, real) = unpack(head);
            if real == r.tail.load(Relaxed) {
                return None;
            }
            let next_real = real.wrapping_add(1);
            // With no thief copying, `steal` follows `real`; else it stays for the thief to move.
            let next = if steal == real {
                pack(next_real, next_real)
            } else {
                pack(steal, next_real)
            };
            match r.head.compare_exchange(head, next, AcqRel, Acquire) {
                Ok(_) => break real,
                Err(actual) => head = actual,
            }
        };
        // SAFETY: the CAS claimed slot `real`.
        Some(unsafe { r.take(real) })
    }

    /// Go's `globrunqget`: takes up to `max` tasks from `global`'s lanes as `take` says (never
    /// more than fit in this ring's free half), returns the first and queues the rest here.
    pub(crate) fn refill(&mut self, global: &Global<T>, max: usize, take: Take) -> Option<T> {
        if global.hint(take) == 0 {
            return None;
        }
        let r = &*self.ring;
        let (steal, _) = unpack(r.head.load(Acquire));
        let tail = r.tail.load(Relaxed);
        let room = LOCAL_CAP - tail.wrapping_sub(steal) as usize;
        let mut q = global.lock();
        let n = max.max(1).min(q.available(take)).min(room / 2 + 1);
        let takes_ready = q.takes_ready(take, n);
        let ret = q.pop_front(take)?;
        for i in 0..n as u32 - 1 {
            let t = q
                .pop_front(take)
                .expect("gort: global queue shorter than counted");
            // SAFETY: `room / 2` slots past `tail` are free and only the owner writes them.
            unsafe { r.put(tail.wrapping_add(i), t) };
        }
        global.publish(&q);
        drop(q);
        let end = tail.wrapping_add(n as u32 - 1);
        r.tail.store(end, Release);
        if takes_ready && n > 1 {
            self.note_ready(unpack(r.head.load(Relaxed)).1, tail, end);
        }
        Some(ret)
    }
}

impl<T> Stealer<T> {
    /// Tasks queued (a racy hint).
    pub(crate) fn len(&self) -> usize {
        self.ring.len()
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Go's `runqsteal`: moves half of this ring's tasks into `dst` (the thief's own ring) and
    /// returns one of them to run. `None` if there was nothing, another thief is at work, or
    /// `dst` is more than half full.
    pub(crate) fn steal_into(&self, dst: &mut Local<T>) -> Option<T> {
        let d = &*dst.ring;
        let dst_tail = d.tail.load(Relaxed);
        let (dst_steal, _) = unpack(d.head.load(Acquire));
        if dst_tail.wrapping_sub(dst_steal) > HALF {
            return None;
        }
        let n = self.claim_and_copy(d, dst_tail);
        if n == 0 {
            return None;
        }
        // The last one copied is returned rather than published.
        let last = dst_tail.wrapping_add(n - 1);
        // SAFETY: we just wrote slot `last` of our own ring, beyond its published tail.
        let ret = unsafe { d.take(last) };
        if n > 1 {
            d.tail.store(last, Release);
        }
        Some(ret)
    }

    /// Claims half of this ring (moving `real`), copies it to `dst` from `dst_tail`, then
    /// releases the claim (moving `steal`). Returns how many were copied.
    fn claim_and_copy(&self, dst: &Ring<T>, dst_tail: u32) -> u32 {
        let src = &*self.ring;
        let mut head = src.head.load(Acquire);
        let (first, n) = loop {
            let (steal, real) = unpack(head);
            if steal != real {
                // Another thief is copying.
                return 0;
            }
            // Acquire: the owner's slot writes before this tail are visible.
            let tail = src.tail.load(Acquire);
            let len = tail.wrapping_sub(real);
            let n = len - len / 2;
            if n == 0 || n > HALF {
                // Empty, or a torn view (the owner moved on between our loads): give up.
                return 0;
            }
            match src.head.compare_exchange(
                head,
                pack(steal, real.wrapping_add(n)),
                AcqRel,
                Acquire,
            ) {
                Ok(_) => break (real, n),
                Err(actual) => head = actual,
            }
        };
        for i in 0..n {
            // SAFETY: the CAS claimed `first..first + n` of `src`; the owner will not write them
            // while `steal` stays at `first`. `dst_tail..dst_tail + n` of our own ring is free
            // (we checked it is at most half full) and unpublished.
            unsafe { dst.put(dst_tail.wrapping_add(i), src.take(first.wrapping_add(i))) };
        }
        // Release the claim: `steal` catches up with `real` (which the owner may have moved).
        let mut head = pack(first, first.wrapping_add(n));
        loop {
            let (_, real) = unpack(head);
            match src
                .head
                .compare_exchange(head, pack(real, real), AcqRel, Acquire)
            {
                Ok(_) => return n,
                Err(actual) => head = actual,
            }
        }
    }
}

/// Go's global run queue (`sched.runq`), in two lanes (module docs): for tasks readied by
/// threads that hold no P, and overflow from full rings. `len` mirrors the total length for
/// lock-free emptiness checks (Go's `sched.runqsize`), `ready` the `Ready` lane's, so that a
/// refill of that lane alone skips the lock when it is empty.
pub(crate) struct Global<T> {
    len: AtomicUsize,
    ready: AtomicUsize,
    /// Tasks ever readied into the `Ready` lane by a thread that holds no P (`push_woken`):
    /// a yield serves the global queue only when this moved (`P::note_yield`), not for the
    /// overflow of rings full of yielding tasks.
    woken: AtomicUsize,
    queue: Mutex<Lanes<T>>,
}

struct Lanes<T> {
    ready: VecDeque<T>,
    fresh: VecDeque<T>,
}

impl<T> Lanes<T> {
    fn lane(&mut self, lane: Lane) -> &mut VecDeque<T> {
        match lane {
            Lane::Ready => &mut self.ready,
            Lane::Fresh => &mut self.fresh,
        }
    }

    /// The oldest task of the first lane `take` names, else of the other if it may.
    fn pop_front(&mut self, take: Take) -> Option<T> {
        match take {
            Take::Only(lane) => self.lane(lane).pop_front(),
            Take::First(lane) => self
                .lane(lane)
                .pop_front()
                .or_else(|| self.lane(lane.other()).pop_front()),
        }
    }

    /// Whether taking `n` tasks as `take` says takes a `Ready` one.
    fn takes_ready(&self, take: Take, n: usize) -> bool {
        match take {
            Take::Only(lane) => lane == Lane::Ready,
            Take::First(Lane::Ready) => !self.ready.is_empty(),
            Take::First(Lane::Fresh) => n > self.fresh.len(),
        }
    }

    fn available(&self, take: Take) -> usize {
        match take {
            Take::Only(Lane::Ready) => self.ready.len(),
            Take::Only(Lane::Fresh) => self.fresh.len(),
            Take::First(_) => self.len(),
        }
    }

    fn len(&self) -> usize {
        self.ready.len() + self.fresh.len()
    }
}

impl<T> Default for Global<T> {
    fn default() -> Self {
        Global {
            len: AtomicUsize::new(0),
            ready: AtomicUsize::new(0),
            woken: AtomicUsize::new(0),
            queue: Mutex::new(Lanes {
                ready: VecDeque::new(),
                fresh: VecDeque::new(),
            }),
        }
    }
}

impl<T> Global<T> {
    fn lock(&self) -> gort_loom::MutexGuard<'_, Lanes<T>> {
        self.queue.lock()
    }

    pub(crate) fn push(&self, task: T, lane: Lane) {
        self.push_batch(std::iter::once(task), lane);
    }

    /// `push` for a task readied by a thread that holds no P (a timer run by sysmon or an
    /// idle M, a wake from a plain thread): counted in `woken`.
    pub(crate) fn push_woken(&self, task: T, lane: Lane) {
        self.push(task, lane);
        if lane == Lane::Ready {
            self.woken.fetch_add(1, Relaxed);
        }
    }

    /// Tasks in the `Ready` lane (a racy hint).
    pub(crate) fn ready_len(&self) -> usize {
        self.hint(Take::Only(Lane::Ready))
    }

    /// How many tasks `push_woken` ever readied into the `Ready` lane (a racy hint).
    pub(crate) fn woken(&self) -> usize {
        self.woken.load(Relaxed)
    }

    pub(crate) fn push_batch(&self, tasks: impl Iterator<Item = T>, lane: Lane) {
        let mut q = self.lock();
        q.lane(lane).extend(tasks);
        self.publish(&q);
    }

    /// The oldest `Ready` task, else the oldest `Fresh` one.
    pub(crate) fn pop(&self) -> Option<T> {
        if self.is_empty() {
            return None;
        }
        let mut q = self.lock();
        let t = q.pop_front(Take::First(Lane::Ready));
        self.publish(&q);
        t
    }

    /// Mirrors the lanes' lengths after a change, under the lock.
    fn publish(&self, q: &Lanes<T>) {
        // SeqCst: the parking protocol's re-check (idle.rs) pairs with this store.
        self.len.store(q.len(), SeqCst);
        // A hint: a refill that misses a task pushed just now finds it on its next look.
        self.ready.store(q.ready.len(), Relaxed);
    }

    /// How many tasks a refill as `take` says could find (a racy hint).
    fn hint(&self, take: Take) -> usize {
        match take {
            Take::Only(Lane::Ready) => self.ready.load(Relaxed),
            _ => self.len(),
        }
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub(crate) fn len(&self) -> usize {
        self.len.load(SeqCst)
    }
}

/// Whether ring position `a` comes before `b` (positions wrap; a ring spans far less than
/// half the range).
fn before(a: u32, b: u32) -> bool {
    (a.wrapping_sub(b) as i32) < 0
}

#[cfg(all(test, not(loom)))]
#[path = "runq_tests.rs"]
mod tests;
