//! `context::after_func` cancelled from a thread of no runtime starts each function on a new
//! thread. When no thread can be made (a limit on threads or on address space), the cancel
//! must still finish: every function run, every child canceled; not a panic half-way that
//! leaves the tree half canceled and the remaining functions dropped unrun.
//!
//! The limit is set in a child process (this test binary run again, for the one test, with
//! `GORT_AFTER_FUNC_CHILD` set), on its address space only, so nothing else on the machine
//! is short of threads.

mod support;

use gort::context::{self, Context, Error};
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::Arc;
use std::time::Duration;

const CHILD: &str = "GORT_AFTER_FUNC_CHILD";
const FUNCS: usize = 48;

/// The address space this process uses now, in bytes (`VmSize`).
fn vm_size() -> libc::rlim_t {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let line = status.lines().find(|l| l.starts_with("VmSize:")).unwrap();
    let kib: libc::rlim_t = line.split_whitespace().nth(1).unwrap().parse().unwrap();
    kib * 1024
}

fn set_address_space_limit(bytes: libc::rlim_t) {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: plain system calls on a valid struct.
    unsafe {
        assert_eq!(libc::getrlimit(libc::RLIMIT_AS, &mut lim), 0);
        lim.rlim_cur = bytes;
        assert_eq!(libc::setrlimit(libc::RLIMIT_AS, &lim), 0);
    }
}

/// The child's part: 48 functions that each hold their thread 30 ms, on a context with a
/// child, canceled from this plain thread with room for only a few thread stacks.
fn child() {
    let (root, cancel) = context::with_cancel(&Context::background());
    let (child, _c) = context::with_cancel(&root);
    let ran = Arc::new(AtomicUsize::new(0));
    let stops: Vec<_> = (0..FUNCS)
        .map(|_| {
            let ran = ran.clone();
            context::after_func(&root, move || {
                std::thread::sleep(Duration::from_millis(30));
                ran.fetch_add(1, SeqCst);
            })
        })
        .collect();
    // Room for a few 2 MiB thread stacks (and glibc's per-thread arenas fail over to the
    // main one): most of the 48 spawns fail.
    set_address_space_limit(vm_size() + 12 * 1024 * 1024);
    let cancelled = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| cancel.cancel()));
    set_address_space_limit(libc::RLIM_INFINITY);
    let outcome = match &cancelled {
        Ok(()) => "returned".to_string(),
        Err(p) => format!("panicked: {}", support::panic_text(&**p)),
    };
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while ran.load(SeqCst) < FUNCS && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(5));
    }
    println!(
        "CHILD cancel {outcome}; child err {:?}; ran {} of {FUNCS}",
        child.err(),
        ran.load(SeqCst)
    );
    drop(stops);
}

#[test]
fn a_cancel_with_no_thread_to_spare_still_runs_every_function_and_cancels_every_child() {
    if std::env::var_os(CHILD).is_some() {
        return child();
    }
    let out = support::within(|| {
        std::process::Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                "a_cancel_with_no_thread_to_spare_still_runs_every_function_and_cancels_every_child",
                "--nocapture",
                "--test-threads=1",
            ])
            .env(CHILD, "1")
            .output()
            .unwrap()
    });
    let stdout = String::from_utf8_lossy(&out.stdout);
    // With --nocapture the line follows the harness's "test ... " on the same line.
    let line = stdout
        .lines()
        .find_map(|l| l.find("CHILD ").map(|at| &l[at..]))
        .unwrap_or_else(|| {
            panic!(
                "the child printed no result: {stdout}\n{}",
                String::from_utf8_lossy(&out.stderr)
            )
        });
    let want = format!(
        "CHILD cancel returned; child err {:?}; ran {FUNCS} of {FUNCS}",
        Some(Error::Canceled)
    );
    assert_eq!(line, want);
}
