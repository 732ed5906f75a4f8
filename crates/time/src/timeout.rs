//! [`timeout`] and [`timeout_at`]: bound how long a future may take.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use gort_timer::{nanotime, Nanos};

use crate::{sleep_until, Instant, Sleep};

/// The error of a [`Timeout`] whose deadline passed first.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Elapsed(());

impl fmt::Display for Elapsed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("deadline has elapsed")
    }
}

impl std::error::Error for Elapsed {}

/// An [`Elapsed`] is an I/O error of kind [`TimedOut`](std::io::ErrorKind::TimedOut), the kind
/// a passed socket deadline gives, so `?` takes it in a function returning `io::Result` (as
/// with tokio's `Elapsed`).
///
/// ```
/// use std::time::Duration;
///
/// async fn read_some(conn: &gort::net::TcpStream, buf: &mut [u8]) -> std::io::Result<usize> {
///     let n = gort::time::timeout(Duration::from_millis(10), conn.read(buf)).await??;
///     Ok(n)
/// }
///
/// gort::Runtime::new().unwrap().block_on(async {
///     let listener = gort::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
///     let conn = gort::net::TcpStream::connect(listener.local_addr().unwrap()).await.unwrap();
///     let err = read_some(&conn, &mut [0; 8]).await.unwrap_err(); // nothing was sent
///     assert_eq!(err.kind(), std::io::ErrorKind::TimedOut);
/// });
/// ```
impl From<Elapsed> for std::io::Error {
    fn from(elapsed: Elapsed) -> std::io::Error {
        std::io::Error::new(std::io::ErrorKind::TimedOut, elapsed)
    }
}

/// Runs `future`, giving up with [`Elapsed`] once `duration` has passed.
///
/// See [`Timeout`] for exactly when the deadline is checked.
///
/// # Panics
///
/// The returned future panics if it has to wait for its deadline outside a gort runtime.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// let rt = gort::Runtime::new().unwrap();
/// rt.block_on(async {
///     let slow = gort::time::sleep(Duration::from_secs(3600));
///     let r = gort::time::timeout(Duration::from_millis(5), slow).await;
///     assert_eq!(r.unwrap_err().to_string(), "deadline has elapsed");
///
///     let fast = async { 7 };
///     assert_eq!(gort::time::timeout(Duration::from_millis(5), fast).await, Ok(7));
/// });
/// ```
pub fn timeout<F: Future>(duration: Duration, future: F) -> Timeout<F> {
    timeout_at(Instant::now() + duration, future)
}

/// Runs `future`, giving up with [`Elapsed`] at `deadline`.
///
/// # Panics
///
/// The returned future panics if it has to wait for its deadline outside a gort runtime.
pub fn timeout_at<F: Future>(deadline: Instant, future: F) -> Timeout<F> {
    Timeout {
        future,
        deadline: deadline.as_nanos(),
        sleep: None,
    }
}

/// The future returned by [`timeout`] and [`timeout_at`].
///
/// Every poll first polls the inner future, and returns its output if it is ready, even if
/// the deadline has passed. Otherwise it checks the deadline itself (so a future that keeps
/// waking itself up and returning `Pending` is still timed out on time: tokio#4291), and only
/// then registers a timer: a future that completes on its first poll never touches a timer
/// heap.
///
/// A future that never returns from `poll` (it blocks the thread, or loops forever inside one
/// poll) cannot be timed out: the deadline is only looked at between polls.
///
/// A loop whose every `.await` is ready is timed out too, as under Tokio: gort's channels,
/// sockets and join handles spend a cooperative budget of 128 ready operations per task poll
/// and then return `Pending` (see `gort::task::unconstrained`), and the deadline is looked at
/// outside that budget, so a spent budget never hides an expired deadline (tokio#4291):
///
/// ```
/// use std::time::Duration;
/// gort::Runtime::new().unwrap().block_on(async {
///     let (tx, rx) = gort::chan::bounded(1);
///     let echo = async {
///         loop {
///             tx.send(1).await.unwrap();
///             rx.recv().await.unwrap(); // always ready: the budget makes it yield now and then
///         }
///     };
///     assert!(gort::time::timeout(Duration::from_millis(5), echo).await.is_err());
/// });
/// ```
///
/// A loop that awaits nothing of gort's (it computes, or awaits `tokio::sync`'s channels,
/// whose budget only Tokio's runtime sets) still never returns `Pending` by itself: give it a
/// `gort::task::consume_budget().await` or a `gort::yield_now().await`. So does a loop inside
/// `gort::task::unconstrained`.
///
/// It does nothing until awaited: dropping it unawaited is an `unused_must_use` warning.
///
/// ```compile_fail
/// #![deny(unused_must_use)]
/// async fn forgot() {
///     gort::time::timeout(std::time::Duration::from_secs(1), async {}); // forgot .await
/// }
/// ```
#[must_use = "futures do nothing unless you `.await` or poll them"]
pub struct Timeout<F> {
    future: F,
    deadline: Nanos,
    /// Created by the first poll that has to wait.
    sleep: Option<Sleep>,
}

impl<F> Timeout<F> {
    /// The inner future.
    pub fn get_ref(&self) -> &F {
        &self.future
    }

    /// The inner future, mutably (only if it is `Unpin`, so it cannot be moved while pinned).
    pub fn get_mut(&mut self) -> &mut F
    where
        F: Unpin,
    {
        &mut self.future
    }

    /// The inner future, giving up on the timeout.
    pub fn into_inner(self) -> F {
        self.future
    }

    /// The deadline.
    pub fn deadline(&self) -> Instant {
        Instant::from_nanos(self.deadline)
    }
}

impl<F: Future> Future for Timeout<F> {
    type Output = Result<F::Output, Elapsed>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        // SAFETY: `future` is structurally pinned: it is only ever used through the
        // `Pin::new_unchecked` below, never moved out while pinned (`into_inner` takes `self`
        // by value, which requires an unpinned `Timeout`), and `Timeout` has no `Drop` impl.
        // `sleep` and `deadline` are not pinned (Sleep is Unpin).
        let this = unsafe { self.get_unchecked_mut() };
        // SAFETY: see above; `this.future` stays where it is for as long as `self` is pinned.
        let future = unsafe { Pin::new_unchecked(&mut this.future) };
        if let Poll::Ready(v) = future.poll(cx) {
            return Poll::Ready(Ok(v));
        }
        if nanotime() >= this.deadline {
            return Poll::Ready(Err(Elapsed(())));
        }
        let deadline = this.deadline;
        let sleep = this
            .sleep
            .get_or_insert_with(|| sleep_until(Instant::from_nanos(deadline)));
        // Outside the cooperative budget if the inner future spent it (that is how a loop
        // over a ready channel came back `Pending`): the deadline must still be seen (Tokio's
        // rule, tokio#4314). The clock check above spends nothing; with budget left, the
        // plain poll saves T6 the save and restore (one load instead).
        let poll = if gort_coop::has_budget_remaining() {
            Pin::new(sleep).poll(cx)
        } else {
            gort_coop::with_unconstrained(|| Pin::new(sleep).poll(cx))
        };
        match poll {
            Poll::Ready(()) => Poll::Ready(Err(Elapsed(()))),
            Poll::Pending => Poll::Pending,
        }
    }
}

impl<F: fmt::Debug> fmt::Debug for Timeout<F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Timeout")
            .field("future", &self.future)
            .field("deadline", &self.deadline())
            .finish()
    }
}
