//! Helpers shared by the top crate's integration tests (each test file is its own crate and
//! declares `mod support;`, and uses some of them).
#![allow(dead_code)]

use std::sync::mpsc;
use std::time::Duration;

/// Generous: the machine may be loaded; a healthy run takes milliseconds.
pub const WATCHDOG: Duration = Duration::from_secs(30);

/// Runs `f` on its own thread; fails if it does not return within [`WATCHDOG`] (a hang, a
/// lost value or wake-up), after printing every live runtime's `debug_state` (the thread is
/// left behind, the test process exits anyway), and resumes its panic if it panicked.
pub fn within<R: Send + 'static>(f: impl FnOnce() -> R + Send + 'static) -> R {
    let (tx, rx) = mpsc::channel();
    let t = std::thread::spawn(move || {
        let r = f();
        let _ = tx.send(());
        r
    });
    if let Err(mpsc::RecvTimeoutError::Timeout) = rx.recv_timeout(WATCHDOG) {
        // Where the stranded task sits, in every runtime of the process (other tests' too).
        eprintln!("{}", gort::Handle::debug_states());
        panic!("still running after {WATCHDOG:?}: hung (a lost value or wake-up?)");
    }
    match t.join() {
        Ok(r) => r,
        Err(p) => std::panic::resume_unwind(p),
    }
}

/// A runtime of one P.
pub fn one_p() -> gort::Runtime {
    gort::Builder::new().procs(1).build().unwrap()
}

/// The message of a caught panic, by reference (`String` or `&str` payloads), or "".
pub fn panic_text(p: &(dyn std::any::Any + Send)) -> String {
    p.downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| p.downcast_ref::<String>().cloned())
        .unwrap_or_default()
}

/// The message of a caught panic (`String` or `&str` payloads), or "" for any other payload.
pub fn panic_message(payload: Box<dyn std::any::Any + Send>) -> String {
    payload
        .downcast_ref::<String>()
        .cloned()
        .or_else(|| payload.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_default()
}

/// What a child test process left: how it ended and what it printed.
pub struct ChildRun {
    pub status: std::process::ExitStatus,
    pub stdout: String,
    pub stderr: String,
}

/// Runs the ignored test `name` of this test binary in a child process with `env` set to "1"
/// (the child checks it, so a plain `--ignored` run does nothing); panics with `hung` if the
/// child has not ended within `patience` (it is killed first).
pub fn run_child(name: &str, env: &str, patience: Duration, hung: &str) -> ChildRun {
    use std::process::{Command, Stdio};
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args([name, "--exact", "--ignored", "--nocapture"])
        .env(env, "1")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Read the pipes on their own threads so that a chatty child never blocks on a full pipe.
    let mut out = child.stdout.take().unwrap();
    let mut err = child.stderr.take().unwrap();
    let out = std::thread::spawn(move || std::io::read_to_string(&mut out).unwrap_or_default());
    let err = std::thread::spawn(move || std::io::read_to_string(&mut err).unwrap_or_default());
    let start = std::time::Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if start.elapsed() > patience {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{hung}");
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    ChildRun {
        status,
        stdout: out.join().unwrap(),
        stderr: err.join().unwrap(),
    }
}

/// Drops `x` on a thread of its own and waits for that up to `patience`; panics with `hung`
/// if the drop has not returned by then (a runtime's drop that waits for ever).
pub fn drop_within<T: Send + 'static>(x: T, patience: Duration, hung: &str) {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        drop(x);
        let _ = tx.send(());
    });
    rx.recv_timeout(patience).expect(hung);
}

/// A thread that changes a runtime's number of Ps in a loop (1, 2, 3, 1, ...) every `every`
/// until [`Resizer::stop`].
pub struct Resizer {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    thread: std::thread::JoinHandle<()>,
}

impl Resizer {
    pub fn start(rt: std::sync::Arc<gort::Runtime>, every: Duration) -> Resizer {
        use std::sync::atomic::Ordering::SeqCst;
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let stopped = stop.clone();
        let thread = std::thread::spawn(move || {
            let mut i = 0usize;
            while !stopped.load(SeqCst) {
                rt.set_procs(1 + i % 3);
                i += 1;
                std::thread::sleep(every);
            }
        });
        Resizer { stop, thread }
    }

    /// Stops the loop and waits for the thread (resuming its panic, if any).
    pub fn stop(self) {
        self.stop.store(true, std::sync::atomic::Ordering::SeqCst);
        if let Err(p) = self.thread.join() {
            std::panic::resume_unwind(p);
        }
    }
}

/// A slot for a runtime, so that user code can take it and drop it wherever it runs.
pub type Slot = std::sync::Arc<std::sync::Mutex<Option<gort::Runtime>>>;

pub fn slot(rt: gort::Runtime) -> Slot {
    std::sync::Arc::new(std::sync::Mutex::new(Some(rt)))
}

/// Waits (up to [`WATCHDOG`]) until user code took the runtime out of `slot`.
pub fn wait_until_taken(slot: &Slot) {
    let start = std::time::Instant::now();
    while slot.lock().unwrap().is_some() {
        assert!(start.elapsed() < WATCHDOG, "the callback never ran");
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// A waker that drops the runtime in its slot when woken (a timer fired: `wake` runs on an
/// M), then says so on its channel.
pub struct DroppingWaker(pub Slot, pub mpsc::Sender<()>);

impl std::task::Wake for DroppingWaker {
    fn wake(self: std::sync::Arc<Self>) {
        let taken = self.0.lock().unwrap().take();
        drop(taken);
        let _ = self.1.send(());
    }
}

/// A runtime of `procs` Ps.
pub fn rt(procs: usize) -> gort::Runtime {
    gort::Builder::new().procs(procs).build().unwrap()
}

/// A value that counts its drops on `dropped` (a task's output or future: whether it was
/// dropped, and how often); `n` tells values apart.
pub struct Tracked {
    pub dropped: std::sync::Arc<std::sync::atomic::AtomicUsize>,
    pub n: u64,
}

impl Drop for Tracked {
    fn drop(&mut self) {
        self.dropped
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    }
}

/// A runtime of `procs` Ps whose clock is paused from the start.
pub fn paused(procs: usize) -> gort::Runtime {
    gort::Builder::new()
        .procs(procs)
        .start_paused(true)
        .build()
        .unwrap()
}

/// Polls until `rt`'s live task count is back to `base` (tasks that end on their own, such
/// as a search's losing replicas finishing their sleep); fails after 10 s: a leaked task.
pub fn wait_tasks(rt: &gort::Runtime, base: u64) {
    let start = std::time::Instant::now();
    loop {
        let alive = rt.metrics().tasks_alive;
        if alive <= base {
            return;
        }
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "{alive} tasks still alive (base {base}): leaked"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// How many fds this process has open.
pub fn open_fds() -> usize {
    std::fs::read_dir("/proc/self/fd").unwrap().count()
}

/// Sets `SO_LINGER` to 0 s (Tokio's `set_zero_linger`; gort has Go's API, so through libc):
/// closing the socket then sends a reset (RST) instead of a FIN.
pub fn linger_zero(socket: &impl std::os::fd::AsRawFd) {
    let linger = libc::linger {
        l_onoff: 1,
        l_linger: 0,
    };
    let len = std::mem::size_of::<libc::linger>() as libc::socklen_t;
    // SAFETY: `linger` is valid for reads of `len` bytes for the call; the fd is open
    // (borrowed from a live socket).
    let rc = unsafe {
        libc::setsockopt(
            socket.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_LINGER,
            (&linger as *const libc::linger).cast(),
            len,
        )
    };
    assert_eq!(rc, 0, "{}", std::io::Error::last_os_error());
}

/// A `#[tokio::test]` body: a task spawned on a runtime of 1 P (not the `block_on` future),
/// under the watchdog.
pub fn task_on_one_p<Fut>(body: impl FnOnce() -> Fut + Send + 'static)
where
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    within(move || {
        let rt = one_p();
        rt.block_on(rt.spawn(body())).unwrap()
    })
}

/// A task output whose drop panics (Tokio's `join_handle_panic.rs`): wherever it is dropped,
/// the panic must stay there.
pub struct PanicsOnDrop;

impl Drop for PanicsOnDrop {
    fn drop(&mut self) {
        panic!("I told you so");
    }
}

/// Binds a listener at `target`, accepts one connection in a task and connects to it:
/// (the connecting end, the accepted end, the peer address `accept` returned).
pub async fn tcp_pair_at(
    target: impl std::net::ToSocketAddrs + Send + 'static,
) -> (
    gort::net::TcpStream,
    gort::net::TcpStream,
    std::net::SocketAddr,
) {
    let listener = gort::net::TcpListener::bind(target).await.unwrap();
    let addr = listener.local_addr().unwrap();
    let accepted = gort::spawn(async move { listener.accept().await.unwrap() });
    let mine = gort::net::TcpStream::connect(addr).await.unwrap();
    let (theirs, peer) = accepted.await.unwrap();
    (mine, theirs, peer)
}
