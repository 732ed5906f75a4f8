//! The deadline rules of Go's `net.Conn` beyond `timeout_test.go`: deadlines apply to
//! operations already blocked (set, extended, cleared), are not sticky, and each direction
//! has its own; many connections with their own deadlines all time out, none early, none
//! lost; data that arrives before the deadline is returned.

use gort::net::{TcpListener, TcpStream};
use gort::time::Instant;
use std::io::ErrorKind;
use std::sync::Arc;
use std::time::Duration;

const MS: Duration = Duration::from_millis(1);
const LATE: Duration = Duration::from_secs(5);

fn run<F: std::future::Future>(f: F) -> F::Output {
    gort::Runtime::new().unwrap().block_on(f)
}

async fn pair() -> (TcpStream, TcpStream) {
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    let c = gort::spawn(async move { TcpStream::connect(addr).await.unwrap() });
    let (s, _) = l.accept().await.unwrap();
    (c.await.unwrap(), s)
}

/// Starts a read of one byte on `c` in its own task; yields the result and when it came.
fn spawn_read(c: &Arc<TcpStream>) -> gort::JoinHandle<(std::io::Result<usize>, Instant)> {
    let c = c.clone();
    gort::spawn(async move {
        let r = c.read(&mut [0; 1]).await;
        (r, Instant::now())
    })
}

#[test]
fn a_deadline_set_while_a_read_is_blocked_ends_that_read() {
    run(async {
        let (c, _s) = pair().await;
        let c = Arc::new(c);
        let read = spawn_read(&c);
        gort::time::sleep(20 * MS).await; // the read blocks with no deadline
        let deadline = Instant::now() + 20 * MS;
        c.set_read_deadline(Some(deadline)).unwrap();
        let (r, at) = read.await.unwrap();
        assert_eq!(r.unwrap_err().kind(), ErrorKind::TimedOut);
        assert!(at >= deadline, "timed out early");
        assert!(at - deadline < LATE);
    });
}

#[test]
fn a_deadline_in_the_past_set_while_a_read_is_blocked_ends_it_at_once() {
    run(async {
        let (c, _s) = pair().await;
        let c = Arc::new(c);
        let read = spawn_read(&c);
        gort::time::sleep(20 * MS).await;
        c.set_read_deadline(Some(Instant::now() - MS)).unwrap();
        let (r, _) = read.await.unwrap();
        assert_eq!(r.unwrap_err().kind(), ErrorKind::TimedOut);
    });
}

/// Blocks a read under a deadline 50 ms away, changes the deadline with `change` 10 ms later
/// and writes 150 ms after that (well past the first deadline); returns what the read got.
/// `None` when the change ended after the first deadline: a loaded machine held this task
/// past it (seen once in 53 runs beside CPU hogs), and the read may rightly have timed out.
async fn read_past_a_changed_deadline(
    change: impl Fn(&TcpStream),
) -> Option<std::io::Result<usize>> {
    let (c, s) = pair().await;
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
async fn read_after_a_timely_change(change: impl Fn(&TcpStream)) -> std::io::Result<usize> {
    for _ in 0..5 {
        if let Some(r) = read_past_a_changed_deadline(&change).await {
            return r;
        }
    }
    panic!("in 5 tries the deadline was never changed within its 40 ms of slack");
}

#[test]
fn an_extended_deadline_lets_a_blocked_read_go_on_until_data_comes() {
    run(async {
        let r = read_after_a_timely_change(|c| {
            c.set_read_deadline(Some(Instant::now() + Duration::from_secs(30)))
                .unwrap()
        })
        .await;
        assert_eq!(
            r.unwrap(),
            1,
            "the extended read timed out at the old deadline"
        );
    });
}

#[test]
fn a_cleared_deadline_lets_a_blocked_read_go_on_until_data_comes() {
    run(async {
        let r = read_after_a_timely_change(|c| c.set_read_deadline(None).unwrap()).await;
        assert_eq!(r.unwrap(), 1, "the read timed out at a cleared deadline");
    });
}

#[test]
fn a_deadline_moved_earlier_while_blocked_ends_the_read_at_the_new_one() {
    run(async {
        let (c, _s) = pair().await;
        let c = Arc::new(c);
        c.set_read_deadline(Some(Instant::now() + Duration::from_secs(60)))
            .unwrap();
        let read = spawn_read(&c);
        gort::time::sleep(10 * MS).await;
        let deadline = Instant::now() + 30 * MS;
        c.set_read_deadline(Some(deadline)).unwrap();
        let (r, at) = read.await.unwrap();
        assert_eq!(r.unwrap_err().kind(), ErrorKind::TimedOut);
        assert!(at >= deadline && at - deadline < LATE);
    });
}

#[test]
fn a_timeout_is_not_sticky() {
    run(async {
        let (c, s) = pair().await;
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
    });
}

#[test]
fn the_read_deadline_never_affects_writes_nor_the_write_deadline_reads() {
    run(async {
        let (c, s) = pair().await;
        c.set_read_deadline(Some(Instant::now() - MS)).unwrap();
        c.write_all(b"w").await.unwrap();
        c.set_read_deadline(None).unwrap();
        c.set_write_deadline(Some(Instant::now() - MS)).unwrap();
        s.write_all(b"r").await.unwrap();
        let mut b = [0; 1];
        c.read_exact(&mut b).await.unwrap();
        assert_eq!(&b, b"r");
        assert_eq!(c.write(b"x").await.unwrap_err().kind(), ErrorKind::TimedOut);
    });
}

/// A deadline moved many times re-arms the one timer of its direction: the heaps hold one
/// pending timer, not one per move, and it still fires at the last deadline.
#[test]
fn a_deadline_moved_thousands_of_times_keeps_one_timer_and_still_fires() {
    let rt = gort::Runtime::new().unwrap();
    let (c, _s) = rt.block_on(pair());
    let before = rt.metrics();
    rt.block_on(async {
        for i in 0..10_000u64 {
            let d = Duration::from_secs(60 + i % 7);
            c.set_read_deadline(Some(Instant::now() + d)).unwrap();
        }
    });
    let m = rt.metrics();
    assert_eq!(m.timers_pending, before.timers_pending + 1);
    rt.block_on(async {
        let deadline = Instant::now() + 10 * MS;
        c.set_read_deadline(Some(deadline)).unwrap();
        let r = c.read(&mut [0; 1]).await;
        assert_eq!(r.unwrap_err().kind(), ErrorKind::TimedOut);
        assert!(Instant::now() >= deadline);
    });
}

/// Raises the soft open-file limit to the hard one (a test needs thousands of fds).
fn raise_fd_limit() {
    // SAFETY: getrlimit/setrlimit with a properly initialised struct of this process.
    unsafe {
        let mut r = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut r) == 0 && r.rlim_cur < r.rlim_max {
            r.rlim_cur = r.rlim_max;
            libc::setrlimit(libc::RLIMIT_NOFILE, &r);
        }
    }
}

/// 1,000 connections, each blocked in a read with its own deadline (spread over 50-550 ms):
/// every read times out, none before its deadline, none lost.
#[test]
fn a_thousand_connections_with_their_own_deadlines_all_time_out_none_early() {
    raise_fd_limit();
    run(async {
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = l.local_addr().unwrap();
        let acceptor = gort::spawn(async move {
            let mut keep = Vec::new();
            for _ in 0..1000 {
                keep.push(l.accept().await.unwrap().0);
            }
            keep
        });
        let mut conns = Vec::new();
        for _ in 0..1000 {
            conns.push(TcpStream::connect(addr).await.unwrap());
        }
        let _servers = acceptor.await.unwrap();
        let start = Instant::now();
        let readers: Vec<_> = conns
            .into_iter()
            .enumerate()
            .map(|(i, c)| {
                let deadline = start + Duration::from_micros(50_000 + (i as u64 * 7919) % 500_000);
                gort::spawn(async move {
                    c.set_read_deadline(Some(deadline)).unwrap();
                    let r = c.read(&mut [0; 1]).await;
                    (r.map_err(|e| e.kind()), deadline, Instant::now())
                })
            })
            .collect();
        for r in readers {
            let (r, deadline, at) = r.await.unwrap();
            assert_eq!(r, Err(ErrorKind::TimedOut));
            assert!(at >= deadline, "a read timed out {:?} early", deadline - at);
            assert!(
                at - deadline < LATE,
                "a read timed out {:?} late",
                at - deadline
            );
        }
    });
}

/// Data written well before each connection's deadline is always returned, never a
/// timeout, over 200 connections whose peers answer after 0-20 ms.
#[test]
fn data_arriving_before_the_deadline_is_returned() {
    raise_fd_limit();
    run(async {
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = l.local_addr().unwrap();
        gort::spawn(async move {
            let mut i = 0u64;
            while let Ok((s, _)) = l.accept().await {
                i += 1;
                gort::spawn(async move {
                    gort::time::sleep(Duration::from_micros(i * 100 % 20_000)).await;
                    s.write_all(b"data").await.unwrap();
                    let _ = s.read(&mut [0; 1]).await; // hold until the client is done
                });
            }
        });
        let tasks: Vec<_> = (0..200)
            .map(|_| {
                gort::spawn(async move {
                    let c = TcpStream::connect(addr).await.unwrap();
                    c.set_read_deadline(Some(Instant::now() + Duration::from_secs(10)))
                        .unwrap();
                    let mut b = [0; 4];
                    c.read_exact(&mut b).await.map(|_| b)
                })
            })
            .collect();
        for t in tasks {
            assert_eq!(&t.await.unwrap().unwrap(), b"data");
        }
    });
}
