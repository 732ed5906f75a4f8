//! A one-shot text picture of the scheduler for hang reports (`Handle::debug_state`): what a
//! watchdog prints when a program stops making progress, so that a rare lost wake-up says
//! where the stranded task sits (which P's `runnext` or ring, the global queue) and what the
//! Ms believed (idle and spinning counts, the poller's deadline, sysmon parked).
//!
//! Every figure is a racy snapshot read without stopping the runtime; taken after seconds
//! without progress, they are stable.

use crate::handle::Handle;
use crate::p::PStatus;
use gort_timer::nanotime;
use std::fmt::Write;
use std::sync::atomic::Ordering::SeqCst;

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
}

/// An instant relative to `now` (0 = none).
fn rel(t: i64, now: i64) -> String {
    if t == 0 {
        "none".into()
    } else {
        format!("{:+.3} ms", (t - now) as f64 / 1e6)
    }
}
