//! gort's cooperative budget: how many ready operations a task may do in one poll before
//! its resources make it yield (Tokio's rule, tokio-rs/tokio#4291 and PR #4314).
//!
//! gort cannot preempt a task (Go preempts a goroutine that runs past 10 ms). A task whose
//! every `.await` finds its channel or socket ready would never return `Pending`: it would
//! hold its P for good, and a `gort::time::timeout` around it would never get a look at its
//! deadline. So the scheduler gives each task poll a budget of [`BUDGET`] operations in a
//! per-thread counter, and every leaf resource that can be ready again and again (channel
//! sends and receives, socket reads, writes and accepts, `JoinHandle`s, `JoinSet::join_next`,
//! `Interval::tick`, `WaitGroup::wait`) spends one unit per ready operation through
//! [`poll_budgeted`]. Once the budget is spent, the next such operation wakes the task and
//! returns `Pending` without touching the resource (except a receive that a sender completed
//! while it was parked, which returns that value: [`poll_budgeted_or_held`]): the wake
//! comes while the task runs, so the scheduler puts it at the back of its P's queue, as
//! `yield_now` does, and the P's other tasks, its timers and its sockets get their turn.
//!
//! The counter starts [`unconstrained`] on every thread: a future polled by
//! anything but gort's scheduler or `block_on` (another executor, a loom model, a plain
//! thread) never sees a budget. The counter is a `const` thread-local without a destructor,
//! so each check is one load and one compare (and a store when ready), with no lazy
//! initialisation; design/ARCHITECTURE.md ("Cooperative budget") and
//! design/PERFORMANCE-LOG.md have its measured cost.

#![warn(missing_docs)]

use std::cell::Cell;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

/// The operations a task may do in one poll: Tokio's figure, which Tokio chose as large
/// enough that a task rarely yields for budget in practice (one yield per 128 ready
/// operations costs about one queue push in 128) and small enough that a task in an
/// always-ready loop gives up its thread within microseconds.
pub const BUDGET: u64 = 128;

/// The counter's value outside any budget: counted down like a budget, but from so high
/// that no thread ever gets to 0 (2^64 operations), so a ready operation's spending is one
/// unconditional decrement, with no test for "unconstrained" on the hot path.
const UNCONSTRAINED: u64 = u64::MAX;

thread_local! {
    /// The units left to the future this thread is polling ([`UNCONSTRAINED`] outside any
    /// budget).
    static LEFT: Cell<u64> = const { Cell::new(UNCONSTRAINED) };
}

/// Gives the task about to be polled a full budget: the scheduler calls it before every
/// task poll. Not a user API.
#[doc(hidden)]
#[inline]
pub fn start_task_poll() {
    LEFT.with(|l| l.set(BUDGET));
}

/// Runs `f` (a `block_on`'s poll of its future) with a full budget, restoring the previous
/// one afterwards, also if `f` unwinds. Not a user API.
#[doc(hidden)]
#[inline]
pub fn with_budget<R>(f: impl FnOnce() -> R) -> R {
    with_left(BUDGET, f)
}

/// Runs `f` without a budget (see [`unconstrained`]), restoring the previous one afterwards.
/// Not a user API: for work that a spent budget must never hold back (`gort::time::Timeout`
/// polls its deadline this way, Tokio's rule), or a poll whose `Pending` would lose track of
/// something (`JoinSet` polling a handle it took off its ready list).
#[doc(hidden)]
#[inline]
pub fn with_unconstrained<R>(f: impl FnOnce() -> R) -> R {
    with_left(UNCONSTRAINED, f)
}

fn with_left<R>(left: u64, f: impl FnOnce() -> R) -> R {
    struct Restore(u64);
    impl Drop for Restore {
        fn drop(&mut self) {
            LEFT.with(|l| l.set(self.0));
        }
    }
    let _restore = Restore(LEFT.with(|l| l.replace(left)));
    f()
}

/// Whether the current poll has budget left (always true outside a budget); Tokio's
/// `task::coop::has_budget_remaining`. A loop of work that awaits nothing of gort's may ask
/// it to decide when to yield.
///
/// # Examples
///
/// ```
/// let rt = gort::Builder::new().procs(1).build().unwrap();
/// rt.block_on(async {
///     let task = gort::spawn(async {
///         assert!(gort::task::has_budget_remaining());
///         for _ in 0..128 {
///             gort::task::consume_budget().await; // the budget is 128 operations per poll
///         }
///         assert!(!gort::task::has_budget_remaining());
///     });
///     task.await.unwrap();
/// });
/// ```
#[inline]
pub fn has_budget_remaining() -> bool {
    LEFT.with(Cell::get) != 0
}

/// Polls the leaf operation `op` under the budget: `Pending` (after waking the task, so that
/// it is polled again after the other tasks of its P) without calling `op` when the budget is
/// spent; else `op`'s result, one unit spent if it is `Ready`. An operation that is not ready
/// spends nothing, so a `select!` whose arms wait pays only for the arm that completes.
///
/// `op` must not poll other futures (it is one resource's operation).
#[inline]
pub fn poll_budgeted<T>(
    cx: &mut Context<'_>,
    op: impl FnOnce(&mut Context<'_>) -> Poll<T>,
) -> Poll<T> {
    // Checked before `op` and spent after it, only if it is ready: nothing is kept live
    // across the call, a waiting operation (half the polls of a ping-pong) pays one load,
    // a ready one a load and a decrement. Measured against taking the unit first and
    // refunding it, and against keeping the count read before `op`: both cost R3 more
    // instructions (design/PERFORMANCE-LOG.md, "Cooperative budget").
    if LEFT.with(Cell::get) == 0 {
        return spent(cx);
    }
    let out = op(cx);
    if out.is_ready() {
        // Not 0: it was not before `op`, which polls no other future.
        LEFT.with(|l| l.set(l.get().wrapping_sub(1)));
    }
    out
}

/// [`poll_budgeted`] for an operation that may already hold its result (a receive that a
/// sender completed while it was parked): on a spent budget `held` is asked for that result
/// first, and the task yields only if there is none. Returning what was already handed over
/// lets nothing new in and costs no unit; yielding instead would leave it to be put back if
/// the caller is then cut off (a `timeout` past its deadline), behind what was delivered
/// meanwhile (design/CHANNELS.md, "Order"). Not a user API.
#[inline]
pub fn poll_budgeted_or_held<S, T>(
    cx: &mut Context<'_>,
    state: &mut S,
    held: impl FnOnce(&mut S) -> Option<T>,
    op: impl FnOnce(&mut S, &mut Context<'_>) -> Poll<T>,
) -> Poll<T> {
    if LEFT.with(Cell::get) == 0 {
        return match held(state) {
            Some(v) => Poll::Ready(v),
            None => spent(cx),
        };
    }
    let out = op(state, cx);
    if out.is_ready() {
        // Not 0: it was not before `op`, which polls no other future.
        LEFT.with(|l| l.set(l.get().wrapping_sub(1)));
    }
    out
}

/// The units left to the current poll: a mark for [`spend_unless_spent_since`]. Not a user
/// API.
#[inline]
pub fn left() -> u64 {
    LEFT.with(Cell::get)
}

/// Spends one unit unless the budget changed since `mark` (a [`left`] taken earlier in the
/// same poll): for a composite that returns `Ready` (a `select!`), so that it costs at least
/// one operation whatever completed it (an arm that spends nothing, such as a timer past its
/// deadline, or its `default`), and a loop around it yields as a loop of ready operations
/// does. Outside a budget it spends from the unconstrained count, which no thread exhausts.
/// Not a user API.
#[inline]
pub fn spend_unless_spent_since(mark: u64) {
    LEFT.with(|l| {
        if l.get() == mark {
            l.set(mark.saturating_sub(1));
        }
    });
}

/// `Ready` if the current poll has budget left, else `Pending` after waking the task, as
/// [`poll_budgeted`] without spending: for a composite (a `select!`) that must not start
/// polling its parts on a spent budget.
#[inline]
pub fn poll_has_budget(cx: &mut Context<'_>) -> Poll<()> {
    if LEFT.with(Cell::get) == 0 {
        return spent(cx);
    }
    Poll::Ready(())
}

/// The budget is spent: the task yields. The wake comes during the task's poll, which the
/// scheduler answers by queueing it at the back of its P's queue once the poll returns (not
/// in `runnext`, where it would run again at once and the P's other tasks would not).
#[cold]
#[inline(never)]
fn spent<T>(cx: &mut Context<'_>) -> Poll<T> {
    cx.waker().wake_by_ref();
    Poll::Pending
}

/// Runs `future` without a cooperative budget: the channels, sockets and join handles it
/// awaits never make it yield, however many of their operations are ready in one poll
/// (Tokio's `tokio::task::unconstrained`).
///
/// Use it for a short burst that must not be interleaved with other tasks; a loop that can
/// always find work ready inside it holds its P until it ends, as every loop did before gort
/// had a budget, and a `gort::time::timeout` around it only fires when it returns `Pending`.
///
/// # Examples
///
/// ```
/// gort::Runtime::new().unwrap().block_on(async {
///     let (tx, rx) = gort::chan::bounded(1000);
///     for i in 0..1000 {
///         tx.send(i).await.unwrap();
///     }
///     // 1,000 ready receives in one poll: no yield for budget on the way.
///     let sum = gort::task::unconstrained(async {
///         let mut sum = 0;
///         for _ in 0..1000 {
///             sum += rx.recv().await.unwrap();
///         }
///         sum
///     })
///     .await;
///     assert_eq!(sum, 499_500);
/// });
/// ```
pub fn unconstrained<F: Future>(future: F) -> Unconstrained<F> {
    Unconstrained { future }
}

/// The future returned by [`unconstrained`].
#[must_use = "futures do nothing unless you `.await` or poll them"]
#[derive(Debug)]
pub struct Unconstrained<F> {
    future: F,
}

impl<F: Future> Future for Unconstrained<F> {
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        // SAFETY: `future` is structurally pinned: it is only reached through this pinned
        // projection, never moved out, and `Unconstrained` has no `Drop` impl.
        let future = unsafe { self.map_unchecked_mut(|u| &mut u.future) };
        with_unconstrained(|| future.poll(cx))
    }
}

/// Spends one unit of the cooperative budget, yielding first if it is spent (Tokio's
/// `tokio::task::consume_budget`): for a loop whose work never awaits a gort resource (it
/// computes, or reads an in-memory cache) but should share its P as a loop over a channel
/// does. Costs a thread-local read and write when the budget is not spent; outside a budget
/// (in [`unconstrained`], or outside gort) it never yields.
///
/// # Examples
///
/// ```
/// gort::Runtime::new().unwrap().block_on(async {
///     let mut sum = 0u64;
///     for i in 0..10_000u64 {
///         sum += i; // some work with no .await of its own
///         gort::task::consume_budget().await; // yields once every 128 rounds
///     }
///     assert_eq!(sum, 49_995_000);
/// });
/// ```
pub async fn consume_budget() {
    ConsumeBudget.await
}

struct ConsumeBudget;

impl Future for ConsumeBudget {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        poll_budgeted(cx, |_| Poll::Ready(()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
    use std::sync::Arc;
    use std::task::{Wake, Waker};

    struct Count(AtomicUsize);
    impl Wake for Count {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Relaxed);
        }
        fn wake_by_ref(self: &Arc<Self>) {
            self.0.fetch_add(1, Relaxed);
        }
    }

    fn ready_ops(cx: &mut Context<'_>, n: usize) -> usize {
        (0..n)
            .take_while(|_| poll_budgeted(cx, |_| Poll::Ready(())).is_ready())
            .count()
    }

    #[test]
    fn a_budget_allows_exactly_budget_ready_operations_then_wakes() {
        let wakes = Arc::new(Count(AtomicUsize::new(0)));
        let waker = Waker::from(wakes.clone());
        let mut cx = Context::from_waker(&waker);
        assert_eq!(
            ready_ops(&mut cx, 1000),
            1000,
            "unconstrained outside a budget"
        );
        with_budget(|| {
            assert_eq!(ready_ops(&mut cx, 1000), BUDGET as usize);
            assert_eq!(wakes.0.load(Relaxed), 1);
            assert!(!has_budget_remaining());
            assert!(poll_has_budget(&mut cx).is_pending());
            // Not-ready operations spend nothing.
            assert_eq!(ready_ops(&mut cx, 0), 0);
            assert_eq!(with_unconstrained(|| ready_ops(&mut cx, 500)), 500);
            assert!(!has_budget_remaining(), "the spent budget is restored");
        });
        assert!(has_budget_remaining());
        // Outside a budget the count goes down from `UNCONSTRAINED` too, restored as it was.
        assert_eq!(LEFT.with(Cell::get), UNCONSTRAINED - 1000);
    }

    #[test]
    fn pending_operations_spend_nothing() {
        let waker = Waker::from(Arc::new(Count(AtomicUsize::new(0))));
        let mut cx = Context::from_waker(&waker);
        with_budget(|| {
            for _ in 0..1000 {
                assert!(poll_budgeted(&mut cx, |_| Poll::<()>::Pending).is_pending());
            }
            assert_eq!(LEFT.with(Cell::get), BUDGET);
        });
    }
}
