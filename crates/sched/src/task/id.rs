//! Task ids: unique for the life of the process, handed out in blocks per thread so that a
//! spawn loop does not bounce one global counter between Ms, and the current task's id,
//! recorded for the length of each poll.

use std::cell::Cell;
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// A task's id, unique among all tasks of the process for as long as it runs.
///
/// Ids are not in spawn order: each thread takes ids from a block of its own.
///
/// # Examples
///
/// ```
/// let rt = gort::Runtime::new().unwrap();
/// let h = rt.spawn(async { gort::task::id() });
/// let id = h.id();
/// assert_eq!(rt.block_on(h).unwrap(), id);
/// ```
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Id(u64);

impl fmt::Debug for Id {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Id({})", self.0)
    }
}

impl fmt::Display for Id {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.0, f)
    }
}

/// Ids a thread takes from the global counter at once.
const BLOCK: u64 = 256;

/// The next block's first id (0 is never used: it means "no task" in `CURRENT`).
static NEXT_BLOCK: AtomicU64 = AtomicU64::new(1);

thread_local! {
    /// This thread's next id and the end of its block.
    static LOCAL: Cell<(u64, u64)> = const { Cell::new((0, 0)) };
    /// The id of the task this thread is polling (0: none).
    static CURRENT: Cell<u64> = const { Cell::new(0) };
}

impl Id {
    /// A fresh id.
    pub(crate) fn next() -> Id {
        let take_block = || NEXT_BLOCK.fetch_add(BLOCK, Relaxed);
        let id = LOCAL
            .try_with(|l| {
                let (mut next, mut end) = l.get();
                if next == end {
                    next = take_block();
                    end = next + BLOCK;
                }
                l.set((next + 1, end));
                next
            })
            // A thread being torn down: take a whole block for one id.
            .unwrap_or_else(|_| take_block());
        Id(id)
    }

    /// The id as a number (unique, never 0).
    ///
    /// # Examples
    ///
    /// ```
    /// let rt = gort::Runtime::new().unwrap();
    /// let h = rt.spawn(async {});
    /// assert_ne!(h.id().as_u64(), 0);
    /// assert_eq!(h.id().to_string(), h.id().as_u64().to_string());
    /// ```
    pub fn as_u64(self) -> u64 {
        self.0
    }
}

/// Marks `id` as the running task's until dropped (then the previous one again).
pub(crate) struct CurrentGuard(u64);

impl CurrentGuard {
    pub(crate) fn enter(id: Id) -> CurrentGuard {
        CurrentGuard(CURRENT.try_with(|c| c.replace(id.0)).unwrap_or(0))
    }
}

impl Drop for CurrentGuard {
    fn drop(&mut self) {
        let _ = CURRENT.try_with(|c| c.set(self.0));
    }
}

/// The id of the task being polled on this thread, or `None` outside a task (in
/// `block_on`'s own future, a plain thread). A blocking closure has the id of its
/// `JoinHandle`, as in Tokio.
///
/// # Examples
///
/// ```
/// assert_eq!(gort::task::try_id(), None);
/// let rt = gort::Runtime::new().unwrap();
/// let id = rt.block_on(async { gort::spawn(async { gort::task::try_id() }).await.unwrap() });
/// assert!(id.is_some());
/// ```
pub fn try_id() -> Option<Id> {
    CURRENT
        .try_with(|c| c.get())
        .ok()
        .filter(|&id| id != 0)
        .map(Id)
}

/// The id of the task being polled on this thread.
///
/// # Panics
///
/// Outside a task (see [`try_id`]).
///
/// # Examples
///
/// ```
/// let rt = gort::Runtime::new().unwrap();
/// let h = rt.spawn(async { gort::task::id() });
/// let id = h.id();
/// assert_eq!(rt.block_on(h).unwrap(), id);
/// ```
#[track_caller]
pub fn id() -> Id {
    try_id().expect("gort::task::id called outside a task (use gort::task::try_id there)")
}
