//! A round's context tree: its nodes (context, cancel function, chain of ancestors, effective
//! deadline), the instant each cancel was first called (recorded before the call), and the
//! check of a done observation against them.

use super::super::Ctx;
use super::MAX_DEADLINE;
use crate::rng::Rng;
use gort::context::{self, CancelCauseFn, CancelFn, Cause, Context, Error};
use gort::time::Instant;
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::Duration;

/// Deepest node (the root is at depth 0).
pub(crate) const MAX_DEPTH: usize = 6;

/// Most children of one node.
pub(crate) const MAX_FANOUT: usize = 8;

/// The cause a node's `CancelCauseFn` cancels with.
#[derive(Debug)]
pub(crate) struct CancelCause(pub usize);

/// The cause a node's `with_deadline_cause` deadline cancels with.
#[derive(Debug)]
pub(crate) struct DeadlineCause(pub usize);

impl fmt::Display for CancelCause {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "cancel of node {}", self.0)
    }
}

impl fmt::Display for DeadlineCause {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "deadline of node {}", self.0)
    }
}

impl std::error::Error for CancelCause {}
impl std::error::Error for DeadlineCause {}

/// What `cause()` said, comparable: the error itself, or the node whose cause it is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum CauseKey {
    Err(Error),
    Cancel(usize),
    Deadline(usize),
    Unknown,
}

impl CauseKey {
    pub(crate) fn of(cause: &Cause) -> CauseKey {
        if let Some(e) = cause.downcast_ref::<Error>() {
            CauseKey::Err(*e)
        } else if let Some(c) = cause.downcast_ref::<CancelCause>() {
            CauseKey::Cancel(c.0)
        } else if let Some(d) = cause.downcast_ref::<DeadlineCause>() {
            CauseKey::Deadline(d.0)
        } else {
            CauseKey::Unknown
        }
    }
}

enum Cancel {
    Plain(CancelFn),
    Cause(CancelCauseFn),
}

/// One node of the tree.
pub(crate) struct Node {
    pub(crate) ctx: Context,
    cancel: Cancel,
    /// Itself and its ancestors, itself first.
    chain: Vec<usize>,
    depth: usize,
    children: usize,
    /// Effective deadline (the minimum along the chain), ns on the scenario's clock; `MAX`
    /// for none.
    eff_ns: u64,
}

/// A round's tree; node 0 is the root, a child of the background context.
pub(crate) struct Tree {
    nodes: Vec<Node>,
    /// When each node's cancel was first called, ns (`MAX`: never).
    cancel_at: Vec<AtomicU64>,
}

impl Tree {
    /// A random tree of 150 to 400 nodes under a cancelable root, deadlines from the
    /// round's start up to [`MAX_DEADLINE`] ahead (a tenth of them already past).
    pub(crate) fn build(ctx: &Ctx, rng: &mut Rng) -> Tree {
        let t0 = Instant::now();
        let n = rng.range(150..400) as usize;
        let mut t = Tree {
            nodes: Vec::with_capacity(n),
            cancel_at: (0..n).map(|_| AtomicU64::new(u64::MAX)).collect(),
        };
        let (root, cancel) = if rng.chance(50) {
            let (c, f) = context::with_cancel(&Context::background());
            (c, Cancel::Plain(f))
        } else {
            let (c, f) = context::with_cancel_cause(&Context::background());
            (c, Cancel::Cause(f))
        };
        t.nodes.push(Node {
            ctx: root,
            cancel,
            chain: vec![0],
            depth: 0,
            children: 0,
            eff_ns: u64::MAX,
        });
        let mut open = vec![0usize];
        while t.nodes.len() < n && !open.is_empty() {
            // Half the time the newest open node (deep chains), else any open one.
            let slot = if rng.chance(50) {
                open.len() - 1
            } else {
                rng.index(open.len())
            };
            let p = open[slot];
            let child = t.derive(ctx, rng, p, t0);
            t.nodes[p].children += 1;
            if t.nodes[p].children >= MAX_FANOUT {
                open.swap_remove(slot);
            }
            if t.nodes[child].depth < MAX_DEPTH {
                open.push(child);
            }
        }
        ctx.counts.started.fetch_add(t.nodes.len() as u64, Relaxed);
        t
    }

    /// Derives a random child of `p` and checks its `deadline()`; returns its index.
    fn derive(&mut self, ctx: &Ctx, rng: &mut Rng, p: usize, t0: Instant) -> usize {
        let i = self.nodes.len();
        let parent = &self.nodes[p];
        let pd = parent.ctx.deadline();
        let at = if rng.chance(10) {
            Instant::now() - rng.duration(Duration::ZERO, Duration::from_millis(5))
        } else {
            t0 + rng.duration(Duration::ZERO, MAX_DEADLINE)
        };
        let timeout = rng.duration(Duration::ZERO, MAX_DEADLINE);
        let before = Instant::now();
        let (c, cancel, want) = match rng.below(100) {
            0..=29 => {
                let (c, f) = context::with_cancel(&parent.ctx);
                (c, Cancel::Plain(f), Want::Exactly(pd))
            }
            30..=49 => {
                let (c, f) = context::with_cancel_cause(&parent.ctx);
                (c, Cancel::Cause(f), Want::Exactly(pd))
            }
            50..=64 => {
                let (c, f) = context::with_deadline(&parent.ctx, at);
                (c, Cancel::Plain(f), Want::Exactly(Some(min(pd, at))))
            }
            65..=74 => {
                let (c, f) = context::with_deadline_cause(&parent.ctx, at, DeadlineCause(i));
                (c, Cancel::Plain(f), Want::Exactly(Some(min(pd, at))))
            }
            75..=89 => {
                let (c, f) = context::with_timeout(&parent.ctx, timeout);
                (c, Cancel::Plain(f), Want::Within(pd, before + timeout))
            }
            _ => {
                let (c, f) = context::with_timeout_cause(&parent.ctx, timeout, DeadlineCause(i));
                (c, Cancel::Plain(f), Want::Within(pd, before + timeout))
            }
        };
        let after_t = Instant::now() + timeout;
        let got = c.deadline();
        let ok = match want {
            Want::Exactly(d) => got == d,
            // The parent's deadline if it is no later than the timeout's, else within the call.
            Want::Within(pd, lo) => match (got, pd) {
                (Some(g), Some(p)) if g == p => p <= after_t,
                (Some(g), _) => g >= lo && g <= after_t && pd.map_or(true, |p| p > lo),
                (None, _) => false,
            },
        };
        if !ok {
            ctx.violation(format!(
                "node {i}: deadline() is {got:?}, expected {want:?} (parent's {pd:?})"
            ));
        }
        let mut chain = Vec::with_capacity(parent.chain.len() + 1);
        chain.push(i);
        chain.extend_from_slice(&parent.chain);
        let depth = parent.depth + 1;
        self.nodes.push(Node {
            eff_ns: got.map_or(u64::MAX, |d| ctx.ns(d)),
            ctx: c,
            cancel,
            chain,
            depth,
            children: 0,
        });
        i
    }

    pub(crate) fn len(&self) -> usize {
        self.nodes.len()
    }

    pub(crate) fn node(&self, i: usize) -> &Node {
        &self.nodes[i]
    }

    /// Whether `a` is `i` or one of its ancestors.
    pub(crate) fn on_chain(&self, i: usize, a: usize) -> bool {
        self.nodes[i].chain.contains(&a)
    }

    /// Cancels node `i`, recording the instant before the call.
    pub(crate) fn cancel(&self, ctx: &Ctx, i: usize) {
        self.cancel_at[i].fetch_min(ctx.now_ns(), Relaxed);
        match &self.nodes[i].cancel {
            Cancel::Plain(f) => f.cancel(),
            Cancel::Cause(f) => f.cancel(CancelCause(i)),
        }
    }

    /// The earliest cancel called on `i`'s chain, ns (`MAX`: none yet).
    fn chain_cancel(&self, i: usize) -> u64 {
        let at = |j: &usize| self.cancel_at[*j].load(Relaxed);
        self.nodes[i].chain.iter().map(at).min().unwrap_or(u64::MAX)
    }

    /// When node `i` was due to be done: its effective deadline or the first cancel on its
    /// chain, whichever came first (ns; `MAX` if neither yet).
    pub(crate) fn due(&self, i: usize) -> u64 {
        self.chain_cancel(i).min(self.nodes[i].eff_ns)
    }

    /// Checks node `i`, seen done at `seen` ns (read after the observation): `err()` and
    /// `cause()` set and consistent with each other and with what was due by then. Returns
    /// what `cause()` said.
    pub(crate) fn check_done(&self, ctx: &Ctx, i: usize, seen: u64, what: &str) -> CauseKey {
        let node = &self.nodes[i];
        let (Some(err), Some(cause)) = (node.ctx.err(), node.ctx.cause()) else {
            ctx.violation(format!("node {i}: {what}, but err()/cause() is None"));
            return CauseKey::Unknown;
        };
        let key = CauseKey::of(&cause);
        let (c, e) = (self.chain_cancel(i), node.eff_ns);
        if seen < c.min(e) {
            ctx.violation(format!(
                "node {i}: {what} {} µs before its effective deadline, with no cancel on its chain",
                (e - seen) / 1_000
            ));
        }
        match err {
            Error::Canceled if c > seen => ctx.violation(format!(
                "node {i}: err() is Canceled but no cancel on its chain had been called ({what})"
            )),
            Error::DeadlineExceeded if e > seen => ctx.violation(format!(
                "node {i}: err() is DeadlineExceeded {} µs before its effective deadline ({what})",
                (e - seen) / 1_000
            )),
            _ => {}
        }
        let fits = match key {
            CauseKey::Err(x) => x == err,
            CauseKey::Cancel(j) => {
                err == Error::Canceled
                    && self.on_chain(i, j)
                    && self.cancel_at[j].load(Relaxed) <= seen
            }
            CauseKey::Deadline(j) => {
                err == Error::DeadlineExceeded
                    && self.on_chain(i, j)
                    && self.nodes[j].eff_ns <= seen
            }
            CauseKey::Unknown => false,
        };
        if !fits {
            ctx.violation(format!(
                "node {i}: cause() {key:?} does not fit err() {err:?} ({what}; chain {:?})",
                node.chain
            ));
        }
        key
    }
}

/// What a new node's `deadline()` must be.
#[derive(Debug)]
enum Want {
    Exactly(Option<Instant>),
    /// The parent's (first), or the timeout's from the call's start (second) to its end.
    Within(Option<Instant>, Instant),
}

fn min(pd: Option<Instant>, at: Instant) -> Instant {
    pd.map_or(at, |p| p.min(at))
}
