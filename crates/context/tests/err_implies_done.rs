//! Go's contract between `Err` and `Done`: "If Done is not yet closed, Err returns nil". A
//! reader that sees `err()` (or `cause()`) return `Some` must find `done()` closed, even while
//! another thread is in the middle of the cancel that set the error (the stress suite's
//! context-trees scenario saw `err()` return `DeadlineExceeded` with `done()` still open).

use std::sync::atomic::{AtomicBool, Ordering::SeqCst};
use std::sync::{Arc, Barrier};

use gort::context::{self, Context};

/// Children per round: a parent's cancel closes their `done` one after another, each a little
/// after setting its error, while the reader walks them.
const CHILDREN: usize = 64;
const ROUNDS: usize = 3_000;

/// Reads every child's `err()` (or `cause()`) and then its `done()` until all are done; the
/// first that reports an error with `done()` open fails the test.
fn reader(children: &[Context], use_cause: bool) -> Option<usize> {
    let mut left = children.len();
    let mut seen = vec![false; children.len()];
    while left > 0 {
        for (i, c) in children.iter().enumerate() {
            let set = if use_cause {
                c.cause().is_some()
            } else {
                c.err().is_some()
            };
            if !set || seen[i] {
                continue;
            }
            if !c.done().is_closed() {
                return Some(i);
            }
            seen[i] = true;
            left -= 1;
        }
    }
    None
}

fn race(use_cause: bool) {
    let failed = Arc::new(AtomicBool::new(false));
    for round in 0..ROUNDS {
        let (parent, cancel) = context::with_cancel(&Context::background());
        let children: Vec<Context> = (0..CHILDREN)
            .map(|_| {
                let (c, _cancel) = context::with_cancel(&parent);
                let _ = c.done(); // created before the cancel: the cancel must close it
                c
            })
            .collect();
        let go = Arc::new(Barrier::new(2));
        let canceller = {
            let go = go.clone();
            std::thread::spawn(move || {
                go.wait();
                cancel.cancel();
            })
        };
        go.wait();
        let bad = reader(&children, use_cause);
        canceller.join().unwrap();
        if let Some(i) = bad {
            failed.store(true, SeqCst);
            panic!(
                "round {round}: child {i}'s {} was Some while its done() was open",
                if use_cause { "cause()" } else { "err()" }
            );
        }
    }
    assert!(!failed.load(SeqCst));
}

#[test]
fn err_is_some_only_once_done_is_closed() {
    race(false);
}

#[test]
fn cause_is_some_only_once_done_is_closed() {
    race(true);
}
