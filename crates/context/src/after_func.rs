//! [`after_func`]: run a function once a context is done (Go 1.21's `context.AfterFunc`).
//!
//! The function sits in a [`Slot`] shared by the context (which starts it on cancellation)
//! and the [`AfterFunc`] handle (which may take it back with `stop`); whoever takes it out of
//! the slot first decides, so it runs at most once and `stop` knows whether it prevented it.

use std::fmt;
use std::sync::Arc;

use parking_lot::Mutex;

use crate::ctx::{key, Node};
use crate::Context;

type Func = Box<dyn FnOnce() + Send + 'static>;

/// One registered function, until started or stopped.
pub(crate) struct Slot {
    f: Mutex<Option<Func>>,
}

impl Slot {
    /// Starts the function in its own unit of work (Go's `go f()`), unless stopped: a task on
    /// the current gort runtime, or a new thread when cancelled from outside any runtime.
    /// The function runs on the canceller's stack only when no thread can be made, its panic
    /// caught; else a panic in it is the task's (or thread's) own. No lock is held while it
    /// runs (a cancel starts functions after releasing the node's lock).
    pub(crate) fn start(&self) {
        let Some(f) = self.f.lock().take() else {
            return;
        };
        if gort_sched::timer_api::in_runtime() {
            drop(gort_sched::spawn(async move { f() }));
        } else {
            run_on_a_new_thread(f);
        }
    }
}

/// Runs `f` on a new thread; if none can be made (a limit on threads or on address space),
/// here, with its panic caught. `std::thread::spawn` would panic instead, in the middle of a
/// cancel: the functions after this one, and the children of the context, were left
/// unstarted and uncanceled (`tests/abuse_after_func_threads.rs`).
fn run_on_a_new_thread(f: Func) {
    let mine = Arc::new(Mutex::new(Some(f)));
    let theirs = mine.clone();
    let spawned = std::thread::Builder::new().spawn(move || {
        let f = theirs.lock().take();
        if let Some(f) = f {
            f();
        }
    });
    if spawned.is_err() {
        // The failed spawn dropped its closure, not the function.
        let f = mine.lock().take();
        if let Some(f) = f {
            // The panic hook has reported it; the cancel goes on.
            let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f));
        }
    }
}

/// Arranges for `f` to run in its own task once `ctx` is done, or at once (in its own task)
/// if it already is (Go 1.21's `context.AfterFunc`). On [`Context::background`], `f` never
/// runs. Dropping the returned handle does not unregister `f`;
/// [`AfterFunc::drop_guard`] does, when its guard drops (Go's `defer stop()`).
///
/// `f`'s task is a task like any other: a cancel during the runtime's shutdown (a context's
/// cancel guard dropped with the tasks being torn down) spawns it on a runtime that runs
/// nothing more, so it is dropped unrun, as Go's goroutines are when `main` returns. A
/// cancel from a thread of no runtime runs `f` on a new thread, or, if no thread can be made
/// (a limit on threads or address space), on the cancelling thread, rather than lose it.
///
/// # Examples
///
/// ```
/// use gort::context::{self, Context};
///
/// let rt = gort::Runtime::new().unwrap();
/// rt.block_on(async {
///     let (ctx, cancel) = context::with_cancel(&Context::background());
///     let (tx, rx) = gort::chan::bounded(1);
///     let _stop = context::after_func(&ctx, move || {
///         tx.try_send("cleaned up").unwrap();
///     });
///     cancel.cancel();
///     assert_eq!(rx.recv().await, Some("cleaned up"));
/// });
/// ```
#[doc(alias = "AfterFunc")]
pub fn after_func(ctx: &Context, f: impl FnOnce() + Send + 'static) -> AfterFunc {
    let slot = Arc::new(Slot {
        f: Mutex::new(Some(Box::new(f))),
    });
    let node = ctx.node.clone();
    if node.is_cancelable() {
        let mut s = node.state();
        if s.err.is_none() {
            s.after_funcs.insert(key(&slot), slot.clone());
            let adopted = s.adopted;
            drop(s);
            if adopted {
                // The orphanage keeps its deadline but holds it weakly: the function waits
                // for that deadline whoever holds the context.
                crate::orphanage::hold(&node);
            }
        } else {
            drop(s);
            slot.start();
        }
    }
    AfterFunc { node, slot }
}

/// The handle of an [`after_func`] registration.
pub struct AfterFunc {
    node: Arc<Node>,
    slot: Arc<Slot>,
}

impl AfterFunc {
    /// Unregisters the function. Returns true if this stopped it from running; false if it
    /// has already been started (`stop` does not wait for it) or stopped.
    ///
    /// # Examples
    ///
    /// ```
    /// use gort::context::{self, Context};
    ///
    /// let (ctx, cancel) = context::with_cancel(&Context::background());
    /// let stop = context::after_func(&ctx, || unreachable!("stopped before cancel"));
    /// assert!(stop.stop());
    /// assert!(!stop.stop(), "already stopped");
    /// cancel.cancel();
    /// ```
    pub fn stop(&self) -> bool {
        let f = self.slot.f.lock().take();
        let removed = self.node.state().after_funcs.remove(&key(&self.slot));
        drop(removed);
        let stopped = f.is_some();
        drop(f); // the function's captures drop outside every lock
        stopped
    }
}

impl fmt::Debug for AfterFunc {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AfterFunc").finish_non_exhaustive()
    }
}
