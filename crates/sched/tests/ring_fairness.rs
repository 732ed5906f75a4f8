//! A thousand runnable tasks fit in a P's ring (1,024 slots, four times Go's 256): readied in
//! one burst, they run in the order they were readied. With Go's 256, the overflow went to
//! the global queue, which a busy P serves once per 61 rounds, and the tasks readied first
//! ran last: under load, 1-2 % of a server's requests waited ~100 ms while the rest waited
//! ~5 (design/ARCHITECTURE.md, "A P's ring").

use gort_sched::Builder;
use std::sync::{Arc, Mutex};

const TASKS: usize = 1_000;

#[test]
fn a_thousand_tasks_readied_at_once_run_in_the_order_they_were_readied() {
    let rt = Builder::new().procs(1).build().unwrap();
    let order = Arc::new(Mutex::new(Vec::with_capacity(TASKS)));
    let log = order.clone();
    rt.block_on(rt.spawn(async move {
        // Spawned from a task, each goes to this P's ring (runnext, then the ring's tail).
        let handles: Vec<_> = (0..TASKS)
            .map(|i| {
                let log = log.clone();
                gort_sched::spawn(async move { log.lock().unwrap().push(i) })
            })
            .collect();
        for h in handles {
            h.await.unwrap();
        }
    }))
    .unwrap();
    let order = order.lock().unwrap();
    assert_eq!(order.len(), TASKS);
    // The last spawned may run first (it sits in `runnext`, Go's rule); the rest in order.
    let rest: Vec<usize> = order.iter().copied().filter(|&i| i != TASKS - 1).collect();
    let late = rest.windows(2).filter(|w| w[0] > w[1]).count();
    assert_eq!(
        late,
        0,
        "tasks ran out of the order they were readied: {:?}",
        &order[..20]
    );
}
