//! The timer status word and the corruption panic.

/// The state of a [`Timer`](crate::Timer): Go 1.19's `timerNoStatus` .. `timerMoving`, in
/// Go's order. design/TIMERS.md ("The state machine") gives the whole transition table.
#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Status {
    /// Fresh, or a one-shot that has run. In no heap.
    NoStatus = 0,
    /// Pending; the heap key is the deadline.
    Waiting,
    /// Claimed by `runtimer` under the heap lock; the callback has not started yet.
    Running,
    /// Stopped; still in a heap until its owner removes it lazily.
    Deleted,
    /// Being removed from a heap under its lock.
    Removing,
    /// Stopped and removed. In no heap.
    Removed,
    /// Owned by `del`/`modify`/`add`, without any heap lock.
    Modifying,
    /// Re-armed earlier than its heap key; the key is fixed lazily.
    ModifiedEarlier,
    /// Re-armed at or after its heap key; the key is fixed lazily.
    ModifiedLater,
    /// Being re-keyed or moved to another heap under the heap lock.
    Moving,
}

impl Status {
    /// Every status, in Go's order.
    pub(crate) const ALL: [Status; 10] = [
        Status::NoStatus,
        Status::Waiting,
        Status::Running,
        Status::Deleted,
        Status::Removing,
        Status::Removed,
        Status::Modifying,
        Status::ModifiedEarlier,
        Status::ModifiedLater,
        Status::Moving,
    ];

    /// Decodes the atomic word; anything else is memory corruption.
    pub(crate) fn from_u32(v: u32) -> Status {
        match Status::ALL.get(v as usize) {
            Some(s) => *s,
            None => bad("unknown status word"),
        }
    }
}

/// Go's `badTimer`: an impossible state was observed. Always a bug (in this crate, or a
/// caller racing `add` with other operations on one timer); continuing would corrupt a heap.
#[cold]
#[inline(never)]
#[track_caller]
pub(crate) fn bad(what: &str) -> ! {
    panic!("gort: timer data corruption: {what}")
}
