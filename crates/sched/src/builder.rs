//! The `Builder`'s thread options: names, stack size, start/stop hooks and the blocking
//! pool's limits, with Tokio's names and meanings.

use crate::runtime::Builder;
use std::sync::Arc;
use std::time::Duration;

impl Builder {
    /// Names every thread the runtime starts (workers and blocking threads) `name`. By
    /// default workers are `gort-m<n>` and blocking threads `gort-blocking`.
    ///
    /// # Examples
    ///
    /// ```
    /// let rt = gort::Builder::new().thread_name("app-worker").build().unwrap();
    /// let name = rt.block_on(rt.spawn(async {
    ///     std::thread::current().name().map(String::from)
    /// }));
    /// assert_eq!(name.unwrap().as_deref(), Some("app-worker"));
    /// ```
    ///
    /// # Panics
    ///
    /// If `name` contains a NUL byte (no OS thread can carry it).
    pub fn thread_name(&mut self, name: impl Into<String>) -> &mut Builder {
        let name: String = name.into();
        assert!(
            !name.contains('\0'),
            "gort: a thread name may not contain a NUL byte: {name:?}"
        );
        self.threads.name = Some(Arc::new(move || name.clone()));
        self
    }

    /// Names each new thread of the runtime by calling `f` (on the thread that starts it,
    /// under no lock of the runtime's: `f` may spawn). A panic in `f` is caught (after the
    /// panic hook reported it): that thread gets the default name, as it does when `f`
    /// returns a name with a NUL byte.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::atomic::{AtomicUsize, Ordering};
    /// static N: AtomicUsize = AtomicUsize::new(0);
    /// let rt = gort::Builder::new()
    ///     .thread_name_fn(|| format!("app-{}", N.fetch_add(1, Ordering::Relaxed)))
    ///     .build()
    ///     .unwrap();
    /// let name = rt.block_on(rt.spawn_blocking(|| std::thread::current().name().map(String::from)));
    /// assert!(name.unwrap().unwrap().starts_with("app-"));
    /// ```
    pub fn thread_name_fn<F>(&mut self, f: F) -> &mut Builder
    where
        F: Fn() -> String + Send + Sync + 'static,
    {
        self.threads.name = Some(Arc::new(f));
        self
    }

    /// Sets the stack size, in bytes, of every thread the runtime starts (by default,
    /// Rust's default for spawned threads: 2 MiB unless `RUST_MIN_STACK` says otherwise).
    ///
    /// # Examples
    ///
    /// ```
    /// let rt = gort::Builder::new().thread_stack_size(4 << 20).build().unwrap();
    /// // A task may now use up to 4 MiB of stack.
    /// let n = rt.block_on(rt.spawn(async { std::hint::black_box([1u8; 1 << 20])[7] }));
    /// assert_eq!(n.unwrap(), 1);
    /// ```
    pub fn thread_stack_size(&mut self, bytes: usize) -> &mut Builder {
        self.threads.stack_size = Some(bytes);
        self
    }

    /// Runs `f` on each thread the runtime starts (workers and blocking threads), before it
    /// does any work, in the runtime's context (`Handle::current` works there). A panic in
    /// `f` is caught (after the panic hook reported it): the
    /// thread goes on with its work.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::atomic::{AtomicUsize, Ordering};
    /// use std::sync::Arc;
    /// let started = Arc::new(AtomicUsize::new(0));
    /// let count = started.clone();
    /// let rt = gort::Builder::new()
    ///     .on_thread_start(move || {
    ///         count.fetch_add(1, Ordering::Relaxed);
    ///     })
    ///     .build()
    ///     .unwrap();
    /// rt.block_on(rt.spawn_blocking(|| ())).unwrap();
    /// assert!(started.load(Ordering::Relaxed) >= 1);
    /// ```
    pub fn on_thread_start<F>(&mut self, f: F) -> &mut Builder
    where
        F: Fn() + Send + Sync + 'static,
    {
        self.threads.on_start = Some(Arc::new(f));
        self
    }

    /// Runs `f` on each thread of the runtime just before it exits (a blocking thread idle
    /// for longer than [`thread_keep_alive`](Builder::thread_keep_alive), every thread at
    /// shutdown). It has run when the `Runtime`'s drop returns, except on threads the shutdown
    /// abandons past its deadline (`drop_timeout`, `shutdown_timeout`) and when the runtime is
    /// dropped on one of its own threads (its shutdown then goes on on another thread). A panic
    /// in `f` is caught.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::atomic::{AtomicUsize, Ordering};
    /// use std::sync::Arc;
    /// let stopped = Arc::new(AtomicUsize::new(0));
    /// let count = stopped.clone();
    /// let rt = gort::Builder::new()
    ///     .on_thread_stop(move || {
    ///         count.fetch_add(1, Ordering::Relaxed);
    ///     })
    ///     .build()
    ///     .unwrap();
    /// rt.block_on(rt.spawn(async {})).unwrap();
    /// drop(rt);
    /// ```
    pub fn on_thread_stop<F>(&mut self, f: F) -> &mut Builder
    where
        F: Fn() + Send + Sync + 'static,
    {
        self.threads.on_stop = Some(Arc::new(f));
        self
    }

    /// Caps the blocking pool at `n` threads (default 512, as Tokio's). Closures beyond
    /// that wait in a queue for a thread.
    ///
    /// # Panics
    ///
    /// If `n` is 0.
    ///
    /// # Examples
    ///
    /// ```
    /// let rt = gort::Builder::new().max_blocking_threads(1).build().unwrap();
    /// let a = rt.spawn_blocking(|| std::thread::current().id());
    /// let b = rt.spawn_blocking(|| std::thread::current().id());
    /// assert_eq!(rt.block_on(a).unwrap(), rt.block_on(b).unwrap());
    /// ```
    #[track_caller]
    pub fn max_blocking_threads(&mut self, n: usize) -> &mut Builder {
        assert!(
            n > 0,
            "gort: Builder::max_blocking_threads(0): the blocking pool needs at least 1 thread"
        );
        self.threads.max_blocking = n;
        self
    }

    /// How long an idle blocking thread waits for work before it exits (default 10 s, as
    /// Tokio's).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// let rt = gort::Builder::new()
    ///     .thread_keep_alive(Duration::from_millis(50))
    ///     .build()
    ///     .unwrap();
    /// rt.block_on(rt.spawn_blocking(|| ())).unwrap();
    /// ```
    pub fn thread_keep_alive(&mut self, keep_alive: Duration) -> &mut Builder {
        self.threads.keep_alive = keep_alive;
        self
    }

    /// Starts the runtime with its clock paused, as if its first task called
    /// `gort::time::pause()`: time moves only when the runtime is quiescent (it then jumps to
    /// the next deadline) or when a task calls `gort::time::advance`. For tests of
    /// time-dependent code; `#[gort::test(start_paused = true)]` sets it.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// let rt = gort::Builder::new().start_paused(true).build().unwrap();
    /// let slept = rt.block_on(async {
    ///     let start = gort::time::Instant::now();
    ///     gort::time::sleep(Duration::from_secs(3600)).await; // returns at once
    ///     gort::time::Instant::now() - start
    /// });
    /// assert_eq!(slept, Duration::from_secs(3600));
    /// ```
    pub fn start_paused(&mut self, paused: bool) -> &mut Builder {
        self.start_paused = paused;
        self
    }
}
