//! `#[gort::main]` and `#[gort::test]`: run an `async fn` on a fresh gort runtime.
//!
//! Both accept the optional arguments `procs = N` (the runtime's number of Ps,
//! `1..=MAX_PROCS`), `start_paused = true` (a paused clock: `Builder::start_paused`) and
//! `crate = "PATH"` (where gort is when not at `::gort`: a renamed dependency, a re-export;
//! Tokio's `crate` argument).
//! The function keeps its return type: `main` may return anything a plain `fn main` may (any
//! `T: Termination`, e.g. `Result<(), E>`), a test `()` or `Result<(), E>`; other attributes
//! (`#[should_panic]`, `#[ignore]`, ...) stay on the generated function.

use proc_macro::TokenStream;

mod expand;

/// Runs `async fn main` on a gort runtime, which is dropped when `main` returns.
///
/// When `main` returns (or panics) the runtime is dropped, waiting at most one second for
/// threads still busy (a blocking closure, a task in `block_in_place`); those are abandoned
/// and end with the process, as goroutines do when a Go program's `main` returns.
///
/// ```ignore
/// #[gort::main]
/// async fn main() -> Result<(), std::num::ParseIntError> {
///     gort::time::sleep(std::time::Duration::from_millis(1)).await;
///     let n: u32 = "42".parse()?;
///     assert_eq!(n, 42);
///     Ok(())
/// }
/// ```
///
/// `#[gort::main(procs = 4)]` sets the number of Ps (without it, the `GORT_MAXPROCS`
/// environment variable does, else one P per CPU: `gort::Builder::new`); `start_paused = true` starts the
/// runtime with a paused clock (`gort::Builder::start_paused`); `crate = "PATH"` names where gort
/// is when it is not at `::gort` (`gort` renamed in `Cargo.toml`, or re-exported by a crate
/// of one's own: `#[my_facade::gort::main(crate = "my_facade::gort")]`). A bad argument, a `procs` outside
/// `1..=gort::MAX_PROCS`, a non-`async` function or one with parameters is a compile error.
#[proc_macro_attribute]
pub fn main(args: TokenStream, item: TokenStream) -> TokenStream {
    expand::expand(args.into(), item.into(), expand::Kind::Main).into()
}

/// Runs an `async fn` test on a fresh gort runtime (dropped when the test ends).
///
/// A test that passes waits, as it drops its runtime, for every thread still busy; one that
/// fails (panics, or returns an `Err`) waits at most one second for them (a blocking closure
/// or a task that never yields, waiting for an end of the test that the failure skipped),
/// then fails, rather than hang.
///
/// ```ignore
/// #[gort::test(procs = 2)]
/// async fn adds() -> Result<(), String> {
///     assert_eq!(gort::spawn(async { 1 + 1 }).await.unwrap(), 2);
///     Ok(())
/// }
/// ```
///
/// It takes the same arguments as [`main`](macro@main). With `start_paused = true` the
/// test's clock is paused: time-dependent code runs hours of virtual time in microseconds.
///
/// ```ignore
/// #[gort::test(start_paused = true)]
/// async fn an_hour_passes_at_once() {
///     let start = gort::time::Instant::now();
///     gort::time::sleep(std::time::Duration::from_secs(3600)).await;
///     assert_eq!(start.elapsed(), std::time::Duration::from_secs(3600));
/// }
/// ```
#[proc_macro_attribute]
pub fn test(args: TokenStream, item: TokenStream) -> TokenStream {
    expand::expand(args.into(), item.into(), expand::Kind::Test).into()
}
