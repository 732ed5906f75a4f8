//! Adversarial probes of `JoinHandle`/`AbortHandle`: abort racing completion, a detaching
//! drop and the runtime's drop, from plain threads (each output delivered or dropped exactly
//! once); `is_finished`; a handle polled after it returned its output.

mod support;

use support::{rt, Tracked};

use gort::task::JoinHandle;
use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::SeqCst};
use std::sync::{Arc, Barrier};
use std::time::Duration;
use support::{panic_text, within};

/// Spins for about `iters` steps (a task that finishes at an unpredictable moment).
fn spin(iters: u64) {
    for i in 0..iters {
        std::hint::black_box(i);
    }
}

/// `abort` from a plain thread racing the task's own completion, many times: the output is
/// either delivered (`Ok`) or dropped by the task, exactly once, never both or neither; and
/// once `is_finished` says so, the handle is ready at its next poll.
#[test]
fn abort_racing_completion_delivers_or_drops_each_output_exactly_once() {
    within(|| {
        let rt = rt(2);
        const ROUNDS: u64 = 3000;
        let made = Arc::new(AtomicUsize::new(0));
        let dropped = Arc::new(AtomicUsize::new(0));
        let (mut delivered, mut cancelled) = (0, 0);
        for round in 0..ROUNDS {
            let (made2, dropped2) = (made.clone(), dropped.clone());
            let barrier = Arc::new(Barrier::new(2));
            let b2 = barrier.clone();
            let h: JoinHandle<Tracked> = rt.spawn(async move {
                b2.wait();
                spin(round % 64 * 20);
                made2.fetch_add(1, SeqCst);
                Tracked {
                    dropped: dropped2,
                    n: round,
                }
            });
            let abort = h.abort_handle();
            let aborter = std::thread::spawn(move || {
                barrier.wait();
                spin(round % 50 * 20);
                abort.abort();
                abort
            });
            let abort = aborter.join().unwrap();
            let res = rt.block_on(h);
            assert!(abort.is_finished());
            match res {
                Ok(t) => {
                    assert_eq!(t.n, round);
                    delivered += 1;
                }
                Err(e) => {
                    assert!(e.is_cancelled(), "{e}");
                    cancelled += 1;
                }
            }
        }
        // Every output made was dropped once: by us (delivered) or by the task.
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while dropped.load(SeqCst) < made.load(SeqCst) {
            assert!(std::time::Instant::now() < deadline);
            std::thread::sleep(Duration::from_millis(1));
        }
        assert_eq!(dropped.load(SeqCst), made.load(SeqCst));
        assert!(delivered as usize <= made.load(SeqCst));
        assert_eq!(delivered + cancelled, ROUNDS);
    });
}

/// The same race with the `JoinHandle` dropped (detached) from a third thread while the task
/// completes and is aborted: each output made is dropped exactly once.
#[test]
fn abort_and_detach_racing_completion_drop_each_output_exactly_once() {
    within(|| {
        let rt = rt(2);
        const ROUNDS: u64 = 2000;
        let made = Arc::new(AtomicUsize::new(0));
        let dropped = Arc::new(AtomicUsize::new(0));
        let mut finished = Vec::new();
        for round in 0..ROUNDS {
            let (made2, dropped2) = (made.clone(), dropped.clone());
            let barrier = Arc::new(Barrier::new(3));
            let (b2, b3) = (barrier.clone(), barrier.clone());
            let h = rt.spawn(async move {
                b2.wait();
                spin(round % 32 * 20);
                made2.fetch_add(1, SeqCst);
                Tracked {
                    dropped: dropped2,
                    n: round,
                }
            });
            let abort = h.abort_handle();
            let a2 = abort.clone();
            let t1 = std::thread::spawn(move || {
                b3.wait();
                spin(round % 40 * 20);
                a2.abort();
            });
            let t2 = std::thread::spawn(move || {
                barrier.wait();
                spin(round % 24 * 20);
                drop(h);
            });
            t1.join().unwrap();
            t2.join().unwrap();
            finished.push(abort);
        }
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while !finished.iter().all(|a| a.is_finished()) {
            assert!(
                std::time::Instant::now() < deadline,
                "an aborted task never finished"
            );
            std::thread::sleep(Duration::from_millis(1));
        }
        drop(rt);
        assert_eq!(dropped.load(SeqCst), made.load(SeqCst));
    });
}

/// `is_finished` is true only once the output can be taken: a handle that says finished is
/// ready at its next poll, from a foreign executor, for every kind of end.
#[test]
fn is_finished_means_the_next_poll_is_ready() {
    within(|| {
        let rt = rt(2);
        for round in 0..2000u32 {
            let go = Arc::new(AtomicBool::new(false));
            let g2 = go.clone();
            let h = rt.spawn(async move {
                while !g2.load(SeqCst) {
                    gort::yield_now().await;
                }
                if round % 3 == 0 {
                    panic!("round {round}");
                }
                round
            });
            if round % 3 == 1 {
                h.abort();
            }
            go.store(true, SeqCst);
            while !h.is_finished() {
                std::hint::spin_loop();
            }
            let waker = futures::task::noop_waker();
            let mut cx = std::task::Context::from_waker(&waker);
            let mut h = h;
            match std::pin::Pin::new(&mut h).poll(&mut cx) {
                std::task::Poll::Ready(_) => {}
                std::task::Poll::Pending => panic!("finished, yet pending (round {round})"),
            }
        }
    });
}

/// A `JoinHandle` polled again after it returned its output panics with a clear message
/// (misuse, not UB or a hang).
#[test]
fn a_join_handle_polled_after_ready_panics_clearly() {
    within(|| {
        let rt = rt(1);
        let mut h = rt.spawn(async { 5 });
        assert_eq!(rt.block_on(&mut h).unwrap(), 5);
        let again = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let waker = futures::task::noop_waker();
            let mut cx = std::task::Context::from_waker(&waker);
            let _ = std::pin::Pin::new(&mut h).poll(&mut cx);
        }))
        .unwrap_err();
        assert!(panic_text(&*again).contains("after it returned Ready"));
        drop(h);
    });
}

/// Aborts from a plain thread racing the runtime's drop: every task ends cancelled, every
/// future is dropped exactly once, and neither side hangs.
#[test]
fn aborts_racing_the_runtimes_drop_drop_every_future_once() {
    within(|| {
        for round in 0..20u64 {
            let rt = rt(2);
            let dropped = Arc::new(AtomicUsize::new(0));
            let mut handles = Vec::new();
            for i in 0..300 {
                let guard = Tracked {
                    dropped: dropped.clone(),
                    n: i,
                };
                handles.push(rt.spawn(async move {
                    let _guard = guard;
                    if i % 2 == 0 {
                        gort::time::sleep(Duration::from_secs(3600)).await;
                    } else {
                        std::future::pending::<()>().await;
                    }
                }));
            }
            let aborts: Vec<_> = handles.iter().map(|h| h.abort_handle()).collect();
            let barrier = Arc::new(Barrier::new(2));
            let b2 = barrier.clone();
            let aborter = std::thread::spawn(move || {
                b2.wait();
                spin(round * 500);
                for a in &aborts {
                    a.abort();
                }
                aborts
            });
            barrier.wait();
            drop(rt);
            let aborts = aborter.join().unwrap();
            assert!(aborts.iter().all(|a| a.is_finished()));
            for h in handles {
                assert!(futures::executor::block_on(h).unwrap_err().is_cancelled());
            }
            assert_eq!(dropped.load(SeqCst), 300, "round {round}");
        }
    });
}
