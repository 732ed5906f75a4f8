//! [`CancelGuard`]: Go's `defer cancel()` as a value that cancels its context when dropped;
//! [`AfterFuncGuard`]: Go's `defer stop()` for an `after_func` registration.

use crate::after_func::AfterFunc;
use crate::ctx::CancelFn;

impl CancelFn {
    /// A guard that calls [`cancel`](CancelFn::cancel) when dropped: Go's `defer cancel()`
    /// (tokio-util's `CancellationToken::drop_guard`). A handler that derives a context per
    /// request from a long-lived one keeps the guard for the request's scope, so the child
    /// never outlives the work: a child never canceled stays registered with its parent, and
    /// its deadline's timer stays armed, until the parent is canceled or the deadline passes
    /// (Go's `go vet` reports the forgotten `cancel`; Rust needs the guard).
    ///
    /// # Examples
    ///
    /// ```
    /// use gort::context::{self, Context, Error};
    /// use std::time::Duration;
    ///
    /// async fn handle(server: &Context) -> Context {
    ///     let (ctx, cancel) = context::with_timeout(server, Duration::from_secs(30));
    ///     let _cancel = cancel.drop_guard(); // canceled when the handler returns
    ///     // ... the request's work, watching `ctx.done()` ...
    ///     ctx
    /// }
    ///
    /// gort::Runtime::new().unwrap().block_on(async {
    ///     let (server, _stop) = context::with_cancel(&Context::background());
    ///     let finished = handle(&server).await;
    ///     assert_eq!(finished.err(), Some(Error::Canceled));
    ///     assert_eq!(server.err(), None);
    /// });
    /// ```
    pub fn drop_guard(self) -> CancelGuard {
        CancelGuard { cancel: Some(self) }
    }
}

/// Cancels its context when dropped, from [`CancelFn::drop_guard`] (Go's `defer cancel()`).
///
/// # Examples
///
/// ```
/// use gort::context::{self, Context, Error};
///
/// let (ctx, cancel) = context::with_cancel(&Context::background());
/// let guard = cancel.drop_guard();
/// let cancel = guard.disarm(); // the work moved elsewhere: keep the context alive
/// assert_eq!(ctx.err(), None);
/// drop(cancel.drop_guard());
/// assert_eq!(ctx.err(), Some(Error::Canceled));
/// ```
#[derive(Debug)]
#[must_use = "dropping the guard at once cancels the context at once"]
pub struct CancelGuard {
    /// Taken by `disarm`.
    cancel: Option<CancelFn>,
}

impl CancelGuard {
    /// Gives the [`CancelFn`] back without canceling (tokio-util's `DropGuard::disarm`).
    ///
    /// # Examples
    ///
    /// ```
    /// use gort::context::{self, Context};
    ///
    /// let (ctx, cancel) = context::with_cancel(&Context::background());
    /// let cancel = cancel.drop_guard().disarm();
    /// assert_eq!(ctx.err(), None);
    /// cancel.cancel();
    /// assert!(ctx.err().is_some());
    /// ```
    pub fn disarm(mut self) -> CancelFn {
        self.cancel
            .take()
            .expect("gort: a CancelGuard is disarmed once")
    }
}

impl Drop for CancelGuard {
    fn drop(&mut self) {
        if let Some(cancel) = self.cancel.take() {
            cancel.cancel();
        }
    }
}

impl AfterFunc {
    /// A guard that calls [`stop`](AfterFunc::stop) when dropped: Go's
    /// `stop := context.AfterFunc(ctx, f); defer stop()`. Dropping an `AfterFunc` itself does
    /// not unregister the function (as in Go, where the `stop` func may be ignored), so a
    /// handler that registers one on a long-lived context and then returns early, or panics,
    /// would leave the function and its captures (a socket, say) registered until that
    /// context is done; the guard unregisters it when the handler's scope ends, on a panic
    /// too.
    ///
    /// # Examples
    ///
    /// ```
    /// use gort::context::{self, Context};
    /// use std::sync::Arc;
    ///
    /// let (server, _shutdown) = context::with_cancel(&Context::background());
    /// let conn = Arc::new("a connection");
    /// {
    ///     let mine = conn.clone();
    ///     let _stop = context::after_func(&server, move || drop(mine)).drop_guard();
    ///     // ... serve the connection; the function ends it if the server shuts down ...
    /// }
    /// assert_eq!(Arc::strong_count(&conn), 1); // unregistered with the guard
    /// ```
    pub fn drop_guard(self) -> AfterFuncGuard {
        AfterFuncGuard { stop: Some(self) }
    }
}

/// Stops its [`after_func`](crate::after_func) registration when dropped, from
/// [`AfterFunc::drop_guard`] (Go's `defer stop()`).
///
/// # Examples
///
/// ```
/// use gort::context::{self, Context};
///
/// let (ctx, _cancel) = context::with_cancel(&Context::background());
/// let guard = context::after_func(&ctx, || ()).drop_guard();
/// let stop = guard.disarm(); // keep the function registered after all
/// assert!(stop.stop());
/// ```
#[derive(Debug)]
#[must_use = "dropping the guard at once stops the function at once"]
pub struct AfterFuncGuard {
    /// Taken by `disarm`.
    stop: Option<AfterFunc>,
}

impl AfterFuncGuard {
    /// Gives the [`AfterFunc`] back without stopping it.
    ///
    /// # Examples
    ///
    /// ```
    /// use gort::context::{self, Context};
    ///
    /// let (ctx, _cancel) = context::with_cancel(&Context::background());
    /// let stop = context::after_func(&ctx, || ()).drop_guard().disarm();
    /// assert!(stop.stop(), "still registered");
    /// ```
    pub fn disarm(mut self) -> AfterFunc {
        self.stop
            .take()
            .expect("gort: an AfterFuncGuard is disarmed once")
    }
}

impl Drop for AfterFuncGuard {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            stop.stop();
        }
    }
}
