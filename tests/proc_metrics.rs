//! `Runtime::proc_metrics` and `global_queue_depth`: snapshots of what each P holds.

use gort::Builder;
use std::sync::atomic::{AtomicBool, Ordering::SeqCst};
use std::sync::Arc;
use std::time::{Duration, Instant};

fn wait_for(flag: &AtomicBool) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !flag.load(SeqCst) {
        assert!(Instant::now() < deadline, "timed out");
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// With one P held by a spinning task, the tasks it spawned wait in its local queue and
/// those spawned from a plain thread wait in the global queue.
#[test]
fn queue_depths_show_where_waiting_tasks_are() {
    let rt = Builder::new().procs(1).build().unwrap();
    let (spawned, release) = (
        Arc::new(AtomicBool::new(false)),
        Arc::new(AtomicBool::new(false)),
    );
    let (s, r) = (spawned.clone(), release.clone());
    let hog = rt.spawn(async move {
        // The first spawn takes `runnext`; the next ten are pushed into the ring.
        let children: Vec<_> = (0..11).map(|_| gort::spawn(async {})).collect();
        s.store(true, SeqCst);
        while !r.load(SeqCst) {
            std::hint::spin_loop();
        }
        children
    });
    wait_for(&spawned);
    let from_outside: Vec<_> = (0..5).map(|_| rt.spawn(async {})).collect();
    let ps = rt.proc_metrics();
    let global = rt.global_queue_depth();
    release.store(true, SeqCst);
    for h in rt.block_on(hog).unwrap().into_iter().chain(from_outside) {
        rt.block_on(h).unwrap();
    }
    assert_eq!(ps.len(), 1);
    assert!(ps[0].running);
    assert_eq!(ps[0].local_queue, 10, "{ps:?}");
    assert_eq!(global, 5);
    assert_eq!(rt.global_queue_depth(), 0);
    assert_eq!(rt.proc_metrics()[0].local_queue, 0);
}

#[test]
fn timers_per_p_add_up_to_the_runtime_totals() {
    let rt = Builder::new().procs(2).build().unwrap();
    let sleepers: Vec<_> = (0..6)
        .map(|_| rt.spawn(gort::time::sleep(Duration::from_secs(3600))))
        .collect();
    let deadline = Instant::now() + Duration::from_secs(30);
    while rt.metrics().timers_pending < 6 {
        assert!(Instant::now() < deadline, "the sleeps never armed");
        std::thread::sleep(Duration::from_millis(1));
    }
    let ps = rt.proc_metrics();
    let m = rt.metrics();
    assert_eq!(
        ps.iter().map(|p| p.timers_pending).sum::<u64>(),
        m.timers_pending
    );
    assert_eq!(
        ps.iter().map(|p| p.timers_deleted).sum::<u64>(),
        m.timers_deleted
    );
    assert_eq!(ps.iter().map(|p| p.id).collect::<Vec<_>>(), [0, 1]);
    for s in sleepers {
        s.abort();
    }
}

/// A task reads the counters of the runtime it runs on through `Handle::current()` (a debug
/// endpoint cannot borrow the `Runtime`): the same numbers as `Runtime::metrics`, sysmon's
/// looks included.
#[test]
fn a_task_reads_the_runtimes_metrics_through_its_handle() {
    let rt = Builder::new().procs(2).build().unwrap();
    let (from_task, ps, depth) = rt.block_on(async {
        let parked = gort::spawn(gort::time::sleep(Duration::from_secs(3600)));
        // Keep a P busy long enough for sysmon to look at least once.
        gort::spawn(async {
            let start = Instant::now();
            while start.elapsed() < Duration::from_millis(30) {}
        })
        .await
        .unwrap();
        let read = gort::spawn(async {
            let h = gort::runtime::Handle::current();
            (h.metrics(), h.proc_metrics(), h.global_queue_depth())
        });
        let seen = read.await.unwrap();
        parked.abort();
        seen
    });
    assert_eq!(from_task.procs, 2);
    assert!(from_task.tasks_alive >= 2, "{from_task:?}"); // the sleeper and the reader
    assert!(from_task.tasks_spawned >= 3);
    assert!(from_task.timers_pending >= 1); // the hour-long sleep
    assert!(from_task.sysmon_wakeups >= 1, "{from_task:?}");
    assert!(rt.metrics().sysmon_wakeups >= from_task.sysmon_wakeups);
    assert_eq!(ps.len(), 2);
    assert_eq!(depth, 0);
    assert_eq!(rt.handle().metrics().procs, rt.metrics().procs);
}

/// `tasks_alive` never counts a live task as gone while finished ones are taken out of the
/// registry in batches: it subtracted the Ps' pending batches read *before* the registry's
/// size, so a batch taken out in between was subtracted twice (seen as `tasks_alive: 1`
/// with two tasks alive, in a loaded run of the test above).
#[test]
fn tasks_alive_never_undercounts_while_tasks_finish_in_batches() {
    const KEPT: u64 = 8;
    let rt = Builder::new().procs(2).build().unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let kept: Vec<_> = (0..KEPT)
        .map(|_| rt.spawn(gort::time::sleep(Duration::from_secs(3600))))
        .collect();
    let churn = {
        let stop = stop.clone();
        rt.spawn(async move {
            while !stop.load(SeqCst) {
                for _ in 0..256 {
                    gort::spawn(async {});
                }
                gort::task::yield_now().await;
            }
        })
    };
    let h = rt.handle().clone();
    let start = Instant::now();
    let mut lowest = u64::MAX;
    while start.elapsed() < Duration::from_secs(2) {
        lowest = lowest.min(h.metrics().tasks_alive);
    }
    stop.store(true, SeqCst);
    rt.block_on(churn).unwrap();
    for k in kept {
        k.abort();
    }
    // The kept sleepers and the churning task were alive throughout.
    assert!(
        lowest > KEPT,
        "tasks_alive fell to {lowest} with {} alive",
        KEPT + 1
    );
}
