//! A long-lived `ErrGroup` (a server's: one task per connection, `wait` at shutdown, Go's
//! `g.Go(func() { handle(conn) })`) keeps no memory for its finished tasks: Go's errgroup
//! holds a counter, not the goroutines. Live heap bytes are counted by a global allocator,
//! so this file holds one test (its own process).

#[path = "../../time/tests/support/counting.rs"]
mod counting;

use counting::BYTES as LIVE;
use gort::sync::ErrGroup;
use std::sync::atomic::Ordering::Relaxed;

/// Spawns `n` short tasks in `group`, each finished before the next is spawned.
async fn run_finished(group: &ErrGroup<&'static str>, n: usize) {
    for _ in 0..n {
        let (tx, rx) = gort::chan::bounded::<()>(1);
        group.spawn(async move {
            let _ = tx.send(()).await;
            Ok(())
        });
        let _ = rx.recv().await;
    }
    // Let the last tasks' ends (their `Running` guards, their cells) settle.
    gort::time::sleep(std::time::Duration::from_millis(20)).await;
}

#[test]
fn a_long_lived_group_keeps_no_memory_for_finished_tasks() {
    let rt = gort::Builder::new().procs(2).build().unwrap();
    rt.block_on(async {
        let group = ErrGroup::new();
        run_finished(&group, 1_000).await;
        let before = LIVE.load(Relaxed);
        run_finished(&group, 20_000).await;
        let grown = LIVE.load(Relaxed) - before;
        // A task's cell and join-set entry are a few hundred bytes: 20,000 of them kept
        // would be megabytes. Allow 256 KiB for the runtime's own caches and queues.
        assert!(
            grown < 256 * 1024,
            "{grown} bytes still allocated after 20,000 finished tasks"
        );
        assert_eq!(group.wait().await, Ok(()));
    });
}
