//! Go's `sync` primitives for tasks: [`WaitGroup`], [`ErrGroup`] (Go's
//! `golang.org/x/sync/errgroup`), and [`singleflight::Group`] (Go's
//! `golang.org/x/sync/singleflight`: concurrent calls for one key share one run of the work).
//!
//! Locks and condition-like waiting for async code are already done well by
//! runtime-agnostic crates (`tokio::sync`, `async-lock`), which work on gort unchanged (see
//! the README); this crate holds what Go programmers reach for and those crates lack.
//!
//! # Examples
//!
//! ```
//! let rt = gort::Runtime::new().unwrap();
//! rt.block_on(async {
//!     let wg = gort::sync::WaitGroup::new();
//!     for _ in 0..4 {
//!         wg.add(1);
//!         let wg = wg.clone();
//!         gort::spawn(async move {
//!             gort::time::sleep(std::time::Duration::from_millis(1)).await;
//!             wg.done();
//!         });
//!     }
//!     wg.wait().await;
//! });
//! ```

#![warn(missing_docs)]

mod err_group;
pub mod singleflight;
mod wait_group;
mod wait_group_go;

pub use crate::err_group::ErrGroup;
pub use crate::wait_group::WaitGroup;
