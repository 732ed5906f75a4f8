//! The deadline rules of Go's `net.Conn` beyond `timeout_test.go`: deadlines apply to
//! operations already blocked (set, extended, cleared), are not sticky, and each direction
//! has its own (the cases of `support/conn_cases.rs`, run here on TCP); many connections
//! with their own deadlines all time out, none early, none lost; data that arrives before
//! the deadline is returned.

#[path = "support/conn_cases.rs"]
#[macro_use]
mod conn_cases;

use conn_cases::{run, Conn, LATE, MS};
use gort::net::{TcpListener, TcpStream};
use gort::time::Instant;
use std::io::ErrorKind;
use std::time::Duration;

conn_case_tests!(TcpStream);

async fn pair() -> (TcpStream, TcpStream) {
    <TcpStream as Conn>::pair().await
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
