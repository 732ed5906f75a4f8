//! `ErrGroup::set_limit`, `try_spawn` and `spawn_limited` (Go's `SetLimit`, `TryGo`, and `Go`
//! under a limit): never more tasks running than the limit, on several Ps and from several
//! spawners at once, and no slot lost to a task that panics, is aborted, or a dropped wait.

use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::SeqCst};
use std::sync::Arc;
use std::time::Duration;

use futures::FutureExt;
use gort::sync::ErrGroup;

fn runtime() -> gort::Runtime {
    gort::Builder::new().procs(4).build().unwrap()
}

/// Counts the tasks inside their body, and the most at once.
#[derive(Clone, Default)]
struct Gauge {
    now: Arc<AtomicUsize>,
    most: Arc<AtomicUsize>,
}

impl Gauge {
    /// A task body: in, a little work across a yield and a spin (so that other Ps overlap
    /// it), out.
    async fn run(self) -> Result<(), String> {
        self.most
            .fetch_max(self.now.fetch_add(1, SeqCst) + 1, SeqCst);
        gort::time::sleep(Duration::from_micros(200)).await;
        for _ in 0..1_000 {
            std::hint::spin_loop();
        }
        self.now.fetch_sub(1, SeqCst);
        Ok(())
    }
}

/// Four spawner tasks on four Ps, each spawning 100 tasks in one of the three ways, into a
/// group limited to 2: never 3 at once.
#[test]
fn a_limit_of_2_never_runs_3_at_once_on_4_ps() {
    runtime().block_on(async {
        let mut group = ErrGroup::new();
        group.set_limit(Some(2));
        let group = Arc::new(group);
        let gauge = Gauge::default();
        let spawners: Vec<_> = (0..4)
            .map(|way| {
                let (group, gauge) = (group.clone(), gauge.clone());
                gort::spawn(async move {
                    for _ in 0..100 {
                        match way {
                            0 | 3 => group.spawn(gauge.clone().run()),
                            1 => group.spawn_limited(gauge.clone().run()).await,
                            _ => {
                                while !group.try_spawn(gauge.clone().run()) {
                                    gort::yield_now().await;
                                }
                            }
                        }
                    }
                })
            })
            .collect();
        for s in spawners {
            s.await.unwrap();
        }
        assert_eq!(group.wait().await, Ok(()));
        let most = gauge.most.load(SeqCst);
        assert!((1..=2).contains(&most), "{most} tasks ran at once");
        assert_eq!(gauge.now.load(SeqCst), 0);
    });
}

/// Two tasks that meet each other: both run at once under a limit of 2.
#[test]
fn the_limit_tasks_do_run_at_once() {
    runtime().block_on(async {
        let mut group = ErrGroup::<()>::new();
        group.set_limit(Some(2));
        let (tx, rx) = gort::chan::bounded::<()>(0);
        group.spawn(async move { tx.send(()).await.map_err(drop) });
        group.spawn(async move { rx.recv().await.ok_or(()) });
        let met = gort::time::timeout(Duration::from_secs(20), group.wait()).await;
        assert_eq!(met, Ok(Ok(())));
    });
}

#[test]
fn try_spawn_refuses_without_starting_and_succeeds_once_a_slot_frees() {
    runtime().block_on(async {
        let mut group = ErrGroup::<()>::new();
        group.set_limit(Some(1));
        let (release, released) = gort::chan::bounded::<()>(0);
        assert!(group.try_spawn(async move {
            released.recv().await;
            Ok(())
        }));
        let ran = Arc::new(AtomicBool::new(false));
        let r = ran.clone();
        assert!(!group.try_spawn(async move {
            r.store(true, SeqCst);
            Ok(())
        }));
        drop(release);
        assert_eq!(group.wait().await, Ok(()));
        assert!(!ran.load(SeqCst), "a refused task never runs");
        assert!(group.try_spawn(async { Ok(()) }));
        assert_eq!(group.wait().await, Ok(()));
    });
}

/// A panicking task of a limit-1 group frees its slot: the task queued behind it runs, `wait`
/// resumes the panic, and the group takes new tasks.
#[test]
fn a_panicking_task_frees_its_slot() {
    runtime().block_on(async {
        let mut group = ErrGroup::<()>::new();
        group.set_limit(Some(1));
        let ran = Arc::new(AtomicBool::new(false));
        group.spawn(async { panic!("task panics") });
        let r = ran.clone();
        group.spawn(async move {
            r.store(true, SeqCst);
            Ok(())
        });
        let waited = AssertUnwindSafe(group.wait()).catch_unwind().await;
        assert!(waited.is_err(), "wait resumes the panic");
        assert!(ran.load(SeqCst), "the queued task got the freed slot");
        assert!(group.try_spawn(async { Ok(()) }));
        assert_eq!(group.wait().await, Ok(()));
    });
}

/// Dropping `wait` aborts the tasks it took, one holding the slot and others queued for it:
/// the slot comes back.
#[test]
fn aborted_tasks_free_their_slots() {
    runtime().block_on(async {
        let mut group = ErrGroup::<()>::new();
        group.set_limit(Some(1));
        for _ in 0..3 {
            group.spawn(std::future::pending());
        }
        let gave_up = gort::time::timeout(Duration::from_millis(20), group.wait()).await;
        assert!(gave_up.is_err());
        // The aborted tasks are gone once their futures are dropped.
        assert_eq!(group.wait().await, Ok(()));
        assert!(group.try_spawn(async { Ok(()) }));
        assert_eq!(group.wait().await, Ok(()));
    });
}

/// A `spawn_limited` dropped while it waits for a slot spawns nothing and keeps no slot.
#[test]
fn spawn_limited_is_cancel_safe() {
    runtime().block_on(async {
        let mut group = ErrGroup::<()>::new();
        group.set_limit(Some(1));
        let (release, released) = gort::chan::bounded::<()>(0);
        group
            .spawn_limited(async move {
                released.recv().await;
                Ok(())
            })
            .await;
        let ran = Arc::new(AtomicBool::new(false));
        let r = ran.clone();
        let late = group.spawn_limited(async move {
            r.store(true, SeqCst);
            Ok(())
        });
        assert!(gort::time::timeout(Duration::from_millis(20), late)
            .await
            .is_err());
        drop(release);
        assert_eq!(group.wait().await, Ok(()));
        assert!(!ran.load(SeqCst));
        assert!(group.try_spawn(async { Ok(()) }));
        assert_eq!(group.wait().await, Ok(()));
    });
}

#[test]
fn set_limit_panics_while_tasks_run_and_on_zero() {
    runtime().block_on(async {
        let mut group = ErrGroup::<()>::new();
        let (release, released) = gort::chan::bounded::<()>(0);
        group.spawn(async move {
            released.recv().await;
            Ok(())
        });
        let set = std::panic::catch_unwind(AssertUnwindSafe(|| group.set_limit(Some(2))));
        assert!(set.is_err(), "set_limit with a task running");
        drop(release);
        assert_eq!(group.wait().await, Ok(()));
        group.set_limit(Some(2)); // fine once idle
        assert_eq!(group.limit(), Some(2));
        let zero = std::panic::catch_unwind(AssertUnwindSafe(|| group.set_limit(Some(0))));
        assert!(zero.is_err(), "a limit of 0");
        assert_eq!(group.limit(), Some(2), "a refused limit changes nothing");
        group.set_limit(None);
        assert_eq!(group.limit(), None);
    });
}

/// Without a limit, `try_spawn` always spawns and `spawn_limited` never waits.
#[test]
fn no_limit_never_refuses() {
    runtime().block_on(async {
        let group = ErrGroup::new();
        for n in 0..100u32 {
            assert!(group.try_spawn(async move {
                if n == 7 {
                    Err(n)
                } else {
                    Ok(())
                }
            }));
            group.spawn_limited(async { Ok(()) }).await;
        }
        assert_eq!(group.wait().await, Err(7));
    });
}

/// The first error still cancels the context at once under a limit, and queued tasks see it.
#[test]
fn queued_tasks_see_the_cancel_of_the_first_error() {
    runtime().block_on(async {
        let (mut group, ctx) = ErrGroup::with_context(&gort::context::Context::background());
        group.set_limit(Some(1));
        // Takes the one slot at once: every other task starts after it failed.
        assert!(group.try_spawn(async { Err("first") }));
        let canceled_at_start = Arc::new(AtomicUsize::new(0));
        for _ in 0..5 {
            let (ctx, seen) = (ctx.clone(), canceled_at_start.clone());
            group.spawn(async move {
                if ctx.err().is_some() {
                    seen.fetch_add(1, SeqCst);
                }
                Ok(())
            });
        }
        assert_eq!(group.wait().await, Err("first"));
        assert_eq!(canceled_at_start.load(SeqCst), 5);
    });
}

/// Go's `TryGo` after `SetLimit(2)` and two `Go`s returns false: `spawn` takes its slot
/// before it returns, so a `try_spawn` right after finds none, nor while a third waits in
/// the queue (a spawned task took its slot at its first poll: 119-150 of 200 rounds let
/// `try_spawn` in).
#[test]
fn spawn_takes_its_slot_before_it_returns() {
    let rt = runtime();
    rt.block_on(async {
        for round in 0..200 {
            let mut group = ErrGroup::<String>::new();
            group.set_limit(Some(2));
            // The two tasks hold their slots until the gate closes, however late this
            // thread gets to its next line.
            let (gate, closed) = gort::chan::bounded::<()>(0);
            for _ in 0..2 {
                let closed = closed.clone();
                group.spawn(async move {
                    let _ = closed.recv().await;
                    Ok(())
                });
            }
            assert!(
                !group.try_spawn(async { Ok(()) }),
                "round {round}: try_spawn found a slot that a spawned task holds"
            );
            // A third `spawn` queues; while it waits, `try_spawn` finds no slot either.
            group.spawn(async { Ok(()) });
            assert!(
                !group.try_spawn(async { Ok(()) }),
                "round {round}: passed the queue"
            );
            drop(gate);
            group.wait().await.unwrap();
        }
    });
}
