//! `gort::signal`: Go's `os/signal` on the netpoller.
//!
//! Each [`notify`] is a subscription: a self-pipe (a `UnixStream` pair) whose read end is
//! registered with the runtime's poller like any socket, one `signal-hook-registry` action per
//! signal (what tokio uses), and a task that delivers. The action, run inside the signal
//! handler, does only async-signal-safe things: it sets the signal's bit in the
//! subscription's pending mask and sends one byte into the pipe. The task, woken by the
//! poller, drains the pipe, takes the mask and sends each signal on the channel unless one of
//! its kind waits there still (signals coalesce, as the OS merges a signal raised while it is
//! pending). No thread per signal or per subscription. `design/NETPOLL.md` ("Signals") has the rules.

mod default;
mod kind;

pub use kind::Signal;

use crate::io::{Dir, Io};
use gort_chan::{Receiver, RecvHook, TimerSender, TrySendError};
use signal_hook_registry::SigId;
use std::io::{self, Read};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::SeqCst};
use std::sync::{Arc, Mutex};

/// The highest signal number a subscription's mask holds (Linux's `SIGRTMAX`).
const MAX_SIGNAL: libc::c_int = 64;

/// Starts delivering the listed signals to the returned channel (Go's `signal.Notify`),
/// until the last receiver is dropped (Go's `signal.Stop`) or the runtime shuts down (the
/// channel then closes: `recv` gives `None`). While a receiver lives, the signals' default
/// actions (terminating the process on `SIGINT` or `SIGTERM`) do not happen; once no
/// receiver listens for a signal any more, its default action is back, as in Go.
///
/// The channel has one slot per listed signal, and a signal raised again while one of its
/// kind waits in the channel is merged with it (as the OS merges a signal raised again while
/// pending): every listed signal always finds room, so a storm of one (`SIGCHLD`) never
/// crowds out another (`SIGTERM`), and a signal raised at any time is followed by a receive
/// of it. Every receiver gets every signal it asked for: several `notify` calls may listen
/// for the same signal.
///
/// # Errors
///
/// `InvalidInput` for an empty list, or a signal that cannot be caught (`SIGKILL`,
/// `SIGSTOP`) or must not be (`SIGSEGV`, `SIGILL`, `SIGFPE`) or is not a signal number;
/// an error outside a gort runtime, or the OS's.
///
/// # Examples
///
/// ```
/// use gort::signal::{self, Signal};
///
/// gort::Runtime::new().unwrap().block_on(async {
///     let signals = signal::notify(&[Signal::HANGUP, Signal::USER_DEFINED1]).unwrap();
///     // SAFETY: raise only sends a signal to this process, which now handles it.
///     unsafe { libc::raise(libc::SIGUSR1) };
///     assert_eq!(signals.recv().await, Some(Signal::USER_DEFINED1));
/// });
/// ```
pub fn notify(signals: &[Signal]) -> io::Result<Receiver<Signal>> {
    let mask = mask_of(signals)?;
    let (wake, read) = mio::net::UnixStream::pair()?;
    // A background descriptor: a task waiting for a signal does not hold a paused clock.
    let io = Io::new_background(read)?; // fails outside a runtime, before anything is registered
    let sub = Arc::new(Subscription {
        pending: AtomicU64::new(0),
        wake,
        ids: Mutex::new(Vec::new()),
        listening: AtomicU64::new(0),
        stopped: AtomicBool::new(false),
    });
    if let Err(e) = sub.register(mask) {
        sub.stop();
        return Err(e);
    }
    let hook = Arc::new(ReceiverGone(sub.clone()));
    let (tx, rx) = gort_chan::bounded_with_hook(mask.count_ones() as usize, hook);
    gort_sched::spawn(deliver(io, sub, tx, mask.count_ones() as usize));
    Ok(rx)
}

/// Waits for a Ctrl-C (`SIGINT`; tokio's `ctrl_c`). It listens from its first poll until it
/// returns; a Ctrl-C outside that window has its default action (the process ends) unless
/// some [`notify`] listens for `SIGINT`.
///
/// # Errors
///
/// As [`notify`]'s; or the runtime shut down while waiting.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
///
/// gort::Runtime::new().unwrap().block_on(async {
///     // Listening for SIGINT all along: a Ctrl-C raised before the task below listens does
///     // not end the process.
///     let _all_along = gort::signal::notify(&[gort::signal::Signal::INTERRUPT]).unwrap();
///     let ctrl_c = gort::spawn(gort::signal::ctrl_c());
///     while !ctrl_c.is_finished() {
///         // SAFETY: raise only sends a signal to this process, which handles SIGINT now.
///         unsafe { libc::raise(libc::SIGINT) }; // a Ctrl-C
///         gort::time::sleep(Duration::from_millis(10)).await;
///     }
///     ctrl_c.await.unwrap().unwrap();
/// });
/// ```
pub async fn ctrl_c() -> io::Result<()> {
    let signals = notify(&[Signal::INTERRUPT])?;
    match signals.recv().await {
        Some(_) => Ok(()),
        None => Err(io::Error::other(
            "gort::signal::ctrl_c: the runtime shut down while waiting",
        )),
    }
}

/// The mask of `signals` (bit `n - 1` for signal `n`), or why one cannot be listened for.
fn mask_of(signals: &[Signal]) -> io::Result<u64> {
    let invalid = |what: String| io::Error::new(io::ErrorKind::InvalidInput, what);
    if signals.is_empty() {
        return Err(invalid(
            "gort::signal::notify: no signal to listen for".into(),
        ));
    }
    let mut mask = 0;
    for &s in signals {
        let n = s.as_raw();
        if !(1..=MAX_SIGNAL).contains(&n) || signal_hook_registry::FORBIDDEN.contains(&n) {
            return Err(invalid(format!(
                "gort::signal::notify: {s:?} cannot be listened for"
            )));
        }
        mask |= 1u64 << (n - 1);
    }
    Ok(mask)
}

/// The signals one [`notify`] listens for, as its handler actions and its task see them.
struct Subscription {
    /// Bit `n - 1` is set by signal `n`'s action and taken by the delivering task.
    pending: AtomicU64,
    /// The pipe's write end: each action sends a byte, which wakes the task through the
    /// poller.
    wake: mio::net::UnixStream,
    /// The actions, unregistered by the first [`stop`](Subscription::stop).
    ids: Mutex<Vec<SigId>>,
    /// The signals counted as listened for (`default::listening`), uncounted by `stop`.
    listening: AtomicU64,
    /// Set by `stop`: the task ends.
    stopped: AtomicBool,
}

impl Subscription {
    /// Registers an action for each signal of `mask`.
    fn register(self: &Arc<Self>, mask: u64) -> io::Result<()> {
        let mut bits = mask;
        while bits != 0 {
            let signum = bits.trailing_zeros() as libc::c_int + 1;
            bits &= bits - 1;
            default::listening(signum);
            self.listening.fetch_or(1 << (signum - 1), SeqCst);
            let sub = self.clone();
            // SAFETY: the action is async-signal-safe: an atomic `fetch_or` and a `send(2)`
            // (on POSIX's list); it allocates nothing and takes no lock. The descriptor it
            // writes to stays open while the action is registered: `sub` owns it, and
            // `unregister` (in `stop`) waits for running handlers before it drops the action.
            let id = unsafe { signal_hook_registry::register(signum, move || sub.raise(signum)) }?;
            self.ids.lock().unwrap_or_else(|e| e.into_inner()).push(id);
        }
        Ok(())
    }

    /// From a signal handler: marks `signum` pending and wakes the task.
    fn raise(&self, signum: libc::c_int) {
        self.pending.fetch_or(1 << (signum - 1), SeqCst);
        self.wake_task();
    }

    /// Sends a byte into the pipe (async-signal-safe). A full pipe already holds a wake-up.
    fn wake_task(&self) {
        let byte = 1u8;
        let flags = libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL;
        let fd = self.wake.as_raw_fd();
        // SAFETY: `byte` is valid for reads of 1 byte; `fd` is the open write end `self` owns.
        unsafe { libc::send(fd, (&byte as *const u8).cast(), 1, flags) };
    }

    /// Unregisters every action (after it returns, no handler touches this subscription),
    /// gives the signals' default actions back if nobody else listens, and ends the task.
    fn stop(&self) {
        let ids = std::mem::take(&mut *self.ids.lock().unwrap_or_else(|e| e.into_inner()));
        for id in ids {
            signal_hook_registry::unregister(id);
        }
        let mut bits = self.listening.swap(0, SeqCst);
        while bits != 0 {
            default::stopped_listening(bits.trailing_zeros() as libc::c_int + 1);
            bits &= bits - 1;
        }
        self.stopped.store(true, SeqCst);
        self.wake_task();
    }
}

/// The channel's hook: its last receiver gone, the subscription stops (Go's `Stop`).
struct ReceiverGone(Arc<Subscription>);

impl RecvHook for ReceiverGone {
    fn before_recv(&self) {}
    fn parked(self: Arc<Self>) {}
    fn unparked(self: Arc<Self>) {}
    fn last_receiver_dropped(&self) {
        self.0.stop();
    }
}

/// Stops the subscription when the delivering task ends or is dropped (runtime shutdown).
struct StopOnDrop(Arc<Subscription>);

impl Drop for StopOnDrop {
    fn drop(&mut self) {
        self.0.stop();
    }
}

/// The delivering task: waits for the pipe, then sends each pending signal.
async fn deliver(
    io: Io<mio::net::UnixStream>,
    sub: Arc<Subscription>,
    tx: TimerSender<Signal>,
    listed: usize,
) {
    let _stop = StopOnDrop(sub.clone());
    let mut buf = [0u8; 64];
    let mut sent = Sent::new(listed);
    loop {
        if io.op(Dir::Read, |s| drain(s, &mut buf)).await.is_err() {
            return;
        }
        if sub.stopped.load(SeqCst) {
            return;
        }
        // After the drain: a signal whose byte was drained has its bit set already (the
        // action sets it before it sends), and a later one sends a byte of its own.
        let mut bits = sub.pending.swap(0, SeqCst);
        while bits != 0 {
            let signal = Signal::from_raw(bits.trailing_zeros() as libc::c_int + 1);
            bits &= bits - 1;
            if sent.waits_in(&tx, signal) {
                continue; // merged with the one the receiver has yet to take
            }
            match tx.try_send(signal) {
                Ok(()) => sent.push(signal),
                Err(TrySendError::Closed(_)) => return,
                // Only past values that dropped receive futures put back (beyond the
                // capacity): dropped, as Go's `Notify` drops a signal it cannot send.
                Err(TrySendError::Full(_)) => {}
            }
        }
    }
}

/// The last signals the delivering task sent, as many as the channel holds: since the task
/// is the channel's only sender and the channel is FIFO (a dropped receive future puts its
/// value back), the values the channel holds are the last `tx.len()` sent.
struct Sent {
    last: std::collections::VecDeque<Signal>,
    cap: usize,
}

impl Sent {
    fn new(cap: usize) -> Sent {
        Sent {
            last: std::collections::VecDeque::with_capacity(cap),
            cap,
        }
    }

    /// Whether `signal` waits in the channel, not yet received. Without this check, a signal
    /// raised in several wake-ups filled every slot and the channel dropped the other
    /// listed signals (`tests/abuse_signal.rs`). A receive that takes it right after the
    /// check still comes after the raise being merged: nothing is lost. (Inexact only when
    /// two receive futures run at once and one that was handed a signal is dropped, putting
    /// it back, after the other took a later one: the channel then holds a set that is not
    /// the last sent, and a raise may be merged into a signal already taken.)
    fn waits_in(&self, tx: &TimerSender<Signal>, signal: Signal) -> bool {
        let held = tx.len().min(self.last.len());
        self.last.iter().rev().take(held).any(|&s| s == signal)
    }

    fn push(&mut self, signal: Signal) {
        if self.last.len() == self.cap {
            self.last.pop_front();
        }
        self.last.push_back(signal);
    }
}

/// Reads the pipe empty: `WouldBlock` if it held nothing (the task then waits for it).
fn drain(mut pipe: &mio::net::UnixStream, buf: &mut [u8]) -> io::Result<()> {
    let mut read_any = false;
    loop {
        match pipe.read(buf) {
            Ok(0) => return Err(io::ErrorKind::UnexpectedEof.into()),
            Ok(_) => read_any = true,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock && read_any => return Ok(()),
            Err(e) => return Err(e),
        }
    }
}
