//! gort::context and runtime configuration misused the way user code does: an `after_func`
//! whose captures cancel its own context when dropped, a callback that cancels its parent,
//! `procs` of zero or too many, runtimes made and dropped in a loop or inside another's task.
//! The rule each test checks: no hang, no leaked thread, and a clear panic for misuse.

mod support;

use support::{within, WATCHDOG};

use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::{mpsc, Arc};
use std::time::Duration;

use gort::context::{self, CancelFn, Context};

fn panic_of(f: impl FnOnce()) -> String {
    let p = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).expect_err("no panic");
    p.downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| p.downcast_ref::<String>().cloned())
        .unwrap_or_default()
}

/// Cancels a context when dropped: captured by that context's own `after_func`.
struct CancelOnDrop(Option<CancelFn>);

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        if let Some(c) = self.0.take() {
            c.cancel();
        }
    }
}

#[test]
fn an_after_func_whose_captures_cancel_its_own_context_when_dropped() {
    within(|| {
        let rt = gort::Runtime::new().unwrap();
        rt.block_on(async {
            // Dropped by `stop`.
            let (ctx, cancel) = context::with_cancel(&Context::background());
            let guard = CancelOnDrop(Some(cancel));
            let af = context::after_func(&ctx, move || drop(guard));
            assert!(af.stop());
            assert!(ctx.err().is_some(), "the drop cancelled it");
            // Run by the cancel, then dropped in its own task.
            let (ctx, cancel) = context::with_cancel(&Context::background());
            let (ctx2, cancel2) = context::with_cancel(&ctx);
            let guard = CancelOnDrop(Some(cancel2));
            let (tx, rx) = gort::chan::bounded(1);
            let _af = context::after_func(&ctx, move || {
                drop(guard);
                let _ = tx.try_send(());
            });
            cancel.cancel();
            rx.recv().await.unwrap();
            assert!(ctx2.err().is_some());
        });
    });
}

#[test]
fn callbacks_cancelling_their_parents_and_registering_more_callbacks_end() {
    within(|| {
        let rt = gort::Runtime::new().unwrap();
        rt.block_on(async {
            let (root, cancel_root) = context::with_cancel(&Context::background());
            let cancel_root = Arc::new(cancel_root);
            let runs = Arc::new(AtomicUsize::new(0));
            let mut leaf = root.clone();
            let mut keep = Vec::new();
            for _ in 0..200 {
                let (child, cancel) = context::with_cancel(&leaf);
                keep.push(cancel);
                leaf = child;
            }
            // The deepest child's callback cancels the root, whose callbacks register more.
            let (r, c, l) = (runs.clone(), cancel_root.clone(), leaf.clone());
            let _a = context::after_func(&leaf, move || {
                r.fetch_add(1, SeqCst);
                c.cancel();
                let r = r.clone();
                let _b = context::after_func(&l, move || {
                    r.fetch_add(1, SeqCst);
                });
            });
            let r = runs.clone();
            let root2 = root.clone();
            let _c = context::after_func(&root, move || {
                r.fetch_add(1, SeqCst);
                let (x, cancel_x) = context::with_cancel(&root2);
                assert!(
                    x.err().is_some(),
                    "a child of a cancelled context is cancelled"
                );
                cancel_x.cancel();
            });
            keep.pop().unwrap().cancel();
            let start = std::time::Instant::now();
            while runs.load(SeqCst) < 3 {
                assert!(start.elapsed() < WATCHDOG, "{}", runs.load(SeqCst));
                gort::time::sleep(Duration::from_millis(1)).await;
            }
            root.done().recv().await;
        });
    });
}

#[test]
fn zero_or_too_many_procs_panic_or_err_clearly() {
    within(|| {
        let msg = panic_of(|| drop(gort::Builder::new().procs(0).build()));
        assert!(msg.contains("procs"), "{msg:?}");
        let msg = panic_of(|| drop(gort::Builder::new().procs(gort::MAX_PROCS + 1).build()));
        assert!(msg.contains("procs"), "{msg:?}");
        let rt = gort::Builder::new().procs(2).build().unwrap();
        let msg = panic_of(|| rt.set_procs(0));
        assert!(msg.contains("procs"), "{msg:?}");
        // Shrinking to one P from inside a task of a busy runtime.
        let n = rt.block_on(async {
            let mut set = gort::JoinSet::new();
            for i in 0..100u64 {
                set.spawn(async move {
                    gort::time::sleep(Duration::from_millis(i % 5)).await;
                    i
                });
            }
            let h = gort::spawn_blocking(|| ());
            h.await.unwrap();
            let mut sum = 0;
            while let Some(r) = set.join_next().await {
                sum += r.unwrap();
            }
            sum
        });
        assert_eq!(n, 4950);
    });
}

fn threads_now() -> usize {
    std::fs::read_dir("/proc/self/task").map_or(0, |d| d.count())
}

#[test]
fn runtimes_made_and_dropped_in_a_loop_and_inside_each_other_leak_no_thread() {
    within(|| {
        let before = threads_now();
        for i in 0..100u64 {
            let rt = gort::Builder::new().procs(2).build().unwrap();
            let got = rt.block_on(async move {
                // Another runtime made, used through its handle, and dropped inside a task.
                let inner = gort::Runtime::new().unwrap();
                let h = inner.spawn(async move { i });
                let v = h.await.unwrap();
                gort::spawn_blocking(move || drop(inner)).await.unwrap();
                v
            });
            assert_eq!(got, i);
            drop(rt);
        }
        let after = threads_now();
        // The watchdog thread and the test harness's own may come and go; 100 leaked
        // runtimes would leave hundreds.
        assert!(
            after <= before + 4,
            "threads: {before} before, {after} after"
        );
    });
}

/// A waker that changes the number of Ps when woken: it runs in a P's timer batch.
struct ResizingWaker(Arc<gort::Runtime>, usize);

impl std::task::Wake for ResizingWaker {
    fn wake(self: Arc<Self>) {
        self.0.set_procs(self.1);
    }
}

#[test]
fn procs_changed_in_a_loop_from_a_thread_and_from_wakers_lose_no_task() {
    within(|| {
        let rt = Arc::new(gort::Builder::new().procs(3).build().unwrap());
        let resizer = support::Resizer::start(rt.clone(), Duration::from_micros(200));
        for round in 0..20usize {
            let rt_w = rt.clone();
            let sum = rt.block_on(async move {
                let mut set = gort::JoinSet::new();
                for i in 0..100u64 {
                    let waker = std::task::Waker::from(Arc::new(ResizingWaker(
                        rt_w.clone(),
                        1 + (round + i as usize) % 3,
                    )));
                    set.spawn(async move {
                        let mut s =
                            std::pin::pin!(gort::time::sleep(Duration::from_micros(i % 5 * 200)));
                        let _ = std::future::Future::poll(
                            s.as_mut(),
                            &mut std::task::Context::from_waker(&waker),
                        );
                        drop(waker);
                        gort::time::sleep(Duration::from_millis(1)).await;
                        gort::task::yield_now().await;
                        i
                    });
                }
                let mut sum = 0;
                while let Some(r) = set.join_next().await {
                    sum += r.unwrap();
                }
                sum
            });
            assert_eq!(sum, 4950);
        }
        resizer.stop();
        let rt = Arc::try_unwrap(rt).ok();
        drop(rt);
    });
}

#[test]
fn wait_groups_and_err_groups_misused_across_runtimes_threads_and_drops() {
    within(|| {
        let rt = gort::Builder::new().procs(2).build().unwrap();
        // A WaitGroup whose `done` runs in the Drop of futures dropped by a shutdown, waited
        // for from a plain thread through a foreign executor.
        let wg = gort::sync::WaitGroup::new();
        for _ in 0..10 {
            wg.add(1);
            let wg = wg.clone();
            struct Done(gort::sync::WaitGroup);
            impl Drop for Done {
                fn drop(&mut self) {
                    self.0.done();
                }
            }
            let done = Done(wg);
            drop(rt.spawn(async move {
                let _d = done;
                std::future::pending::<()>().await;
            }));
        }
        let w = wg.clone();
        let waiter = std::thread::spawn(move || futures::executor::block_on(w.wait()));
        std::thread::sleep(Duration::from_millis(20));
        drop(rt);
        waiter.join().unwrap();
        assert_eq!(wg.count(), 0);
        let msg = panic_of(|| wg.done());
        assert!(msg.contains("negative"), "{msg:?}");

        // An ErrGroup whose wait is raced from two tasks, and one dropped inside its own task.
        let rt = gort::Builder::new().procs(2).build().unwrap();
        rt.block_on(async {
            let group = Arc::new(gort::sync::ErrGroup::<String>::new());
            for i in 0..20u32 {
                group.spawn(async move {
                    gort::time::sleep(Duration::from_millis(u64::from(i % 3))).await;
                    if i == 7 {
                        Err("seven".to_string())
                    } else {
                        Ok(())
                    }
                });
            }
            let (a, b) = (group.clone(), group.clone());
            let wa = gort::spawn(async move { a.wait().await });
            let wb = gort::spawn(async move { b.wait().await });
            let (ra, rb) = (wa.await.unwrap(), wb.await.unwrap());
            assert!(
                ra.is_err() || rb.is_err(),
                "neither wait saw the error: {ra:?} {rb:?}"
            );

            let slot = Arc::new(std::sync::Mutex::new(Some(
                gort::sync::ErrGroup::<()>::new(),
            )));
            let inner = slot.clone();
            let (tx, rx) = gort::chan::bounded(1);
            slot.lock().unwrap().as_ref().unwrap().spawn(async move {
                gort::time::sleep(Duration::from_millis(2)).await;
                let taken = inner.lock().unwrap().take();
                drop(taken); // aborts this task too, at its next await
                let _ = tx.try_send(());
                gort::task::yield_now().await;
                Ok(())
            });
            for _ in 0..5 {
                slot.lock()
                    .unwrap()
                    .as_ref()
                    .unwrap()
                    .spawn(std::future::pending::<Result<(), ()>>());
            }
            rx.recv().await.unwrap();
        });
        drop(rt);
    });
}

#[test]
fn a_singleflight_work_calling_its_own_key_waits_alone_and_shutdown_frees_its_callers() {
    use gort::sync::singleflight::{CallError, Group};
    within(|| {
        let rt = gort::Builder::new().procs(2).build().unwrap();
        let group: Group<u32, u32> = Group::new();
        let g = group.clone();
        let (outer_tx, outer_rx) = mpsc::channel();
        let g2 = g.clone();
        drop(rt.spawn(async move {
            // The work joins its own run: it waits for itself (Go's Do deadlocks the same).
            let r = g2
                .call(1, move || {
                    let g3 = g.clone();
                    async move {
                        match gort::time::timeout(
                            Duration::from_millis(50),
                            g3.call(1, || async { 0 }),
                        )
                        .await
                        {
                            Ok(Ok((v, _))) => v + 100,
                            Ok(Err(_)) => 200,
                            Err(_) => 300, // timed out waiting for itself
                        }
                    }
                })
                .await;
            let _ = outer_tx.send(r);
        }));
        let r = outer_rx
            .recv_timeout(WATCHDOG)
            .expect("the outer call hung");
        assert_eq!(r, Ok((300, true)));
        // A run in flight when the runtime is dropped: a caller on a plain thread is freed.
        let (go_tx, go_rx) = gort::chan::bounded::<()>(0);
        let pending = {
            // Registered (its work spawned) now, inside the runtime.
            let _g = rt.handle().enter();
            group.call(2, move || async move {
                go_rx.recv().await;
                1
            })
        };
        let waiter = std::thread::spawn(move || futures::executor::block_on(pending));
        std::thread::sleep(Duration::from_millis(20));
        drop(rt);
        assert_eq!(waiter.join().unwrap(), Err(CallError::Shutdown));
        drop(go_tx);
    });
}
