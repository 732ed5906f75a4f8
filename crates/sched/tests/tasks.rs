//! Behaviour of tasks on the scheduler: completion, panics, abort, wake-ups, blocking,
//! resizing, shutdown.

use gort_sched::{block_in_place, spawn, spawn_blocking, yield_now, Builder, Runtime};
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::SeqCst};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

/// A future that is pending until `fire` is called from anywhere.
#[derive(Clone, Default)]
struct Gate(Arc<Mutex<(bool, Option<Waker>)>>);

impl Gate {
    fn fire(&self) {
        let w = {
            let mut g = self.0.lock().unwrap();
            g.0 = true;
            g.1.take()
        };
        if let Some(w) = w {
            w.wake();
        }
    }
}

impl Future for Gate {
    type Output = ();
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let mut g = self.0.lock().unwrap();
        if g.0 {
            Poll::Ready(())
        } else {
            g.1 = Some(cx.waker().clone());
            Poll::Pending
        }
    }
}

#[test]
fn a_million_tasks_all_complete() {
    let rt = Builder::new().procs(2).build().unwrap();
    let done = Arc::new(AtomicUsize::new(0));
    let d = done.clone();
    rt.block_on(async move {
        let mut hs = Vec::with_capacity(1_000_000);
        for _ in 0..1_000_000 {
            let d = d.clone();
            hs.push(spawn(async move {
                d.fetch_add(1, SeqCst);
            }));
        }
        for h in hs {
            h.await.unwrap();
        }
    });
    assert_eq!(done.load(SeqCst), 1_000_000);
    assert_eq!(rt.metrics().tasks_alive, 0);
    assert_eq!(rt.metrics().tasks_spawned, 1_000_000);
}

#[test]
fn panic_is_isolated_and_reported() {
    let rt = Builder::new().procs(2).build().unwrap();
    let res = rt.block_on(async {
        let bad = spawn(async { panic!("boom") });
        let good = spawn(async { 7 });
        (bad.await, good.await)
    });
    let err = res.0.unwrap_err();
    assert!(err.is_panic() && !err.is_cancelled());
    assert!(err.to_string().contains("boom"), "{err}");
    assert_eq!(res.1.unwrap(), 7);
    // The runtime goes on.
    assert_eq!(rt.block_on(rt.spawn(async { 1 })).unwrap(), 1);
    assert_eq!(rt.metrics().task_panics, 1);
}

#[test]
fn block_on_propagates_panic() {
    let rt = Runtime::new().unwrap();
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        rt.block_on(async { panic!("inside block_on") })
    }));
    assert!(r.is_err());
    assert_eq!(rt.block_on(async { 3 }), 3);
}

#[test]
fn abort_cancels_a_pending_task_and_drops_its_future() {
    struct Flag(Arc<AtomicBool>);
    impl Drop for Flag {
        fn drop(&mut self) {
            self.0.store(true, SeqCst);
        }
    }
    let rt = Builder::new().procs(2).build().unwrap();
    let dropped = Arc::new(AtomicBool::new(false));
    let flag = Flag(dropped.clone());
    let gate = Gate::default();
    let g = gate.clone();
    let h = rt.spawn(async move {
        let _f = flag;
        g.await;
        1
    });
    let err = rt.block_on(async move {
        h.abort();
        h.await.unwrap_err()
    });
    assert!(err.is_cancelled());
    assert!(
        dropped.load(SeqCst),
        "the aborted task's future must be dropped"
    );
    gate.fire(); // waking a cancelled task is harmless
}

#[test]
fn abort_after_completion_keeps_the_output() {
    let rt = Runtime::new().unwrap();
    let h = rt.spawn(async { 5 });
    while !h.is_finished() {
        std::thread::sleep(Duration::from_millis(1));
    }
    h.abort();
    assert_eq!(rt.block_on(h).unwrap(), 5);
}

#[test]
fn spawn_from_outside_and_inside() {
    let rt = Builder::new().procs(2).build().unwrap();
    let outer = rt.spawn(async {
        let inner = spawn(async { spawn(async { 40 }).await.unwrap() + 1 });
        inner.await.unwrap() + 1
    });
    assert_eq!(rt.block_on(outer).unwrap(), 42);
}

#[test]
#[should_panic(expected = "must be called from the context of a gort runtime")]
fn spawn_outside_a_runtime_panics() {
    drop(spawn(async {}));
}

#[test]
fn wake_from_another_thread_runs_the_task_once() {
    let rt = Builder::new().procs(2).build().unwrap();
    let polls = Arc::new(AtomicUsize::new(0));
    let gate = Gate::default();
    let (g, p) = (gate.clone(), polls.clone());
    let h = rt.spawn(async move {
        std::future::poll_fn(|cx| {
            p.fetch_add(1, SeqCst);
            Pin::new(&mut g.clone()).poll(cx)
        })
        .await;
    });
    // Let it park, then wake it many times from several threads at once.
    while polls.load(SeqCst) == 0 {
        std::thread::sleep(Duration::from_millis(1));
    }
    let waker = gate.0.lock().unwrap().1.clone().unwrap();
    std::thread::scope(|s| {
        for _ in 0..4 {
            let w = waker.clone();
            s.spawn(move || {
                for _ in 0..1000 {
                    w.wake_by_ref();
                }
            });
        }
    });
    gate.fire();
    rt.block_on(h).unwrap();
    // One poll per scheduling, never two concurrent ones: with 4000 spurious wakes the count
    // stays far below 4000 + 2 only because wakes coalesce while the task is queued.
    let n = polls.load(SeqCst);
    assert!(n >= 2, "polled {n} times");
}

#[test]
fn yield_now_lets_others_run() {
    let rt = Builder::new().procs(1).build().unwrap();
    let flag = Arc::new(AtomicBool::new(false));
    let f = flag.clone();
    let saw = rt.block_on(rt.spawn(async move {
        let f2 = f.clone();
        let _other = spawn(async move { f2.store(true, SeqCst) });
        for _ in 0..100 {
            if f.load(SeqCst) {
                return true;
            }
            yield_now().await;
        }
        false
    }));
    assert!(
        saw.unwrap(),
        "a yielding task must let the other task on its P run"
    );
}

#[test]
fn block_in_place_keeps_the_ps_other_tasks_running() {
    // One P: while its only M blocks inside block_in_place, the P must move to another M.
    let rt = Builder::new().procs(1).build().unwrap();
    let ran = Arc::new(AtomicBool::new(false));
    let r = ran.clone();
    let ok = rt.block_on(rt.spawn(async move {
        let r2 = r.clone();
        let _other = spawn(async move { r2.store(true, SeqCst) });
        block_in_place(|| {
            let deadline = Instant::now() + Duration::from_secs(10);
            while !r.load(SeqCst) && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(1));
            }
        });
        r.load(SeqCst)
    }));
    assert!(
        ok.unwrap(),
        "the other task did not run while the P's M was blocked"
    );
    assert!(ran.load(SeqCst));
}

#[test]
fn spawn_blocking_runs_off_the_ps() {
    let rt = Builder::new().procs(1).build().unwrap();
    let v = rt.block_on(async {
        let b = spawn_blocking(|| {
            std::thread::sleep(Duration::from_millis(20));
            11
        });
        // The P stays free meanwhile.
        let t = spawn(async { 1 }).await.unwrap();
        b.await.unwrap() + t
    });
    assert_eq!(v, 12);
    let err = rt
        .block_on(async { spawn_blocking(|| panic!("blocking boom")).await })
        .unwrap_err();
    assert!(err.is_panic());
}

#[test]
fn set_procs_up_and_down_under_load_loses_no_task() {
    let rt = Builder::new().procs(2).build().unwrap();
    let done = Arc::new(AtomicUsize::new(0));
    let mut hs = Vec::new();
    for _ in 0..2000 {
        let d = done.clone();
        hs.push(rt.spawn(async move {
            for _ in 0..20 {
                yield_now().await;
            }
            d.fetch_add(1, SeqCst);
        }));
    }
    for n in [4, 1, 3, 1, 8, 2] {
        rt.set_procs(n);
        assert_eq!(rt.procs(), n);
        std::thread::sleep(Duration::from_millis(2));
    }
    rt.block_on(async {
        for h in hs {
            h.await.unwrap();
        }
    });
    assert_eq!(done.load(SeqCst), 2000);
}

#[test]
fn dropping_the_runtime_drops_every_future() {
    static LIVE: AtomicUsize = AtomicUsize::new(0);
    struct Counted;
    impl Counted {
        fn new() -> Counted {
            LIVE.fetch_add(1, SeqCst);
            Counted
        }
    }
    impl Drop for Counted {
        fn drop(&mut self) {
            LIVE.fetch_sub(1, SeqCst);
        }
    }
    let rt = Builder::new().procs(2).build().unwrap();
    let gates: Vec<Gate> = (0..100).map(|_| Gate::default()).collect();
    for g in &gates {
        let g = g.clone();
        let c = Counted::new();
        // Each pending task holds its counter; wakers to it are held by the gates (a cycle
        // through the gate is not possible here, but a parked task is in no queue).
        drop(rt.spawn(async move {
            let _c = c;
            g.await;
        }));
    }
    // And some runnable ones.
    for _ in 0..100 {
        let c = Counted::new();
        drop(rt.spawn(async move {
            let _c = c;
            loop {
                yield_now().await;
            }
        }));
    }
    std::thread::sleep(Duration::from_millis(20));
    drop(rt);
    assert_eq!(
        LIVE.load(SeqCst),
        0,
        "futures leaked after the runtime was dropped"
    );
    drop(gates);
}

#[test]
fn shutdown_timeout_returns_despite_a_stuck_blocking_closure() {
    let rt = Builder::new().procs(1).build().unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let s = stop.clone();
    rt.block_on(async move {
        drop(spawn_blocking(move || {
            while !s.load(SeqCst) {
                std::thread::sleep(Duration::from_millis(5));
            }
        }));
    });
    let t = Instant::now();
    rt.shutdown_timeout(Duration::from_millis(100));
    assert!(t.elapsed() < Duration::from_secs(5));
    stop.store(true, SeqCst);
}

#[test]
fn idle_runtime_parks_its_threads() {
    // After work is done, Ms park: a second burst of work is still picked up (no lost wake-up
    // after everyone went idle).
    let rt = Builder::new().procs(2).build().unwrap();
    for round in 0..50 {
        let v = rt.block_on(async move { spawn(async move { round }).await.unwrap() });
        assert_eq!(v, round);
        if round % 10 == 0 {
            std::thread::sleep(Duration::from_millis(60));
        }
    }
}

/// Spawns a task that parks on `gate` and, once woken, returns how many tasks had counted
/// themselves in `ran` by then; returns after the task parked.
fn spawn_parked_on(
    rt: &Runtime,
    gate: &Gate,
    ran: &Arc<AtomicUsize>,
) -> gort_sched::JoinHandle<usize> {
    let polled = Arc::new(AtomicBool::new(false));
    let (g, p, r) = (gate.clone(), polled.clone(), ran.clone());
    let woken = rt.spawn(async move {
        std::future::poll_fn(|cx| {
            p.store(true, SeqCst);
            Pin::new(&mut g.clone()).poll(cx)
        })
        .await;
        r.load(SeqCst)
    });
    while !polled.load(SeqCst) {
        std::thread::sleep(Duration::from_millis(1));
    }
    woken
}

/// The global queue's two lanes (runq.rs): a task woken from outside the runtime runs before
/// a backlog of new tasks queued ahead of it. One P, held by a spinning task while 20,000 new
/// tasks and then the wake-up are queued; in a single FIFO the woken task would run last.
#[test]
fn a_woken_task_runs_before_a_backlog_of_new_tasks() {
    const NEW: usize = 20_000;
    let rt = Builder::new().procs(1).build().unwrap();
    let ran = Arc::new(AtomicUsize::new(0));
    let gate = Gate::default();
    let woken = spawn_parked_on(&rt, &gate, &ran);
    let (holding, release) = (
        Arc::new(AtomicBool::new(false)),
        Arc::new(AtomicBool::new(false)),
    );
    let (h, rel) = (holding.clone(), release.clone());
    let blocker = rt.spawn(async move {
        h.store(true, SeqCst);
        while !rel.load(SeqCst) {
            std::thread::yield_now();
        }
    });
    while !holding.load(SeqCst) {
        std::thread::sleep(Duration::from_millis(1));
    }
    let news: Vec<_> = (0..NEW)
        .map(|_| {
            let r = ran.clone();
            rt.spawn(async move {
                r.fetch_add(1, SeqCst);
            })
        })
        .collect();
    gate.fire();
    release.store(true, SeqCst);
    let before = rt.block_on(woken).unwrap();
    rt.block_on(blocker).unwrap();
    for h in news {
        rt.block_on(h).unwrap();
    }
    assert!(
        before < NEW / 10,
        "the woken task ran after {before} of the {NEW} new tasks queued before it"
    );
}

/// A task woken on a P and then pushed out of its `runnext` by a burst of spawns is still
/// started work: when the burst overflows the ring into the global queue, the batch that
/// moves it goes to the `Ready` lane, not behind the burst's backlog in the `Fresh` lane
/// (the sleep-fanout stress scenario's late sleepers). One P: a task queues a backlog of
/// spawns, wakes another task, then spawns more without yielding.
#[test]
fn a_woken_task_pushed_out_by_a_spawn_burst_runs_before_the_burst() {
    const BACKLOG: usize = 5_000;
    const MORE: usize = 1_000;
    let rt = Builder::new().procs(1).build().unwrap();
    let ran = Arc::new(AtomicUsize::new(0));
    let gate = Gate::default();
    let woken = spawn_parked_on(&rt, &gate, &ran);
    let r = ran.clone();
    let burst = rt.spawn(async move {
        let spawn_one = || {
            let r = r.clone();
            spawn(async move {
                r.fetch_add(1, SeqCst);
            })
        };
        let mut hs: Vec<_> = (0..BACKLOG).map(|_| spawn_one()).collect();
        gate.fire();
        hs.extend((0..MORE).map(|_| spawn_one()));
        for h in hs {
            h.await.unwrap();
        }
    });
    let before = rt.block_on(woken).unwrap();
    rt.block_on(burst).unwrap();
    assert!(
        before < BACKLOG / 2,
        "the woken task ran after {before} of the {} spawned tasks",
        BACKLOG + MORE
    );
}

/// New tasks are never starved by started ones: 300 tasks yield in a loop on one P, so its
/// ring keeps overflowing into the global queue's `Ready` lane and that lane never empties;
/// a task spawned from outside (the `Fresh` lane) must still run, and it stops the others.
#[test]
fn a_new_task_runs_while_started_tasks_keep_the_global_queue_busy() {
    let rt = Builder::new().procs(1).build().unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let yields = Arc::new(AtomicUsize::new(0));
    let (s, y) = (stop.clone(), yields.clone());
    let flood = rt.spawn(async move {
        let hs: Vec<_> = (0..300)
            .map(|_| {
                let (s, y) = (s.clone(), y.clone());
                spawn(async move {
                    while !s.load(SeqCst) {
                        y.fetch_add(1, SeqCst);
                        yield_now().await;
                    }
                })
            })
            .collect();
        for h in hs {
            h.await.unwrap();
        }
    });
    // Let the flood fill the ring and the global queue.
    while yields.load(SeqCst) < 100_000 {
        std::thread::sleep(Duration::from_millis(1));
    }
    let s = stop.clone();
    let newcomer = rt.spawn(async move { s.store(true, SeqCst) });
    let deadline = Instant::now() + Duration::from_secs(20);
    while !stop.load(SeqCst) {
        assert!(
            Instant::now() < deadline,
            "a new task starved behind yielding ones ({} yields)",
            yields.load(SeqCst)
        );
        std::thread::sleep(Duration::from_millis(1));
    }
    rt.block_on(newcomer).unwrap();
    rt.block_on(flood).unwrap();
}
