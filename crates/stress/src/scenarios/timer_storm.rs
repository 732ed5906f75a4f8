//! timer-storm: many timers (channel `Timer`s and `after_func`s) stopped and reset at random
//! from other tasks, which usually run on other Ps than the timer's heap.

use super::{join_all, Ctx};
use crate::check::{Attribution, CountBook, TimerBook};
use gort::time::{after_func, AfterFunc, Timer};
use std::sync::atomic::{AtomicU64, AtomicU8, Ordering::Relaxed};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

/// One line for `--list`.
pub const ABOUT: &str =
    "timers and after_funcs (up to millions) stopped/reset at random from other Ps: \
    deltimer/modtimer earlier+later on remote heaps, cleantimers, adjusttimers, runtimer";

/// How long a receiver waits past a deadline before the fire counts as lost.
pub(crate) const GRACE: Duration = Duration::from_secs(5);

/// A callback timer and its counting book; the mutex serialises calls and book updates.
struct AfEntry {
    handle: Mutex<AfterFunc>,
    shared: Arc<AfShared>,
}

/// What the callback sees.
struct AfShared {
    book: CountBook,
    /// Earliest due instant of the latest arming (for lateness only).
    due_ns: AtomicU64,
}

/// A channel timer, its book, and nothing else: its receiver task holds an `Arc` of it.
pub(crate) struct ChEntry {
    pub(crate) id: u64,
    pub(crate) timer: Timer,
    pub(crate) book: Mutex<TimerBook>,
    /// Where its receiver is (`RECEIVING`...), for a hang report.
    stage: AtomicU8,
}

/// A receiver's stages: selecting on its timer and `done`; after `done`, waiting for the
/// value still owed; returned.
const RECEIVING: u8 = 0;
const DRAINING: u8 = 1;
const RETURNED: u8 = 2;

/// The timers of a storm, filled in by creator tasks while controllers already use them.
pub(crate) struct Tables {
    af: Vec<OnceLock<AfEntry>>,
    ch: Vec<OnceLock<Arc<ChEntry>>>,
    receivers: Mutex<Vec<gort::JoinHandle<()>>>,
}

impl Tables {
    pub(crate) fn new(n_af: usize, n_ch: usize) -> Arc<Self> {
        Arc::new(Tables {
            af: (0..n_af).map(|_| OnceLock::new()).collect(),
            ch: (0..n_ch).map(|_| OnceLock::new()).collect(),
            receivers: Mutex::new(Vec::new()),
        })
    }

    pub(crate) fn n_af(&self) -> usize {
        self.af.len()
    }

    pub(crate) fn n_ch(&self) -> usize {
        self.ch.len()
    }

    /// Arms after_func `i` with `d`.
    pub(crate) fn make_af(&self, ctx: &Arc<Ctx>, i: usize, d: Duration) {
        let shared = Arc::new(AfShared {
            book: CountBook::armed(),
            due_ns: AtomicU64::new(0),
        });
        let (sh, c) = (shared.clone(), ctx.clone());
        shared
            .due_ns
            .store(ctx.now_ns() + d.as_nanos() as u64, Relaxed);
        let handle = after_func(d, move || {
            let now = c.now_ns();
            if c.take_drop_fire_fault() {
                return; // --inject-fault drop-fire: forget this expiry
            }
            sh.book.fires.fetch_add(1, Relaxed);
            c.counts.fired.fetch_add(1, Relaxed);
            let due = sh.due_ns.load(Relaxed);
            if now >= due {
                c.record_lateness(due, now, "after_func");
            }
        });
        let _ = self.af[i].set(AfEntry {
            handle: Mutex::new(handle),
            shared,
        });
        ctx.counts.started.fetch_add(1, Relaxed);
        ctx.counts.ops.fetch_add(1, Relaxed);
    }

    /// Arms channel timer `i` with `d` and spawns its receiver.
    pub(crate) fn make_ch(
        &self,
        ctx: &Arc<Ctx>,
        i: usize,
        d: Duration,
        done: &gort::chan::Receiver<()>,
    ) {
        let before = ctx.now_ns();
        let timer = Timer::new(d);
        let after = ctx.now_ns();
        let book = Mutex::new(TimerBook::new(
            i as u64,
            before,
            after,
            d.as_nanos() as u64,
            0,
        ));
        let e = Arc::new(ChEntry {
            id: i as u64,
            timer,
            book,
            stage: AtomicU8::new(RECEIVING),
        });
        let _ = self.ch[i].set(e.clone());
        ctx.counts.started.fetch_add(1, Relaxed);
        ctx.counts.ops.fetch_add(1, Relaxed);
        let h = gort::spawn(receive(ctx.clone(), e, done.clone()));
        self.receivers.lock().unwrap().push(h);
    }

    /// A stop (`stop`) or reset to `d` of a random timer: a channel timer with probability
    /// `ch_percent`, else an after_func. Skips timers not created yet.
    pub(crate) fn random_op(
        &self,
        ctx: &Ctx,
        rng: &mut crate::rng::Rng,
        ch_percent: u64,
        stop: bool,
        d: Duration,
    ) {
        if rng.chance(ch_percent) {
            let i = rng.index(self.ch.len());
            if let Some(e) = self.ch[i].get() {
                timer_op(ctx, e, stop, d);
                ctx.counts.ops.fetch_add(1, Relaxed);
            }
            return;
        }
        let i = rng.index(self.af.len());
        let Some(e) = self.af[i].get() else { return };
        let h = e.handle.lock().unwrap();
        if stop {
            let r = h.stop();
            e.shared.book.on_stop(r, i as u64, &ctx.violations);
            ctx.counts.stopped.fetch_add(1, Relaxed);
        } else {
            // Before the call: a callback of the new arming then never sees an older due.
            e.shared
                .due_ns
                .store(ctx.now_ns() + d.as_nanos() as u64, Relaxed);
            let r = h.reset(d);
            e.shared.book.on_reset(r, i as u64, &ctx.violations);
            ctx.counts.reset.fetch_add(1, Relaxed);
        }
        ctx.counts.ops.fetch_add(1, Relaxed);
    }

    /// After the last stop/reset: tells receivers (`done`), waits until every uncancelled
    /// arming has fired (at most `max_d` + [`GRACE`]), and runs every book's final check.
    pub(crate) async fn settle(
        &self,
        ctx: &Arc<Ctx>,
        done: gort::chan::Sender<()>,
        max_d: Duration,
    ) {
        done.close();
        crate::watchdog::phase("settle: waiting for the after_funcs still armed");
        crate::patience::wait_until(max_d + GRACE, Duration::from_millis(5), || {
            let outstanding: i64 = (self.af.iter().filter_map(|e| e.get()))
                .map(|e| e.shared.book.outstanding())
                .sum();
            outstanding <= 0
        })
        .await;
        let handles = std::mem::take(&mut *self.receivers.lock().unwrap());
        crate::watchdog::phase("settle: joining the channel timers' receivers");
        join_all(ctx, "receiver", handles).await;
        crate::watchdog::phase("settle: final checks");
        // A short idle so that a late duplicate would have arrived, then the final checks.
        gort::time::sleep(Duration::from_millis(20)).await;
        for (i, e) in self
            .af
            .iter()
            .enumerate()
            .filter_map(|(i, e)| e.get().map(|e| (i, e)))
        {
            e.shared.book.finish(i as u64, &ctx.violations);
        }
        let now = ctx.now_ns();
        for e in self.ch.iter().filter_map(|e| e.get()) {
            if let Ok(v) = e.timer.c().try_recv() {
                ctx.violation(format!(
                    "timer {}: extra value {:?} left in the channel at the end",
                    e.id, v
                ));
            }
            e.book.lock().unwrap().finish(now, &ctx.violations);
        }
    }

    /// What a hang report needs from the tables: where the receivers are, and the first
    /// few that have not returned, with their books and timers.
    pub(crate) fn progress(&self) -> String {
        let created: Vec<&Arc<ChEntry>> = self.ch.iter().filter_map(|e| e.get()).collect();
        let at = |stage| {
            created
                .iter()
                .filter(|e| e.stage.load(Relaxed) == stage)
                .count()
        };
        let outstanding: i64 = (self.af.iter().filter_map(|e| e.get()))
            .map(|e| e.shared.book.outstanding())
            .sum();
        let mut out = format!(
            "timer tables: {} of {} channel timers created; receivers selecting {}, draining {}, \
             returned {}; after_func fires outstanding {outstanding}",
            created.len(),
            self.ch.len(),
            at(RECEIVING),
            at(DRAINING),
            at(RETURNED),
        );
        for e in created
            .iter()
            .filter(|e| e.stage.load(Relaxed) != RETURNED)
            .take(4)
        {
            let book = e.book.try_lock().map(|b| format!("{b:?}"));
            let mut book = book.unwrap_or_else(|_| "(book locked)".into());
            book.truncate(800);
            out += &format!(
                "\n  receiver {} stage {}: {:?}\n    {book}",
                e.id,
                e.stage.load(Relaxed),
                e.timer
            );
        }
        out
    }
}

/// A random timer duration: a fifth near zero, the rest up to `max`.
pub(crate) fn pick_d(rng: &mut crate::rng::Rng, max: Duration) -> Duration {
    match rng.below(10) {
        0 | 1 => rng.duration(Duration::ZERO, Duration::from_micros(100)),
        2..=5 => rng.duration(
            Duration::from_micros(100),
            Duration::from_millis(20).min(max),
        ),
        _ => rng.duration(Duration::from_millis(20).min(max), max),
    }
}

/// Runs timer-storm.
pub fn run(ctx: &Arc<Ctx>) {
    let rt = ctx.runtime();
    let procs = ctx.cfg.procs;
    let active = ctx.part(0.55);
    let n_af = ctx.scaled(120_000.0, 2_000, 1_500_000) as usize;
    let n_ch = (n_af / 25).clamp(200, 20_000);
    let max_d = (active / 2).clamp(Duration::from_millis(5), Duration::from_millis(1_500));
    ctx.note(format!(
        "after_funcs={n_af} channel_timers={n_ch} max_d={max_d:?} active={active:?}"
    ));
    let tables = Tables::new(n_af, n_ch);
    let t = tables.clone();
    crate::watchdog::on_hang(move || t.progress());
    crate::watchdog::phase("storm: creators and controllers");
    let c = ctx.clone();
    rt.block_on(async move {
        let ctx = c;
        let (done_tx, done_rx) = gort::chan::unbounded::<()>();
        let workers = procs * 4;
        let creators: Vec<_> = (0..workers)
            .map(|w| {
                let (ctx, t, done) = (ctx.clone(), tables.clone(), done_rx.clone());
                gort::spawn(async move { create(&ctx, &t, w, workers, active, max_d, &done).await })
            })
            .collect();
        let controllers: Vec<_> = (0..procs * 2)
            .map(|w| {
                let (ctx, t) = (ctx.clone(), tables.clone());
                gort::spawn(async move { control(&ctx, &t, w, active, max_d).await })
            })
            .collect();
        join_all(&ctx, "creator", creators).await;
        join_all(&ctx, "controller", controllers).await;
        tables.settle(&ctx, done_tx, max_d).await;
    });
    ctx.finish_runtime(rt);
}

/// Creates creator `w`'s share of both tables, paced over 80 % of `active`.
async fn create(
    ctx: &Arc<Ctx>,
    t: &Tables,
    w: usize,
    workers: usize,
    active: Duration,
    max_d: Duration,
    done: &gort::chan::Receiver<()>,
) {
    let mut rng = ctx.rng(w as u64);
    let mine_af: Vec<usize> = (w..t.n_af()).step_by(workers).collect();
    let mut mine_ch = (w..t.n_ch()).step_by(workers);
    let batches = mine_af.len().div_ceil(64).max(1);
    let pace = active.mul_f64(0.8) / batches as u32;
    for chunk in mine_af.chunks(64) {
        for &i in chunk {
            t.make_af(ctx, i, pick_d(&mut rng, max_d));
        }
        if let Some(i) = mine_ch.next() {
            t.make_ch(ctx, i, pick_d(&mut rng, max_d), done);
        }
        gort::time::sleep(pace).await;
    }
    for i in mine_ch {
        t.make_ch(ctx, i, pick_d(&mut rng, max_d), done);
    }
}

/// Stops (35 %) and resets random timers until `active` has passed.
async fn control(ctx: &Arc<Ctx>, t: &Tables, w: usize, active: Duration, max_d: Duration) {
    let mut rng = ctx.rng(1_000 + w as u64);
    let end = ctx.epoch + active;
    let mut n = 0u64;
    while std::time::Instant::now() < end {
        n += 1;
        if n % 32 == 0 {
            gort::yield_now().await;
        }
        if n % 512 == 0 {
            gort::time::sleep(Duration::from_micros(500)).await;
        }
        let stop = rng.chance(35);
        let d = pick_d(&mut rng, max_d);
        t.random_op(ctx, &mut rng, 25, stop, d);
    }
}

/// One stop or reset on a channel timer, recorded in its book under the book's lock.
pub(crate) fn timer_op(ctx: &Ctx, e: &ChEntry, stop: bool, d: Duration) {
    let mut b = e.book.lock().unwrap();
    let before = ctx.now_ns();
    if stop {
        let r = e.timer.stop();
        b.on_stop(Some(r), ctx.now_ns(), &ctx.violations);
        ctx.counts.stopped.fetch_add(1, Relaxed);
    } else {
        let r = e.timer.reset(d);
        let after = ctx.now_ns();
        b.on_reset(
            Some(r),
            before,
            after,
            d.as_nanos() as u64,
            0,
            &ctx.violations,
        );
        ctx.counts.reset.fetch_add(1, Relaxed);
    }
}

enum Event {
    Value(Option<gort::time::Instant>),
    Done,
}

/// Receives `e`'s values until the storm is over, then waits for the value still owed.
pub(crate) async fn receive(ctx: Arc<Ctx>, e: Arc<ChEntry>, done: gort::chan::Receiver<()>) {
    loop {
        let ops = e.book.lock().unwrap().ops();
        let start = ctx.now_ns();
        let ev = gort::select! {
            v = e.timer.c().recv() => Event::Value(v),
            _ = done.recv() => Event::Done,
        };
        match ev {
            Event::Value(Some(v)) => on_value(&ctx, &e, v, ops, start),
            Event::Value(None) => {
                ctx.violation(format!("timer {}: channel closed", e.id));
                e.stage.store(RETURNED, Relaxed);
                return;
            }
            Event::Done => break,
        }
    }
    e.stage.store(DRAINING, Relaxed);
    drain(&ctx, &e).await;
    e.stage.store(RETURNED, Relaxed);
}

/// After the storm: waits for the value `e` still owes, if any.
async fn drain(ctx: &Arc<Ctx>, e: &ChEntry) {
    loop {
        let (ops, expects, due_hi) = {
            let b = e.book.lock().unwrap();
            (b.ops(), b.expects_value(), b.current_due_hi())
        };
        if !expects {
            return;
        }
        let start = ctx.now_ns();
        let wait = Duration::from_nanos(due_hi.saturating_sub(start)) + GRACE;
        match gort::time::timeout(wait, e.timer.c().recv()).await {
            Ok(Some(v)) => on_value(ctx, e, v, ops, start),
            Ok(None) => {
                ctx.violation(format!("timer {}: channel closed", e.id));
                return;
            }
            Err(_) => return, // the book reports the lost fire
        }
    }
}

fn on_value(ctx: &Ctx, e: &ChEntry, v: gort::time::Instant, ops: u64, start: u64) {
    let seen = ctx.now_ns();
    let v_ns = ctx.ns(v);
    ctx.counts.fired.fetch_add(1, Relaxed);
    let attr = e.book.lock().unwrap().on_value(v_ns, ops, &ctx.violations);
    // Only a receive that was waiting before the due instant measures lateness.
    if attr != Attribution::Violation && start <= v_ns {
        ctx.record_lateness(v_ns, seen, "timer value");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_hang_report_counts_receivers_and_fires_outstanding() {
        let t = Tables::new(2, 3);
        let report = t.progress();
        assert!(
            report.starts_with(
                "timer tables: 0 of 3 channel timers created; receivers \
                 selecting 0, draining 0, returned 0; after_func fires outstanding 0"
            ),
            "{report}"
        );
    }
}
