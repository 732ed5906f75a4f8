//! `WaitGroup::go` (Go 1.25's `WaitGroup.Go`): the task is counted before it starts and
//! counted done however it ends (returned, panicked, aborted, or dropped unrun by the
//! runtime's shutdown), so a `wait` never hangs on a task that died. The Go-literal port,
//! `wg.add(1); gort::spawn(async move { work().await; wg.done() })`, has no `defer`: a panic
//! in `work` left the counter up and the server's graceful shutdown waiting for ever.

use std::time::Duration;

use gort::sync::WaitGroup;

#[test]
fn go_counts_tasks_that_panic_or_are_aborted() {
    for procs in [1, 4] {
        let rt = gort::Builder::new().procs(procs).build().unwrap();
        rt.block_on(async {
            let wg = WaitGroup::new();
            let (gate_tx, gate) = gort::chan::bounded::<()>(0);
            let ok = wg.go(async move {
                let _ = gate.recv().await;
                7
            });
            let gate2 = gate_tx.clone();
            let panicked = wg.go(async move {
                let _ = gate2.send(()).await; // waits for the close below
                panic!("handler bug");
            });
            let stuck = wg.go(std::future::pending::<()>());
            assert_eq!(wg.count(), 3, "counted before the tasks start");
            gate_tx.close();
            assert_eq!(ok.await.unwrap(), 7);
            assert!(panicked.await.unwrap_err().is_panic());
            stuck.abort();
            let waited = gort::time::timeout(Duration::from_secs(10), wg.wait()).await;
            assert!(waited.is_ok(), "wait hung: count {}", wg.count());
            assert_eq!(wg.count(), 0);
        });
    }
}

#[test]
fn go_tasks_dropped_by_the_runtime_count_done() {
    let rt = gort::Builder::new().procs(2).build().unwrap();
    let wg = WaitGroup::new();
    rt.block_on(async {
        for _ in 0..100 {
            drop(wg.go(std::future::pending::<()>()));
        }
    });
    assert_eq!(wg.count(), 100);
    drop(rt);
    assert_eq!(wg.count(), 0, "tasks dropped at shutdown are done");
}
