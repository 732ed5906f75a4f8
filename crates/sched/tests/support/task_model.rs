// The real task module and the one piece of the scheduler it reaches for, shared by the loom
// models of task cells (`loom_task.rs`, `loom_join_set.rs`): `include!`d at a test's root.

#[allow(dead_code, unused_imports)]
#[path = "../../src/task/mod.rs"]
mod task;

/// What `task/` reaches for (the panic counters of callbacks and user code); unused here.
mod context {
    pub struct Shared {
        pub panics: std::sync::atomic::AtomicUsize,
        pub user_panics: std::sync::atomic::AtomicUsize,
    }
    pub fn with_current<R>(f: impl FnOnce(Option<&std::sync::Arc<Shared>>) -> R) -> R {
        f(None)
    }
}
