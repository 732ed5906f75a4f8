//! What the loom models of the queues share: tasks that count their drops, and the record of
//! which came out (`loom_runq.rs`, `loom_runnext.rs`).

use loom::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use loom::sync::Arc;

/// A task that counts its drops, so a task lost or duplicated shows up in the totals.
pub struct Token {
    pub id: usize,
    dropped: Arc<AtomicUsize>,
}

impl Drop for Token {
    fn drop(&mut self) {
        self.dropped.fetch_add(1, SeqCst);
    }
}

/// Token `id`, counting its drop in `dropped`.
pub fn token(id: usize, dropped: &Arc<AtomicUsize>) -> Token {
    Token {
        id,
        dropped: dropped.clone(),
    }
}

/// The ids that came out, asserting none twice.
#[derive(Default)]
pub struct Seen(pub Vec<usize>);

impl Seen {
    pub fn add(&mut self, t: Token) {
        assert!(!self.0.contains(&t.id), "task {} came out twice", t.id);
        self.0.push(t.id);
    }

    /// Adds the ids another thread saw.
    pub fn merge(&mut self, ids: Vec<usize>) {
        for id in ids {
            assert!(!self.0.contains(&id), "task {id} came out twice");
            self.0.push(id);
        }
    }
}
