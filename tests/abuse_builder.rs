//! The user code a `Builder` hands the runtime, misbehaving: a thread-name function that
//! panics, start and stop hooks that panic, block, spawn or block on the runtime, a stack
//! size no thread can get. The rule: no hang and no abort; the runtime runs its tasks or
//! fails with a clear error.

mod support;

use support::{panic_text, within, WATCHDOG};

use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::Arc;
use std::time::Duration;

/// Runs a little of everything: tasks on every P, timers, blocking closures.
fn workload(rt: &gort::Runtime) -> u64 {
    rt.block_on(async {
        let mut set = gort::JoinSet::new();
        for i in 0..50u64 {
            set.spawn(async move {
                gort::time::sleep(Duration::from_micros(i * 20)).await;
                gort::spawn_blocking(move || i).await.unwrap()
            });
        }
        let mut sum = 0;
        while let Some(r) = set.join_next().await {
            sum += r.unwrap();
        }
        sum
    })
}

#[test]
fn a_thread_name_function_that_panics_sometimes_or_always() {
    within(|| {
        for every in [1usize, 3] {
            let calls = Arc::new(AtomicUsize::new(0));
            let c = calls.clone();
            let rt = gort::Builder::new()
                .procs(2)
                .thread_name_fn(move || {
                    if c.fetch_add(1, SeqCst) % every == 0 {
                        panic!("test: this thread name function panics");
                    }
                    "named".to_string()
                })
                .build()
                .unwrap();
            let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| workload(&rt)));
            if let Ok(sum) = r {
                assert_eq!(sum, 49 * 50 / 2);
            }
            support::drop_within(rt, WATCHDOG, "the drop hung");
        }
    });
}

#[test]
fn start_and_stop_hooks_that_panic_block_spawn_and_block_on() {
    within(|| {
        let rt = gort::Builder::new()
            .procs(2)
            .on_thread_start(|| {
                drop(gort::spawn(async {}));
                let r = std::panic::catch_unwind(|| gort::Handle::current().block_on(async { 1 }));
                let _ = r;
                std::thread::sleep(Duration::from_millis(2));
                panic!("test: this start hook panics");
            })
            .on_thread_stop(|| {
                drop(gort::spawn(async {}));
                std::thread::sleep(Duration::from_millis(2));
                panic!("test: this stop hook panics");
            })
            .thread_keep_alive(Duration::from_millis(1))
            .build()
            .unwrap();
        assert_eq!(workload(&rt), 49 * 50 / 2);
        std::thread::sleep(Duration::from_millis(20)); // idle blocking threads exit
        assert_eq!(workload(&rt), 49 * 50 / 2);
        drop(rt);
    });
}

#[test]
fn a_stack_size_no_thread_can_get_fails_clearly() {
    within(|| {
        let rt = gort::Builder::new()
            .procs(1)
            .thread_stack_size(usize::MAX / 2)
            .build();
        let Ok(rt) = rt else { return };
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            rt.block_on(rt.spawn(async { 1 })).unwrap()
        }));
        if let Err(p) = r {
            let msg = p
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_default();
            assert!(msg.contains("thread"), "unclear: {msg:?}");
        }
        drop(rt);
    });
}

/// The name function ran under the blocking pool's lock: one that spawns a blocking closure
/// (user code may do anything) deadlocked on that lock.
#[test]
fn a_thread_name_function_that_spawns_blocking_closures() {
    within(|| {
        let calls = Arc::new(AtomicUsize::new(0));
        let c = calls.clone();
        let rt = gort::Builder::new()
            .procs(2)
            .max_blocking_threads(4)
            .thread_name_fn(move || {
                if c.fetch_add(1, SeqCst) < 3 {
                    if let Ok(h) = gort::runtime::Handle::try_current() {
                        drop(h.spawn_blocking(|| ()));
                        drop(h.spawn(async {}));
                    }
                }
                "named".to_string()
            })
            .build()
            .unwrap();
        assert_eq!(workload(&rt), 49 * 50 / 2);
        drop(rt);
    });
}

/// std's thread builder panics on a name with a NUL byte; gort passed on what the user gave,
/// so that panic unwound through the code that starts Ms and blocking threads, with the M
/// counted: the runtime's drop then waited for ever (this test hung before).
#[test]
fn a_thread_name_with_a_nul_byte_is_refused_at_once() {
    let r = std::panic::catch_unwind(|| {
        gort::Builder::new().thread_name("a\0b");
    });
    let msg = panic_text(&*r.unwrap_err());
    assert!(msg.contains("NUL"), "unclear: {msg:?}");
}

/// A name function's name with a NUL byte is as one that panicked: the default name.
#[test]
fn a_name_function_giving_a_nul_byte_leaves_the_default_name() {
    within(|| {
        let calls = Arc::new(AtomicUsize::new(0));
        let c = calls.clone();
        let rt = gort::Builder::new()
            .procs(2)
            .thread_name_fn(move || {
                c.fetch_add(1, SeqCst);
                "bad\0name".into()
            })
            .build()
            .unwrap();
        let (m, b) = rt.block_on(async {
            let name = || std::thread::current().name().map(String::from);
            let m = gort::spawn(async move { name() }).await.unwrap();
            let b = gort::spawn_blocking(name).await.unwrap();
            (m, b)
        });
        assert!(calls.load(SeqCst) >= 1);
        assert!(
            m.as_deref().is_some_and(|m| m.starts_with("gort-m")),
            "{m:?}"
        );
        assert_eq!(b.as_deref(), Some("gort-blocking"));
        support::drop_within(rt, WATCHDOG, "the drop hung");
    });
}
