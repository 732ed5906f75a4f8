//! [`Context`] and [`CancelFn`]: Go's `cancelCtx` and `timerCtx` in one node type.
//!
//! Each derived context is a node with a lock over its cancellation state: the error once
//! canceled, the children to cancel with it, its deadline timer, and the `after_func`s to
//! start. Cancelling (Go's `cancelCtx.cancel`, `Node::cancel` in `cancel.rs`) walks the
//! subtree from a work list: it marks each node under its lock (sets the error, takes out the
//! rest) and closes its `done` after the lock; then, once the whole subtree is done, it stops
//! the timers, starts the functions, and removes the node from its parent. A cancel that
//! finds a node already done waits for the [`Walk`] that marked it, so a cancel returns only
//! with its whole subtree done, as Go's, which holds the node's lock meanwhile.
//!
//! Lock order. A node's lock is never held with another node's, nor while waiting: locks are
//! taken parent → nothing or child → parent, one at a time. A walk's own lock is a leaf. The
//! orphanage's lock may be held while taking a node's, never the other way. No user code
//! (wakers, functions, drops) ever runs under any of these; wakers (`done`'s close) run
//! during a walk, before it finishes, and a cancel they make does not wait (see [`Walk`]).
//! A reader that sees the error before the cancel got to `done` closes it itself (Go's `Err`
//! is nil until `Done` is closed).
//!
//! `done` is created on first use, under the lock, so that a concurrent cancel either sees it
//! (and closes it) or has already set the error (and `done` creates it closed).

use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, OnceLock};

use gort_chan::{Receiver, Sender};
use gort_time::Instant;
use parking_lot::Mutex;

use crate::after_func::Slot;
use crate::cancel::Walk;
use crate::cause::Cause;
use crate::deadline::DeadlineTimer;
use crate::Error;
use gort_sched::timer_api::runtime_shut_down;

/// A cancellation signal and deadline that flows from a parent to its children (Go's
/// `context.Context`, without values). Cheap to clone: clones are the same context.
///
/// # Examples
///
/// ```
/// use gort::context::{self, Context, Error};
///
/// let rt = gort::Runtime::new().unwrap();
/// rt.block_on(async {
///     let (ctx, cancel) = context::with_cancel(&Context::background());
///     let worker = gort::spawn({
///         let ctx = ctx.clone();
///         async move {
///             ctx.done().recv().await; // parks until canceled
///             ctx.err()
///         }
///     });
///     cancel.cancel();
///     assert_eq!(worker.await.unwrap(), Some(Error::Canceled));
/// });
/// ```
#[derive(Clone)]
pub struct Context {
    pub(crate) node: Arc<Node>,
}

/// Cancels its [`Context`] (and the context's children) with [`Error::Canceled`] (Go's
/// `CancelFunc`). Calling it again, or after the context is done, does nothing. Dropping it
/// does not cancel; [`drop_guard`](CancelFn::drop_guard) gives a guard that does (Go's
/// `defer cancel()`).
///
/// As in Go, a child that is never canceled stays registered with its parent, with its
/// deadline timer and its own children, until the parent is canceled: call the `CancelFn`
/// (or hold its guard) once the work it bounds is done, or every request leaks a child of a
/// long-lived parent.
///
/// # Examples
///
/// ```
/// use gort::context::{self, Context, Error};
///
/// let (ctx, cancel) = context::with_cancel(&Context::background());
/// let also = cancel.clone();
/// drop(cancel); // does not cancel
/// assert_eq!(ctx.err(), None);
/// also.cancel();
/// also.cancel(); // no-op
/// assert_eq!(ctx.err(), Some(Error::Canceled));
/// ```
#[derive(Clone)]
pub struct CancelFn {
    node: Arc<Node>,
}

pub(crate) struct Node {
    /// Background is never canceled: nothing registers with it.
    pub(crate) cancelable: bool,
    deadline: Option<Instant>,
    /// The cause its own deadline cancels it with (`with_deadline_cause`).
    deadline_cause: Option<Cause>,
    /// The node this one is registered with (removed from on its own cancel).
    pub(crate) parent: Option<Arc<Node>>,
    pub(crate) state: Mutex<State>,
    done: OnceLock<(Sender<()>, Receiver<()>)>,
}

#[derive(Default)]
pub(crate) struct State {
    pub(crate) err: Option<Error>,
    /// The cause given with the cancellation that set `err`, if one was (Go's `cause`).
    pub(crate) cause: Option<Cause>,
    /// Keyed by the child's address (unique while the map holds it).
    pub(crate) children: HashMap<usize, Arc<Node>>,
    pub(crate) timer: Option<DeadlineTimer>,
    /// Keyed by the slot's address.
    pub(crate) after_funcs: HashMap<usize, Arc<Slot>>,
    /// The walk of the cancel that set `err`, if the node had children then: a late
    /// canceller waits for it.
    pub(crate) walk: Option<Arc<Walk>>,
    /// Its deadline is in the orphanage, which is told when the node is canceled or dropped
    /// (its entry can go then), or gets an `after_func` (the orphanage holds it then).
    pub(crate) adopted: bool,
}

impl Context {
    /// The root context: never canceled, no deadline (Go's `context.Background`).
    ///
    /// # Examples
    ///
    /// ```
    /// let bg = gort::context::Context::background();
    /// assert_eq!(bg.err(), None);
    /// assert_eq!(bg.deadline(), None);
    /// assert!(bg.done().try_recv().is_err()); // never closed
    /// ```
    ///
    /// It is also Go 1.21's `context.WithoutCancel(parent)`: a context never canceled and
    /// without deadline, whatever its parent; as a gort context carries no values, there is
    /// nothing of the parent left to keep.
    #[doc(alias = "Background")]
    #[doc(alias = "TODO")]
    #[doc(alias = "WithoutCancel")]
    pub fn background() -> Context {
        static BACKGROUND: OnceLock<Context> = OnceLock::new();
        BACKGROUND
            .get_or_init(|| Context {
                node: Arc::new(Node::new(false, None, None, None)),
            })
            .clone()
    }

    /// A channel closed when the context is canceled: `ctx.done().recv()` resolves to `None`
    /// then (and never receives a value). Usable as a `select!` arm.
    ///
    /// # Examples
    ///
    /// ```
    /// use gort::context::{self, Context};
    ///
    /// futures::executor::block_on(async {
    ///     let (ctx, cancel) = context::with_cancel(&Context::background());
    ///     let (_tx, work) = gort::chan::bounded::<u32>(1);
    ///     cancel.cancel();
    ///     let got = gort::select! {
    ///         v = work.recv() => v,
    ///         _ = ctx.done().recv() => None,
    ///     };
    ///     assert_eq!(got, None);
    /// });
    /// ```
    #[doc(alias = "Done")]
    pub fn done(&self) -> &Receiver<()> {
        &self.node.done().1
    }

    /// `None` while the context is live; why it is done once it is (Go's `ctx.Err()`). As in
    /// Go, `Some` implies that [`done`](Context::done) is closed, even while another thread
    /// is still in the middle of the cancel.
    ///
    /// # Examples
    ///
    /// ```
    /// use gort::context::{self, Context, Error};
    ///
    /// let (ctx, cancel) = context::with_cancel(&Context::background());
    /// assert_eq!(ctx.err(), None);
    /// cancel.cancel();
    /// assert_eq!(ctx.err(), Some(Error::Canceled));
    /// ```
    #[doc(alias = "Err")]
    pub fn err(&self) -> Option<Error> {
        let err = self.node.state.lock().err;
        if err.is_some() {
            self.node.close_done();
        }
        err
    }

    /// Why the context was canceled (Go 1.20's `context.Cause(ctx)`): `None` while it is
    /// live; once it is done, the cause given to the cancellation that first reached it (a
    /// [`CancelCauseFn`](crate::CancelCauseFn) of it or of an ancestor, or the deadline of a
    /// [`with_deadline_cause`](crate::with_deadline_cause)), else its [`err`](Context::err)
    /// as an error. Children inherit the cause of the ancestor whose cancellation reached them.
    ///
    /// # Examples
    ///
    /// ```
    /// use gort::context::{self, Context, Error};
    ///
    /// let (ctx, cancel) = context::with_cancel_cause(&Context::background());
    /// let (child, _cancel_child) = context::with_cancel(&ctx);
    /// assert!(child.cause().is_none());
    /// cancel.cancel("disk full");
    /// assert_eq!(child.err(), Some(Error::Canceled));
    /// assert_eq!(child.cause().unwrap().to_string(), "disk full");
    ///
    /// // Without a cause, the cause is the error.
    /// let (plain, cancel) = context::with_cancel(&Context::background());
    /// cancel.cancel();
    /// let cause = plain.cause().unwrap();
    /// assert_eq!(cause.downcast_ref::<Error>(), Some(&Error::Canceled));
    /// ```
    #[doc(alias = "Cause")]
    pub fn cause(&self) -> Option<Cause> {
        let (err, cause) = {
            let s = self.node.state.lock();
            (s.err?, s.cause.clone())
        };
        self.node.close_done();
        Some(cause.unwrap_or_else(|| Arc::new(err)))
    }

    /// When the context will be canceled by a deadline (its own or an ancestor's), or `None`
    /// if no deadline was set on it or its ancestors (Go's `ctx.Deadline()`). A deadline
    /// set, however far, is `Some`: `with_timeout(parent, Duration::MAX)` gives the latest
    /// instant the clock holds, some 292 years ahead, as Go's `WithTimeout` with the largest
    /// `Duration` gives a far-future deadline (see [`with_timeout`](crate::with_timeout)).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use gort::context::{self, Context};
    /// use gort::time::Instant;
    ///
    /// let rt = gort::Runtime::new().unwrap();
    /// rt.block_on(async {
    ///     let soon = Instant::now() + Duration::from_secs(10);
    ///     let (parent, _c1) = context::with_deadline(&Context::background(), soon);
    ///     // A later deadline of a child is capped by its parent's.
    ///     let (child, _c2) = context::with_timeout(&parent, Duration::from_secs(60));
    ///     assert_eq!(child.deadline(), Some(soon));
    /// });
    /// ```
    #[doc(alias = "Deadline")]
    pub fn deadline(&self) -> Option<Instant> {
        self.node.deadline
    }
}

impl fmt::Debug for Context {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Context")
            .field("deadline", &self.deadline())
            .field("err", &self.err())
            .finish_non_exhaustive()
    }
}

impl CancelFn {
    /// Cancels the context with [`Error::Canceled`] unless it is already done: closes its
    /// `done` channel, stops its deadline timer, cancels its children, starts its
    /// `after_func`s, and unregisters it from its parent. As in Go, once it returns the
    /// context and all its descendants are done, even when another cancel (a second call,
    /// an ancestor's, a deadline) got to them first: it waits for that one to be through.
    ///
    /// # Examples
    ///
    /// ```
    /// use gort::context::{self, Context};
    ///
    /// let (ctx, cancel) = context::with_cancel(&Context::background());
    /// cancel.cancel();
    /// assert!(ctx.done().is_closed());
    /// ```
    #[doc(alias = "CancelFunc")]
    pub fn cancel(&self) {
        self.node.cancel(true, Error::Canceled, None);
    }
}

impl fmt::Debug for CancelFn {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CancelFn").finish_non_exhaustive()
    }
}

/// A child of `parent`, with `deadline` if given (already checked to be earlier than the
/// parent's) and the cause that deadline cancels it with, registered to be canceled with it.
pub(crate) fn derive(
    parent: &Context,
    deadline: Option<Instant>,
    deadline_cause: Option<Cause>,
) -> (Context, CancelFn) {
    let registered_with = parent.node.cancelable.then(|| parent.node.clone());
    let node = Arc::new(Node::new(
        true,
        deadline.or(parent.node.deadline),
        deadline_cause,
        registered_with,
    ));
    node.propagate_cancel();
    if let Some(deadline) = deadline {
        node.arm_deadline(deadline);
    }
    (Context { node: node.clone() }, CancelFn { node })
}

impl CancelFn {
    /// The node it cancels, for [`CancelCauseFn`](crate::CancelCauseFn).
    pub(crate) fn into_node(self) -> Arc<Node> {
        self.node
    }
}

impl Node {
    fn new(
        cancelable: bool,
        deadline: Option<Instant>,
        deadline_cause: Option<Cause>,
        parent: Option<Arc<Node>>,
    ) -> Node {
        Node {
            cancelable,
            deadline,
            deadline_cause,
            parent,
            state: Mutex::new(State::default()),
            done: OnceLock::new(),
        }
    }

    /// Whether the node is canceled.
    pub(crate) fn is_done(&self) -> bool {
        self.state.lock().err.is_some()
    }

    pub(crate) fn is_cancelable(&self) -> bool {
        self.cancelable
    }

    pub(crate) fn state(&self) -> parking_lot::MutexGuard<'_, State> {
        self.state.lock()
    }

    fn done(&self) -> &(Sender<()>, Receiver<()>) {
        if let Some(done) = self.done.get() {
            return done;
        }
        let s = self.state.lock();
        self.done.get_or_init(|| {
            let (tx, rx) = gort_chan::bounded(0);
            if s.err.is_some() {
                tx.close(); // a new channel: no waiter to wake under the lock
            }
            (tx, rx)
        })
    }

    /// Closes `done` if created (a no-op once closed), for a node whose error is set. Go sets
    /// the error and closes `Done` under one lock (`Err` is nil until `Done` is closed); here
    /// the close wakes waiters (user code), so a cancel closes after releasing the lock, and
    /// a reader that sees the error first ([`Context::err`], `cause`) closes `done` itself.
    pub(crate) fn close_done(&self) {
        if let Some((tx, _)) = self.done.get() {
            tx.close();
        }
    }

    /// Registers with the parent, or cancels at once if the parent is already done (Go's
    /// `propagateCancel`).
    fn propagate_cancel(self: &Arc<Self>) {
        let Some(parent) = &self.parent else { return };
        let mut ps = parent.state.lock();
        match ps.err {
            Some(err) => {
                let cause = ps.cause.clone();
                drop(ps);
                self.cancel(false, err, cause);
            }
            None => {
                ps.children.insert(key(self), self.clone());
            }
        }
    }

    /// Starts the deadline timer, or cancels at once if the deadline has passed. Outside a
    /// gort runtime the orphanage keeps the deadline instead.
    fn arm_deadline(self: &Arc<Self>, deadline: Instant) {
        if deadline <= Instant::now() {
            self.expire();
            return;
        }
        let Some(timer) = DeadlineTimer::start(self, deadline) else {
            self.adopt(deadline);
            return;
        };
        let mut s = self.state.lock();
        if s.err.is_none() {
            s.timer = Some(timer);
            drop(s);
            if runtime_shut_down() {
                // No M will run the heap it went to, nor drain it if the drain is over.
                self.orphan();
            }
            return;
        }
        drop(s);
        timer.stop(); // canceled (by the parent, or the timer itself) meanwhile
    }

    /// Cancels the node for its deadline: [`Error::DeadlineExceeded`], with its deadline's
    /// cause if it has one.
    pub(crate) fn expire(self: &Arc<Self>) {
        self.cancel(true, Error::DeadlineExceeded, self.deadline_cause.clone());
    }

    /// The runtime holding this node's deadline timer shut down before the deadline (the
    /// timer's `Fire::shutdown`, or an arming on a shut-down runtime): the timer is stopped
    /// (a no-op once shutdown's drain took it out of its heap), and the deadline goes to the
    /// orphanage, which cancels the node when it comes.
    ///
    /// Unless nothing can observe the node any more: the caller's reference (the timer's) is
    /// the last, so no handle, no child (a child holds its parent), no registration with a
    /// parent (which holds its children) and no orphanage entry (which could upgrade) is
    /// left, and no `after_func` waits to run. Whether its deadline ever comes then makes no
    /// difference, and the node goes with the timer's callback rather than keep the
    /// orphanage's thread for it (a day, for a day's timeout dropped uncanceled). With the
    /// caller's reference the last, no other can appear while this looks.
    pub(crate) fn orphan(self: &Arc<Self>) {
        let (timer, observable) = {
            let mut s = self.state.lock();
            if s.err.is_some() {
                return;
            }
            let observable = Arc::strong_count(self) > 1 || !s.after_funcs.is_empty();
            (s.timer.take(), observable)
        };
        if let Some(timer) = timer {
            timer.stop();
        }
        if let (Some(deadline), true) = (self.deadline, observable) {
            self.adopt(deadline);
        }
    }

    /// Hands the deadline to the orphanage (once), marking the node adopted first, so that its
    /// cancel or its drop tells the orphanage that the entry can go.
    fn adopt(self: &Arc<Self>, deadline: Instant) {
        if deadline.is_never() {
            return; // the orphanage keeps none
        }
        let hold = {
            let mut s = self.state.lock();
            if s.err.is_some() || s.adopted {
                return;
            }
            s.adopted = true;
            // Else an `after_func` registered from now on asks for it (`after_func`).
            !s.after_funcs.is_empty()
        };
        crate::orphanage::adopt(self, deadline, hold);
    }

    #[cfg(test)]
    pub(crate) fn children_len(&self) -> usize {
        self.state.lock().children.len()
    }

    #[cfg(test)]
    pub(crate) fn has_timer(&self) -> bool {
        self.state.lock().timer.is_some()
    }
}

/// Drops the links to other nodes one node at a time: a node's drop releases its parent, which
/// may be the last reference to it, and so on up a chain; a recursive drop of a chain of
/// 100,000 contexts would overflow the stack.
impl Drop for Node {
    fn drop(&mut self) {
        if self.state.get_mut().adopted {
            crate::orphanage::forget(1);
        }
        let mut pending = Vec::new();
        let mut next = self.take_links(&mut pending);
        while let Some(node) = next.take().or_else(|| pending.pop()) {
            if let Some(mut last) = Arc::into_inner(node) {
                next = last.take_links(&mut pending);
            } // `last` drops here, with no links left: its own drop is shallow
        }
    }
}

impl Node {
    /// Takes this node's links for an unlinking drop: returns the parent, and adds the
    /// children (if any are still registered) to `pending`.
    fn take_links(&mut self, pending: &mut Vec<Arc<Node>>) -> Option<Arc<Node>> {
        let children = &mut self.state.get_mut().children;
        if !children.is_empty() {
            pending.extend(children.drain().map(|(_, child)| child));
        }
        self.parent.take()
    }
}

/// A map key for `node`: its address, unique while the map keeps it alive.
pub(crate) fn key<T>(node: &Arc<T>) -> usize {
    Arc::as_ptr(node) as *const () as usize
}
