//! Issue 17, item 4: dropping a runtime on its own thread, a `#[gort::main]` that returns
//! while threads are blocked, and timers armed by blocking closures during shutdown or waited
//! for in them.

mod support;

use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::SeqCst};
use std::sync::Arc;
use std::time::{Duration, Instant};
use support::panic_message;

/// Generous: the machine may be loaded; a healthy run takes milliseconds.
const PATIENCE: Duration = Duration::from_secs(60);

/// Sets its flag when dropped.
struct SetOnDrop(Arc<AtomicBool>);

impl Drop for SetOnDrop {
    fn drop(&mut self) {
        self.0.store(true, SeqCst);
    }
}

fn wait_for(flag: &AtomicBool, what: &str) {
    let start = Instant::now();
    while !flag.load(SeqCst) {
        assert!(start.elapsed() < PATIENCE, "timed out waiting: {what}");
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// Item 4a: the drop waited for every M to exit, the one it ran on included: it hung, and
/// with it the task and every future the shutdown should have dropped.
#[test]
fn dropping_the_last_runtime_inside_its_own_task_shuts_it_down() {
    let rt = Arc::new(gort::Builder::new().procs(2).build().unwrap());
    let other_dropped = Arc::new(AtomicBool::new(false));
    let guard = SetOnDrop(other_dropped.clone());
    drop(rt.spawn(async move {
        let _guard = guard;
        std::future::pending::<()>().await;
    }));
    let main_let_go = Arc::new(AtomicBool::new(false));
    let drop_returned = Arc::new(AtomicBool::new(false));
    let (mine, theirs) = (rt.clone(), main_let_go.clone());
    let returned = drop_returned.clone();
    drop(rt.spawn(async move {
        while !theirs.load(SeqCst) {
            gort::time::sleep(Duration::from_millis(1)).await;
        }
        drop(mine); // the last reference
        returned.store(true, SeqCst);
    }));
    drop(rt);
    main_let_go.store(true, SeqCst);
    wait_for(&drop_returned, "the drop inside the task to return");
    wait_for(
        &other_dropped,
        "the shutdown to drop the other task's future",
    );
}

/// Item 4c: a blocking closure that arms a timer after shutdown's first drain. The payload
/// holds a task of the runtime (a cycle through the heap: runtime -> P -> heap -> payload ->
/// task -> runtime), so it was never dropped; shutdown now drains again after the pool.
#[test]
fn timers_armed_by_blocking_closures_during_shutdown_are_dropped() {
    let rt = gort::Runtime::new().unwrap();
    let shutdown_began = Arc::new(AtomicBool::new(false));
    let guard = SetOnDrop(shutdown_began.clone());
    drop(rt.spawn(async move {
        let _guard = guard;
        std::future::pending::<()>().await;
    }));
    let payload_dropped = Arc::new(AtomicBool::new(false));
    let armed = Arc::new(AtomicUsize::new(0));
    let started = Arc::new(AtomicBool::new(false));
    let (began, dropped, armed2) = (shutdown_began, payload_dropped.clone(), armed.clone());
    let started2 = started.clone();
    rt.block_on(async move {
        drop(gort::spawn_blocking(move || {
            started2.store(true, SeqCst);
            // Shutdown dropping the task above is its first drain; let it finish.
            wait_for(&began, "shutdown to begin");
            std::thread::sleep(Duration::from_millis(50));
            let task = gort::spawn(async {});
            let guard = SetOnDrop(dropped);
            let timer = gort::time::after_func(Duration::from_secs(3600), move || {
                let _ = (&task, &guard);
            });
            armed2.fetch_add(1, SeqCst);
            drop(timer); // does not stop it (Go's AfterFunc)
        }));
    });
    wait_for(&started, "the blocking closure to start"); // else shutdown drops it unrun
    drop(rt);
    assert_eq!(armed.load(SeqCst), 1, "the closure ran to the end");
    assert!(
        payload_dropped.load(SeqCst),
        "a timer armed during shutdown kept its payload after the runtime was dropped"
    );
}

/// Shutdown waits for running blocking closures; one parked in `block_on` on a sleep (armed
/// before the shutdown, or after it began) waited for a timer that no M would run any more,
/// and the drop hung for good. The drain now wakes a timer's waker, and a timer armed off
/// the runtime's Ps once it is shut down panics, as Tokio's do: the closure ends.
#[test]
fn a_blocking_closure_sleeping_in_block_on_lets_the_drop_return() {
    let rt = gort::Runtime::new().unwrap();
    let (parked, late) = (
        Arc::new(AtomicBool::new(false)),
        Arc::new(AtomicBool::new(false)),
    );
    let outcomes = Arc::new(std::sync::Mutex::new(Vec::new()));
    for (started, wait_first) in [(parked.clone(), false), (late.clone(), true)] {
        let (handle, outcomes) = (rt.handle().clone(), outcomes.clone());
        drop(rt.handle().spawn_blocking(move || {
            started.store(true, SeqCst);
            if wait_first {
                // Sleeps only once the shutdown has drained the heaps.
                std::thread::sleep(Duration::from_millis(100));
            }
            let slept = std::panic::catch_unwind(AssertUnwindSafe(|| {
                handle.block_on(gort::time::sleep(Duration::from_secs(3600)))
            }));
            outcomes.lock().unwrap().push(slept.map_err(panic_message));
        }));
    }
    wait_for(&parked, "the first blocking closure to start");
    wait_for(&late, "the second blocking closure to start");
    std::thread::sleep(Duration::from_millis(20)); // the first one parks
    support::drop_within(
        rt,
        PATIENCE,
        "the drop hung on a blocking closure waiting for a timer",
    );
    let outcomes = outcomes.lock().unwrap();
    assert_eq!(outcomes.len(), 2);
    for outcome in outcomes.iter() {
        let message = outcome
            .as_ref()
            .expect_err("an hour-long sleep cannot have ended");
        assert!(message.contains("not shut down"), "{message}");
    }
}

/// The same wait on a channel timer: its runtime timer's payload is a callback, not a waker,
/// and the drain dropped it, leaving the receive parked for good. The callback is told of
/// the shutdown now, and closes its channel: the receive ends with `None`.
#[test]
fn a_blocking_closure_receiving_from_a_timer_lets_the_drop_return() {
    let rt = gort::Runtime::new().unwrap();
    let started = Arc::new(AtomicBool::new(false));
    let received = Arc::new(std::sync::Mutex::new(Vec::new()));
    let (handle, started2, received2) = (rt.handle().clone(), started.clone(), received.clone());
    drop(rt.handle().spawn_blocking(move || {
        let ticker = handle.block_on(async { gort::time::Ticker::new(Duration::from_secs(3600)) });
        started2.store(true, SeqCst);
        let (once, tick) = handle.block_on(async {
            let once = gort::time::after(Duration::from_secs(3600));
            gort::select! {
                v = once.recv() => (Some(v), None),
                v = ticker.c().recv() => (None, Some(v)),
            }
        });
        received2.lock().unwrap().push((once, tick));
    }));
    wait_for(&started, "the blocking closure to start");
    std::thread::sleep(Duration::from_millis(20)); // it parks
    support::drop_within(
        rt,
        PATIENCE,
        "the drop hung on a blocking closure receiving from a timer",
    );
    let received = received.lock().unwrap();
    assert_eq!(received.len(), 1, "the receive ended");
    let (once, tick) = received[0];
    assert!(
        once == Some(None) || tick == Some(None),
        "an hour-long timer cannot have fired: {:?}",
        received[0]
    );
}

/// The same wait on a socket: no M polls any more, so the read waited for ever, and the
/// drop with it. Shutdown now closes every registered socket's halves (Go's `pollUnblock`),
/// so the read fails, and a socket registered after it fails at once.
#[test]
fn a_blocking_closure_reading_a_socket_lets_the_drop_return() {
    let rt = gort::Runtime::new().unwrap();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let connected = Arc::new(AtomicBool::new(false));
    let results = Arc::new(std::sync::Mutex::new(Vec::new()));
    let (handle, connected2, results2) = (rt.handle().clone(), connected.clone(), results.clone());
    drop(rt.handle().spawn_blocking(move || {
        let read = handle.block_on(async {
            let stream = gort::net::TcpStream::connect(addr).await?;
            connected2.store(true, SeqCst);
            stream.read(&mut [0; 8]).await
        });
        let again = handle.block_on(gort::net::TcpStream::connect(addr));
        results2.lock().unwrap().push((read, again.map(drop)));
    }));
    let (_peer, _) = listener.accept().unwrap(); // connected; it sends nothing
    wait_for(&connected, "the blocking closure to connect");
    std::thread::sleep(Duration::from_millis(20)); // it parks in the read
    support::drop_within(
        rt,
        PATIENCE,
        "the drop hung on a blocking closure reading a socket",
    );
    let results = results.lock().unwrap();
    let (read, again) = &results[0];
    assert!(read.is_err(), "the peer sent nothing: {read:?}");
    assert!(
        again.is_err(),
        "a socket registered after shutdown: {again:?}"
    );
}

/// A future whose `Drop` spawns a clean-up task holding the next link, `left` more times.
struct SpawnsOnDrop {
    left: u32,
    dropped: Arc<AtomicUsize>,
}

impl Drop for SpawnsOnDrop {
    fn drop(&mut self) {
        self.dropped.fetch_add(1, SeqCst);
        if self.left > 0 {
            let next = SpawnsOnDrop {
                left: self.left - 1,
                dropped: self.dropped.clone(),
            };
            drop(gort::spawn(async move {
                let _next = next;
                std::future::pending::<()>().await;
            }));
        }
    }
}

/// A task spawned on a shut-down runtime has its future dropped at once, inside the spawn:
/// with a `Drop` that spawns again (an async clean-up whose task's drop spawns the next), each
/// link recursed, and a chain of 10,000 overflowed the stack of the dropping thread (an
/// abort). The nested spawns are now dropped in a loop.
#[test]
fn a_long_chain_of_spawns_from_drops_at_shutdown_is_dropped_whole() {
    const LINKS: u32 = 100_000;
    let rt = gort::Builder::new().procs(2).build().unwrap();
    let dropped = Arc::new(AtomicUsize::new(0));
    let first = SpawnsOnDrop {
        left: LINKS,
        dropped: dropped.clone(),
    };
    drop(rt.spawn(async move {
        let _first = first;
        std::future::pending::<()>().await;
    }));
    support::drop_within(rt, PATIENCE, "the drop hung");
    assert_eq!(dropped.load(SeqCst), LINKS as usize + 1);
}

/// The child of `a_gort_main_that_returns_ends_the_program`: threads blocked for ever in a
/// blocking closure and in `block_in_place` when `main` returns.
#[gort::main(procs = 2)]
async fn main_with_blocked_threads() {
    let blocked = Arc::new(AtomicUsize::new(0));
    let b = blocked.clone();
    drop(gort::spawn_blocking(move || {
        b.fetch_add(1, SeqCst);
        loop {
            std::thread::park();
        }
    }));
    let b = blocked.clone();
    drop(gort::spawn(async move {
        gort::block_in_place(|| {
            b.fetch_add(1, SeqCst);
            loop {
                std::thread::park();
            }
        })
    }));
    while blocked.load(SeqCst) < 2 {
        gort::time::sleep(Duration::from_millis(1)).await;
    }
    println!("main returns");
}

#[test]
#[ignore = "run by a_gort_main_that_returns_ends_the_program in a child process"]
fn gort_main_child() {
    if std::env::var_os("GORT_EXITING_CHILD").is_some() {
        main_with_blocked_threads();
    }
}

/// Item 4b: the runtime's drop waited for ever for the blocked threads, so the program
/// never ended. The child is this test binary running `gort_main_child`.
#[test]
fn a_gort_main_that_returns_ends_the_program() {
    let run = support::run_child(
        "gort_main_child",
        "GORT_EXITING_CHILD",
        PATIENCE,
        "the program did not end after its #[gort::main] returned",
    );
    let out = &run.stdout;
    assert!(run.status.success(), "child failed: {}\n{out}", run.status);
    assert!(out.contains("main returns"), "the child did not run: {out}");
    assert!(
        out.contains("1 passed"),
        "the child test did not pass: {out}"
    );
}
