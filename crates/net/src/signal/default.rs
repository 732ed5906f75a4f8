//! A signal's default action, back once nobody listens for it (Go's `signal.Stop`).
//!
//! `signal-hook-registry` keeps its handler installed for good: with every action
//! unregistered, a `SIGINT` would do nothing. So the first subscription to a signal whose
//! default action ends the process, and which had that default when gort first saw it (not
//! ignored, not handled by someone else), also registers an action that, while no
//! subscription listens, does what the kernel would have done: it restores the default
//! disposition and raises the signal again, which ends the process when the handler returns.

use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::Once;

/// Per signal number: how many subscriptions listen, and whether the emulation was set up.
struct Slot {
    listeners: AtomicUsize,
    installed: Once,
}

static SLOTS: [Slot; 65] = [const {
    Slot {
        listeners: AtomicUsize::new(0),
        installed: Once::new(),
    }
}; 65];

/// A subscription starts listening for `signum` (before its action is registered).
pub(super) fn listening(signum: libc::c_int) {
    let slot = &SLOTS[signum as usize];
    slot.listeners.fetch_add(1, SeqCst);
    slot.installed.call_once(|| install(signum));
}

/// A subscription stopped listening for `signum` (after its action was unregistered).
pub(super) fn stopped_listening(signum: libc::c_int) {
    SLOTS[signum as usize].listeners.fetch_sub(1, SeqCst);
}

/// Registers the emulation for `signum` if its default action ends the process and it has
/// that default now (before `signal-hook-registry` installs its handler).
fn install(signum: libc::c_int) {
    if !ends_the_process(signum) || !has_default_disposition(signum) {
        return;
    }
    // SAFETY: the action is async-signal-safe: an atomic load, `sigaction` and `raise` (both
    // on POSIX's list); it allocates nothing and takes no lock.
    let _ = unsafe { signal_hook_registry::register(signum, move || emulate(signum)) };
}

/// From the signal handler: the kernel's default action, if nobody listens.
fn emulate(signum: libc::c_int) {
    if SLOTS[signum as usize].listeners.load(SeqCst) != 0 {
        return;
    }
    // SAFETY: a zeroed `sigaction` is a valid one (no flags, empty mask) and SIG_DFL is 0:
    // it restores the default. `raise` sends `signum` to this thread; it is blocked while its
    // handler runs, so it is delivered, with the default action, when the handler returns.
    unsafe {
        let default: libc::sigaction = std::mem::zeroed();
        libc::sigaction(signum, &default, std::ptr::null_mut());
        libc::raise(signum);
    }
}

/// Whether `signum`'s disposition is the default (`SIG_DFL`), read without changing it.
fn has_default_disposition(signum: libc::c_int) -> bool {
    // SAFETY: a zeroed `sigaction` is valid for the kernel to fill in; a null `act` only
    // reads the current disposition.
    unsafe {
        let mut current: libc::sigaction = std::mem::zeroed();
        libc::sigaction(signum, std::ptr::null(), &mut current) == 0
            && current.sa_sigaction == libc::SIG_DFL
    }
}

/// Whether the kernel's default action for `signum` ends the process (with or without a
/// core dump), as for all but the ignored (`SIGCHLD`, `SIGURG`, `SIGWINCH`), continuing
/// (`SIGCONT`) and stopping ones (`SIGTSTP`, `SIGTTIN`, `SIGTTOU`; re-raising those would
/// leave the default disposition in place of the registry's handler after the process
/// resumes).
fn ends_the_process(signum: libc::c_int) -> bool {
    ![
        libc::SIGCHLD,
        libc::SIGURG,
        libc::SIGWINCH,
        libc::SIGCONT,
        libc::SIGTSTP,
        libc::SIGTTIN,
        libc::SIGTTOU,
    ]
    .contains(&signum)
}
