//! The Builder's thread options, observed from the threads themselves: names, stack size,
//! start/stop hooks, the blocking pool's cap and keep-alive.

use gort::Builder;
use std::collections::HashSet;
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

fn thread_name() -> Option<String> {
    std::thread::current().name().map(String::from)
}

/// Waits (generously: the machine may be loaded) until `done` holds.
fn eventually(what: &str, done: impl Fn() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !done() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(5));
    }
}

#[test]
fn default_names_tell_workers_from_blocking_threads() {
    let rt = Builder::new().procs(1).build().unwrap();
    let worker = rt
        .block_on(rt.spawn(async { thread_name() }))
        .unwrap()
        .unwrap();
    let blocking = rt.block_on(rt.spawn_blocking(thread_name)).unwrap();
    assert!(worker.starts_with("gort-m"), "{worker}");
    assert_eq!(blocking.as_deref(), Some("gort-blocking"));
}

#[test]
fn thread_name_names_workers_and_blocking_threads() {
    let rt = Builder::new().procs(2).thread_name("svc").build().unwrap();
    let worker = rt.block_on(rt.spawn(async { thread_name() })).unwrap();
    let blocking = rt.block_on(rt.spawn_blocking(thread_name)).unwrap();
    assert_eq!(
        (worker.as_deref(), blocking.as_deref()),
        (Some("svc"), Some("svc"))
    );
}

#[test]
fn thread_name_fn_is_called_for_each_new_thread() {
    let calls = Arc::new(AtomicUsize::new(0));
    let counter = calls.clone();
    let rt = Builder::new()
        .procs(2)
        .thread_name_fn(move || format!("pool-{}", counter.fetch_add(1, SeqCst)))
        .build()
        .unwrap();
    let a = rt
        .block_on(rt.spawn(async { thread_name() }))
        .unwrap()
        .unwrap();
    let b = rt
        .block_on(rt.spawn_blocking(thread_name))
        .unwrap()
        .unwrap();
    assert!(
        a.starts_with("pool-") && b.starts_with("pool-") && a != b,
        "{a} {b}"
    );
    assert!(calls.load(SeqCst) >= 2);
}

#[test]
fn thread_stack_size_lets_tasks_use_a_deep_stack() {
    let rt = Builder::new()
        .procs(1)
        .thread_stack_size(32 << 20)
        .build()
        .unwrap();
    // 8 MiB on the stack: beyond the 2 MiB a thread gets by default.
    let deep = || std::hint::black_box([3u8; 8 << 20])[12345];
    assert_eq!(rt.block_on(rt.spawn(async move { deep() })).unwrap(), 3);
    assert_eq!(rt.block_on(rt.spawn_blocking(deep)).unwrap(), 3);
}

#[test]
fn start_and_stop_hooks_run_once_per_thread_on_that_thread() {
    let started = Arc::new(Mutex::new(Vec::new()));
    let stopped = Arc::new(Mutex::new(Vec::new()));
    let (s, t) = (started.clone(), stopped.clone());
    let rt = Builder::new()
        .procs(2)
        .thread_name("hooked")
        .on_thread_start(move || {
            // Recorded, not asserted here: a hook's panic is caught.
            let in_runtime = gort::Handle::try_current().is_ok();
            s.lock()
                .unwrap()
                .push((thread_name(), std::thread::current().id(), in_runtime))
        })
        .on_thread_stop(move || t.lock().unwrap().push(std::thread::current().id()))
        .build()
        .unwrap();
    let mut seen = HashSet::new();
    for _ in 0..20 {
        seen.insert(
            rt.block_on(rt.spawn(async { std::thread::current().id() }))
                .unwrap(),
        );
        seen.insert(
            rt.block_on(rt.spawn_blocking(|| std::thread::current().id()))
                .unwrap(),
        );
    }
    let starts = started.lock().unwrap().clone();
    let start_ids: HashSet<_> = starts.iter().map(|(_, id, _)| *id).collect();
    assert_eq!(start_ids.len(), starts.len(), "a thread started twice");
    assert!(
        seen.is_subset(&start_ids),
        "a thread ran work before its start hook"
    );
    assert!(starts
        .iter()
        .all(|(name, _, _)| name.as_deref() == Some("hooked")));
    // The hooks run in the runtime's context (as Tokio's).
    assert!(starts.iter().all(|(_, _, in_runtime)| *in_runtime));
    drop(rt);
    // Each started thread stops once (the hook may run just after `drop` returned). The
    // starts are read again: an M may have started after the snapshot above (a spinning M
    // woken by the last spawn), and its start must be counted against its stop.
    eventually("every stop hook", || {
        stopped.lock().unwrap().len() >= started.lock().unwrap().len()
    });
    let starts = started.lock().unwrap().clone();
    let start_ids: HashSet<_> = starts.iter().map(|(_, id, _)| *id).collect();
    assert_eq!(start_ids.len(), starts.len(), "a thread started twice");
    let stops = stopped.lock().unwrap().clone();
    assert_eq!(stops.iter().copied().collect::<HashSet<_>>(), start_ids);
    assert_eq!(stops.len(), starts.len(), "a thread stopped twice");
}

/// A panicking hook is user code: it must not take a worker down (with one P, a dead M
/// would leave every task unrun) nor hang the shutdown.
#[test]
fn panicking_hooks_do_not_kill_the_runtime() {
    let rt = Builder::new()
        .procs(1)
        .on_thread_start(|| panic!("start hook"))
        .on_thread_stop(|| panic!("stop hook"))
        .build()
        .unwrap();
    assert_eq!(rt.block_on(rt.spawn(async { 1 })).unwrap(), 1);
    assert_eq!(rt.block_on(rt.spawn_blocking(|| 2)).unwrap(), 2);
    assert_eq!(rt.metrics().task_panics, 0);
    drop(rt);
}

#[test]
fn max_blocking_threads_caps_the_pool() {
    let rt = Builder::new()
        .procs(1)
        .max_blocking_threads(2)
        .build()
        .unwrap();
    let running = Arc::new(AtomicUsize::new(0));
    let peak = Arc::new(AtomicUsize::new(0));
    let handles: Vec<_> = (0..8)
        .map(|_| {
            let (running, peak) = (running.clone(), peak.clone());
            rt.spawn_blocking(move || {
                let now = running.fetch_add(1, SeqCst) + 1;
                peak.fetch_max(now, SeqCst);
                std::thread::sleep(Duration::from_millis(20));
                running.fetch_sub(1, SeqCst);
                std::thread::current().id()
            })
        })
        .collect();
    let threads: HashSet<_> = handles
        .into_iter()
        .map(|h| rt.block_on(h).unwrap())
        .collect();
    assert!(peak.load(SeqCst) <= 2, "peak {}", peak.load(SeqCst));
    assert!(threads.len() <= 2, "{} threads", threads.len());
}

#[test]
fn max_blocking_threads_zero_is_refused_with_a_message() {
    let err = std::panic::catch_unwind(|| {
        Builder::new().max_blocking_threads(0);
    })
    .unwrap_err();
    let msg = err
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| err.downcast_ref::<String>().cloned())
        .unwrap_or_default();
    assert!(msg.contains("max_blocking_threads(0)"), "{msg}");
}

/// With one pool thread, a thread that outlived its keep-alive is replaced by a new one;
/// within the keep-alive it is reused.
#[test]
fn thread_keep_alive_exits_idle_blocking_threads() {
    let stops = Arc::new(AtomicUsize::new(0));
    let counter = stops.clone();
    let rt = Builder::new()
        .procs(1)
        .max_blocking_threads(1)
        .thread_name("keep")
        .thread_keep_alive(Duration::from_millis(50))
        .on_thread_stop(move || {
            if thread_name().as_deref() == Some("keep") {
                counter.fetch_add(1, SeqCst);
            }
        })
        .build()
        .unwrap();
    let first = rt
        .block_on(rt.spawn_blocking(|| std::thread::current().id()))
        .unwrap();
    eventually("the idle blocking thread to exit", || {
        stops.load(SeqCst) >= 1
    });
    let second = rt
        .block_on(rt.spawn_blocking(|| std::thread::current().id()))
        .unwrap();
    assert_ne!(first, second);

    let rt = Builder::new()
        .procs(1)
        .max_blocking_threads(1)
        .thread_keep_alive(Duration::from_secs(3600))
        .build()
        .unwrap();
    let a = rt
        .block_on(rt.spawn_blocking(|| std::thread::current().id()))
        .unwrap();
    std::thread::sleep(Duration::from_millis(100));
    let b = rt
        .block_on(rt.spawn_blocking(|| std::thread::current().id()))
        .unwrap();
    assert_eq!(a, b);
}

#[test]
fn setters_chain_on_a_mut_builder_and_build_borrows_it() {
    let mut builder = Builder::new();
    builder
        .procs(1)
        .thread_name("x")
        .thread_stack_size(1 << 20)
        .max_blocking_threads(4)
        .thread_keep_alive(Duration::from_secs(1));
    let a = builder.build().unwrap();
    let b = builder.build().unwrap();
    assert_eq!((a.procs(), b.procs()), (1, 1));
    assert!(format!("{builder:?}").contains("max_blocking: 4"));
}
