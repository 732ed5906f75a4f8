//! Dropping a runtime returns only once its threads are gone: every M and blocking thread
//! has run its stop hook and exited, and the poller's descriptors, which the threads' last
//! references to the runtime keep open, are closed. A program that builds and drops
//! runtimes in a loop sees no thread or descriptor outlive each drop. One test per binary:
//! other tests would start threads meanwhile.
#![cfg(not(loom))]

use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::Arc;
use std::time::Duration;

fn count(dir: &str) -> usize {
    std::fs::read_dir(dir).unwrap().count()
}

#[test]
fn drop_waits_for_every_thread_to_exit() {
    let (threads, fds) = (count("/proc/self/task"), count("/proc/self/fd"));
    for _ in 0..3 {
        let (started, stopped) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
        let (s, t) = (started.clone(), stopped.clone());
        let rt = gort::Builder::new()
            .procs(2)
            .on_thread_start(move || {
                s.fetch_add(1, SeqCst);
            })
            // A slow stop hook: a drop that does not wait for the threads returns before it.
            .on_thread_stop(move || {
                std::thread::sleep(Duration::from_millis(30));
                t.fetch_add(1, SeqCst);
            })
            .build()
            .unwrap();
        rt.block_on(async {
            let io = gort::spawn_blocking(|| std::fs::read_to_string("/proc/self/status"));
            assert!(io.await.unwrap().is_ok());
            let spawned: Vec<_> = (0..8).map(|i| gort::spawn(async move { i })).collect();
            for h in spawned {
                h.await.unwrap();
            }
        });
        drop(rt);
        assert!(started.load(SeqCst) >= 2, "an M and a blocking thread ran");
        assert_eq!(
            stopped.load(SeqCst),
            started.load(SeqCst),
            "stop hooks still running"
        );
        assert_eq!(
            count("/proc/self/task"),
            threads,
            "threads outlived the drop"
        );
        assert_eq!(count("/proc/self/fd"), fds, "descriptors outlived the drop");
    }
}
