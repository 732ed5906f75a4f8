//! Thread-local state: which `select!` arm is being polled (so channel operations deep inside
//! an arm's future know their [`Group`]), and the select's random number generator.
//!
//! A select installs itself once per poll ([`enter`], undone by [`Entered::leave`] or on
//! unwind), then names each arm before polling it ([`set_arm`]). A channel operation reads
//! that state for the duration of its own call ([`with_op`]). The group is moved in and out
//! of its cell rather than cloned, so there is no reference-count traffic, and a nested select
//! saves the outer state in its guard and restores it when it leaves.

use std::cell::{Cell, RefCell};

use gort_loom::{Arc, Stamp};

use crate::group::{Group, GroupRef};

#[cfg(loom)]
use loom::thread_local;

/// What a channel operation needs to know about the select arm that polls it.
#[derive(Debug)]
pub(crate) struct SelectCtx {
    /// The select's group, created by the first operation that has to park.
    pub(crate) group: Option<Arc<Group>>,
    /// The index of the arm being polled.
    pub(crate) arm: usize,
    /// First pass of a select's first poll: operations must not park.
    pub(crate) nonblocking: bool,
    /// A select with `default` is taking a snapshot: operations log their lock sections'
    /// stamps ([`Snapshot`]).
    pub(crate) record: bool,
}

impl SelectCtx {
    /// The identity of the group to skip as "own" when looking for a counterparty.
    pub(crate) fn me(&self) -> Option<*const Group> {
        self.group.as_ref().map(Arc::as_ptr)
    }

    /// The membership to record in a waiter that parks now (creates the group on first use).
    pub(crate) fn group_ref(&mut self) -> GroupRef {
        let group = self.group.get_or_insert_with(Group::new_polling).clone();
        GroupRef {
            group,
            arm: u32::try_from(self.arm).expect("gort::chan: a select has fewer than 2^32 arms"),
        }
    }
}

/// The per-thread select state, read only while a select is active ([`ACTIVE`]).
struct Current {
    arm: Cell<usize>,
    nonblocking: Cell<bool>,
    group: Cell<Option<Arc<Group>>>,
    /// A [`Snapshot`] is being taken (by this select or one it is nested in).
    recording: Cell<bool>,
}

#[cfg(not(loom))]
thread_local! {
    /// A select is polling one of its arms on this thread. Apart from `CURRENT`, which owns
    /// a group and so has a destructor: every channel operation reads this flag, and a
    /// thread-local without a destructor is read with one load, with no check of whether it
    /// was registered for destruction or already destroyed.
    static ACTIVE: Cell<bool> = const { Cell::new(false) };
    static CURRENT: Current = const {
        Current {
            arm: Cell::new(0),
            nonblocking: Cell::new(false),
            group: Cell::new(None),
            recording: Cell::new(false),
        }
    };
    static RNG: Cell<u64> = Cell::new(seed());
    /// The lock sections a [`Snapshot`] logged; reused, so a thread allocates it once.
    static LOG: RefCell<Vec<Logged>> = const { RefCell::new(Vec::new()) };
}

// loom's `thread_local!` has no `const` form.
#[cfg(loom)]
thread_local! {
    static ACTIVE: Cell<bool> = Cell::new(false);
    static CURRENT: Current = Current {
        arm: Cell::new(0),
        nonblocking: Cell::new(false),
        group: Cell::new(None),
        recording: Cell::new(false),
    };
    static RNG: Cell<u64> = Cell::new(seed());
    static LOG: RefCell<Vec<Logged>> = RefCell::new(Vec::new());
}

/// Runs a channel operation with the current select context, if any. Always inlined: a
/// receive's poll (R3's hot path) stopped inlining it when the receive hooks became calls
/// through a fused channel's functions, 50 instructions a round trip more
/// (design/PERFORMANCE-LOG.md, "A channel Timer in 144 bytes").
#[inline(always)]
pub(crate) fn with_op<R>(f: impl FnOnce(Option<&mut SelectCtx>) -> R) -> R {
    if !ACTIVE.with(Cell::get) {
        return f(None);
    }
    CURRENT.with(|cur| {
        // Give the group back even if `f` unwinds, so the select keeps it.
        struct Restore<'a> {
            cur: &'a Current,
            ctx: SelectCtx,
        }
        impl Drop for Restore<'_> {
            fn drop(&mut self) {
                self.cur.group.set(self.ctx.group.take());
            }
        }
        let mut restore = Restore {
            cur,
            ctx: SelectCtx {
                group: cur.group.take(),
                arm: cur.arm.get(),
                nonblocking: cur.nonblocking.get(),
                record: cur.recording.get(),
            },
        };
        f(Some(&mut restore.ctx))
    })
}

/// Installs a select (with its group, if it has one yet) for one poll of its arms; the
/// previous state comes back on [`Entered::leave`], or on drop if an arm's poll unwinds.
pub(crate) fn enter(group: Option<Arc<Group>>) -> Entered {
    let prev = CURRENT.with(|cur| Saved {
        active: ACTIVE.with(|a| a.replace(true)),
        arm: cur.arm.get(),
        nonblocking: cur.nonblocking.get(),
        group: cur.group.replace(group),
    });
    Entered { prev: Some(prev) }
}

/// Names the arm about to be polled.
#[inline]
pub(crate) fn set_arm(arm: usize, nonblocking: bool) {
    CURRENT.with(|cur| {
        cur.arm.set(arm);
        cur.nonblocking.set(nonblocking);
    });
}

/// The state an [`Entered`] restores.
#[derive(Debug)]
struct Saved {
    active: bool,
    arm: usize,
    nonblocking: bool,
    group: Option<Arc<Group>>,
}

/// The guard returned by [`enter`].
#[derive(Debug)]
pub(crate) struct Entered {
    prev: Option<Saved>,
}

impl Entered {
    /// Restores the previous state and returns the select's group (which an operation may
    /// have created meanwhile).
    pub(crate) fn leave(mut self) -> Option<Arc<Group>> {
        let prev = self.prev.take().expect("left a select context twice");
        restore(prev)
    }
}

impl Drop for Entered {
    fn drop(&mut self) {
        if let Some(prev) = self.prev.take() {
            drop(restore(prev));
        }
    }
}

/// Puts `prev` back; returns the group that was installed.
fn restore(prev: Saved) -> Option<Arc<Group>> {
    ACTIVE.with(|a| a.set(prev.active));
    CURRENT.with(|cur| {
        cur.arm.set(prev.arm);
        cur.nonblocking.set(prev.nonblocking);
        cur.group.replace(prev.group)
    })
}

/// One channel lock section of a select arm's operation, logged while a [`Snapshot`] is
/// taken: which channel (its address, only ever compared, never followed) and the lock
/// word around the section.
#[derive(Clone, Copy, Debug)]
struct Logged {
    chan: usize,
    stamp: Stamp,
}

/// Logs a lock section of the channel at `chan` (called by an operation whose context says
/// `record`).
pub(crate) fn log(chan: usize, stamp: Stamp) {
    LOG.with(|l| l.borrow_mut().push(Logged { chan, stamp }));
}

/// A select with `default` making sure that "no arm is ready" held at one moment, as Go's
/// `selectgo` does by locking every case's channel at once (CHANNELS.md, "`default` is a
/// snapshot"). The select polls its arms in two passes while this is alive ([`pass`]
/// between them); every channel operation logs its lock section's [`Stamp`]. The passes saw
/// one moment (the one between them) when both looked at the same channels and on each
/// channel no section ran between the logged ones: then each channel stayed as its first
/// look saw it until its last, and those spans all hold the moment between the passes.
/// Only addresses are compared, so a channel dropped meanwhile costs nothing but a retry.
///
/// [`pass`]: Snapshot::pass
pub(crate) struct Snapshot {
    /// Where this snapshot's log starts (a select nested in an arm of another logs after
    /// the outer one's entries, which it leaves alone).
    start: usize,
    /// Where its second pass starts.
    second: usize,
    /// A snapshot was already being taken: this one is nested.
    nested: bool,
}

impl Snapshot {
    /// Starts logging (the first pass follows).
    pub(crate) fn begin() -> Snapshot {
        let nested = CURRENT.with(|c| c.recording.replace(true));
        let start = LOG.with(|l| l.borrow().len());
        Snapshot {
            start,
            second: start,
            nested,
        }
    }

    /// Whether the first pass logged more than one lock section: one section alone is one
    /// moment, and needs no second pass.
    pub(crate) fn needs_second_pass(&self) -> bool {
        LOG.with(|l| l.borrow().len() - self.start > 1)
    }

    /// Marks the start of the second pass.
    pub(crate) fn pass(&mut self) {
        self.second = LOG.with(|l| l.borrow().len());
    }

    /// Whether the two passes saw one moment (the type's docs); if not, clears the log for
    /// another try.
    pub(crate) fn one_moment(&mut self) -> bool {
        LOG.with(|l| {
            let mut l = l.borrow_mut();
            let ok = one_moment(&l[self.start..], self.second - self.start);
            l.truncate(self.start);
            ok
        })
    }
}

/// The rule of [`Snapshot`] over its log, `second` the index where the second pass starts.
fn one_moment(log: &[Logged], second: usize) -> bool {
    let (first, rest) = log.split_at(second);
    let in_both = |e: &Logged| {
        first.iter().any(|f| f.chan == e.chan) && rest.iter().any(|r| r.chan == e.chan)
    };
    // Each section follows the previous one logged on its channel directly.
    let chained = log.iter().enumerate().all(|(i, e)| {
        log[..i]
            .iter()
            .rev()
            .find(|p| p.chan == e.chan)
            .map_or(true, |p| p.stamp.after == e.stamp.before)
    });
    chained && log.iter().all(in_both)
}

impl Drop for Snapshot {
    fn drop(&mut self) {
        CURRENT.with(|c| c.recording.set(self.nested));
        if !self.nested {
            LOG.with(|l| l.borrow_mut().clear());
        }
    }
}

/// A uniformly distributed index in `0..n` (`n > 0`), from a per-thread xorshift64*
/// generator (Vigna, "An experimental exploration of Marsaglia's xorshift generators,
/// scrambled", 2016) reduced with Lemire's multiply-shift, as Go's `cheaprandn` does.
pub(crate) fn rand_below(n: usize) -> usize {
    debug_assert!(
        n > 0 && n <= u32::MAX as usize,
        "rand_below({n}) out of range"
    );
    let r = RNG.with(|s| {
        let mut x = s.get();
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        s.set(x);
        // The multiplier is the xorshift64* constant M_32 from Vigna's paper.
        (x.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 32) as u32
    });
    ((u64::from(r) * n as u64) >> 32) as usize
}

/// A non-zero seed that differs per thread and per process.
#[cfg(not(loom))]
fn seed() -> u64 {
    use std::hash::BuildHasher;
    std::collections::hash_map::RandomState::new().hash_one(std::thread::current().id()) | 1
}

/// A fixed seed: loom replays executions and needs every one to be deterministic.
#[cfg(loom)]
fn seed() -> u64 {
    0x9E37_79B9_7F4A_7C15
}
