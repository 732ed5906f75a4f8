//! Go-like multi-producer multi-consumer channels and `select!`, for any executor.
//!
//! - [`bounded(cap)`](bounded) is Go's `make(chan T, cap)`; `cap == 0` is unbuffered: a send
//!   completes only when a receiver has taken the value (rendezvous).
//! - [`unbounded()`](unbounded) never makes a sender wait.
//! - [`Sender`] and [`Receiver`] are both `Clone`; each value is received exactly once, and
//!   values from one sender arrive in the order it sent them.
//! - [`close`](Sender::close) from either side, dropping every `Sender`, or dropping every
//!   `Receiver` closes the channel: sends fail and give the value back ([`SendError`]),
//!   receivers drain what is buffered and then get `None`.
//! - [`select!`] waits on several futures and runs the first ready arm, choosing fairly among
//!   ready arms; as with Go's `select`, the channel operation of at most one arm takes effect.
//!
//! The crate only uses `std::task::Waker`s, so it works under gort's scheduler, any other
//! executor, or `futures::executor::block_on`.
//!
//! # Cooperative budget
//!
//! Under gort's scheduler a task gets a budget of 128 operations per poll (Tokio's rule; see
//! `gort::task::unconstrained`). A `send` or `recv` that completes, a `Sender` used as a
//! `Sink`, a `Receiver` used as a `Stream` each spend one unit; once it is spent, the next
//! such operation wakes the task and returns `Pending` without taking or giving a value (but
//! a receive that a sender already completed while it waited returns that value), so a
//! loop over a channel that is always ready still lets the P's other tasks and a `timeout`
//! around it run. A [`select!`] checks the budget once before it polls any arm and then
//! costs one unit for the arm that completes. `try_send` and `try_recv` spend nothing.
//! Outside gort's scheduler and `block_on` there is no budget.
//!
//! # Examples
//!
//! A bounded channel between two threads:
//!
//! ```
//! let (tx, rx) = gort::chan::bounded(4);
//! let producer = std::thread::spawn(move || {
//!     futures::executor::block_on(async {
//!         for i in 0..10 {
//!             tx.send(i).await.unwrap();
//!         }
//!     })
//! });
//! let sum: i32 = futures::executor::block_on(async {
//!     let mut sum = 0;
//!     while let Some(i) = rx.recv().await {
//!         sum += i;
//!     }
//!     sum
//! });
//! producer.join().unwrap();
//! assert_eq!(sum, 45);
//! ```
//!
//! An unbounded channel used as a work queue, with `select!` and a quit channel:
//!
//! ```
//! use gort::chan::{select, unbounded};
//!
//! futures::executor::block_on(async {
//!     let (jobs_tx, jobs_rx) = unbounded();
//!     let (quit_tx, quit_rx) = unbounded::<()>();
//!     for job in ["a", "b"] {
//!         jobs_tx.try_send(job).unwrap();
//!     }
//!     quit_tx.close();
//!     let mut done = Vec::new();
//!     loop {
//!         select! {
//!             job = jobs_rx.recv() => done.push(job.unwrap()),
//!             _ = quit_rx.recv() => break,
//!         }
//!     }
//!     // `quit` was ready all along, so some jobs may be left: select is fair, not ordered.
//!     assert!(done.len() <= 2);
//! });
//! ```
//!
//! # Design
//!
//! One lock per channel guards a buffer and two queues of parked operations, as Go's `hchan`
//! does (`core.rs`, with O(1) removal from the queues in `queue.rs`); wakers run only after
//! the lock is released (`wake.rs`). A parked sender offers its value, so a receiver can take
//! it at once, and a sender hands its value straight to a parked receiver. `select!`
//! (`select.rs`, `macros.rs`) gives each invocation a commit flag (`group.rs`) so that a
//! counterparty can complete a parked arm only if no other arm has taken effect; channel
//! operations find their select through a thread-local (`select_ctx.rs`).
//!
//! Uncontended `try_send`/`try_recv` take the lock once and never allocate; a bounded
//! channel allocates its buffer at creation, for at most 4,096 values (a larger one grows as
//! values come); parking reuses slots of a per-channel slab.
//!
//! `Sender` and `Receiver` are `Send + Sync` when `T: Send`:
//!
//! ```compile_fail,E0277
//! fn assert_send<T: Send>(_: T) {}
//! let (tx, _rx) = gort::chan::bounded::<std::rc::Rc<u8>>(1);
//! assert_send(tx);
//! ```

#![warn(missing_docs)]

mod buf;
mod chan;
mod core;
mod error;
mod fused;
mod group;
mod macros;
mod queue;
mod receiver;
mod select;
mod select_ctx;
mod sender;
mod timer_sender;
mod wake;

#[doc(hidden)]
pub use crate::chan::Chan;
pub use crate::error::{SendError, TryRecvError, TrySendError};

// Unwind safety, as Tokio's `mpsc` channels have: a panic never leaves a channel
// half-updated. Its state changes under its lock, where no user waker runs (wakers are woken
// after the lock is released: design/CHANNELS.md, "Wake-ups outside the lock"; a panicking
// waker costs the others nothing), so a channel seen after a caught panic is consistent.
impl<T> std::panic::UnwindSafe for Receiver<T> {}
impl<T> std::panic::RefUnwindSafe for Receiver<T> {}
impl<T> std::panic::UnwindSafe for Sender<T> {}
impl<T> std::panic::RefUnwindSafe for Sender<T> {}
#[doc(hidden)]
pub use crate::fused::{bounded_fused, Fused, FusedReceiver};
pub use crate::receiver::{Receiver, RecvFuture};
pub use crate::sender::{SendFuture, Sender};
#[doc(hidden)]
pub use crate::timer_sender::{TimerSender, TimerWakes};

/// Support for the `select!` expansion; not a public API.
#[doc(hidden)]
pub mod __private {
    pub use crate::select::{guard, select, Arm, ArmPoll, Arms, Either, Flags, Never, Out, Select};
    pub use crate::select::{ArmViaFuture, ArmViaOption, ArmWrap, OptionRecv};
}

/// Creates a channel with a buffer of `cap` values (Go's `make(chan T, cap)`); `cap == 0` is
/// unbuffered (every send waits for a receiver to take the value).
///
/// The buffer is allocated here for at most 4,096 values; a larger one grows as values come,
/// so a huge `cap` costs only what is buffered.
///
/// # Examples
///
/// ```
/// futures::executor::block_on(async {
///     let (tx, rx) = gort::chan::bounded(1);
///     tx.send(1).await.unwrap();
///     assert!(tx.try_send(2).unwrap_err().is_full());
///     assert_eq!((rx.len(), rx.capacity()), (1, Some(1)));
///     assert_eq!(rx.recv().await, Some(1));
/// });
/// ```
#[doc(alias = "make")]
#[doc(alias = "sync_channel")]
pub fn bounded<T>(cap: usize) -> (Sender<T>, Receiver<T>) {
    channel(Some(cap))
}

/// Creates a channel whose buffer grows as needed: sends never wait.
///
/// # Examples
///
/// ```
/// let (tx, rx) = gort::chan::unbounded();
/// for i in 0..1000 {
///     tx.try_send(i).unwrap();
/// }
/// assert_eq!((rx.len(), rx.capacity()), (1000, None));
/// assert_eq!(rx.try_recv(), Ok(0));
/// ```
pub fn unbounded<T>() -> (Sender<T>, Receiver<T>) {
    channel(None)
}

fn channel<T>(cap: Option<usize>) -> (Sender<T>, Receiver<T>) {
    let chan = fused::ChanRef::plain(cap);
    (
        Sender {
            chan: chan.clone(),
            sink: sender::SinkSlot::EMPTY,
        },
        Receiver::new(chan),
    )
}

/// What a channel timer (gort::time's `Timer`/`Ticker`) is told about its channel's
/// receivers, so that it needs a runtime timer only while someone waits (Go 1.23's
/// `maybeRunChan`, `blockTimerChan`, `unblockTimerChan`). Not a user API.
///
/// Every call is made with no channel lock held. For one receive operation, `parked` is
/// always followed by exactly one `unparked`, in that order.
#[doc(hidden)]
pub trait RecvHook: Send + Sync {
    /// A receive (`recv`, `try_recv`, a `select!` arm, the `Stream`) or `len` is about to
    /// look at the channel: a timer that is due but not in a heap sends its value now.
    fn before_recv(&self);
    /// A receive operation parked: it waits for a value. Given a reference of its own, so
    /// that a timer can hand one to the heap it enters.
    fn parked(self: std::sync::Arc<Self>);
    /// A parked receive operation ended: it got a value, or it was cancelled or dropped.
    /// Given a reference of its own, as `parked` is.
    fn unparked(self: std::sync::Arc<Self>);
    /// The last receiver was dropped: nobody can receive from the channel any more. A hook
    /// that owns the channel's [`TimerSender`] must let it go now: the channel holds the
    /// hook strongly, so otherwise the two keep each other alive for good.
    fn last_receiver_dropped(&self);
}

/// [`bounded`] with a hook that is told about the receivers (see [`RecvHook`]): a
/// [`bounded_fused`] channel whose object is the hook's `Arc` (a channel timer fuses its
/// state into the channel itself). The channel holds the hook (strongly) as long as the
/// channel lives; the hook may own the sender, a [`TimerSender`] (one word), and must drop it
/// when told that the last receiver is gone. Not a user API.
#[doc(hidden)]
pub fn bounded_with_hook<T: Send + 'static>(
    cap: usize,
    hook: std::sync::Arc<dyn RecvHook>,
) -> (TimerSender<T>, Receiver<T>) {
    let chan = fused::fused(cap, |chan| WithHook { chan, hook });
    (TimerSender::new(chan.clone()), Receiver::new(chan))
}

/// A channel with a [`RecvHook`] held apart.
#[repr(C)]
struct WithHook<T> {
    chan: Chan<T>,
    hook: std::sync::Arc<dyn RecvHook>,
}

// SAFETY: `#[repr(C)]`, with the channel `bounded_fused` made first.
unsafe impl<T: Send + 'static> Fused<T> for WithHook<T> {
    fn chan(&self) -> &Chan<T> {
        &self.chan
    }
    fn before_recv(&self) {
        self.hook.before_recv();
    }
    fn parked(this: &std::sync::Arc<Self>) {
        this.hook.clone().parked();
    }
    fn unparked(this: &std::sync::Arc<Self>) {
        this.hook.clone().unparked();
    }
    fn last_receiver_dropped(&self) {
        self.hook.last_receiver_dropped();
    }
}

#[allow(dead_code)]
fn _assert_send_sync() {
    fn send_sync<T: Send + Sync>() {}
    fn send<T: Send>() {}
    fn unpin<T: Unpin>() {}
    send_sync::<Sender<Vec<u8>>>();
    send_sync::<Receiver<Vec<u8>>>();
    // A payload that is `Send` but not `Sync` still gives `Sync` halves.
    send_sync::<Sender<std::cell::Cell<u8>>>();
    send_sync::<Receiver<std::cell::Cell<u8>>>();
    send::<SendFuture<'static, Vec<u8>>>();
    send::<RecvFuture<'static, Vec<u8>>>();
    unpin::<SendFuture<'static, std::marker::PhantomPinned>>();
    unpin::<RecvFuture<'static, std::marker::PhantomPinned>>();
}
