//! A one-shot text picture of the scheduler for hang reports (`Handle::debug_state`): what a
//! watchdog prints when a program stops making progress, so that a rare lost wake-up says
//! where the stranded task sits (which P's `runnext` or ring, the global queue) and what the
//! Ms believed (idle and spinning counts, the poller's deadline, sysmon parked).
//!
//! Every figure is a racy snapshot read without stopping the runtime; taken after seconds
//! without progress, they are stable.

use crate::handle::Handle;
use crate::p::PStatus;
use crate::shared::Shared;
use gort_timer::nanotime;
use parking_lot::Mutex;
use std::fmt::Write;
use std::sync::atomic::{AtomicU64, Ordering::SeqCst};
use std::sync::{Arc, Weak};

/// Every runtime built in this process, for [`Handle::debug_states`]; entries of dropped
/// runtimes are pruned at the next build. Touched only when a runtime is built and when a
/// watchdog reports, never on a scheduling path.
static BUILT: Mutex<Vec<(u64, Weak<Shared>)>> = Mutex::new(Vec::new());

/// Lists a runtime just built, so that a watchdog that knows no runtime can still report
/// every runtime's state.
pub(crate) fn note_built(shared: &Arc<Shared>) {
    static SERIAL: AtomicU64 = AtomicU64::new(0);
    let serial = SERIAL.fetch_add(1, SeqCst);
    let mut built = BUILT.lock();
    built.retain(|(_, w)| w.strong_count() > 0);
    built.push((serial, Arc::downgrade(shared)));
}

impl Handle {
    /// The scheduler's state as text, for hang reports: the idle and spinning counts, the
    /// poller, the global queue, and for every P its status, `runnext`, ring length, timer
    /// counts, earliest deadline and heap root (its key, its timer's status). Not a stable
    /// format; for people, not programs.
    ///
    /// # Examples
    ///
    /// ```
    /// let rt = gort::Builder::new().procs(1).build().unwrap();
    /// let hour = std::time::Duration::from_secs(3600);
    /// let _timer = rt.block_on(async move { gort::time::after_func(hour, || {}) });
    /// let state = rt.handle().debug_state();
    /// assert!(state.contains("p0 "), "{state}");
    /// assert!(state.contains("timers 1 (deleted 0)"), "{state}");
    /// // The root's key and status, unless an M held the heap's lock at that instant.
    /// assert!(state.contains("root +3599") || state.contains("root locked"), "{state}");
    /// ```
    #[doc(hidden)]
    pub fn debug_state(&self) -> String {
        let s = &self.shared;
        let now = nanotime();
        let (pidle, midle, sysmon_parked) = s.idle.debug_counts();
        let mut out = String::new();
        let _ = writeln!(
            out,
            "gort scheduler: procs {} npidle {} (listed {pidle}) nmspinning {} idle Ms {midle} \
             sysmon parked {sysmon_parked} global queue {} shutdown {}",
            s.nprocs(),
            s.idle.npidle(),
            s.idle.nmspinning(),
            s.global.len(),
            s.is_shutdown(),
        );
        let lastpoll = s.idle.lastpoll.load(SeqCst);
        let until = s.idle.poll_until.load(SeqCst);
        let _ = writeln!(
            out,
            "  poller: {} until {} poller spinner {}",
            if lastpoll == 0 { "blocked" } else { "free" },
            rel(until, now),
            s.idle.poller_spinner.load(SeqCst),
        );
        for p in s.all_ps() {
            let status = match p.status() {
                PStatus::Idle => "idle",
                PStatus::Running => "running",
                PStatus::Dead => "dead",
            };
            let _ = writeln!(
                out,
                "  p{} {status} runnext {} ring {} timers {} (deleted {}) earliest {} root {}",
                p.id,
                p.has_runnext(),
                p.stealer.len(),
                p.timers.len(),
                p.timers.deleted(),
                rel(p.timers.wake_time(), now),
                p.timers.debug_root(now),
            );
        }
        out
    }

    /// [`debug_state`](Handle::debug_state) of every runtime of this process not yet dropped
    /// (numbered in the order they were built), for a watchdog that knows no runtime: a
    /// test's hang report. Not a stable format; for people, not programs.
    ///
    /// # Examples
    ///
    /// ```
    /// let rt = gort::Builder::new().procs(1).build().unwrap();
    /// let states = gort::Handle::debug_states();
    /// assert!(states.starts_with("1 live gort runtime(s)"), "{states}");
    /// assert!(states.contains("runtime #0: gort scheduler: procs 1 "), "{states}");
    /// drop(rt);
    /// assert!(gort::Handle::debug_states().starts_with("0 live"));
    /// ```
    #[doc(hidden)]
    pub fn debug_states() -> String {
        // Upgraded first and formatted outside the list's lock: a runtime dropped meanwhile
        // is still whole, and no runtime lock is taken under this one.
        let live: Vec<(u64, Arc<Shared>)> = BUILT
            .lock()
            .iter()
            .filter_map(|(n, w)| Some((*n, w.upgrade()?)))
            .collect();
        let mut out = format!("{} live gort runtime(s)\n", live.len());
        for (n, shared) in live {
            let _ = write!(out, "runtime #{n}: {}", Handle::new(shared).debug_state());
        }
        out
    }
}

/// An instant relative to `now` (0 = none).
fn rel(t: i64, now: i64) -> String {
    if t == 0 {
        "none".into()
    } else {
        format!("{:+.3} ms", (t - now) as f64 / 1e6)
    }
}
