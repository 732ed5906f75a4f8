//! The limiter half of rate-and-ticks: tasks on every P share one `rate::Limiter` on a paused
//! clock and call `allow_n`, `reserve_n` (+ `cancel_at`), `wait_n`, `wait_deadline`,
//! `timeout(wait_n)` and `wait_ctx` on a context canceled midway, each at instants of its
//! own (task `k` of `K` calls the limiter only at `t0 + (m·K + k) µs`). A paused clock
//! moves only when every task is idle, so calls at distinct instants are ordered by them:
//! the log of every call, sorted by instant, is the order the limiter saw. At the end of a
//! round that log is replayed, one call at a time, on a second limiter (the model), which
//! must give every result the shared one gave: the same `allow`, the same time to act, the
//! same refusals, a wait returning at exactly the instant the model's reservation names.
//! Beside the replay, the bound a token bucket promises is checked over every window of a
//! round whose limit did not change midway: the tokens used from `a` to `b` are at most
//! `burst + rate·(b − a)` (+1 for rounding).

use super::super::Ctx;
use crate::rng::Rng;
use gort::context::{self, Context};
use gort::time::rate::{Limit, Limiter, Reservation, WaitError};
use gort::time::{sleep_until, Instant};
use std::collections::HashMap;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The slot grid: each task calls the limiter only at instants of its own on it.
const SLOT: Duration = Duration::from_micros(1);

/// Limiter calls per task per round.
const STEPS: usize = 24;

/// Token periods a round picks from (the limit is one token per period).
const PERIODS_MS: [u64; 4] = [1, 7, 50, 100];

/// What a call did, as the log keeps it.
#[derive(Debug, Clone)]
enum Op {
    Allow {
        n: u32,
        ok: bool,
    },
    Reserve {
        n: u32,
        id: u64,
        tta: Option<Instant>,
    },
    Cancel {
        id: u64,
    },
    /// A wait started at the event's instant: its result, the instant it returned (or was
    /// dropped at, then a `Cancel` follows), and its deadline.
    Wait {
        n: u32,
        id: u64,
        deadline: Option<Instant>,
        result: Option<Result<(), WaitError>>,
        returned: Instant,
    },
    SetLimit {
        limit: Limit,
    },
    SetBurst {
        burst: u32,
    },
}

/// A logged call: its instant, then the caller's sequence (calls of one task at one instant).
#[derive(Debug, Clone)]
struct Event {
    at: Instant,
    seq: u64,
    op: Op,
}

/// The shared limiter, its call log and the tokens used, for one run of the scenario.
pub struct Shared {
    limiter: Limiter,
    model: Limiter,
    log: Mutex<Vec<Event>>,
    /// Tokens used this round, at the instant they were used.
    used: Mutex<Vec<(Instant, u32)>>,
    t0: Instant,
    slots: u64,
    next_id: std::sync::atomic::AtomicU64,
    next_seq: std::sync::atomic::AtomicU64,
}

impl Shared {
    /// A limiter (and its model) for `tasks` tasks, starting at 10 tokens per second, burst 4.
    pub fn new(tasks: u64) -> Arc<Shared> {
        let limit = Limit::per_second(10.0);
        Arc::new(Shared {
            limiter: Limiter::new(limit, 4),
            model: Limiter::new(limit, 4),
            log: Mutex::default(),
            used: Mutex::default(),
            t0: Instant::now(),
            slots: tasks + 1,
            next_id: Default::default(),
            next_seq: Default::default(),
        })
    }

    fn log(&self, at: Instant, op: Op) {
        let seq = self.next_seq.fetch_add(1, Relaxed);
        lock(&self.log).push(Event { at, seq, op });
    }

    fn used(&self, at: Instant, n: u32) {
        lock(&self.used).push((at, n));
    }

    fn id(&self) -> u64 {
        self.next_id.fetch_add(1, Relaxed)
    }

    /// The first instant at or after `after` in slot `k`.
    fn slot(&self, k: u64, after: Instant) -> Instant {
        let slot = SLOT.as_nanos() as u64;
        let first = self.t0 + SLOT * k as u32;
        let since = after.duration_since(first).as_nanos() as u64;
        let step = slot * self.slots;
        first + Duration::from_nanos(since.div_ceil(step) * step)
    }

    /// Starts a round (quiescent: no task is running): a new limit and burst, set in the
    /// driver's slot (the last). Returns them.
    pub async fn start_round(&self, rng: &mut Rng) -> (Limit, u32) {
        let at = self.slot(self.slots - 1, Instant::now());
        sleep_until(at).await;
        self.set_params(at, rng, false, false)
    }

    /// `set_limit` (one token per 1, 7, 50 or 100 ms; unless `keep_limit`; with `extremes`,
    /// one time in 5 `Limit::INF` or `Limit::ZERO`) and `set_burst` (1-8) at `at`, logged.
    /// Returns the limit and burst.
    fn set_params(
        &self,
        at: Instant,
        rng: &mut Rng,
        keep_limit: bool,
        extremes: bool,
    ) -> (Limit, u32) {
        let mut limit = self.limiter.limit();
        if !keep_limit {
            limit = if extremes && rng.chance(20) {
                [Limit::INF, Limit::ZERO][rng.index(2)]
            } else {
                Limit::every(Duration::from_millis(
                    PERIODS_MS[rng.index(PERIODS_MS.len())],
                ))
            };
            self.limiter.set_limit(limit);
            self.log(at, Op::SetLimit { limit });
        }
        let burst = rng.range(1..9) as u32;
        self.limiter.set_burst(burst);
        self.log(at, Op::SetBurst { burst });
        (limit, burst)
    }

    /// In the driver's slot, while the tasks run: `changes` new bursts (and limits, with
    /// `limits`) a few periods apart. Returns the highest burst set.
    pub async fn change_midway(
        &self,
        mut rng: Rng,
        period: Duration,
        changes: usize,
        limits: bool,
    ) -> u32 {
        let mut top = 0;
        for _ in 0..changes {
            let gap = rng.duration(Duration::ZERO, period * 8);
            let at = self.slot(self.slots - 1, Instant::now() + gap);
            sleep_until(at).await;
            top = top.max(self.set_params(at, &mut rng, !limits, true).1);
        }
        top
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// One task's round: `STEPS` random calls in slot `k`.
pub async fn task(ctx: Arc<Ctx>, sh: Arc<Shared>, k: u64, period: Duration, mut rng: Rng) {
    for _ in 0..STEPS {
        let gap = rng.duration(Duration::ZERO, period * 3);
        let at = sh.slot(k, Instant::now() + gap);
        sleep_until(at).await;
        check_now(&ctx, at, "a limiter task's slot");
        let burst = sh.limiter.burst(); // the driver may change it between our calls
        let n = rng.range(1..u64::from(burst) + 2) as u32; // sometimes burst + 1
        ctx.counts.ops.fetch_add(1, Relaxed);
        match rng.index(7) {
            0 => {
                let ok = sh.limiter.allow_n(at, n);
                sh.log(at, Op::Allow { n, ok });
                if ok {
                    sh.used(at, n);
                }
            }
            1 => reserve_and_act(&ctx, &sh, at, n).await,
            2 => reserve_cancel(&ctx, &sh, at, n, rng.chance(50)).await,
            3 => wait(&ctx, &sh, at, n, None).await,
            4 => {
                let d = sh.slot(k, at + rng.duration(Duration::ZERO, period * 4));
                wait(&ctx, &sh, at, n, Some(d)).await;
            }
            5 => {
                let d = sh.slot(k, at + rng.duration(Duration::ZERO, period * 4));
                timed_out_wait(&ctx, &sh, at, n, d).await;
            }
            _ => {
                // Strictly later than `at`: the context is live when the wait starts.
                let gap = rng.duration(Duration::from_nanos(1), period * 4);
                canceled_wait(&ctx, &sh, at, n, sh.slot(k, at + gap)).await;
            }
        }
    }
}

/// A violation unless the clock reads exactly `due`.
fn check_now(ctx: &Ctx, due: Instant, what: &str) {
    let now = Instant::now();
    ctx.record_lateness(ctx.ns(due), ctx.ns(now), what);
    ctx.counts.fired.fetch_add(1, Relaxed);
    ctx.violations.check(now == due, || {
        format!("{what}: the paused clock read {now:?}, expected exactly {due:?}")
    });
}

/// `reserve_n`, then a sleep to its time to act: the tokens are used then.
async fn reserve_and_act(ctx: &Ctx, sh: &Shared, at: Instant, n: u32) {
    let r = sh.limiter.reserve_n(at, n);
    let id = sh.id();
    let tta = r.time_to_act();
    sh.log(at, Op::Reserve { n, id, tta });
    ctx.counts.started.fetch_add(1, Relaxed);
    match tta {
        Some(t) => {
            ctx.violations
                .check(r.delay_from(at) == t.duration_since(at), || {
                    format!(
                        "a reservation's delay_from {:?} is not its time to act",
                        r.delay_from(at)
                    )
                });
            sleep_until(t).await;
            check_now(ctx, t, "a reservation's time to act");
            sh.used(t, n);
        }
        None => {
            let (burst, limit) = (sh.limiter.burst(), sh.limiter.limit());
            ctx.violations.check(n > burst || limit == Limit::ZERO, || {
                format!("reserve_n({n}) within the burst {burst} at {limit:?} was refused")
            });
        }
    }
}

/// `reserve_n` and `cancel_at` at once: the tokens come back exactly, and the same
/// reservation made again gets the same time to act (the canceled one delays nothing). The
/// second reservation is then used or canceled too.
async fn reserve_cancel(ctx: &Ctx, sh: &Shared, at: Instant, n: u32, use_second: bool) {
    let before = sh.limiter.tokens_at(at);
    let first = sh.limiter.reserve_n(at, n);
    let id = sh.id();
    let tta = first.time_to_act();
    sh.log(at, Op::Reserve { n, id, tta });
    first.cancel_at(at);
    sh.log(at, Op::Cancel { id });
    ctx.counts.stopped.fetch_add(1, Relaxed);
    let after = sh.limiter.tokens_at(at);
    ctx.violations.check((after - before).abs() < 1e-6, || {
        format!("reserve_n({n}) canceled at once left {after} tokens, {before} before it")
    });
    let second = sh.limiter.reserve_n(at, n);
    let id2 = sh.id();
    let tta2 = second.time_to_act();
    sh.log(
        at,
        Op::Reserve {
            n,
            id: id2,
            tta: tta2,
        },
    );
    ctx.violations.check(tta2 == tta, || {
        format!("after a canceled reserve_n({n}) due {tta:?}, the same reservation is due {tta2:?}")
    });
    match tta2 {
        Some(t) if use_second => {
            sleep_until(t).await;
            check_now(ctx, t, "a reservation's time to act");
            sh.used(t, n);
        }
        Some(_) => {
            second.cancel_at(at);
            sh.log(at, Op::Cancel { id: id2 });
        }
        None => {}
    }
}

/// `wait_n` (no deadline) or `wait_deadline`: a refusal is at once; a success is logged with
/// the instant it returned, which the replay compares with the model's time to act.
async fn wait(ctx: &Ctx, sh: &Shared, at: Instant, n: u32, deadline: Option<Instant>) {
    ctx.counts.started.fetch_add(1, Relaxed);
    let result = match deadline {
        None => sh.limiter.wait_n(n).await,
        Some(d) => sh.limiter.wait_deadline(n, d).await,
    };
    let returned = Instant::now();
    let id = sh.id();
    if result.is_err() {
        ctx.violations.check(returned == at, || {
            format!(
                "wait(n={n}, deadline {deadline:?}) failed {:?} after it was called: {result:?}",
                returned - at
            )
        });
    } else {
        sh.used(returned, n);
        if let Some(d) = deadline {
            ctx.violations.check(returned <= d, || {
                format!(
                    "wait_deadline(n={n}) returned {:?} past its deadline",
                    returned - d
                )
            });
        }
    }
    let result = Some(result);
    sh.log(
        at,
        Op::Wait {
            n,
            id,
            deadline,
            result,
            returned,
        },
    );
}

/// `timeout_at(d, wait_n)`: it returns the tokens or is dropped at `d` exactly (then its
/// reservation is canceled, as a `Cancel` at `d`).
async fn timed_out_wait(ctx: &Ctx, sh: &Shared, at: Instant, n: u32, d: Instant) {
    ctx.counts.started.fetch_add(1, Relaxed);
    let r = gort::time::timeout_at(d, sh.limiter.wait_n(n)).await;
    let returned = Instant::now();
    let id = sh.id();
    let result = r.ok();
    let timed_out = result.is_none();
    match result {
        Some(Ok(())) => sh.used(returned, n),
        Some(Err(_)) => {}
        None => check_now(ctx, d, "a timed-out wait_n"),
    }
    sh.log(
        at,
        Op::Wait {
            n,
            id,
            deadline: None,
            result,
            returned,
        },
    );
    if timed_out {
        sh.log(returned, Op::Cancel { id });
    }
}

/// `wait_ctx` on a context a helper task cancels at `c` (in this task's slot, where only
/// this task calls the limiter): it returns the tokens, or `Done` at exactly `c` (then its
/// reservation is given back, as a `Cancel` at `c`).
async fn canceled_wait(ctx: &Ctx, sh: &Shared, at: Instant, n: u32, c: Instant) {
    ctx.counts.started.fetch_add(1, Relaxed);
    let (cx, cancel) = context::with_cancel(&Context::background());
    let canceler = gort::spawn(async move {
        sleep_until(c).await;
        cancel.cancel();
    });
    let result = sh.limiter.wait_ctx(&cx, n).await;
    let returned = Instant::now();
    let id = sh.id();
    match result {
        Ok(()) => sh.used(returned, n),
        Err(WaitError::Done) => check_now(ctx, c, "a wait_ctx whose context was canceled"),
        Err(_) => ctx.violations.check(returned == at, || {
            format!(
                "wait_ctx(n={n}) failed {:?} after it was called: {result:?}",
                returned - at
            )
        }),
    }
    let done = result == Err(WaitError::Done);
    sh.log(
        at,
        Op::Wait {
            n,
            id,
            deadline: None,
            result: Some(result),
            returned,
        },
    );
    if done {
        sh.log(returned, Op::Cancel { id });
    }
    if canceler.await.is_err() {
        ctx.violation("a wait_ctx's canceler task did not join");
    }
}

/// Ends a round: replays its log on the model, checks the window bound (given the round's
/// limit and highest burst: `None` when the limit changed midway), clears both.
pub fn check_round(ctx: &Ctx, sh: &Shared, bound: Option<(Limit, u32)>) -> usize {
    let mut log = std::mem::take(&mut *lock(&sh.log));
    log.sort_by_key(|e| (e.at, e.seq));
    replay(ctx, &sh.model, &log);
    let mut used = std::mem::take(&mut *lock(&sh.used));
    if let Some((limit, burst)) = bound {
        check_window(ctx, &mut used, limit, burst);
    }
    log.len()
}

/// Feeds the model the calls in the order the shared limiter saw them, and compares.
fn replay(ctx: &Ctx, model: &Limiter, log: &[Event]) {
    let mut held: HashMap<u64, Reservation<'_>> = HashMap::new();
    for e in log {
        let at = e.at;
        match e.op {
            Op::SetLimit { limit } => model.set_limit_at(at, limit),
            Op::SetBurst { burst } => model.set_burst_at(at, burst),
            Op::Allow { n, ok } => {
                let m = model.allow_n(at, n);
                ctx.violations.check(m == ok, || {
                    format!("allow_n({n}) at {at:?} gave {ok}, the serial model {m}")
                });
            }
            Op::Reserve { n, id, tta } => {
                let r = model.reserve_n(at, n);
                ctx.violations.check(r.time_to_act() == tta, || {
                    format!(
                        "reserve_n({n}) at {at:?} is due {tta:?}, in the serial model {:?}",
                        r.time_to_act()
                    )
                });
                held.insert(id, r);
            }
            Op::Cancel { id } => match held.remove(&id) {
                Some(r) => r.cancel_at(at),
                None => ctx.violation(format!("the log cancels reservation {id}, never made")),
            },
            Op::Wait {
                n,
                id,
                deadline,
                ref result,
                returned,
            } => {
                if let Some(r) = replay_wait(ctx, model, at, n, deadline, result, returned) {
                    held.insert(id, r);
                }
            }
        }
    }
    // Reservations used or dropped unused (a used one's tokens stay taken, as in Go).
    held.clear();
}

/// One wait in the model: the refusal it must have had (computed as the limiter does, so
/// that a refused `wait_deadline` takes nothing from the model either), else a reservation
/// whose time to act the wait must have returned at.
fn replay_wait<'a>(
    ctx: &Ctx,
    model: &'a Limiter,
    at: Instant,
    n: u32,
    deadline: Option<Instant>,
    result: &Option<Result<(), WaitError>>,
    returned: Instant,
) -> Option<Reservation<'a>> {
    // The limiter's order: an infinite limit grants anything, then the burst, then a zero
    // limit when short, then the deadline.
    let (burst, limit) = (model.burst(), model.limit());
    let left = model.tokens_at(at) - f64::from(n);
    let refusal = if limit.is_inf() {
        None
    } else if n > burst {
        Some(WaitError::BurstExceeded { n, burst })
    } else if left < 0.0 && limit == Limit::ZERO {
        Some(WaitError::NeverAvailable { n })
    } else {
        deadline.and_then(|d| {
            let wait = if left < 0.0 {
                (-left / limit.as_f64() * 1e9).round()
            } else {
                0.0
            };
            (wait > d.duration_since(at).as_nanos() as f64)
                .then_some(WaitError::WouldExceedDeadline { n })
        })
    };
    if let Some(refusal) = refusal {
        ctx.violations.check(result.as_ref() == Some(&Err(refusal.clone())), || {
            format!("wait(n={n}, deadline {deadline:?}) at {at:?} gave {result:?}, the serial model {refusal:?}")
        });
        return None;
    }
    let r = model.reserve_n(at, n);
    let tta = r.time_to_act();
    match result {
        Some(Ok(())) => ctx.violations.check(tta == Some(returned), || {
            format!("wait(n={n}) called at {at:?} returned at {returned:?}, the serial model's reservation is due {tta:?}")
        }),
        Some(Err(e)) if *e != WaitError::Done => ctx.violation(format!("wait(n={n}) at {at:?} failed ({e:?}), the serial model grants it")),
        // Dropped by its timeout, or its context canceled: it must not have been due by
        // then (it would have returned its tokens).
        _ => ctx.violations.check(tta.is_some_and(|t| t > returned), || {
            format!("a wait for {n} at {at:?} gave up at {returned:?} (timeout or context), its reservation due {tta:?}")
        }),
    }
    Some(r)
}

/// The token bucket's promise over every window `[a, b]` of the round: the tokens used in it
/// are at most `burst + rate·(b − a)`, plus one for rounding. Linear: with prefix sums `S`,
/// `max over i ≤ j of (S_j − r·t_j) − (S_{i−1} − r·t_i)`.
fn check_window(ctx: &Ctx, used: &mut [(Instant, u32)], limit: Limit, burst: u32) {
    used.sort_by_key(|u| u.0);
    let Some(&(t0, _)) = used.first() else { return };
    let rate = limit.as_f64() / 1e9; // tokens per ns
    let (mut prefix, mut lowest) = (0.0f64, f64::MAX);
    let mut lowest_at = t0;
    for &(t, n) in used.iter() {
        let x = t.duration_since(t0).as_nanos() as f64 * rate;
        let c = prefix - x; // S_{i-1} − r·t_i, for a window starting here
        if c < lowest {
            (lowest, lowest_at) = (c, t);
        }
        prefix += f64::from(n);
        let excess = prefix - x - lowest;
        if excess > f64::from(burst) + 1.0 {
            ctx.violation(format!(
                "the tokens used from {lowest_at:?} to {t:?} at {limit:?} exceed rate x window by {excess:.3}: more than the burst {burst} (+1)"
            ));
            return;
        }
    }
}
