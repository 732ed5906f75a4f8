//! `select!`: wait on several futures, run the body of the first one ready.
//!
//! The macro (in `macros.rs`) pins every arm's future on the caller's stack inside an
//! `Option` (`None`: disabled), pairs each with its pattern as a predicate ([`Arm`]), builds
//! the nested tuple `(Arm0, (Arm1, (..., ())))`, and awaits [`Select`] over it; the output is
//! a nested [`Either`] that the macro matches to run the chosen body with the arm's pattern
//! bound. Everything but the parsing is plain generic code here.
//!
//! # One arm takes effect
//!
//! Each poll of a [`Select`] is one of:
//!
//! 1. A counterparty completed a channel operation of arm `k` while the select was parked
//!    (its [`Group`] was claimed for `k`): poll arm `k` only, and return its output. If its
//!    pattern rejects the output, the arm is disabled (its future dropped), the group is
//!    reopened to `POLLING`, and the poll goes on as step 2.
//! 2. Otherwise the group is `POLLING` (no counterparty can complete any arm's operation):
//!    poll the enabled arms in a fresh uniformly random order (declared order with
//!    `biased;`), and return the first ready one whose output its pattern accepts.
//!    On the first poll this takes two passes, as Go's `selectgo` does: one where channel
//!    operations only try (so a select with a ready arm never allocates or parks anything),
//!    then one where they park. With `default`, only the first pass runs, and `default` wins
//!    if no arm was ready at one moment ([`Select::poll_default`]).
//! 3. None ready: the group becomes `IDLE` and the select returns `Pending`. Every arm
//!    disabled: `else` (or `default`), else a panic.
//!
//! So at most one arm's channel operation takes effect, as in Go. See `group.rs` for the
//! states and the proof obligations.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use gort_loom::Arc;

use crate::group::Group;
use crate::receiver::{Receiver, RecvFuture};
use crate::select_ctx::{self, rand_below, Snapshot};

/// A nested select output: arm 0's output is `Left`, arm `k + 1`'s is `Right` of arm `k`'s
/// position in the rest.
#[doc(hidden)]
#[derive(Debug)]
pub enum Either<L, R> {
    /// This arm.
    Left(L),
    /// One of the following arms.
    Right(R),
}

/// The output of no arm at all.
#[doc(hidden)]
#[derive(Debug)]
pub enum Never {}

/// What polling one arm found.
#[doc(hidden)]
#[derive(Debug)]
pub enum ArmPoll<O> {
    /// Ready, and its output matches the arm's pattern.
    Ready(O),
    /// Not ready.
    Pending,
    /// Disabled: by its `if` guard, or because an output did not match its pattern (the
    /// output and the arm's future have been dropped).
    Disabled,
}

/// A list of select arms that can be polled by index.
#[doc(hidden)]
pub trait Arms {
    /// Nested [`Either`]s of the arms' outputs, ending in [`Never`].
    type Output;
    /// The number of arms.
    const LEN: usize;
    /// Polls arm `arm` (`arm < LEN`).
    fn poll_arm(&mut self, arm: usize, cx: &mut Context<'_>) -> ArmPoll<Self::Output>;
    /// The number of arms not disabled.
    fn enabled(&self) -> usize;
}

impl Arms for () {
    type Output = Never;
    const LEN: usize = 0;

    fn poll_arm(&mut self, arm: usize, _: &mut Context<'_>) -> ArmPoll<Never> {
        unreachable!("select! polled arm {arm}, past its last arm")
    }

    fn enabled(&self) -> usize {
        0
    }
}

/// One arm: its future, pinned in place inside an `Option` (`None` once disabled, so that a
/// disabled arm's future is dropped at once), and its pattern as a predicate.
#[doc(hidden)]
pub struct Arm<'a, F, M> {
    fut: Pin<&'a mut Option<F>>,
    accept: M,
}

impl<'a, F: Future, M: FnMut(&F::Output) -> bool> Arm<'a, F, M> {
    /// An arm polling `fut` (`None`: disabled by its guard) whose outputs must satisfy
    /// `accept` (the arm's pattern).
    pub fn new(fut: Pin<&'a mut Option<F>>, accept: M) -> Self {
        Arm { fut, accept }
    }
}

/// The arm's future if its guard holds; a disabled arm's future is dropped unpolled.
#[doc(hidden)]
pub fn guard<F>(enabled: bool, fut: F) -> Option<F> {
    enabled.then_some(fut)
}

impl<F: Future, M: FnMut(&F::Output) -> bool, R: Arms> Arms for (Arm<'_, F, M>, R) {
    type Output = Either<F::Output, R::Output>;
    const LEN: usize = 1 + R::LEN;

    #[inline]
    fn poll_arm(&mut self, arm: usize, cx: &mut Context<'_>) -> ArmPoll<Self::Output> {
        if arm != 0 {
            return match self.1.poll_arm(arm - 1, cx) {
                ArmPoll::Ready(out) => ArmPoll::Ready(Either::Right(out)),
                ArmPoll::Pending => ArmPoll::Pending,
                ArmPoll::Disabled => ArmPoll::Disabled,
            };
        }
        let this = &mut self.0;
        let Some(fut) = this.fut.as_mut().as_pin_mut() else {
            return ArmPoll::Disabled;
        };
        match fut.poll(cx) {
            Poll::Pending => ArmPoll::Pending,
            Poll::Ready(out) if (this.accept)(&out) => ArmPoll::Ready(Either::Left(out)),
            Poll::Ready(out) => {
                // Tokio's rule: a refutable pattern that does not match disables the arm.
                this.fut.set(None);
                drop(out);
                ArmPoll::Disabled
            }
        }
    }

    fn enabled(&self) -> usize {
        usize::from(self.0.fut.is_some()) + self.1.enabled()
    }
}

/// An arm expression, sorted by type at the call site (autoref specialization): an
/// `Option<&Receiver<T>>` becomes an [`OptionRecv`] (Go's nil channel when `None`), and any
/// other expression must be a future (or `IntoFuture`) and is the arm's future itself.
///
/// The option reading takes `self` by value and the future reading `&mut self`, so method
/// resolution tries the option reading first; the wrapper is a temporary of the `let` that
/// pins the arms, gone before the select awaits (it needs no interior mutability, so a
/// select of `Send` futures stays `Send`).
#[doc(hidden)]
pub struct ArmWrap<T>(Option<T>);

impl<T> ArmWrap<T> {
    /// Wraps an arm expression.
    pub fn new(expr: T) -> Self {
        ArmWrap(Some(expr))
    }
}

/// The preferred reading of an arm expression: `Option<&Receiver<T>>`.
#[doc(hidden)]
pub trait ArmViaOption {
    /// The arm's future.
    type Fut;
    /// Takes the expression out as the arm's future.
    fn __gort_select_arm(self) -> Self::Fut;
}

impl<'a, T> ArmViaOption for ArmWrap<Option<&'a Receiver<T>>> {
    type Fut = OptionRecv<'a, T>;

    fn __gort_select_arm(self) -> OptionRecv<'a, T> {
        OptionRecv(self.0.flatten().map(Receiver::recv))
    }
}

/// The fallback reading of an arm expression: anything that converts into a future
/// (`IntoFuture`, as `.await` and Tokio's `select!` accept; every future is one).
#[doc(hidden)]
pub trait ArmViaFuture {
    /// The arm's future.
    type Fut;
    /// Takes the expression out as the arm's future.
    fn __gort_select_arm(&mut self) -> Self::Fut;
}

impl<F: std::future::IntoFuture> ArmViaFuture for ArmWrap<F> {
    type Fut = F::IntoFuture;

    fn __gort_select_arm(&mut self) -> F::IntoFuture {
        self.0
            .take()
            .expect("select! arm expression taken twice")
            .into_future()
    }
}

/// A receive on `Some(rx)`, as `rx.recv()`; on `None`, never ready (Go's receive from a nil
/// channel, which blocks forever, so a `select` ignores that case).
#[doc(hidden)]
#[derive(Debug)]
#[must_use = "futures do nothing unless you `.await` or poll them"]
pub struct OptionRecv<'a, T>(Option<RecvFuture<'a, T>>);

impl<T> Future for OptionRecv<'_, T> {
    type Output = Option<T>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<T>> {
        match &mut self.get_mut().0 {
            Some(recv) => Pin::new(recv).poll(cx),
            None => Poll::Pending,
        }
    }
}

/// How a `select!` behaves besides its arms.
#[doc(hidden)]
#[derive(Clone, Copy, Debug, Default)]
pub struct Flags {
    /// Has a `default` arm: resolve to [`Out::Default`] if no arm is ready on the first poll.
    pub default: bool,
    /// Has an `else` arm: resolve to [`Out::Else`] once every arm is disabled.
    pub has_else: bool,
    /// `biased;`: poll the arms in order instead of at random.
    pub biased: bool,
}

/// What a `select!` resolved to.
#[doc(hidden)]
#[derive(Debug)]
pub enum Out<O> {
    /// An arm's output.
    Arm(O),
    /// No arm was ready on the first poll, and there is a `default`.
    Default,
    /// Every arm is disabled, and there is an `else`.
    Else,
}

/// Starts a select over `arms`.
#[doc(hidden)]
pub fn select<A: Arms + Unpin>(arms: A, flags: Flags) -> Select<A> {
    Select {
        arms,
        group: None,
        flags,
        polled: false,
        done: false,
    }
}

/// The future behind `select!`.
#[doc(hidden)]
#[must_use = "futures do nothing unless you `.await` or poll them"]
pub struct Select<A> {
    arms: A,
    /// Created by the first channel operation that parks.
    group: Option<Arc<Group>>,
    flags: Flags,
    /// Polled before: the arms' operations may be parked.
    polled: bool,
    done: bool,
}

impl<A> std::fmt::Debug for Select<A> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Select")
            .field("group", &self.group)
            .field("flags", &self.flags)
            .finish_non_exhaustive()
    }
}

/// What one poll of the arms found.
enum Found<O> {
    Arm(O),
    Default,
    AllDisabled,
    /// Nothing ready; `polling` if the group (if any) is `POLLING` and must be ended.
    Nothing {
        polling: bool,
    },
}

/// How many times a select with `default` takes its two passes before it settles for
/// `default` without a proven moment ([`Select::poll_default`]): each retry means another
/// task's section came between the passes, so only a channel hammered without pause, or an
/// arm that makes a new channel on every poll, gets here.
const SNAPSHOT_TRIES: usize = 64;

const ALL_DISABLED: &str = "all branches are disabled and there is no else branch";

impl<A: Arms + Unpin> Future for Select<A> {
    type Output = Out<A::Output>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.get_mut();
        assert!(!this.done, "select! polled after it returned");
        // On a spent cooperative budget the select yields before it looks at any arm: its
        // arms' channel operations would all say `Pending` for budget, and it would take a
        // `default` or park with values ready. With budget left, no arm's channel operation
        // turns `Pending` for it (one that waits spends nothing), and the arm that completes
        // pays its unit: a select costs what one operation costs (lib.rs).
        if gort_coop::poll_has_budget(cx).is_pending() {
            return Poll::Pending;
        }
        let committed = this.group.as_ref().and_then(|g| g.begin_poll());
        // Kept only on the (wake-up) path where a committed arm may turn out disabled.
        let reopen = committed.and(this.group.clone());
        let mark = gort_coop::left();
        let entered = select_ctx::enter(this.group.take());
        let found = this.poll_arms(committed, reopen, cx);
        this.group = entered.leave();
        // A select that completes costs at least one unit: a channel arm pays its own, but
        // an arm that spends nothing (a timer past its deadline, any plain future), or
        // `default` or `else`, would let a loop around the select hold its P for good (on
        // one P the task that would end the loop never ran; `tests/abuse_sync.rs`). Go
        // preempts such a loop.
        if !matches!(found, Found::Nothing { .. }) {
            gort_coop::spend_unless_spent_since(mark);
        }
        match found {
            Found::Arm(out) => this.finish(Out::Arm(out)),
            Found::Default => this.finish(Out::Default),
            Found::AllDisabled if this.flags.has_else => this.finish(Out::Else),
            // No arm can ever be ready: as good as none ready now.
            Found::AllDisabled if this.flags.default => this.finish(Out::Default),
            // The group is finished by `Drop` as the panic unwinds.
            Found::AllDisabled => panic!("{ALL_DISABLED}"),
            Found::Nothing { polling } => {
                // Step 3 (a committed group stays committed).
                if let (true, Some(g)) = (polling, &this.group) {
                    g.end_poll();
                }
                Poll::Pending
            }
        }
    }
}

impl<A: Arms> Select<A> {
    /// Steps 1 and 2, with the select's context installed.
    fn poll_arms(
        &mut self,
        committed: Option<usize>,
        reopen: Option<Arc<Group>>,
        cx: &mut Context<'_>,
    ) -> Found<A::Output> {
        // Step 1.
        if let Some(k) = committed {
            match self.poll_arm(k, false, cx) {
                ArmPoll::Ready(out) => return Found::Arm(out),
                ArmPoll::Pending => return Found::Nothing { polling: false },
                ArmPoll::Disabled => {
                    // Its output did not match its pattern, and its future is dropped (so no
                    // waiter of it is left): the select goes on with the other arms.
                    if let Some(g) = reopen {
                        g.reopen();
                    }
                }
            }
        }
        if A::LEN == 0 && !self.flags.has_else && !self.flags.default {
            return Found::Nothing { polling: true }; // `select! {}` never completes
        }
        if self.arms.enabled() == 0 {
            return Found::AllDisabled;
        }
        // Step 2.
        if !std::mem::replace(&mut self.polled, true) {
            if self.flags.default {
                return self.poll_default(cx);
            }
            if let Some(found) = self.poll_pass(true, cx) {
                return found;
            }
        }
        self.poll_pass(false, cx)
            .unwrap_or(Found::Nothing { polling: true })
    }

    /// The one poll of a select with `default`: an arm ready, or `default` if at one moment
    /// no arm's channel operation was ready (Go's guarantee: `selectgo` locks every case's
    /// channel at once; here arms are polled one at a time, so a pass alone could see one
    /// channel before it became ready and another after it stopped being ready, and take
    /// `default` although one of them was ready all along: `tests/go_chan_test.rs`,
    /// `nonblock_select_race`). A pass that finds nothing, having looked at more than one
    /// channel lock section, is checked by a second pass against the lock stamps of the
    /// first ([`Snapshot`]), and both run again until they agree or an arm is ready.
    fn poll_default(&mut self, cx: &mut Context<'_>) -> Found<A::Output> {
        for _ in 0..SNAPSHOT_TRIES {
            let mut snapshot = Snapshot::begin();
            if let Some(found) = self.poll_pass(true, cx) {
                return found;
            }
            if !snapshot.needs_second_pass() {
                return Found::Default;
            }
            snapshot.pass();
            if let Some(found) = self.poll_pass(true, cx) {
                return found;
            }
            if snapshot.one_moment() {
                return Found::Default;
            }
        }
        // Other tasks changed these channels between every two passes, or an arm's future
        // looks at a different channel on each poll (one it makes anew): nothing was ready
        // at each look, and a select with `default` must not wait.
        Found::Default
    }

    /// Polls every enabled arm once, in random (or, biased, declared) order.
    fn poll_pass(&mut self, nonblocking: bool, cx: &mut Context<'_>) -> Option<Found<A::Output>> {
        for arm in Order::new(A::LEN, self.flags.biased) {
            if let ArmPoll::Ready(out) = self.poll_arm(arm, nonblocking, cx) {
                return Some(Found::Arm(out));
            }
        }
        (self.arms.enabled() == 0).then_some(Found::AllDisabled)
    }

    #[inline]
    fn poll_arm(
        &mut self,
        arm: usize,
        nonblocking: bool,
        cx: &mut Context<'_>,
    ) -> ArmPoll<A::Output> {
        select_ctx::set_arm(arm, nonblocking);
        self.arms.poll_arm(arm, cx)
    }
}

impl<A> Select<A> {
    fn finish<O>(&mut self, out: O) -> Poll<O> {
        self.done = true;
        if let Some(g) = &self.group {
            g.finish();
        }
        Poll::Ready(out)
    }
}

impl<A> Drop for Select<A> {
    fn drop(&mut self) {
        // A select dropped while parked (say, by a timeout around it) must not let a
        // counterparty complete an arm whose future is about to be dropped.
        if let Some(g) = &self.group {
            g.finish();
        }
    }
}

/// A uniformly random permutation of `0..n`, drawn lazily (one random number per arm polled).
struct Order {
    n: usize,
    /// `biased;`: `0..n` in order.
    biased: bool,
    taken: usize,
    /// For `n <= 64`: the arms already yielded.
    used: u64,
    /// For `n > 64`: a Fisher–Yates shuffle in progress.
    big: Vec<usize>,
}

impl Order {
    fn new(n: usize, biased: bool) -> Self {
        Order {
            n,
            biased,
            taken: 0,
            used: 0,
            big: if n > 64 && !biased {
                (0..n).collect()
            } else {
                Vec::new()
            },
        }
    }
}

impl Iterator for Order {
    type Item = usize;

    fn next(&mut self) -> Option<usize> {
        let left = self.n - self.taken;
        if left == 0 {
            return None;
        }
        if self.biased {
            self.taken += 1;
            return Some(self.taken - 1);
        }
        let r = rand_below(left);
        let arm = if self.n > 64 {
            self.big.swap(self.taken, self.taken + r);
            self.big[self.taken]
        } else {
            // The r-th arm not yet used.
            let mut skip = r;
            let mut arm = 0;
            loop {
                if self.used & (1u64 << arm) == 0 {
                    if skip == 0 {
                        break;
                    }
                    skip -= 1;
                }
                arm += 1;
            }
            self.used |= 1u64 << arm;
            arm
        };
        self.taken += 1;
        Some(arm)
    }
}

#[cfg(test)]
mod tests {
    use super::Order;

    #[test]
    fn order_is_a_permutation() {
        for n in [0, 1, 2, 5, 64, 65, 130] {
            let mut seen: Vec<usize> = Order::new(n, false).collect();
            seen.sort_unstable();
            assert_eq!(seen, (0..n).collect::<Vec<_>>(), "n = {n}");
        }
    }

    #[test]
    fn biased_order_is_declared_order() {
        for n in [0, 3, 70] {
            let seen: Vec<usize> = Order::new(n, true).collect();
            assert_eq!(seen, (0..n).collect::<Vec<_>>(), "n = {n}");
        }
    }

    #[test]
    fn order_first_is_uniform() {
        let mut counts = [0u32; 3];
        for _ in 0..30_000 {
            counts[Order::new(3, false).next().unwrap()] += 1;
        }
        for c in counts {
            assert!((8_000..12_000).contains(&c), "{counts:?}");
        }
    }
}
