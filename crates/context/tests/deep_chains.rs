//! Chains of contexts deeper than a thread's stack allows for recursion: cancelling and
//! dropping them must not recurse once per generation.

use std::time::Duration;

use gort::context::{self, Context, Error};

/// Deeper than a recursion of a few hundred bytes per generation fits in an M's 2 MiB stack.
const DEPTH: usize = 100_000;

/// A chain of `DEPTH` contexts under `root`, and the `CancelFn` of each.
fn chain(root: &Context) -> (Context, Vec<context::CancelFn>) {
    let mut ctx = root.clone();
    let mut cancels = Vec::with_capacity(DEPTH);
    for _ in 0..DEPTH {
        let (child, cancel) = context::with_cancel(&ctx);
        cancels.push(cancel);
        ctx = child;
    }
    (ctx, cancels)
}

#[test]
fn cancelling_the_root_of_a_deep_chain_cancels_the_leaf_without_overflowing() {
    let rt = gort::Runtime::new().unwrap();
    rt.block_on(async {
        let leaf = gort::spawn(async {
            let (root, cancel) = context::with_cancel(&Context::background());
            let (leaf, cancels) = chain(&root);
            cancel.cancel(); // on an M's stack
            assert_eq!(leaf.err(), Some(Error::Canceled));
            drop(cancels);
            leaf
        })
        .await
        .unwrap();
        leaf.done().recv().await;
        gort::spawn(async move { drop(leaf) }).await.unwrap(); // the last handle, on an M
    });
}

#[test]
fn a_deadline_at_the_root_of_a_deep_chain_cancels_the_leaf_without_overflowing() {
    let rt = gort::Runtime::new().unwrap();
    rt.block_on(async {
        let (root, _cancel) =
            context::with_timeout(&Context::background(), Duration::from_millis(5));
        let (leaf, cancels) = chain(&root);
        leaf.done().recv().await; // the timer's callback cancels the chain on an M
        assert_eq!(leaf.err(), Some(Error::DeadlineExceeded));
        drop((root, cancels));
        gort::spawn(async move { drop(leaf) }).await.unwrap();
    });
}

#[test]
fn a_deep_chain_whose_leaf_goes_last_drops_on_a_plain_thread() {
    let (root, cancel) = context::with_cancel(&Context::background());
    let (leaf, cancels) = chain(&root);
    cancel.cancel(); // no timer, no task: works outside a runtime
    drop((root, cancel, cancels));
    assert_eq!(leaf.err(), Some(Error::Canceled));
    drop(leaf); // releases the whole chain
}
