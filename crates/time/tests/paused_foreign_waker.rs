//! A waker is user code: a foreign executor's, polling `advance`. One that panics when the
//! runtime, quiescent, releases the tasks waiting in `advance` must not cost the others
//! their wake-up: the panic is caught and counted, and every other waiter is still woken.
#![cfg(not(loom))]

use std::future::Future;
use std::sync::Arc;
use std::task::{Context, Wake, Waker};
use std::time::Duration;

fn panicking_waker() -> Waker {
    struct Panics;
    impl Wake for Panics {
        fn wake(self: Arc<Self>) {
            panic!("a foreign waker panics");
        }
    }
    Waker::from(Arc::new(Panics))
}

#[test]
fn a_task_waiting_in_advance_behind_a_panicking_waker_is_woken() {
    for procs in [1, 2] {
        let rt = gort::Builder::new()
            .procs(procs)
            .start_paused(true)
            .build()
            .unwrap();
        let woken = rt.block_on(async {
            // First in the list of `advance`'s waiters: registered while this task runs, so
            // the runtime is not quiescent yet.
            let mut foreign = Box::pin(gort::time::advance(Duration::ZERO));
            let waker = panicking_waker();
            assert!(foreign
                .as_mut()
                .poll(&mut Context::from_waker(&waker))
                .is_pending());
            let task = gort::spawn(gort::time::advance(Duration::ZERO));
            // Quiescent once both wait: the waiters are released. A task left behind would
            // let the clock jump to this timeout's deadline.
            let woken = gort::time::timeout(Duration::from_secs(3600), task).await;
            drop(foreign);
            woken.is_ok()
        });
        assert!(
            woken,
            "procs {procs}: the task behind the panicking waker was woken"
        );
        assert!(rt.metrics().user_panics >= 1, "the panic is counted");
    }
}
