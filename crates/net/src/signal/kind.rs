//! `Signal`: a Unix signal number with Go's names (`syscall.Signal`).

use std::fmt;

/// A Unix signal (Go's `os.Signal` / `syscall.Signal`), what [`notify`](crate::signal::notify)
/// listens for and delivers. Its `Display` is Go's name (`interrupt`, `terminated`, ...).
///
/// # Examples
///
/// ```
/// use gort::signal::Signal;
///
/// assert_eq!(Signal::INTERRUPT.as_raw(), libc::SIGINT);
/// assert_eq!(Signal::from_raw(libc::SIGTERM), Signal::TERMINATE);
/// assert_eq!(Signal::TERMINATE.to_string(), "terminated"); // as Go prints syscall.SIGTERM
/// assert_eq!(Signal::from_raw(libc::SIGKILL).to_string(), "killed");
/// assert_eq!(Signal::from_raw(libc::SIGRTMIN() + 1).to_string(), format!("signal {}", libc::SIGRTMIN() + 1));
/// ```
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Signal(libc::c_int);

impl Signal {
    /// `SIGHUP`: the terminal hung up; by convention, "reload the configuration".
    pub const HANGUP: Signal = Signal(libc::SIGHUP);
    /// `SIGINT`: Ctrl-C at the terminal (Go's `os.Interrupt`).
    pub const INTERRUPT: Signal = Signal(libc::SIGINT);
    /// `SIGQUIT`: Ctrl-\ at the terminal.
    pub const QUIT: Signal = Signal(libc::SIGQUIT);
    /// `SIGTERM`: a polite request to stop (what `kill`, systemd and Kubernetes send).
    pub const TERMINATE: Signal = Signal(libc::SIGTERM);
    /// `SIGUSR1`: meaning defined by the program.
    pub const USER_DEFINED1: Signal = Signal(libc::SIGUSR1);
    /// `SIGUSR2`: meaning defined by the program.
    pub const USER_DEFINED2: Signal = Signal(libc::SIGUSR2);
    /// `SIGPIPE`: a write to a pipe or socket nobody reads.
    pub const PIPE: Signal = Signal(libc::SIGPIPE);
    /// `SIGALRM`: an `alarm(2)` timer expired.
    pub const ALARM: Signal = Signal(libc::SIGALRM);
    /// `SIGCHLD`: a child process exited or stopped.
    pub const CHILD: Signal = Signal(libc::SIGCHLD);
    /// `SIGWINCH`: the terminal's window size changed.
    pub const WINDOW_CHANGE: Signal = Signal(libc::SIGWINCH);

    /// The signal with number `signum` (`libc::SIGINT`, a real-time signal, ...).
    pub const fn from_raw(signum: libc::c_int) -> Signal {
        Signal(signum)
    }

    /// The signal's number.
    pub const fn as_raw(self) -> libc::c_int {
        self.0
    }

    /// Go's name of the signal (`syscall.Signal.String` on Linux), if it has one here.
    fn name(self) -> Option<&'static str> {
        Some(match self.0 {
            libc::SIGHUP => "hangup",
            libc::SIGINT => "interrupt",
            libc::SIGQUIT => "quit",
            libc::SIGILL => "illegal instruction",
            libc::SIGTRAP => "trace/breakpoint trap",
            libc::SIGABRT => "aborted",
            libc::SIGBUS => "bus error",
            libc::SIGFPE => "floating point exception",
            libc::SIGKILL => "killed",
            libc::SIGUSR1 => "user defined signal 1",
            libc::SIGSEGV => "segmentation fault",
            libc::SIGUSR2 => "user defined signal 2",
            libc::SIGPIPE => "broken pipe",
            libc::SIGALRM => "alarm clock",
            libc::SIGTERM => "terminated",
            libc::SIGSTKFLT => "stack fault",
            libc::SIGCHLD => "child exited",
            libc::SIGCONT => "continued",
            libc::SIGSTOP => "stopped (signal)",
            libc::SIGTSTP => "stopped",
            libc::SIGTTIN => "stopped (tty input)",
            libc::SIGTTOU => "stopped (tty output)",
            libc::SIGURG => "urgent I/O condition",
            libc::SIGXCPU => "CPU time limit exceeded",
            libc::SIGXFSZ => "file size limit exceeded",
            libc::SIGVTALRM => "virtual timer expired",
            libc::SIGPROF => "profiling timer expired",
            libc::SIGWINCH => "window changed",
            libc::SIGIO => "I/O possible",
            libc::SIGPWR => "power failure",
            libc::SIGSYS => "bad system call",
            _ => return None,
        })
    }
}

impl fmt::Display for Signal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.name() {
            Some(name) => f.write_str(name),
            None => write!(f, "signal {}", self.0),
        }
    }
}

impl fmt::Debug for Signal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Signal({}: {self})", self.0)
    }
}
