//! Cancellation with a cause (Go 1.20's `WithCancelCause` and `Cause`, 1.21's
//! `WithDeadlineCause` and `WithTimeoutCause`).
//!
//! The cause travels with the error: a node's cancellation stores both under its lock, and
//! hands both to its descendants, so every waiter of the node and of its children reads the
//! cause of the one cancellation that reached them first.

use std::error::Error as StdError;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use gort_time::Instant;

use crate::ctx::Node;
use crate::{Context, Error};

/// Why a context was canceled, as [`Context::cause`] gives it: any error, shared.
/// Downcast it (`cause.downcast_ref::<MyError>()`) as Go code tests `errors.Is`.
pub type Cause = Arc<dyn StdError + Send + Sync>;

/// Cancels its [`Context`] with [`Error::Canceled`] and a cause (Go's `CancelCauseFunc`), from
/// [`with_cancel_cause`]. As with [`CancelFn`](crate::CancelFn), the first cancellation wins
/// (a later call does nothing) and dropping it does not cancel.
///
/// # Examples
///
/// ```
/// use gort::context::{self, Context};
///
/// let (ctx, cancel) = context::with_cancel_cause(&Context::background());
/// cancel.cancel("first");
/// cancel.cancel("second"); // no-op: already canceled
/// assert_eq!(ctx.cause().unwrap().to_string(), "first");
/// ```
#[derive(Clone)]
pub struct CancelCauseFn {
    node: Arc<Node>,
}

impl CancelCauseFn {
    /// Cancels the context and its children with [`Error::Canceled`], `cause` being what
    /// [`Context::cause`] returns for each, unless the context is already done; as
    /// [`CancelFn::cancel`](crate::CancelFn::cancel), it returns with the context and all its
    /// descendants done, whichever cancel got to them first. `cause` is
    /// anything that converts to a boxed error: a `&str`, a `String`, an error type (which
    /// the cause then downcasts to).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::fmt;
    /// use gort::context::{self, Context};
    ///
    /// #[derive(Debug)]
    /// struct Shutdown;
    /// impl fmt::Display for Shutdown {
    ///     fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
    ///         f.write_str("server shutting down")
    ///     }
    /// }
    /// impl std::error::Error for Shutdown {}
    ///
    /// let (ctx, cancel) = context::with_cancel_cause(&Context::background());
    /// cancel.cancel(Shutdown);
    /// assert!(ctx.cause().unwrap().downcast_ref::<Shutdown>().is_some());
    /// ```
    #[doc(alias = "CancelCauseFunc")]
    pub fn cancel(&self, cause: impl Into<Box<dyn StdError + Send + Sync>>) {
        let cause: Cause = Arc::from(cause.into());
        self.node.cancel(true, Error::Canceled, Some(cause));
    }
}

impl CancelCauseFn {
    /// A guard that cancels the context when dropped, without a cause unless one was given
    /// before: Go's `defer cancel(nil)`, after which [`Context::cause`] is
    /// [`Error::Canceled`]. An early [`cancel`](CancelCauseFn::cancel) through a clone keeps
    /// its cause (the first cancellation wins).
    ///
    /// # Examples
    ///
    /// ```
    /// use gort::context::{self, Context, Error};
    ///
    /// let (ctx, cancel) = context::with_cancel_cause(&Context::background());
    /// let on_error = cancel.clone();
    /// {
    ///     let _guard = cancel.drop_guard();
    ///     on_error.cancel("the upstream refused");
    /// } // the guard's cancel does nothing: the first cancellation won
    /// assert_eq!(ctx.cause().unwrap().to_string(), "the upstream refused");
    ///
    /// let (ctx, cancel) = context::with_cancel_cause(&Context::background());
    /// drop(cancel.drop_guard());
    /// assert_eq!(ctx.err(), Some(Error::Canceled));
    /// assert_eq!(ctx.cause().unwrap().to_string(), Error::Canceled.to_string());
    /// ```
    pub fn drop_guard(self) -> CancelCauseGuard {
        CancelCauseGuard { cancel: Some(self) }
    }
}

/// Cancels its context when dropped, without a cause, from [`CancelCauseFn::drop_guard`]
/// (Go's `defer cancel(nil)`).
#[derive(Debug)]
#[must_use = "dropping the guard at once cancels the context at once"]
pub struct CancelCauseGuard {
    /// Taken by `disarm`.
    cancel: Option<CancelCauseFn>,
}

impl CancelCauseGuard {
    /// Gives the [`CancelCauseFn`] back without canceling.
    ///
    /// # Examples
    ///
    /// ```
    /// use gort::context::{self, Context};
    ///
    /// let (ctx, cancel) = context::with_cancel_cause(&Context::background());
    /// let cancel = cancel.drop_guard().disarm();
    /// assert_eq!(ctx.err(), None);
    /// cancel.cancel("done");
    /// assert_eq!(ctx.cause().unwrap().to_string(), "done");
    /// ```
    pub fn disarm(mut self) -> CancelCauseFn {
        self.cancel
            .take()
            .expect("gort: a CancelCauseGuard is disarmed once")
    }
}

impl Drop for CancelCauseGuard {
    fn drop(&mut self) {
        if let Some(cancel) = self.cancel.take() {
            cancel.node.cancel(true, Error::Canceled, None);
        }
    }
}

impl fmt::Debug for CancelCauseFn {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CancelCauseFn").finish_non_exhaustive()
    }
}

/// [`with_cancel`](crate::with_cancel) whose cancel function takes a cause (Go's
/// `context.WithCancelCause`): [`Context::cause`] of the child and of its descendants
/// returns it once they are canceled by it.
///
/// # Examples
///
/// A worker fails, and every waiter learns why:
///
/// ```
/// use gort::context::{self, Context, Error};
///
/// let rt = gort::Runtime::new().unwrap();
/// rt.block_on(async {
///     let (ctx, cancel) = context::with_cancel_cause(&Context::background());
///     let waiters: Vec<_> = (0..3)
///         .map(|_| {
///             let ctx = ctx.clone();
///             gort::spawn(async move {
///                 ctx.done().recv().await;
///                 ctx.cause().unwrap().to_string()
///             })
///         })
///         .collect();
///     cancel.cancel("upstream refused the connection");
///     for w in waiters {
///         assert_eq!(w.await.unwrap(), "upstream refused the connection");
///     }
///     assert_eq!(ctx.err(), Some(Error::Canceled));
/// });
/// ```
#[doc(alias = "WithCancelCause")]
pub fn with_cancel_cause(parent: &Context) -> (Context, CancelCauseFn) {
    let (ctx, cancel) = crate::with_cancel(parent);
    let node = cancel.into_node();
    (ctx, CancelCauseFn { node })
}

/// [`with_deadline`](crate::with_deadline) whose deadline cancels with `cause` (Go's
/// `context.WithDeadlineCause`): at `deadline`, the child's [`err`](Context::err) is
/// [`Error::DeadlineExceeded`] and its [`cause`](Context::cause) is `cause`. The returned
/// [`CancelFn`](crate::CancelFn) cancels without a cause. If the parent's deadline is
/// earlier, the child is a plain [`with_cancel`](crate::with_cancel) child, and `cause` is
/// dropped, as in Go: the parent's deadline, and its cause, come first.
///
/// # Examples
///
/// ```
/// use gort::context::{self, Context, Error};
/// use gort::time::Instant;
///
/// let past = Instant::now() - std::time::Duration::from_secs(1);
/// let (ctx, _cancel) = context::with_deadline_cause(&Context::background(), past, "too slow");
/// assert_eq!(ctx.err(), Some(Error::DeadlineExceeded));
/// assert_eq!(ctx.cause().unwrap().to_string(), "too slow");
/// ```
#[doc(alias = "WithDeadlineCause")]
pub fn with_deadline_cause(
    parent: &Context,
    deadline: Instant,
    cause: impl Into<Box<dyn StdError + Send + Sync>>,
) -> (Context, crate::CancelFn) {
    crate::deadline_child(parent, deadline, Some(Arc::from(cause.into())))
}

/// [`with_deadline_cause`] at `Instant::now() + timeout` (Go's `context.WithTimeoutCause`).
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use gort::context::{self, Context, Error};
///
/// let rt = gort::Runtime::new().unwrap();
/// rt.block_on(async {
///     let (ctx, cancel) =
///         context::with_timeout_cause(&Context::background(), Duration::from_millis(5), "no reply");
///     let (child, _c) = context::with_cancel(&ctx);
///     child.done().recv().await; // canceled with its parent, at the deadline
///     assert_eq!(child.err(), Some(Error::DeadlineExceeded));
///     assert_eq!(child.cause().unwrap().to_string(), "no reply");
///     cancel.cancel(); // too late to change the cause
///     assert_eq!(ctx.cause().unwrap().to_string(), "no reply");
/// });
/// ```
#[doc(alias = "WithTimeoutCause")]
pub fn with_timeout_cause(
    parent: &Context,
    timeout: Duration,
    cause: impl Into<Box<dyn StdError + Send + Sync>>,
) -> (Context, crate::CancelFn) {
    with_deadline_cause(parent, Instant::now() + timeout, cause)
}
