//! The deadline rules of Go's `net.Conn` as cases generic over the stream type, run by
//! `deadlines.rs` on TCP and `unix_deadlines.rs` on Unix sockets: deadlines apply to
//! operations already blocked (set, extended, cleared, moved earlier), are not sticky, and
//! each direction has its own.

use gort::net::{TcpListener, TcpStream, UnixStream};
use gort::time::Instant;
use std::future::Future;
use std::io::{ErrorKind, Result};
use std::sync::Arc;
use std::time::Duration;

pub const MS: Duration = Duration::from_millis(1);
/// How late a timed-out operation may return on a loaded machine and still pass.
pub const LATE: Duration = Duration::from_secs(5);

/// One `#[test]` per case of this file, run on `$stream`.
macro_rules! conn_case_tests {
    ($stream:ty) => {
        conn_case_tests!($stream:
            a_deadline_set_while_a_read_is_blocked_ends_that_read,
            a_deadline_in_the_past_set_while_a_read_is_blocked_ends_it_at_once,
            an_extended_deadline_lets_a_blocked_read_go_on_until_data_comes,
            a_cleared_deadline_lets_a_blocked_read_go_on_until_data_comes,
            a_deadline_moved_earlier_while_blocked_ends_the_read_at_the_new_one,
            a_timeout_is_not_sticky,
            the_read_deadline_never_affects_writes_nor_the_write_deadline_reads,
            a_deadline_set_while_a_write_is_blocked_ends_that_write,
        );
    };
    ($stream:ty: $($case:ident),* $(,)?) => {
        $(
            #[test]
            fn $case() {
                $crate::conn_cases::run($crate::conn_cases::$case::<$stream>());
            }
        )*
    };
}

pub fn run<F: Future>(f: F) -> F::Output {
    gort::Runtime::new().unwrap().block_on(f)
}

/// A stream the cases run on: its kind's way to make a connected pair, and the methods the
/// cases use (inherent on each type, so a trait forwards to them).
pub trait Conn: Send + Sync + Sized + 'static {
    fn pair() -> impl Future<Output = (Self, Self)> + Send;
    fn read<'a>(&'a self, buf: &'a mut [u8]) -> impl Future<Output = Result<usize>> + Send + 'a;
    fn read_exact<'a>(&'a self, buf: &'a mut [u8]) -> impl Future<Output = Result<()>> + Send + 'a;
    fn write<'a>(&'a self, buf: &'a [u8]) -> impl Future<Output = Result<usize>> + Send + 'a;
    fn write_all<'a>(&'a self, buf: &'a [u8]) -> impl Future<Output = Result<()>> + Send + 'a;
    fn set_read_deadline(&self, deadline: Option<Instant>) -> Result<()>;
    fn set_write_deadline(&self, deadline: Option<Instant>) -> Result<()>;
}

macro_rules! forward_conn {
    () => {
        fn read<'a>(
            &'a self,
            buf: &'a mut [u8],
        ) -> impl Future<Output = Result<usize>> + Send + 'a {
            Self::read(self, buf)
        }
        fn read_exact<'a>(
            &'a self,
            buf: &'a mut [u8],
        ) -> impl Future<Output = Result<()>> + Send + 'a {
            Self::read_exact(self, buf)
        }
        fn write<'a>(&'a self, buf: &'a [u8]) -> impl Future<Output = Result<usize>> + Send + 'a {
            Self::write(self, buf)
        }
        fn write_all<'a>(&'a self, buf: &'a [u8]) -> impl Future<Output = Result<()>> + Send + 'a {
            Self::write_all(self, buf)
        }
        fn set_read_deadline(&self, deadline: Option<Instant>) -> Result<()> {
            Self::set_read_deadline(self, deadline)
        }
        fn set_write_deadline(&self, deadline: Option<Instant>) -> Result<()> {
            Self::set_write_deadline(self, deadline)
        }
    };
}

impl Conn for TcpStream {
    async fn pair() -> (TcpStream, TcpStream) {
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let connect = TcpStream::connect(l.local_addr().unwrap());
        let (c, accepted) = futures::join!(connect, l.accept());
        (c.unwrap(), accepted.unwrap().0)
    }
    forward_conn!();
}

impl Conn for UnixStream {
    async fn pair() -> (UnixStream, UnixStream) {
        UnixStream::pair().unwrap()
    }
    forward_conn!();
}

/// Starts a read of one byte on `c` in its own task; yields the result and when it came.
pub fn spawn_read<C: Conn>(c: &Arc<C>) -> gort::JoinHandle<(Result<usize>, Instant)> {
    let c = c.clone();
    gort::spawn(async move {
        let r = c.read(&mut [0; 1]).await;
        (r, Instant::now())
    })
}

/// Lets the task `op` block for 10 ms, sets its deadline 30 ms ahead with `set`, and
/// asserts that `op` fails with `TimedOut` at that deadline: not before, not much after.
pub async fn assert_a_deadline_set_meanwhile_ends<T: std::fmt::Debug>(
    op: gort::JoinHandle<(Result<T>, Instant)>,
    set: impl FnOnce(Option<Instant>) -> Result<()>,
) {
    gort::time::sleep(10 * MS).await;
    let deadline = Instant::now() + 30 * MS;
    set(Some(deadline)).unwrap();
    let (r, at) = op.await.unwrap();
    assert_eq!(r.unwrap_err().kind(), ErrorKind::TimedOut);
    assert!(at >= deadline, "timed out early");
    assert!(at - deadline < LATE, "timed out {:?} late", at - deadline);
}

pub async fn a_deadline_set_while_a_read_is_blocked_ends_that_read<C: Conn>() {
    let (c, _s) = C::pair().await;
    let c = Arc::new(c);
    // The read blocks with no deadline.
    assert_a_deadline_set_meanwhile_ends(spawn_read(&c), |d| c.set_read_deadline(d)).await;
}

pub async fn a_deadline_in_the_past_set_while_a_read_is_blocked_ends_it_at_once<C: Conn>() {
    let (c, _s) = C::pair().await;
    let c = Arc::new(c);
    let read = spawn_read(&c);
    gort::time::sleep(20 * MS).await;
    c.set_read_deadline(Some(Instant::now() - MS)).unwrap();
    let (r, _) = read.await.unwrap();
    assert_eq!(r.unwrap_err().kind(), ErrorKind::TimedOut);
}

/// Blocks a read under a deadline 50 ms away, changes the deadline with `change` 10 ms later
/// and writes 150 ms after that (well past the first deadline); returns what the read got.
/// `None` when the change ended after the first deadline: a loaded machine held this task
/// past it (seen once in 53 runs beside CPU hogs), and the read may rightly have timed out.
async fn read_past_a_changed_deadline<C: Conn>(change: impl Fn(&C)) -> Option<Result<usize>> {
    let (c, s) = C::pair().await;
    let c = Arc::new(c);
    let first = Instant::now() + 50 * MS;
    c.set_read_deadline(Some(first)).unwrap();
    let read = spawn_read(&c);
    gort::time::sleep(10 * MS).await;
    change(&c);
    let changed = Instant::now();
    gort::time::sleep(150 * MS).await;
    s.write_all(b"d").await.unwrap();
    let (r, _) = read.await.unwrap();
    (changed < first).then_some(r)
}

/// Tries [`read_past_a_changed_deadline`] until a change lands before the first deadline.
async fn read_after_a_timely_change<C: Conn>(change: impl Fn(&C)) -> Result<usize> {
    for _ in 0..5 {
        if let Some(r) = read_past_a_changed_deadline(&change).await {
            return r;
        }
    }
    panic!("in 5 tries the deadline was never changed within its 40 ms of slack");
}

pub async fn an_extended_deadline_lets_a_blocked_read_go_on_until_data_comes<C: Conn>() {
    let r = read_after_a_timely_change(|c: &C| {
        c.set_read_deadline(Some(Instant::now() + Duration::from_secs(30)))
            .unwrap()
    })
    .await;
    assert_eq!(
        r.unwrap(),
        1,
        "the extended read timed out at the old deadline"
    );
}

pub async fn a_cleared_deadline_lets_a_blocked_read_go_on_until_data_comes<C: Conn>() {
    let r = read_after_a_timely_change(|c: &C| c.set_read_deadline(None).unwrap()).await;
    assert_eq!(r.unwrap(), 1, "the read timed out at a cleared deadline");
}

pub async fn a_deadline_moved_earlier_while_blocked_ends_the_read_at_the_new_one<C: Conn>() {
    let (c, _s) = C::pair().await;
    let c = Arc::new(c);
    c.set_read_deadline(Some(Instant::now() + Duration::from_secs(60)))
        .unwrap();
    assert_a_deadline_set_meanwhile_ends(spawn_read(&c), |d| c.set_read_deadline(d)).await;
}

pub async fn a_timeout_is_not_sticky<C: Conn>() {
    let (c, s) = C::pair().await;
    c.set_read_deadline(Some(Instant::now() + 10 * MS)).unwrap();
    assert_eq!(
        c.read(&mut [0; 1]).await.unwrap_err().kind(),
        ErrorKind::TimedOut
    );
    s.write_all(b"ab").await.unwrap();
    c.set_read_deadline(Some(Instant::now() + Duration::from_secs(60)))
        .unwrap();
    let mut b = [0; 1];
    c.read_exact(&mut b).await.unwrap();
    c.set_read_deadline(None).unwrap();
    c.read_exact(&mut b).await.unwrap();
    assert_eq!(&b, b"b");
}

pub async fn the_read_deadline_never_affects_writes_nor_the_write_deadline_reads<C: Conn>() {
    let (c, s) = C::pair().await;
    c.set_read_deadline(Some(Instant::now() - MS)).unwrap();
    c.write_all(b"w").await.unwrap();
    c.set_read_deadline(None).unwrap();
    c.set_write_deadline(Some(Instant::now() - MS)).unwrap();
    s.write_all(b"r").await.unwrap();
    let mut b = [0; 1];
    c.read_exact(&mut b).await.unwrap();
    assert_eq!(&b, b"r");
    assert_eq!(c.write(b"x").await.unwrap_err().kind(), ErrorKind::TimedOut);
}

/// A write blocked on a full socket (nobody reads the peer) with no deadline, then one set
/// while it is blocked: the write fails with `TimedOut` at that deadline, and the bytes it
/// reported before are all the peer gets.
pub async fn a_deadline_set_while_a_write_is_blocked_ends_that_write<C: Conn>() {
    let (c, s) = C::pair().await;
    let c = Arc::new(c);
    let (sent_tx, sent_rx) = std::sync::mpsc::channel();
    let writer = {
        let c = c.clone();
        gort::spawn(async move {
            let chunk = vec![7u8; 64 * 1024];
            let mut sent = 0;
            let err = loop {
                let n = match c.write(&chunk).await {
                    Ok(n) => n,
                    Err(e) => break e,
                };
                sent += n;
            };
            sent_tx.send(sent).unwrap();
            (Err::<(), _>(err), Instant::now())
        })
    };
    gort::time::sleep(40 * MS).await; // the buffers fill and the write blocks
    assert_a_deadline_set_meanwhile_ends(writer, |d| c.set_write_deadline(d)).await;
    let sent = sent_rx.recv().unwrap();
    drop(c);
    let mut all = vec![0; sent];
    s.read_exact(&mut all).await.unwrap();
    assert_eq!(
        s.read(&mut [0; 1]).await.unwrap(),
        0,
        "a timed-out write sent data"
    );
}
