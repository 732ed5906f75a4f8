//! The netpoller's unit tests (netpoll.rs).

use super::*;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

/// Pending once, its waker left in the shared list; ready when polled again.
struct WaitOnce {
    wakers: Arc<Mutex<Vec<Waker>>>,
    waited: bool,
}

impl Future for WaitOnce {
    type Output = ();
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if std::mem::replace(&mut self.waited, true) {
            return Poll::Ready(());
        }
        self.wakers.lock().push(cx.waker().clone());
        Poll::Pending
    }
}

/// A handler whose readable events release one (no-op) waker each.
#[derive(Default)]
struct Readable(std::sync::atomic::AtomicUsize);

impl Ready for Readable {
    fn ready(&self, readable: bool, _: bool, _: bool, wakers: &mut Vec<Waker>) {
        if readable {
            self.0.fetch_add(1, SeqCst);
            wakers.push(Waker::from(Arc::new(Noop)));
        }
    }
}

struct Noop;

impl std::task::Wake for Noop {
    fn wake(self: Arc<Self>) {}
}

/// A sleep on a runtime timer, as gort-time's is (this crate cannot use it).
struct TimerSleep {
    timer: Arc<gort_timer::Timer>,
    until: Nanos,
    armed: bool,
}

impl TimerSleep {
    fn for_ms(ms: i64) -> TimerSleep {
        TimerSleep {
            timer: gort_timer::Timer::new(),
            until: gort_timer::nanotime() + ms * 1_000_000,
            armed: false,
        }
    }
}

impl Future for TimerSleep {
    type Output = ();
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if gort_timer::nanotime() >= self.until {
            return Poll::Ready(());
        }
        self.timer.set_waker(cx.waker());
        if !std::mem::replace(&mut self.armed, true) {
            crate::timer_api::modtimer(&self.timer, self.until, 0, None);
        }
        Poll::Pending
    }
}

/// A blocking poll that a timer ended with no socket's event turns the looks before
/// stealing off (N5 made ~3,800 empty ones a run), and a poll that delivers a socket's
/// event turns them on again. Sysmon may poll in between if this thread stalls for
/// 10 ms; every assertion holds either way.
#[test]
fn looks_before_stealing_pause_while_the_sockets_are_quiet() {
    use std::io::Write;
    let rt = crate::Builder::new().procs(1).build().unwrap();
    rt.block_on(rt.spawn(async {
        let shared = context::current().expect("a task runs in its runtime");
        let idle = || shared.poller.net.looks_idle.load(SeqCst);
        let (a, mut b) = std::os::unix::net::UnixStream::pair().unwrap();
        let handler = Arc::new(Readable::default());
        let fd = std::os::fd::AsRawFd::as_raw_fd(&a);
        let reg = net_api::register(&mut mio::unix::SourceFd(&fd), handler.clone()).unwrap();
        let waiters = net_api::waiters().unwrap();
        // A task waits on a socket: Go's condition for a look.
        waiters.add();
        // The registration's first (writable) edge.
        shared.poll_net_now();
        // The only M idles in the poller until a sleep's timer ends its poll.
        for _ in 0..1000 {
            if idle() {
                break;
            }
            TimerSleep::for_ms(1).await;
        }
        assert!(
            idle(),
            "a timer's wake-up with quiet sockets turns the looks off"
        );
        b.write_all(b"x").unwrap();
        assert!(!shared.look_before_stealing(), "skipped while quiet");
        let until = Instant::now() + Duration::from_secs(5);
        while handler.0.load(SeqCst) == 0 && Instant::now() < until {
            shared.poll_net_now(); // a busy M's look delivers the event
        }
        assert_eq!(handler.0.load(SeqCst), 1);
        assert!(!idle(), "a socket's event turns the looks on again");
        b.write_all(b"y").unwrap();
        let until = Instant::now() + Duration::from_secs(5);
        while handler.0.load(SeqCst) < 2 && Instant::now() < until {
            shared.look_before_stealing(); // none but sysmon's poll besides these
        }
        assert_eq!(handler.0.load(SeqCst), 2, "a look finds the socket");
        waiters.remove();
        reg.close();
        drop(a);
    }))
    .unwrap();
}

fn spin(d: Duration) {
    let until = Instant::now() + d;
    while Instant::now() < until {
        std::hint::spin_loop();
    }
}

/// A batch of readied tasks (a poll's sockets) woken by a busy M while the other P idles
/// and its M is parked: the batch wakes that M once, at its end. Waking one per push
/// handed the P, mid-batch, to the parked M, which stole the one task queued so far, ran
/// it, found nothing and parked again: a futex round trip per task (N6, Unix echo). The
/// wakes are spaced out here as a slow batch is on a busy machine.
#[test]
fn a_batch_of_readied_tasks_wakes_one_parked_m() {
    const TASKS: usize = 16;
    let rt = crate::Builder::new().procs(2).build().unwrap();
    let woken = rt.block_on(rt.spawn(async {
        let wakers = Arc::new(Mutex::new(Vec::new()));
        for _ in 0..TASKS {
            let wakers = wakers.clone();
            drop(crate::spawn(WaitOnce {
                wakers,
                waited: false,
            }));
        }
        while wakers.lock().len() < TASKS {
            crate::yield_now().await;
        }
        // The other M finds nothing (no timer, no socket) and parks.
        std::thread::sleep(Duration::from_millis(20));
        let shared = context::current().expect("a task runs in its runtime");
        let readied = std::mem::take(&mut *wakers.lock());
        let before = shared.idle.ms_woken();
        let ring_wakes = shared.sysmon_ring_wakes.load(SeqCst);
        let handed_before = shared.sysmon_runnext_handoffs.load(SeqCst);
        shared.wake_batch(|| {
            for w in readied {
                w.wake();
                spin(Duration::from_micros(300));
            }
        });
        let ring_wakes = shared.sysmon_ring_wakes.load(SeqCst) - ring_wakes;
        let handed = shared.sysmon_runnext_handoffs.load(SeqCst) - handed_before;
        (shared.idle.ms_woken() - before, handed + ring_wakes)
    }));
    let (woken, by_sysmon) = woken.unwrap();
    // One for the batch, one for each task sysmon found stuck in `runnext` and handed to
    // the idle P, and one per thief sysmon woke for the ring (sysmon.rs, "Rings"): a batch
    // the OS keeps off its CPU lasts several of sysmon's looks (a fixed "at most one
    // more" failed 2 of 5 runs on a loaded machine). Waking one M per push woke about one
    // per task.
    assert!(
        woken <= 1 + by_sysmon,
        "{woken} parked Ms woken for one batch of {TASKS} tasks ({by_sysmon} by sysmon)"
    );
}
