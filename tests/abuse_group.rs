//! Adversarial probes of `gort::sync::ErrGroup` (simultaneous errors, panics, waits cut off,
//! raced or repeated, limits) and `gort::context` trees (chains of 100,000 cancel guards, `after_func` racing cancel).

mod support;

use gort::context::{self, Context, Error};
use gort::sync::ErrGroup;
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::{Arc, Barrier};
use std::time::Duration;
use support::{panic_text, within};

/// `f`'s output, or its panic.
async fn caught<T>(f: impl std::future::Future<Output = T>) -> std::thread::Result<T> {
    futures::FutureExt::catch_unwind(std::panic::AssertUnwindSafe(f)).await
}

fn rt(procs: usize) -> gort::Runtime {
    gort::Builder::new().procs(procs).build().unwrap()
}

/// An error that counts its drops.
#[derive(Debug)]
struct Tracked {
    id: usize,
    dropped: Arc<AtomicUsize>,
}

impl Drop for Tracked {
    fn drop(&mut self) {
        self.dropped.fetch_add(1, SeqCst);
    }
}

/// 500 tasks released at once all fail: `wait` returns one error, every other is dropped
/// exactly once, the context is canceled, and a second `wait` has no error left.
#[test]
fn of_simultaneous_errors_exactly_one_wins_and_each_other_is_dropped_once() {
    within(|| {
        rt(2).block_on(async {
            const N: usize = 500;
            let dropped = Arc::new(AtomicUsize::new(0));
            let (group, ctx) = ErrGroup::with_context(&Context::background());
            let (open, gate) = gort::chan::bounded::<()>(0);
            for id in 0..N {
                let (gate, dropped) = (gate.clone(), dropped.clone());
                group.spawn(async move {
                    gate.recv().await;
                    Err(Tracked { id, dropped })
                });
            }
            drop(open);
            let first = group.wait().await.unwrap_err();
            assert!(first.id < N);
            assert_eq!(
                dropped.load(SeqCst),
                N - 1,
                "later errors are dropped once each"
            );
            assert_eq!(ctx.err(), Some(Error::Canceled));
            drop(first);
            assert_eq!(dropped.load(SeqCst), N);
            assert!(
                group.wait().await.is_ok(),
                "the error is taken by the first wait"
            );
        });
    });
}

/// A `wait` cut off by a timeout after it joined a task that panicked: the panic is not lost,
/// the next `wait` resumes it (the tasks the cut-off wait took are aborted, as documented).
#[test]
fn a_panic_joined_by_a_cut_off_wait_is_resumed_by_the_next_wait() {
    within(|| {
        let rt = rt(2);
        let resumed = rt.block_on(async {
            let group = ErrGroup::<()>::new();
            group.spawn(async { panic!("the lost panic") });
            group.spawn(std::future::pending());
            let cut = gort::time::timeout(Duration::from_millis(50), group.wait()).await;
            assert!(cut.is_err(), "the pending task keeps wait running");
            caught(group.wait()).await
        });
        let payload = resumed.expect_err("the panic of the first task was lost");
        assert_eq!(panic_text(&*payload), "the lost panic");
    });
}

/// The same with a panic that a cut-off wait's set held finished but had not joined yet
/// (the task panicked after the wait started joining a task that never ends).
#[test]
fn a_panic_finished_in_a_cut_off_waits_set_is_resumed_by_the_next_wait() {
    within(|| {
        let rt = rt(2);
        let resumed = rt.block_on(async {
            let group = ErrGroup::<()>::new();
            group.spawn(std::future::pending());
            let (go, wait_go) = gort::chan::bounded::<()>(0);
            let (gone, has_gone) = gort::chan::bounded::<()>(1);
            group.spawn(async move {
                wait_go.recv().await;
                let _signal = gone; // closes `has_gone` as the panic unwinds
                panic!("panicked while the wait looked away")
            });
            let mut wait = Box::pin(group.wait());
            // Start the wait: it takes both tasks.
            assert!(futures::poll!(wait.as_mut()).is_pending());
            drop(go);
            has_gone.recv().await;
            // Let the task finish its unwinding before the wait is dropped unpolled.
            gort::time::sleep(Duration::from_millis(20)).await;
            drop(wait);
            caught(group.wait()).await
        });
        let payload = resumed.expect_err("the panic was lost with the cut-off wait");
        assert_eq!(panic_text(&*payload), "panicked while the wait looked away");
    });
}

/// Waits from two tasks and a plain thread at once, with a task that panics and one that
/// fails: all return once every task ended; exactly one resumes the panic.
#[test]
fn three_concurrent_waits_end_together_and_one_resumes_the_panic() {
    within(|| {
        let rt = rt(2);
        let group = Arc::new(ErrGroup::<String>::new());
        let (open, gate) = gort::chan::bounded::<()>(0);
        for i in 0..30u32 {
            let gate = gate.clone();
            group.spawn_on_test(&rt, async move {
                gate.recv().await;
                gort::time::sleep(Duration::from_millis(u64::from(i % 5))).await;
                match i {
                    3 => panic!("task 3"),
                    4 => Err("task 4".to_string()),
                    _ => Ok(()),
                }
            });
        }
        let waits: Vec<_> = (0..2)
            .map(|_| {
                let g = group.clone();
                rt.spawn(async move { g.wait().await })
            })
            .collect();
        let g = group.clone();
        let thread = std::thread::spawn(move || {
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                futures::executor::block_on(g.wait())
            }))
        });
        std::thread::sleep(Duration::from_millis(20));
        drop(open);
        let mut outcomes = Vec::new();
        for w in waits {
            outcomes.push(match rt.block_on(w) {
                Ok(r) => Ok(r),
                Err(e) => Err(panic_text(&*e.into_panic())),
            });
        }
        outcomes.push(thread.join().unwrap().map_err(|p| panic_text(&*p)));
        let panics: Vec<_> = outcomes.iter().filter(|o| o.is_err()).collect();
        assert_eq!(panics.len(), 1, "{outcomes:?}");
        assert_eq!(panics[0].as_ref().unwrap_err(), "task 3");
        let errors = outcomes
            .iter()
            .filter(|o| matches!(o, Ok(Err(e)) if e == "task 4"))
            .count();
        assert!(errors <= 1, "{outcomes:?}");
    });
}

trait SpawnOn {
    fn spawn_on_test<F>(&self, rt: &gort::Runtime, f: F)
    where
        F: std::future::Future<Output = Result<(), String>> + Send + 'static;
}

impl SpawnOn for ErrGroup<String> {
    fn spawn_on_test<F>(&self, rt: &gort::Runtime, f: F)
    where
        F: std::future::Future<Output = Result<(), String>> + Send + 'static,
    {
        let _enter = rt.handle().enter();
        self.spawn(f);
    }
}

/// A group derived from a parent that is canceled: the group's context is canceled with it,
/// the tasks see it, `wait` returns Ok (the parent's cancel is not a task's error).
#[test]
fn a_parent_cancel_reaches_the_groups_tasks_and_wait_returns_ok() {
    within(|| {
        rt(2).block_on(async {
            let (parent, cancel) = context::with_cancel(&Context::background());
            let (group, ctx) = ErrGroup::<String>::with_context(&parent);
            let stopped = Arc::new(AtomicUsize::new(0));
            for _ in 0..20 {
                let (ctx, stopped) = (ctx.clone(), stopped.clone());
                group.spawn(async move {
                    ctx.done().recv().await;
                    stopped.fetch_add(1, SeqCst);
                    Ok(())
                });
            }
            cancel.cancel();
            assert_eq!(group.wait().await, Ok(()));
            assert_eq!(stopped.load(SeqCst), 20);
            assert_eq!(ctx.err(), Some(Error::Canceled));
        });
    });
}

/// Under a limit of 1, tasks that panic, fail and are cut off by `spawn_limited`'s timeout,
/// mixed: no slot is lost, and the limit holds afterwards.
#[test]
fn a_limit_of_one_survives_panics_errors_and_cut_off_spawns() {
    within(|| {
        rt(2).block_on(async {
            let mut group = ErrGroup::<u32>::new();
            group.set_limit(Some(1));
            let running = Arc::new(AtomicUsize::new(0));
            for i in 0..200u32 {
                let r = running.clone();
                let task = async move {
                    assert_eq!(r.fetch_add(1, SeqCst), 0, "two tasks ran at once");
                    gort::time::sleep(Duration::from_micros(u64::from(i % 7) * 50)).await;
                    r.fetch_sub(1, SeqCst);
                    match i % 5 {
                        0 => panic!("task {i}"),
                        1 => Err(i),
                        _ => Ok(()),
                    }
                };
                if i % 2 == 0 {
                    let _ =
                        gort::time::timeout(Duration::from_micros(100), group.spawn_limited(task))
                            .await;
                } else {
                    group.spawn(task);
                }
            }
            let res = caught(group.wait()).await;
            assert!(res.is_err(), "a task panicked");
            assert_eq!(running.load(SeqCst), 0);
            // The first error, if a task failed before the panic was resumed, is still there.
            if let Err(i) = group.wait().await {
                assert_eq!(i % 5, 1);
            }
            // Every slot is back: one try_spawn succeeds, a second does not.
            let (hold, held) = gort::chan::bounded::<()>(0);
            assert!(group.try_spawn(async move {
                held.recv().await;
                Ok(())
            }));
            assert!(!group.try_spawn(async { Ok(()) }));
            drop(hold);
            assert_eq!(group.wait().await, Ok(()));
        });
    });
}

// ---- context trees --------------------------------------------------------------------------

/// A chain of 100,000 contexts, each held by a cancel guard; the root's guard dropped first
/// (then the others, root to leaf) cancels the whole chain without overflowing a stack, and
/// the leaf's `after_func` runs once.
#[test]
fn a_chain_of_a_hundred_thousand_guards_dropped_from_the_root() {
    within(|| {
        rt(1).block_on(async {
            gort::spawn(async {
                let mut guards = Vec::with_capacity(100_000);
                let mut ctx = Context::background();
                for _ in 0..100_000 {
                    let (child, cancel) = context::with_cancel(&ctx);
                    guards.push(cancel.drop_guard());
                    ctx = child;
                }
                let ran = Arc::new(AtomicUsize::new(0));
                let r = ran.clone();
                let _af = context::after_func(&ctx, move || {
                    r.fetch_add(1, SeqCst);
                });
                drop(guards); // a Vec drops root first
                assert_eq!(ctx.err(), Some(Error::Canceled));
                while ran.load(SeqCst) == 0 {
                    gort::time::sleep(Duration::from_millis(1)).await;
                }
                drop(ctx);
                assert_eq!(ran.load(SeqCst), 1);
            })
            .await
            .unwrap();
        });
    });
}

/// The same chain dropped leaf first: each guard cancels its own node only, and the chain's
/// nodes unregister from their parents (the root is left with no child).
#[test]
fn a_chain_of_a_hundred_thousand_guards_dropped_from_the_leaf() {
    within(|| {
        let (root, root_cancel) = context::with_cancel(&Context::background());
        let mut guards = Vec::with_capacity(100_000);
        let mut ctx = root.clone();
        for _ in 0..100_000 {
            let (child, cancel) = context::with_cancel(&ctx);
            guards.push(cancel.drop_guard());
            ctx = child;
        }
        while let Some(g) = guards.pop() {
            drop(g);
        }
        assert_eq!(ctx.err(), Some(Error::Canceled));
        assert_eq!(root.err(), None);
        drop(ctx);
        root_cancel.cancel();
    });
}

/// `after_func` registered from threads racing a cancel from another thread, and `stop`
/// racing it too: each function runs exactly when its `stop` did not report stopping it,
/// and never twice.
#[test]
fn after_func_and_stop_racing_cancel_run_each_function_at_most_once() {
    within(|| {
        let rt = rt(2);
        for round in 0..300 {
            let (ctx, cancel) = context::with_cancel(&Context::background());
            let ran = Arc::new((0..40).map(|_| AtomicUsize::new(0)).collect::<Vec<_>>());
            let barrier = Arc::new(Barrier::new(3));
            let spawner = |part: usize| {
                let (ctx, ran, barrier, h) = (
                    ctx.clone(),
                    ran.clone(),
                    barrier.clone(),
                    rt.handle().clone(),
                );
                std::thread::spawn(move || {
                    let _enter = (part == 0).then(|| h.enter());
                    barrier.wait();
                    let mut stopped = Vec::new();
                    for i in (part * 20)..(part * 20 + 20) {
                        let r = ran.clone();
                        let af = context::after_func(&ctx, move || {
                            r[i].fetch_add(1, SeqCst);
                        });
                        if i % 2 == 0 && af.stop() {
                            stopped.push(i);
                        }
                    }
                    stopped
                })
            };
            let (t0, t1) = (spawner(0), spawner(1));
            barrier.wait();
            if round % 2 == 0 {
                std::thread::yield_now();
            }
            cancel.cancel();
            let stopped: Vec<usize> = t0
                .join()
                .unwrap()
                .into_iter()
                .chain(t1.join().unwrap())
                .collect();
            let deadline = std::time::Instant::now() + Duration::from_secs(10);
            for i in 0..40 {
                let want = usize::from(!stopped.contains(&i));
                while ran[i].load(SeqCst) < want {
                    assert!(std::time::Instant::now() < deadline, "func {i} never ran");
                    std::thread::sleep(Duration::from_micros(100));
                }
            }
            std::thread::sleep(Duration::from_millis(1));
            for (i, r) in ran.iter().enumerate() {
                let want = usize::from(!stopped.contains(&i));
                assert_eq!(r.load(SeqCst), want, "func {i} in round {round}");
            }
        }
    });
}

/// A huge limit (`usize::MAX` read as "no limit", or a billion) is set at once, costs no
/// memory per slot, and behaves as that many slots.
#[test]
fn a_huge_limit_is_set_at_once_and_limits_nothing() {
    within(|| {
        rt(2).block_on(async {
            for limit in [usize::MAX, 1_000_000_000, 1 << 20] {
                let mut group = ErrGroup::<()>::new();
                let t = std::time::Instant::now();
                group.set_limit(Some(limit));
                assert!(
                    t.elapsed() < Duration::from_secs(1),
                    "set_limit({limit}) took {:?}",
                    t.elapsed()
                );
                assert_eq!(group.limit(), Some(limit));
                let (open, gate) = gort::chan::bounded::<()>(0);
                for _ in 0..100 {
                    let gate = gate.clone();
                    assert!(group.try_spawn(async move {
                        gate.recv().await;
                        Ok(())
                    }));
                }
                drop(open);
                assert_eq!(group.wait().await, Ok(()));
            }
        });
    });
}

/// `wait` cut off again and again by timeouts of 0 to 2 ms while tasks panic, fail and
/// sleep: no wait hangs, a panic joined before a cut is resumed by a later wait (never
/// twice), and the group ends empty and usable.
#[test]
fn waits_cut_off_again_and_again_lose_no_joined_panic_and_end() {
    within(|| {
        rt(2).block_on(async {
            for round in 0..100u64 {
                let group = ErrGroup::<u64>::new();
                let (gone, has_gone) = gort::chan::bounded::<()>(1);
                for i in 0..20u64 {
                    let gone = (i == 0).then(|| gone.clone());
                    group.spawn(async move {
                        // The panicking task ends at once, the others 3 to 9 ms later.
                        let us = if i == 0 {
                            0
                        } else {
                            3000 + (i * 337 + round) % 6000
                        };
                        gort::time::sleep(Duration::from_micros(us)).await;
                        let _signal = gone; // closes `has_gone` as the panic unwinds
                        match i {
                            0 => panic!("round {round}"),
                            1 => Err(i),
                            _ => Ok(()),
                        }
                    });
                }
                drop(gone);
                // The panic is under way (its task may not have finished yet): whichever
                // wait is cut off around it, a later one resumes it, once.
                has_gone.recv().await;
                let mut resumed = 0;
                let mut k = 0u64;
                loop {
                    k += 1;
                    let cut = Duration::from_micros((k * 700) % 2500);
                    match gort::time::timeout(cut, caught(group.wait())).await {
                        Err(_) => continue,
                        Ok(Err(p)) => {
                            assert_eq!(panic_text(&*p), format!("round {round}"));
                            resumed += 1;
                        }
                        Ok(Ok(_)) => break,
                    }
                }
                assert_eq!(
                    resumed, 1,
                    "round {round}: the panic was lost or resumed twice"
                );
                assert_eq!(group.wait().await, Ok(()));
                assert!(group.try_spawn(async { Ok(()) }));
                assert_eq!(group.wait().await, Ok(()));
            }
        });
    });
}

/// Sleeps in its drop: holds a panic's unwinding open for a while.
struct SlowUnwind;
impl Drop for SlowUnwind {
    fn drop(&mut self) {
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A `wait` dropped while one of its tasks is panicking (still unwinding, not yet finished):
/// the panic is not lost with the tasks the wait aborts; the next `wait` resumes it.
#[test]
fn a_panic_still_unwinding_when_its_wait_is_dropped_is_resumed_by_the_next_wait() {
    within(|| {
        let rt = rt(2);
        let resumed = rt.block_on(async {
            let group = ErrGroup::<()>::new();
            group.spawn(std::future::pending());
            let (go, wait_go) = gort::chan::bounded::<()>(0);
            let (gone, has_gone) = gort::chan::bounded::<()>(1);
            group.spawn(async move {
                wait_go.recv().await;
                // Dropped in reverse order as the panic unwinds: `gone` first, then 50 ms
                // of `SlowUnwind` before the task can finish with its panic.
                let _slow = SlowUnwind;
                let _signal = gone;
                panic!("panicked as its wait went")
            });
            let mut wait = Box::pin(group.wait());
            assert!(futures::poll!(wait.as_mut()).is_pending()); // it takes both tasks
            drop(go);
            has_gone.recv().await; // the panic is unwinding now, for 50 ms more
            drop(wait);
            caught(group.wait()).await
        });
        let payload = resumed.expect_err("the panic was lost with the dropped wait");
        assert_eq!(panic_text(&*payload), "panicked as its wait went");
    });
}
