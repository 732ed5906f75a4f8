//! `JoinHandle` and `JoinError`: how a spawner learns what became of its task.

use super::abort::AbortHandle;
use super::id::Id;
use super::raw::RawTask;
use super::state::COMPLETE;
use std::any::Any;
use std::fmt;
use std::future::Future;
use std::marker::PhantomData;
use std::pin::Pin;
use std::task::{Context, Poll};

/// An owned permission to await a spawned task's output; returned by [`spawn`](crate::spawn).
///
/// Awaiting it yields `Ok(output)`, or a [`JoinError`] if the task panicked or was aborted.
/// A task that panicked has its future dropped after the panic was caught, not while it
/// unwinds as under Tokio: in that `Drop`, `std::thread::panicking()` is false, and a panic
/// there is caught and counted (`Metrics::user_panics`) instead of aborting the process.
/// Dropping it detaches the task: the task keeps running, and its output is dropped when it
/// completes (or at once, if it has).
///
/// It can be awaited from anywhere: another task, another gort runtime, a foreign executor
/// (`futures::executor::block_on` on a plain thread); if the task's runtime is dropped
/// first, the await ends with a cancelled [`JoinError`]. A task that awaits its own handle
/// waits for ever: nothing detects that deadlock (Go reports "all goroutines are asleep"
/// only when every goroutine is), but it stalls that task alone; the runtime runs the
/// others, an [`AbortHandle`](crate::task::AbortHandle) still cancels it, and dropping the
/// runtime drops it. An [`abort`](JoinHandle::abort) from inside the task itself takes
/// effect at its next `.await` that returns `Pending`; a task that returns before one
/// completes with its output.
///
/// # Examples
///
/// ```
/// let rt = gort::Runtime::new().unwrap();
/// let n = rt.block_on(async { gort::spawn(async { 6 * 7 }).await.unwrap() });
/// assert_eq!(n, 42);
/// ```
pub struct JoinHandle<T> {
    raw: RawTask,
    /// The output type the cell's `poll_join` writes (a `JoinHandle` is `Send + Sync`, as the
    /// cell is, whatever `T`).
    output: PhantomData<fn() -> T>,
}

impl<T> JoinHandle<T> {
    /// The handle of the task `raw`, whose future's output is `T`.
    ///
    /// # Safety
    ///
    /// `raw`'s cell has a future whose output type is `T`.
    pub(crate) unsafe fn new(raw: RawTask) -> Self {
        JoinHandle {
            raw,
            output: PhantomData,
        }
    }

    /// Cancels the task: its future is dropped at its next scheduling point (at once if it is
    /// not running) and awaiting the handle yields a cancelled [`JoinError`]. A task that has
    /// already completed is not affected.
    pub fn abort(&self) {
        self.raw.abort();
    }

    /// A handle that can abort the task (and ask whether it finished) without owning its
    /// output.
    ///
    /// # Examples
    ///
    /// ```
    /// let rt = gort::Runtime::new().unwrap();
    /// let h = rt.spawn(std::future::pending::<()>());
    /// let abort = h.abort_handle();
    /// abort.abort();
    /// assert!(rt.block_on(h).unwrap_err().is_cancelled());
    /// assert!(abort.is_finished());
    /// ```
    pub fn abort_handle(&self) -> AbortHandle {
        AbortHandle::new(self.raw.clone())
    }

    /// The task's id (what [`task::id`](crate::task::id) returns inside it).
    ///
    /// # Examples
    ///
    /// ```
    /// let rt = gort::Runtime::new().unwrap();
    /// let (a, b) = (rt.spawn(async {}), rt.spawn(async {}));
    /// assert_ne!(a.id(), b.id());
    /// ```
    pub fn id(&self) -> Id {
        self.raw.header().id
    }

    /// Whether the task has finished: completed, panicked, or been cancelled.
    pub fn is_finished(&self) -> bool {
        self.raw.header().state.load() & COMPLETE != 0
    }
}

impl<T> Future for JoinHandle<T> {
    type Output = Result<T, JoinError>;

    /// A finished task's output costs a unit of the cooperative budget (a loop joining
    /// handles of finished tasks yields like a loop over a ready channel).
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        gort_coop::poll_budgeted(cx, |cx| {
            let mut out: Poll<Result<T, JoinError>> = Poll::Pending;
            let poll_join = self.raw.header().vtable.poll_join;
            // SAFETY: the cell's output type is `T` (`new`'s contract), which is what its
            // `poll_join` writes to `out`; this handle's reference keeps the cell alive.
            unsafe {
                poll_join(
                    self.raw.ptr(),
                    (&mut out as *mut Poll<Result<T, JoinError>>).cast(),
                    cx,
                )
            };
            out
        })
    }
}

impl<T> Drop for JoinHandle<T> {
    /// Detaches the task; if it has completed, drops its output now (else the task drops it
    /// when it completes).
    fn drop(&mut self) {
        if self.raw.header().state.drop_join_interest() {
            let drop_output = self.raw.header().vtable.drop_output;
            // SAFETY: this handle's reference keeps the cell alive; COMPLETE was observed.
            unsafe { drop_output(self.raw.ptr()) };
        }
    }
}

impl<T> fmt::Debug for JoinHandle<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("JoinHandle")
            .field("id", &self.id())
            .field("finished", &self.is_finished())
            .finish()
    }
}

/// Why a task did not produce its output: it was cancelled or it panicked. `Display` and
/// `Debug` read as Tokio's (`task 7 panicked with message "boom"`).
pub struct JoinError {
    repr: Repr,
    id: Id,
}

enum Repr {
    Cancelled,
    Panic(Payload),
}

/// A panic payload, `Sync` so that `JoinError` is (as Tokio's is: an error goes into
/// `Box<dyn Error + Send + Sync>` and `anyhow::Error`, and a future holding one across an
/// `.await` stays `Sync`; Tokio's `async_send_sync.rs`, `tests/tokio_async_send_sync.rs`).
/// Through a shared reference it gives only what [`message`](Payload::message) reads, a
/// `&str`, which is `Sync`; the payload itself leaves only by value.
struct Payload(Box<dyn Any + Send + 'static>);

// SAFETY: no `&self` method hands out the payload: `message` only calls `downcast_ref`
// (which reads the vtable's type id, not the value) for `&'static str` and `String`, both
// `Sync`, so the references it returns may be shared between threads; everything else takes
// the payload by value.
unsafe impl Sync for Payload {}

impl Payload {
    /// The panic's message, for a `&str` or `String` payload (what `panic!` makes).
    fn message(&self) -> Option<&str> {
        let p = &self.0;
        p.downcast_ref::<&'static str>()
            .copied()
            .or_else(|| p.downcast_ref::<String>().map(String::as_str))
    }
}

impl JoinError {
    pub(crate) fn cancelled(id: Id) -> JoinError {
        JoinError {
            repr: Repr::Cancelled,
            id,
        }
    }

    pub(crate) fn panic(id: Id, payload: Box<dyn Any + Send + 'static>) -> JoinError {
        JoinError {
            repr: Repr::Panic(Payload(payload)),
            id,
        }
    }

    /// The id of the task that failed (Tokio's `JoinError::id`), as its
    /// [`JoinHandle::id`] was.
    ///
    /// # Examples
    ///
    /// ```
    /// let rt = gort::Runtime::new().unwrap();
    /// rt.block_on(async {
    ///     let h = gort::spawn(async { panic!("boom") });
    ///     let id = h.id();
    ///     let err = h.await.unwrap_err();
    ///     assert_eq!(err.id(), id);
    ///     assert_eq!(err.to_string(), format!("task {id} panicked with message \"boom\""));
    /// });
    /// ```
    pub fn id(&self) -> Id {
        self.id
    }

    /// The task was aborted, or dropped by a runtime shutdown.
    pub fn is_cancelled(&self) -> bool {
        matches!(self.repr, Repr::Cancelled)
    }

    /// The task panicked.
    pub fn is_panic(&self) -> bool {
        matches!(self.repr, Repr::Panic(_))
    }

    /// The panic payload, to resume the panic with `std::panic::resume_unwind`.
    ///
    /// # Panics
    ///
    /// If the task did not panic.
    #[track_caller]
    pub fn into_panic(self) -> Box<dyn Any + Send + 'static> {
        match self.repr {
            Repr::Panic(p) => p.0,
            Repr::Cancelled => panic!("gort: JoinError::into_panic on a cancelled task"),
        }
    }

    fn panic_message(&self) -> Option<&str> {
        match &self.repr {
            Repr::Panic(p) => p.message(),
            Repr::Cancelled => None,
        }
    }
}

impl fmt::Display for JoinError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let id = self.id;
        match (&self.repr, self.panic_message()) {
            (Repr::Cancelled, _) => write!(f, "task {id} was cancelled"),
            (Repr::Panic(_), Some(msg)) => write!(f, "task {id} panicked with message {msg:?}"),
            (Repr::Panic(_), None) => write!(f, "task {id} panicked"),
        }
    }
}

impl fmt::Debug for JoinError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let id = self.id;
        match (&self.repr, self.panic_message()) {
            (Repr::Cancelled, _) => write!(f, "JoinError::Cancelled({id:?})"),
            (Repr::Panic(_), Some(msg)) => write!(f, "JoinError::Panic({id:?}, {msg:?}, ...)"),
            (Repr::Panic(_), None) => write!(f, "JoinError::Panic({id:?}, ...)"),
        }
    }
}

impl std::error::Error for JoinError {}

/// A `JoinError` as an `io::Error` of kind `Other` (Tokio's conversion), so that `?` takes it
/// in a function returning `io::Result`; `into_inner` gives the `JoinError` back, with its
/// panic payload.
///
/// # Examples
///
/// ```
/// let rt = gort::Runtime::new().unwrap();
/// let err: std::io::Error = rt.block_on(async {
///     let h = gort::spawn(async { panic!("boom") });
///     h.await.unwrap_err().into()
/// });
/// assert_eq!(err.kind(), std::io::ErrorKind::Other);
/// let join_err = err.into_inner().unwrap().downcast::<gort::JoinError>().unwrap();
/// assert!(join_err.is_panic());
/// ```
impl From<JoinError> for std::io::Error {
    fn from(err: JoinError) -> std::io::Error {
        std::io::Error::other(err)
    }
}
