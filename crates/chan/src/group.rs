//! The commit flag that lets at most one arm of a `select!` take effect.
//!
//! Go's `select` locks every channel it waits on, so a counterparty completing one case wakes
//! the goroutine with that case already chosen (`selectgo`, `sudog.isSelect`, `g.selectDone`
//! in `src/runtime/select.go` and `chan.go`). gort's `select!` polls arbitrary futures and
//! cannot lock their channels, so it uses the protocol of crossbeam-channel's `Context::
//! try_select` instead: every waiter that a channel operation parks on behalf of a `select!`
//! carries a [`GroupRef`] (the select's [`Group`] and the arm's index), and a counterparty may
//! complete that waiter only after winning the group for that arm with [`Group::try_claim`].
//!
//! # States
//!
//! | state      | meaning                                              | who moves it out          |
//! |------------|------------------------------------------------------|---------------------------|
//! | `POLLING`  | the owner is polling its arms (the initial state)    | owner: `end_poll`, `finish` |
//! | `IDLE`     | the owner is parked; any waiter may be claimed       | owner: `begin_poll`; a claimer: `try_claim` |
//! | arm `k`    | a counterparty completed a waiter of arm `k`         | owner: `finish`           |
//! | `FINISHED` | the select has returned; its waiters are dead        | nobody                    |
//!
//! | operation             | from       | to         | result                              |
//! |-----------------------|------------|------------|-------------------------------------|
//! | `try_claim(k)`        | `IDLE`     | `k`        | `Won`                               |
//! | `try_claim(k)`        | `k`        | `k`        | `Won` (another op of the same arm)  |
//! | `try_claim(k)`        | `POLLING`  | `POLLING`  | `Busy`: skip, wake the owner        |
//! | `try_claim(k)`        | `j != k`, `FINISHED` | same | `Gone`: unlink the waiter      |
//! | `begin_poll`          | `IDLE`     | `POLLING`  | poll every arm                      |
//! | `begin_poll`          | `k`        | `k`        | poll arm `k` only                   |
//! | `begin_poll`          | `POLLING`, `FINISHED` | — | panic (re-entrant or finished select) |
//! | `end_poll`            | `POLLING`  | `IDLE`     | the select returns `Pending`        |
//! | `reopen`              | `k`        | `POLLING`  | arm `k` was disabled by its pattern |
//! | `finish`              | any        | `FINISHED` | the select returns `Ready`          |
//!
//! While `POLLING`, the owner completes operations itself with no claim: nobody else can move
//! the group, so at most one arm takes effect. A claimer that meets a `Busy` waiter leaves it
//! queued and wakes its task, because the owner may already have polled that arm in this round
//! and would otherwise miss what the claimer does next (e.g. parking itself as a sender).
//! Two selects whose polls overlap may skip each other this way and both poll again; no
//! wake-up is lost, but progress relies on the polls not overlapping forever, which on real
//! schedulers they do not (the `threads` tests and the `select_meets_select` loom model cover
//! it).
//!
//! # Orderings
//!
//! All accesses are `Relaxed`. The group only picks a winner, and the winner is decided by the
//! modification order of this one atomic, which every thread agrees on regardless of ordering.
//! No data is published through it: a claimer claims and hands off the value while holding the
//! channel's lock, and the owner reads the outcome by locking that channel when it polls the
//! arm, so the lock provides the happens-before edge (the loom models check this).

use gort_loom::atomic::{AtomicUsize, Ordering::Relaxed};
use gort_loom::Arc;

/// The select has returned; no waiter of it may complete.
const FINISHED: usize = usize::MAX - 2;
/// The owner is polling its arms and completes operations itself.
const POLLING: usize = usize::MAX - 1;
/// The owner is parked; the first claimer wins.
const IDLE: usize = usize::MAX;

/// One `select!` invocation's commit flag (see the module docs).
#[derive(Debug)]
pub(crate) struct Group {
    state: AtomicUsize,
}

/// The outcome of [`Group::try_claim`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Claim {
    /// The waiter may be completed now.
    Won,
    /// The owner is polling; leave the waiter queued and wake it.
    Busy,
    /// The select chose another arm or returned; unlink the waiter, never complete it.
    Gone,
    /// The waiter belongs to the caller's own select; leave it alone (Go never pairs a
    /// select with itself).
    Own,
}

impl Group {
    /// A group created while its owner is polling (the only moment one is created).
    pub(crate) fn new_polling() -> Arc<Group> {
        Arc::new(Group {
            state: AtomicUsize::new(POLLING),
        })
    }

    /// A counterparty asks to complete a waiter of `arm`.
    pub(crate) fn try_claim(&self, arm: usize) -> Claim {
        debug_assert!(
            arm < FINISHED,
            "arm index {arm} collides with a group state"
        );
        match self.state.compare_exchange(IDLE, arm, Relaxed, Relaxed) {
            Ok(_) => Claim::Won,
            Err(cur) if cur == arm => Claim::Won,
            Err(POLLING) => Claim::Busy,
            Err(_) => Claim::Gone,
        }
    }

    /// The owner starts a poll: `Some(k)` if a counterparty committed arm `k`, else `None`
    /// and the group is `POLLING`.
    pub(crate) fn begin_poll(&self) -> Option<usize> {
        match self.state.compare_exchange(IDLE, POLLING, Relaxed, Relaxed) {
            Ok(_) => None,
            Err(k) if k < FINISHED => Some(k),
            Err(FINISHED) => panic!("select! polled after it returned"),
            Err(_) => {
                panic!("select! polled while already polling (re-entrant poll or an earlier panic)")
            }
        }
    }

    /// The owner found no ready arm and parks: waiters become claimable.
    pub(crate) fn end_poll(&self) {
        // Only the owner moves the group out of POLLING, so a plain store cannot lose a claim.
        debug_assert_eq!(self.state.load(Relaxed), POLLING, "end_poll outside a poll");
        self.state.store(IDLE, Relaxed);
    }

    /// The owner found that the arm committed to it is disabled after all (its output did not
    /// match its refutable pattern) and goes on polling the other arms. The caller has dropped
    /// that arm's future, so no waiter of it remains to be claimed: while the group was
    /// committed, only such waiters could be claimed, so a plain store loses nothing.
    pub(crate) fn reopen(&self) {
        debug_assert!(
            self.state.load(Relaxed) < FINISHED,
            "reopen of a group not committed"
        );
        self.state.store(POLLING, Relaxed);
    }

    /// The owner returned: every remaining waiter is dead.
    pub(crate) fn finish(&self) {
        self.state.store(FINISHED, Relaxed);
    }
}

/// A waiter's membership in a select: the group and the arm it belongs to. A slot keeps the
/// two as fields of its own, so that the arm's `u32` shares a word with the slot's flags.
#[derive(Clone, Debug)]
pub(crate) struct GroupRef {
    pub(crate) group: Arc<Group>,
    pub(crate) arm: u32,
}

/// Asks to complete the waiter of `arm` in `group` on behalf of an operation whose own select
/// is `me` (a pointer used only for identity).
pub(crate) fn claim(group: &Arc<Group>, arm: u32, me: Option<*const Group>) -> Claim {
    if me == Some(Arc::as_ptr(group)) {
        return Claim::Own;
    }
    group.try_claim(arm as usize)
}
