//! A payload that counts its drops, for the tests of when an `after_func`'s closure is
//! released.

use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::Arc;

/// Counts its drops.
pub struct Canary(pub Arc<AtomicUsize>);

impl Drop for Canary {
    fn drop(&mut self) {
        self.0.fetch_add(1, SeqCst);
    }
}
