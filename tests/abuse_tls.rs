//! gort's objects left in thread-locals of the runtime's own threads: an armed `Sleep`, a
//! channel `Timer`, an `after_func`, a join handle, a sender with a parked receiver, a
//! context cancel guard. They are dropped by the thread-local destructors when the threads
//! end (the runtime's drop), after gort's own thread-locals may be gone. A panic there
//! aborts the process, so the scenario runs in a child process (this test binary again).

use std::cell::RefCell;
use std::pin::Pin;
use std::time::Duration;

mod support;

const PATIENCE: Duration = Duration::from_secs(60);

/// Everything a user might park in a thread-local (held only to be dropped there).
#[derive(Default)]
struct Stash {
    _sleep: Option<Pin<Box<gort::time::Sleep>>>,
    _timer: Option<gort::time::Timer>,
    _ticker: Option<gort::time::Ticker>,
    _after: Option<gort::time::AfterFunc>,
    _join: Option<gort::JoinHandle<()>>,
    _sender: Option<gort::chan::Sender<u8>>,
    _cancel: Option<gort::context::CancelGuard>,
}

thread_local! {
    static STASH: RefCell<Vec<Stash>> = const { RefCell::new(Vec::new()) };
}

/// Fills this thread's stash (in a task or a blocking closure of a runtime).
fn stash_here() {
    let mut sleep = Box::pin(gort::time::sleep(Duration::from_secs(3600)));
    let waker = futures::task::noop_waker_ref();
    let _ = std::future::Future::poll(sleep.as_mut(), &mut std::task::Context::from_waker(waker));
    let (tx, rx) = gort::chan::bounded::<u8>(0);
    drop(gort::spawn(async move {
        let _ = rx.recv().await;
    }));
    let (ctx, cancel) = gort::context::with_cancel(&gort::context::Context::background());
    let _af = gort::context::after_func(&ctx, || {});
    let stash = Stash {
        _sleep: Some(sleep),
        _timer: Some(gort::time::Timer::new(Duration::from_secs(3600))),
        _ticker: Some(gort::time::Ticker::new(Duration::from_secs(3600))),
        _after: Some(gort::time::after_func(Duration::from_secs(3600), || {})),
        _join: Some(gort::spawn(std::future::pending())),
        _sender: Some(tx),
        _cancel: Some(cancel.drop_guard()),
    };
    STASH.with(|s| s.borrow_mut().push(stash));
}

fn child_scenario() {
    let rt = gort::Builder::new().procs(2).build().unwrap();
    rt.block_on(async {
        let mut set = gort::JoinSet::new();
        for _ in 0..8 {
            set.spawn(async {
                stash_here();
                gort::task::yield_now().await;
                stash_here();
            });
        }
        while let Some(r) = set.join_next().await {
            r.unwrap();
        }
        for _ in 0..4 {
            gort::spawn_blocking(stash_here).await.unwrap();
        }
    });
    // A plain thread that entered the runtime stashes too, and ends before the runtime.
    let h = rt.handle().clone();
    std::thread::spawn(move || h.block_on(async { stash_here() }))
        .join()
        .unwrap();
    drop(rt);
    println!("child ok");
}

#[test]
#[ignore = "run by gort_objects_in_thread_locals_of_runtime_threads_drop_without_aborting in a child process"]
fn tls_child() {
    if std::env::var_os("GORT_ABUSE_TLS_CHILD").is_some() {
        child_scenario();
    }
}

#[test]
fn gort_objects_in_thread_locals_of_runtime_threads_drop_without_aborting() {
    let run = support::run_child(
        "tls_child",
        "GORT_ABUSE_TLS_CHILD",
        PATIENCE,
        "the child hung",
    );
    let (out, err) = (&run.stdout, &run.stderr);
    assert!(
        run.status.success(),
        "child failed: {}\n{out}\n{err}",
        run.status
    );
    assert!(out.contains("child ok"), "{out}\n{err}");
}
