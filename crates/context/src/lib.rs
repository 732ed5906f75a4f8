//! Go's `context` package: cancellation and deadlines that flow from a parent to its children.
//!
//! - [`Context::background`] is the root: never canceled, no deadline.
//! - [`with_cancel`], [`with_deadline`] and [`with_timeout`] derive a child and a [`CancelFn`].
//!   A child is canceled when its `CancelFn` is called, when its deadline passes, or when its
//!   parent is canceled, whichever comes first; its deadline is the earlier of its own and its
//!   parent's.
//! - [`Context::done`] is a channel closed on cancellation, usable as a `select!` arm;
//!   [`Context::err`] says why ([`Error::Canceled`] or [`Error::DeadlineExceeded`]).
//! - [`after_func`] runs a function in its own task once a context is done (Go 1.21);
//!   [`AfterFunc::drop_guard`] unregisters it when a scope ends (Go's `defer stop()`).
//! - [`with_cancel_cause`], [`with_deadline_cause`] and [`with_timeout_cause`] say why, and
//!   [`Context::cause`] tells it (Go 1.20's `Cause`, 1.21's `WithDeadlineCause`).
//! - Go 1.21's `WithoutCancel(parent)` keeps the parent's values but none of its cancellation;
//!   a gort context carries no values, so that is [`Context::background`].
//!
//! Unlike Go's `CancelFunc`, dropping a [`CancelFn`] does not cancel; as in Go, a child that is
//! never canceled stays registered with its (cancelable) parent until the parent is canceled,
//! with its deadline's timer armed, so call `cancel` when the work is done, or hold
//! [`CancelFn::drop_guard`]'s guard for the work's scope (Go's `defer cancel()`).
//!
//! # Cost
//!
//! A deadline is ONE callback timer on the per-P heaps (Go's `WithDeadline` uses a
//! `time.AfterFunc`), stopped when the context is canceled first; the `done` channel is
//! created only when first asked for. A `with_timeout` followed by its `cancel` therefore
//! costs a context allocation, a timer started and stopped, and no wake-up. The timer cancels
//! the context in its own run, as a channel timer sends, not from a task: a task that never
//! yields (Go's `select` with a `default` in a loop) still sees its deadline, even holding
//! the only P.
//!
//! # Examples
//!
//! A worker that stops when its context is canceled or times out:
//!
//! ```
//! use std::time::Duration;
//! use gort::context::{self, Context, Error};
//!
//! let rt = gort::Runtime::new().unwrap();
//! rt.block_on(async {
//!     let (ctx, cancel) = context::with_timeout(&Context::background(), Duration::from_millis(20));
//!     let jobs = gort::time::tick(Duration::from_millis(1));
//!     let mut done_jobs = 0;
//!     loop {
//!         gort::select! {
//!             _ = jobs.recv() => done_jobs += 1,
//!             _ = ctx.done().recv() => break,
//!         }
//!     }
//!     assert_eq!(ctx.err(), Some(Error::DeadlineExceeded));
//!     assert!(done_jobs > 0);
//!     cancel.cancel(); // harmless after the deadline; always call it
//! });
//! ```

#![warn(missing_docs)]

mod after_func;
mod cancel;
mod cause;
mod ctx;
mod deadline;
mod guard;
mod orphanage;
#[cfg(test)]
mod tests;

use std::fmt;
use std::time::Duration;

pub use crate::after_func::{after_func, AfterFunc};
pub use crate::cause::{
    with_cancel_cause, with_deadline_cause, with_timeout_cause, CancelCauseFn, CancelCauseGuard,
    Cause,
};
pub use crate::ctx::{CancelFn, Context};
pub use crate::guard::{AfterFuncGuard, CancelGuard};
use gort_time::Instant;

/// Why a context is done (Go's `context.Canceled` and `context.DeadlineExceeded`).
///
/// # Examples
///
/// ```
/// use gort::context::Error;
/// assert_eq!(Error::Canceled.to_string(), "context canceled");
/// assert_eq!(Error::DeadlineExceeded.to_string(), "context deadline exceeded");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Error {
    /// Canceled by a [`CancelFn`] (its own or an ancestor's).
    Canceled,
    /// Its deadline (or an ancestor's) passed.
    DeadlineExceeded,
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Error::Canceled => "context canceled",
            Error::DeadlineExceeded => "context deadline exceeded",
        })
    }
}

impl std::error::Error for Error {}

impl Error {
    /// Whether the context's deadline passed (Go's `DeadlineExceeded.Timeout()`, which Go
    /// code checks through `net.Error` to treat a context's deadline as a socket's).
    ///
    /// # Examples
    ///
    /// ```
    /// use gort::context::Error;
    /// assert!(Error::DeadlineExceeded.is_timeout());
    /// assert!(!Error::Canceled.is_timeout());
    /// ```
    #[doc(alias = "Timeout")]
    pub fn is_timeout(&self) -> bool {
        matches!(self, Error::DeadlineExceeded)
    }
}

/// A context's error as an I/O error, for a `?` in a function that returns `io::Result`:
/// [`Error::DeadlineExceeded`] is [`TimedOut`](std::io::ErrorKind::TimedOut), the kind
/// `gort::net`'s socket deadlines give, so one check covers both (Go's `Timeout()`);
/// [`Error::Canceled`] is [`Other`](std::io::ErrorKind::Other). The context's error is the
/// I/O error's inner error.
///
/// # Examples
///
/// ```
/// use std::io;
/// use gort::context::{self, Context};
///
/// fn step(ctx: &Context) -> io::Result<()> {
///     if let Some(err) = ctx.err() {
///         return Err(err.into());
///     }
///     Ok(())
/// }
///
/// let past = gort::time::Instant::now() - std::time::Duration::from_secs(1);
/// let (ctx, _cancel) = context::with_deadline(&Context::background(), past);
/// assert_eq!(step(&ctx).unwrap_err().kind(), io::ErrorKind::TimedOut);
/// ```
impl From<Error> for std::io::Error {
    fn from(err: Error) -> std::io::Error {
        let kind = match err {
            Error::DeadlineExceeded => std::io::ErrorKind::TimedOut,
            Error::Canceled => std::io::ErrorKind::Other,
        };
        std::io::Error::new(kind, err)
    }
}

/// A child of `parent` that is canceled when the returned [`CancelFn`] is called or when
/// `parent` is canceled (Go's `context.WithCancel`). Its deadline is its parent's.
///
/// # Examples
///
/// ```
/// use gort::context::{self, Context, Error};
///
/// let (parent, cancel_parent) = context::with_cancel(&Context::background());
/// let (child, _cancel_child) = context::with_cancel(&parent);
/// cancel_parent.cancel();
/// assert_eq!(child.err(), Some(Error::Canceled));
/// assert!(child.done().is_closed());
/// ```
#[doc(alias = "WithCancel")]
pub fn with_cancel(parent: &Context) -> (Context, CancelFn) {
    ctx::derive(parent, None, None)
}

/// A child of `parent` that is also canceled, with [`Error::DeadlineExceeded`], at `deadline`
/// (Go's `context.WithDeadline`). If the parent's deadline is earlier, the child keeps the
/// parent's (and needs no timer); a deadline already past cancels the child at once.
///
/// The deadline is a timer on the caller's runtime. Set on a thread of no gort runtime (at
/// the top of a plain `main`, before `Runtime::block_on`, as Go code makes its contexts
/// anywhere), or outliving the runtime that armed it, it is kept by a plain thread of this
/// crate instead, which cancels the context on time wherever it is waited on, and leaves
/// once no context it keeps can be observed (held, or waited on by an [`after_func`]).
///
/// # Examples
///
/// ```
/// use gort::context::{self, Context, Error};
/// use gort::time::Instant;
///
/// let past = Instant::now() - std::time::Duration::from_secs(1);
/// let (ctx, _cancel) = context::with_deadline(&Context::background(), past);
/// assert_eq!(ctx.err(), Some(Error::DeadlineExceeded));
/// assert_eq!(ctx.deadline(), Some(past));
/// ```
#[doc(alias = "WithDeadline")]
pub fn with_deadline(parent: &Context, deadline: Instant) -> (Context, CancelFn) {
    deadline_child(parent, deadline, None)
}

/// A child of `parent` canceled at `deadline` with `cause` (`None`: the error itself), unless
/// the parent's deadline comes first.
fn deadline_child(
    parent: &Context,
    deadline: Instant,
    cause: Option<Cause>,
) -> (Context, CancelFn) {
    if parent.deadline().is_some_and(|d| d <= deadline) {
        // The parent's deadline comes first: it will cancel the child (with its own cause,
        // as Go's `WithDeadlineCause` then returns a `WithCancel` child).
        return with_cancel(parent);
    }
    ctx::derive(parent, Some(deadline), cause)
}

/// [`with_deadline`] at `Instant::now() + timeout` (Go's `context.WithTimeout`).
///
/// A `timeout` beyond the clock's range (`Duration::MAX`, say) saturates: the deadline is
/// the latest instant [`gort::time::Instant`](gort_time::Instant) holds, some 292 years
/// ahead, so [`Context::deadline`] returns `Some` of that instant (not `None`) and the
/// deadline never cancels the context in practice. Go does the same: `WithTimeout` with the
/// largest `Duration` gives a deadline some 292 years ahead, and `Deadline()` reports it.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use gort::context::{self, Context, Error};
///
/// let rt = gort::Runtime::new().unwrap();
/// rt.block_on(async {
///     let (ctx, _cancel) = context::with_timeout(&Context::background(), Duration::from_millis(5));
///     ctx.done().recv().await; // closed at the deadline
///     assert_eq!(ctx.err(), Some(Error::DeadlineExceeded));
/// });
/// ```
///
/// No timeout, in effect, yet a deadline:
///
/// ```
/// use std::time::Duration;
/// use gort::context::{self, Context};
/// use gort::time::Instant;
///
/// let rt = gort::Runtime::new().unwrap();
/// rt.block_on(async {
///     let (ctx, _cancel) = context::with_timeout(&Context::background(), Duration::MAX);
///     let deadline = ctx.deadline().expect("a deadline, far ahead");
///     assert_eq!(deadline, Instant::now() + Duration::MAX); // the clock's latest instant
///     assert!(deadline - Instant::now() > Duration::from_secs(290 * 365 * 24 * 3600));
///     assert_eq!(ctx.err(), None);
/// });
/// ```
#[doc(alias = "WithTimeout")]
pub fn with_timeout(parent: &Context, timeout: Duration) -> (Context, CancelFn) {
    with_deadline(parent, Instant::now() + timeout)
}

/// A context bounds a rate limiter's wait (Go's `lim.WaitN(ctx, n)`): see
/// [`gort::time::rate::Limiter::wait_ctx`](gort_time::rate::Limiter::wait_ctx).
///
/// # Examples
///
/// ```
/// use gort::context::{self, Context};
/// use gort::time::rate::{Limit, Limiter, WaitError};
/// use std::time::Duration;
///
/// let rt = gort::Builder::new().start_paused(true).build().unwrap();
/// rt.block_on(async {
///     let limiter = Limiter::new(Limit::per_second(1.0), 1);
///     let (ctx, _cancel) = context::with_timeout(&Context::background(), Duration::from_secs(5));
///     limiter.wait_ctx(&ctx, 1).await.unwrap(); // at once
///     limiter.wait_ctx(&ctx, 1).await.unwrap(); // in 1 s, before the deadline
///     assert_eq!(limiter.wait_ctx(&ctx, 2).await, Err(WaitError::BurstExceeded { n: 2, burst: 1 }));
/// });
/// ```
impl gort_time::rate::WaitContext for Context {
    fn deadline(&self) -> Option<Instant> {
        Context::deadline(self)
    }

    fn done(&self) -> &gort_chan::Receiver<()> {
        Context::done(self)
    }

    fn is_done(&self) -> bool {
        self.err().is_some()
    }
}
