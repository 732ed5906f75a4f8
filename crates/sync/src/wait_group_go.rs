//! [`WaitGroup::go`]: Go 1.25's `WaitGroup.Go`, the `add(1)` and the `defer wg.Done()` in one
//! call. Apart from `wait_group.rs` so that the loom model of the counter builds without the
//! scheduler.

use std::future::Future;

use gort_sched::JoinHandle;

use crate::WaitGroup;

impl WaitGroup {
    /// Counts a new task, spawns `future` as that task, and counts it done however it ends
    /// (Go 1.25's `WaitGroup.Go`): when it returns, panics, is aborted, or is dropped unrun
    /// by the runtime's shutdown. The `add(1)` comes before the spawn, as Go requires.
    ///
    /// The by-hand form, `wg.add(1); gort::spawn(async move { work().await; wg.done() })`,
    /// has no `defer`: a panic or an abort in `work` skips the `done`, and a `wait` (a
    /// server's graceful shutdown) waits for ever. Go's program would have died of the panic
    /// instead; here the task dies alone and the group still counts it.
    ///
    /// # Panics
    ///
    /// Outside a gort runtime, as [`gort::spawn`](gort_sched::spawn) (the counter is then
    /// left unchanged).
    ///
    /// # Examples
    ///
    /// ```
    /// let rt = gort::Runtime::new().unwrap();
    /// rt.block_on(async {
    ///     let wg = gort::sync::WaitGroup::new();
    ///     for conn in 0..3 {
    ///         wg.go(async move {
    ///             if conn == 1 {
    ///                 panic!("a handler's bug"); // its task dies; the group counts it done
    ///             }
    ///         });
    ///     }
    ///     wg.wait().await; // returns: no count is left behind by the panic
    /// });
    /// ```
    #[doc(alias = "Go")]
    #[track_caller]
    pub fn go<F>(&self, future: F) -> JoinHandle<F::Output>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        // Checked first, so that a spawn outside a runtime panics with the counter unchanged.
        gort_sched::Handle::current();
        self.add(1);
        let done = DoneOnDrop(self.clone());
        gort_sched::spawn(async move {
            let _done = done;
            future.await
        })
    }
}

/// Go's `defer wg.Done()`: counts the task done when its future is dropped, which happens
/// when it returns, unwinds, is aborted, or is dropped by the runtime.
struct DoneOnDrop(WaitGroup);

impl Drop for DoneOnDrop {
    fn drop(&mut self) {
        self.0.done();
    }
}
