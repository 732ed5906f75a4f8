//! `select!`: wait on several futures, run the body of the first one ready.
//!
//! The macro (in `macros.rs`) pins every arm's future on the caller's stack, builds the nested
//! tuple `(Pin<&mut F0>, (Pin<&mut F1>, (..., ())))`, and awaits [`Select`] over it; the output
//! is a nested [`Either`] that the macro matches to run the chosen body with the arm's pattern
//! bound. Everything but the parsing is plain generic code here.
//!
//! # One arm takes effect
//!
//! Each poll of a [`Select`] is one of:
//!
//! 1. A counterparty completed a channel operation of arm `k` while the select was parked
//!    (its [`Group`] was claimed for `k`): poll arm `k` only, and return its output.
//! 2. Otherwise the group is `POLLING` (no counterparty can complete any arm's operation):
//!    poll the arms in a fresh uniformly random order, and return the first ready one.
//!    On the first poll this takes two passes, as Go's `selectgo` does: one where channel
//!    operations only try (so a select with a ready arm never allocates or parks anything),
//!    then one where they park. With `default`, only the first pass runs, and `default` wins
//!    if no arm is ready.
//! 3. None ready: the group becomes `IDLE` and the select returns `Pending`.
//!
//! So at most one arm's channel operation takes effect, as in Go. See `group.rs` for the
//! states and the proof obligations.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use gort_loom::Arc;

use crate::context::{self, rand_below};
use crate::group::Group;

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

/// A list of pinned futures that can be polled by index.
#[doc(hidden)]
pub trait Arms {
    /// Nested [`Either`]s of the arms' outputs, ending in [`Never`].
    type Output;
    /// The number of arms.
    const LEN: usize;
    /// Polls arm `arm` (`arm < LEN`).
    fn poll_arm(&mut self, arm: usize, cx: &mut Context<'_>) -> Poll<Self::Output>;
}

impl Arms for () {
    type Output = Never;
    const LEN: usize = 0;

    fn poll_arm(&mut self, arm: usize, _: &mut Context<'_>) -> Poll<Never> {
        unreachable!("select! polled arm {arm}, past its last arm")
    }
}

impl<F: Future + ?Sized, R: Arms> Arms for (Pin<&mut F>, R) {
    type Output = Either<F::Output, R::Output>;
    const LEN: usize = 1 + R::LEN;

    #[inline]
    fn poll_arm(&mut self, arm: usize, cx: &mut Context<'_>) -> Poll<Self::Output> {
        if arm == 0 {
            self.0.as_mut().poll(cx).map(Either::Left)
        } else {
            self.1.poll_arm(arm - 1, cx).map(Either::Right)
        }
    }
}

/// Starts a select over `arms`; with `default`, it resolves to `None` if no arm is ready on
/// the first poll.
#[doc(hidden)]
pub fn select<A: Arms + Unpin>(arms: A, default: bool) -> Select<A> {
    Select {
        arms,
        group: None,
        default,
        polled: false,
        done: false,
    }
}

/// The future behind `select!`.
#[doc(hidden)]
#[derive(Debug)]
#[must_use = "futures do nothing unless you `.await` or poll them"]
pub struct Select<A> {
    arms: A,
    /// Created by the first channel operation that parks.
    group: Option<Arc<Group>>,
    default: bool,
    /// Polled before: the arms' operations may be parked.
    polled: bool,
    done: bool,
}

/// What one poll of the arms found.
enum Found<O> {
    Arm(O),
    Default,
    Nothing,
}

impl<A: Arms + Unpin> Future for Select<A> {
    type Output = Option<A::Output>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.get_mut();
        assert!(!this.done, "select! polled after it returned");
        let committed = this.group.as_ref().and_then(|g| g.begin_poll());
        let entered = context::enter(this.group.take());
        let found = this.poll_arms(committed, cx);
        this.group = entered.leave();
        match found {
            Found::Arm(out) => this.finish(Some(out)),
            Found::Default => this.finish(None),
            Found::Nothing => {
                // Step 3 (a committed group stays committed).
                if let (None, Some(g)) = (committed, &this.group) {
                    g.end_poll();
                }
                Poll::Pending
            }
        }
    }
}

impl<A: Arms> Select<A> {
    /// Steps 1 and 2, with the select's context installed.
    fn poll_arms(&mut self, committed: Option<usize>, cx: &mut Context<'_>) -> Found<A::Output> {
        // Step 1.
        if let Some(k) = committed {
            return match self.poll_arm(k, false, cx) {
                Poll::Ready(out) => Found::Arm(out),
                Poll::Pending => Found::Nothing,
            };
        }
        // Step 2.
        if !std::mem::replace(&mut self.polled, true) {
            for arm in Order::new(A::LEN) {
                if let Poll::Ready(out) = self.poll_arm(arm, true, cx) {
                    return Found::Arm(out);
                }
            }
            if self.default {
                return Found::Default;
            }
        }
        for arm in Order::new(A::LEN) {
            if let Poll::Ready(out) = self.poll_arm(arm, false, cx) {
                return Found::Arm(out);
            }
        }
        Found::Nothing
    }

    #[inline]
    fn poll_arm(&mut self, arm: usize, nonblocking: bool, cx: &mut Context<'_>) -> Poll<A::Output> {
        context::set_arm(arm, nonblocking);
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
    taken: usize,
    /// For `n <= 64`: the arms already yielded.
    used: u64,
    /// For `n > 64`: a Fisher–Yates shuffle in progress.
    big: Vec<usize>,
}

impl Order {
    fn new(n: usize) -> Self {
        Order {
            n,
            taken: 0,
            used: 0,
            big: if n > 64 { (0..n).collect() } else { Vec::new() },
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
            let mut seen: Vec<usize> = Order::new(n).collect();
            seen.sort_unstable();
            assert_eq!(seen, (0..n).collect::<Vec<_>>(), "n = {n}");
        }
    }

    #[test]
    fn order_first_is_uniform() {
        let mut counts = [0u32; 3];
        for _ in 0..30_000 {
            counts[Order::new(3).next().unwrap()] += 1;
        }
        for c in counts {
            assert!((8_000..12_000).contains(&c), "{counts:?}");
        }
    }
}
