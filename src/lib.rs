//! # gort
//!
//! Green tasks on a Go-style G/M/P work-stealing scheduler, with Go's per-P timer heaps, Go's
//! `time` package (with Go 1.23's guarantees), and Go-like channels with `select!`.
//!
//! ```
//! use std::time::Duration;
//!
//! let rt = gort::Runtime::new().unwrap();
//! rt.block_on(async {
//!     let (tx, rx) = gort::chan::bounded(1);
//!     gort::spawn(async move {
//!         gort::time::sleep(Duration::from_millis(5)).await;
//!         tx.send("done").await.unwrap();
//!     });
//!     let timeout = gort::time::after(Duration::from_secs(5));
//!     gort::select! {
//!         v = rx.recv() => assert_eq!(v, Some("done")),
//!         _ = timeout.recv() => panic!("timed out"),
//!     }
//! });
//! ```
//!
//! The crates behind it: `gort-sched` (tasks, Ps, Ms, poller), `gort-timer` (per-P timer
//! heaps and their state machine), `gort-time` (this crate's [`time`] module), `gort-chan`
//! ([`chan`] and [`select!`]), `gort-net` ([`net`]: TCP and UDP on the netpoller). `design/ARCHITECTURE.md` and `design/TIMERS.md` explain them.

#![warn(missing_docs)]

pub use gort_sched::{
    block_in_place, spawn, spawn_blocking, yield_now, Builder, JoinError, JoinHandle, Metrics,
    Runtime, MAX_PROCS,
};

pub use gort_macros::{main, test};

/// Go-like MPMC channels: bounded (0 = rendezvous) and unbounded, with `select!`.
pub mod chan {
    pub use gort_chan::*;
}

/// Go's `time` package: sleeps, timers, tickers, `after`, `after_func`, timeouts, intervals.
pub mod time {
    pub use gort_time::*;
}

/// Go's `net` package: TCP and UDP on the netpoller, with Go's deadlines on the per-P timers.
pub mod net {
    pub use gort_net::*;
}

pub use gort_chan::select;
