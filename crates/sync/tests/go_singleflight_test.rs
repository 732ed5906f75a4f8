//! Ports of golang.org/x/sync's `singleflight/singleflight_test.go`, one test per Go test,
//! named in its doc comment. `g.Do(key, fn)` is `group.call(key, work).await`, and
//! `g.DoChan` the same future kept before it is awaited (`call` registers and starts the work
//! when called). Each test runs on a fresh runtime of 1 P and of 4 under a watchdog.
//!
//! gort differs on purpose where Go's tests rely on a panic crossing goroutines: a panic in
//! the work reaches every caller as `CallError::Panicked` and the process lives on (Rust
//! cannot re-panic one payload in several tasks, and Go's `DoChan` crash is what its tests
//! check). Not ported: TestGoexitDo (`runtime.Goexit`: a Rust task has no way to exit
//! mid-call but to return or panic, both covered).

use std::sync::atomic::{AtomicI32, Ordering::SeqCst};
use std::sync::Arc;
use std::time::Duration;

use gort::chan::bounded;
use gort::sync::singleflight::{CallError, Group};
use gort::sync::WaitGroup;

#[path = "../../time/tests/support/watchdog.rs"]
mod watchdog;

use watchdog::on_1_and_4_procs;

/// Go: TestDo. A lone call gets its work's value, not shared.
#[test]
fn do_() {
    on_1_and_4_procs(|| async {
        let g: Group<&str, &str> = Group::new();
        let got = g.call("key", || async { "bar" }).await;
        assert_eq!(got, Ok(("bar", false)));
    });
}

/// Go: TestDoErr. An error of the work is the caller's (here part of the value: a
/// `Result`).
#[test]
fn do_err() {
    on_1_and_4_procs(|| async {
        let g: Group<&str, Result<&str, String>> = Group::new();
        let some_err = "Some error".to_string();
        let e = some_err.clone();
        let (v, _shared) = g.call("key", || async move { Err(e) }).await.unwrap();
        assert_eq!(v, Err(some_err));
    });
}

/// Go: TestDoDupSuppress. Ten concurrent calls of one key while the first run is held open:
/// the work runs at least once and fewer than ten times, and every caller gets "bar".
#[test]
fn do_dup_suppress() {
    on_1_and_4_procs(|| async {
        let g: Group<&str, String> = Group::new();
        let (wg1, wg2) = (WaitGroup::new(), WaitGroup::new());
        let (c_tx, c_rx) = bounded::<String>(1);
        let calls = Arc::new(AtomicI32::new(0));
        const N: i32 = 10;
        wg1.add(1);
        for _ in 0..N {
            wg1.add(1);
            wg2.add(1);
            let (g, wg1, wg2) = (g.clone(), wg1.clone(), wg2.clone());
            let (c_tx, c_rx, calls) = (c_tx.clone(), c_rx.clone(), calls.clone());
            gort::spawn(async move {
                wg1.done();
                let fn_wg1 = wg1.clone();
                let work = move || async move {
                    if calls.fetch_add(1, SeqCst) + 1 == 1 {
                        fn_wg1.done(); // First invocation.
                    }
                    let v = c_rx.recv().await.unwrap();
                    c_tx.send(v.clone()).await.unwrap(); // pump; make available for any future calls
                    gort::time::sleep(Duration::from_millis(10)).await; // let more tasks enter call
                    v
                };
                let (v, _shared) = g.call("key", work).await.expect("Do error");
                assert_eq!(v, "bar");
                wg2.done();
            });
        }
        wg1.wait().await;
        // At least one task is in the work now and all of them have at least reached the
        // line before the call.
        c_tx.send("bar".to_string()).await.unwrap();
        wg2.wait().await;
        let got = calls.load(SeqCst);
        assert!(
            got > 0 && got < N,
            "number of calls = {got}; want over 0 and less than {N}"
        );
    });
}

/// Go: TestForget (go#31420). After `forget`, a new call starts a new run while the old one
/// still ends; a call made once the old run ended joins the new run, not a third.
#[test]
fn forget() {
    on_1_and_4_procs(|| async {
        let g: Group<&str, i32> = Group::new();
        let (first_started_tx, first_started) = bounded::<()>(0);
        let (unblock_first_tx, unblock_first) = bounded::<()>(0);
        let (first_finished_tx, first_finished) = bounded::<()>(0);

        let g1 = g.clone();
        gort::spawn(async move {
            let _ = g1
                .call("key", move || async move {
                    first_started_tx.close();
                    unblock_first.recv().await;
                    first_finished_tx.close();
                    0
                })
                .await;
        });
        first_started.recv().await;
        g.forget("key");

        let (unblock_second_tx, unblock_second) = bounded::<()>(0);
        let second_result = g.call("key", move || async move {
            unblock_second.recv().await;
            2
        });

        unblock_first_tx.close();
        first_finished.recv().await;

        let third_result = g.call("key", || async { 3 });

        unblock_second_tx.close();
        second_result.await.unwrap();
        let (r, _shared) = third_result.await.unwrap();
        assert_eq!(
            r, 2,
            "We should receive result produced by second call, expected: 2, got {r}"
        );
    });
}

/// Go: TestDoChan. The future kept before it is awaited (Go's channel) gives the value.
#[test]
fn do_chan() {
    on_1_and_4_procs(|| async {
        let g: Group<&str, &str> = Group::new();
        let ch = g.call("key", || async { "bar" });
        let (v, _shared) = ch.await.unwrap();
        assert_eq!(v, "bar");
    });
}

/// Go: TestPanicDo (go#41133). Five concurrent calls whose work panics: every caller is told
/// (Go re-panics in each; gort gives each `CallError::Panicked`), and none hangs.
#[test]
fn panic_do() {
    on_1_and_4_procs(|| async {
        let g: Group<&str, ()> = Group::new();
        const N: usize = 5;
        let (done_tx, done) = bounded(N);
        for _ in 0..N {
            let (g, done_tx) = (g.clone(), done_tx.clone());
            gort::spawn(async move {
                let got = g
                    .call("key", || async {
                        panic!("invalid memory address or nil pointer dereference")
                    })
                    .await;
                done_tx.send(got).await.unwrap();
            });
        }
        let hangs = gort::time::after(Duration::from_secs(10));
        for _ in 0..N {
            gort::select! {
                got = done.recv() => assert_eq!(
                    got.unwrap(),
                    Err(CallError::Panicked(
                        "invalid memory address or nil pointer dereference".into()
                    ))
                ),
                _ = hangs.recv() => panic!("Do hangs"),
            }
        }
        // The group keeps working after the panic.
        assert_eq!(g.call("key", || async {}).await, Ok(((), false)));
    });
}

/// Go: TestPanicDoChan. Go's process crashes with the panic of a `DoChan` work (it runs in a
/// goroutine nobody can recover); gort, by design, gives the caller `CallError::Panicked`
/// with the panic's message and the process lives on.
#[test]
fn panic_do_chan() {
    on_1_and_4_procs(|| async {
        let g: Group<&str, ()> = Group::new();
        let ch = g.call("", || async { panic!("Panicking in DoChan") });
        assert_eq!(
            ch.await,
            Err(CallError::Panicked("Panicking in DoChan".into()))
        );
    });
}

/// Go: TestPanicDoSharedByDoChan. A `DoChan` joins a `Do` whose work then panics: the joiner's
/// own work never runs, and it gets the panic (Go: the process crashes with "Panicking in
/// Do"; gort: `CallError::Panicked` with it, to both callers).
#[test]
fn panic_do_shared_by_do_chan() {
    on_1_and_4_procs(|| async {
        let (blocked_tx, blocked) = bounded::<()>(0);
        let (unblock_tx, unblock) = bounded::<()>(0);
        let g: Group<&str, ()> = Group::new();
        let g1 = g.clone();
        let first = gort::spawn(async move {
            g1.call("", move || async move {
                blocked_tx.close();
                unblock.recv().await;
                panic!("Panicking in Do")
            })
            .await
        });
        blocked.recv().await;
        let ch = g.call("", || async {
            panic!("DoChan unexpectedly executed callback")
        });
        unblock_tx.close();
        let want = Err(CallError::Panicked("Panicking in Do".into()));
        assert_eq!(ch.await, want);
        assert_eq!(first.await.unwrap(), want);
    });
}

/// Go: ExampleGroup. Two `DoChan`s of one key while the first work is held: the second
/// shares the first's result ("func 1"), and both are told it was shared.
#[test]
fn example_group() {
    on_1_and_4_procs(|| async {
        let g: Group<&str, &str> = Group::new();
        let (block_tx, block) = bounded::<()>(0);
        let block2 = block.clone();
        let res1c = g.call("key", move || async move {
            block.recv().await;
            "func 1"
        });
        let res2c = g.call("key", move || async move {
            block2.recv().await;
            "func 2"
        });
        block_tx.close();
        let res1 = res1c.await.unwrap();
        let res2 = res2c.await.unwrap();
        assert!(res2.1, "Shared: true");
        assert_eq!(res1.0, res2.0, "Equal results");
        assert_eq!(res1.0, "func 1");
    });
}
