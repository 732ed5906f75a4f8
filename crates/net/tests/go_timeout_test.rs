//! Ports of Go 1.19's `src/net/timeout_test.go`, one test per Go test that applies to gort
//! (named in each doc comment), plus the deadline rules of `net.Conn` that the Go tests
//! imply. Timing assertions are only "not before the deadline" plus generous upper bounds
//! (seconds), so a loaded machine cannot fail them.
//!
//! Not ported: TestDialTimeout / TestDialTimeoutMaxDuration (gort has no dial timeout: wrap
//! `connect` in `gort::time::timeout`), and the `Close`-while-blocked halves of the
//! MustNotReturn tests (a gort socket is closed by dropping it, which a blocked operation's
//! borrow forbids; the future is dropped instead, which must leave the socket usable).

use gort::net::{TcpListener, TcpStream, UdpSocket};
use gort::time::Instant;
use std::io::ErrorKind;
use std::sync::Arc;
use std::time::Duration;

const MS: Duration = Duration::from_millis(1);
/// How late a timed-out operation may return on a loaded machine and still pass.
const LATE: Duration = Duration::from_secs(3);

fn run<F: std::future::Future>(f: F) -> F::Output {
    gort::Runtime::new().unwrap().block_on(f)
}

fn run_procs<F: std::future::Future>(procs: usize, f: F) -> F::Output {
    gort::Builder::new()
        .procs(procs)
        .build()
        .unwrap()
        .block_on(f)
}

async fn pair() -> (TcpStream, TcpStream) {
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    let c = gort::spawn(async move { TcpStream::connect(addr).await.unwrap() });
    let (s, _) = l.accept().await.unwrap();
    (c.await.unwrap(), s)
}

fn past() -> Option<Instant> {
    Some(Instant::now() - Duration::from_secs(5))
}

fn after(d: Duration) -> Option<Instant> {
    Some(Instant::now() + d)
}

fn assert_timed_out<T: std::fmt::Debug>(r: std::io::Result<T>) {
    assert_eq!(r.unwrap_err().kind(), ErrorKind::TimedOut);
}

/// Asserts that `f` is still pending after `d` (the future is then dropped).
async fn must_not_return<F: std::future::Future>(f: F, d: Duration)
where
    F::Output: std::fmt::Debug,
{
    gort::select! {
        r = f => panic!("expected the operation to block, it returned {r:?}"),
        _ = gort::time::sleep(d) => {}
    }
}

/// Go: TestAcceptTimeout. A passed deadline fails accept at once even with a connection
/// pending; a later one lets accepts through until it passes.
#[test]
fn accept_timeout() {
    run(async {
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = l.local_addr().unwrap();
        let _pending = TcpStream::connect(addr).await.unwrap();
        l.set_deadline(past()).unwrap();
        assert_timed_out(l.accept().await);
        assert_timed_out(l.accept().await);

        let deadline = Instant::now() + 50 * MS;
        l.set_deadline(Some(deadline)).unwrap();
        l.accept().await.unwrap(); // the pending connection
        assert_timed_out(l.accept().await);
        assert!(Instant::now() >= deadline, "accept timed out early");
    });
}

/// Go: TestAcceptTimeoutMustReturn. A passed deadline set after a cleared one fails accept.
#[test]
fn accept_timeout_must_return() {
    run(async {
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        l.set_deadline(None).unwrap();
        l.set_deadline(past()).unwrap();
        let t0 = Instant::now();
        assert_timed_out(l.accept().await);
        assert!(t0.elapsed() < LATE);
    });
}

/// Go: TestAcceptTimeoutMustNotReturn. A passed deadline then cleared: accept blocks.
#[test]
fn accept_timeout_must_not_return() {
    run(async {
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        l.set_deadline(past()).unwrap();
        l.set_deadline(None).unwrap();
        must_not_return(l.accept(), 100 * MS).await;
    });
}

/// Go: TestReadTimeout. Read deadlines work even with data ready to be read: a passed
/// deadline fails the read and consumes nothing; data is read until a later deadline
/// passes, then the read times out.
#[test]
fn read_timeout() {
    run(async {
        let (c, s) = pair().await;
        s.write_all(b"READ TIMEOUT TEST").await.unwrap();
        gort::time::sleep(10 * MS).await;
        c.set_read_deadline(Some(Instant::now())).unwrap();
        assert_timed_out(c.read(&mut [0; 1]).await);
        assert_timed_out(c.read(&mut [0; 1]).await);

        let deadline = Instant::now() + 50 * MS;
        c.set_read_deadline(Some(deadline)).unwrap();
        let mut got = Vec::new();
        loop {
            let mut b = [0; 1];
            match c.read(&mut b).await {
                Ok(n) => got.extend_from_slice(&b[..n]),
                Err(e) => {
                    assert_eq!(e.kind(), ErrorKind::TimedOut);
                    break;
                }
            }
        }
        assert_eq!(got, b"READ TIMEOUT TEST", "a timed-out read consumed data");
        assert!(Instant::now() >= deadline, "read timed out early");
    });
}

/// Go: TestReadTimeoutMustNotReturn. Passed deadlines for both directions, then the read
/// deadline cleared: a read blocks (and the write deadline still fails writes).
#[test]
fn read_timeout_must_not_return() {
    run(async {
        let (c, s) = pair().await;
        c.set_deadline(past()).unwrap();
        c.set_write_deadline(past()).unwrap();
        c.set_read_deadline(None).unwrap();
        must_not_return(c.read(&mut [0; 1]), 100 * MS).await;
        assert_timed_out(c.write(b"x").await);
        // The dropped read left the socket usable.
        s.write_all(b"z").await.unwrap();
        let mut b = [0; 1];
        assert_eq!(c.read(&mut b).await.unwrap(), 1);
    });
}

/// Go: TestReadFromTimeout. The same for UDP's recv_from.
#[test]
fn read_from_timeout() {
    run(async {
        let a = UdpSocket::bind("127.0.0.1:0").await.unwrap();
        let b = UdpSocket::bind("127.0.0.1:0").await.unwrap();
        a.send_to(b"d", b.local_addr().unwrap()).await.unwrap();
        gort::time::sleep(10 * MS).await;
        b.set_read_deadline(past()).unwrap();
        assert_timed_out(b.recv_from(&mut [0; 8]).await);
        let deadline = Instant::now() + 50 * MS;
        b.set_read_deadline(Some(deadline)).unwrap();
        assert_eq!(b.recv_from(&mut [0; 8]).await.unwrap().0, 1);
        assert_timed_out(b.recv_from(&mut [0; 8]).await);
        assert!(Instant::now() >= deadline);
    });
}

/// Go: TestWriteTimeout. Writes to a peer that never reads succeed until the socket
/// buffers fill, then time out at the deadline; a timed-out write sends nothing.
#[test]
fn write_timeout() {
    run(async {
        let (c, s) = pair().await;
        c.set_write_deadline(past()).unwrap();
        assert_timed_out(c.write(b"WRITE TIMEOUT TEST").await);

        let deadline = Instant::now() + 50 * MS;
        c.set_write_deadline(Some(deadline)).unwrap();
        let chunk = vec![7u8; 64 * 1024];
        let mut sent = 0;
        loop {
            match c.write(&chunk).await {
                Ok(n) => sent += n,
                Err(e) => {
                    assert_eq!(e.kind(), ErrorKind::TimedOut);
                    break;
                }
            }
        }
        assert!(Instant::now() >= deadline, "write timed out early");
        drop(c);
        let mut received = 0;
        let mut buf = vec![0; 64 * 1024];
        loop {
            match s.read(&mut buf).await.unwrap() {
                0 => break,
                n => received += n,
            }
        }
        assert_eq!(received, sent, "a timed-out write sent data");
    });
}

/// Go: TestWriteTimeoutMustNotReturn. Passed deadlines, then the write deadline cleared: a
/// write into full buffers blocks (and reads still time out).
#[test]
fn write_timeout_must_not_return() {
    run(async {
        let (c, _s) = pair().await;
        c.set_deadline(past()).unwrap();
        c.set_read_deadline(past()).unwrap();
        c.set_write_deadline(None).unwrap();
        let chunk = vec![1u8; 64 * 1024];
        let fill = async {
            loop {
                c.write(&chunk).await.unwrap();
            }
        };
        must_not_return(fill, 100 * MS).await;
        assert_timed_out(c.read(&mut [0; 1]).await);
    });
}

/// Go: TestWriteToTimeout. UDP send_to with a passed deadline fails; cleared, it works.
#[test]
fn write_to_timeout() {
    run(async {
        let a = UdpSocket::bind("127.0.0.1:0").await.unwrap();
        let to = a.local_addr().unwrap();
        a.set_write_deadline(past()).unwrap();
        assert_timed_out(a.send_to(b"x", to).await);
        a.set_write_deadline(after(Duration::from_secs(60)))
            .unwrap();
        assert_eq!(a.send_to(b"x", to).await.unwrap(), 1);
    });
}

/// Go: TestReadTimeoutFluctuation. Deadlines of growing distance, each set before a read
/// that nothing answers: each read times out, never before its deadline.
#[test]
fn read_timeout_fluctuation() {
    run(async {
        let (c, _s) = pair().await;
        for d in [1, 5, 10, 25, 50] {
            let deadline = Instant::now() + d * MS;
            c.set_read_deadline(Some(deadline)).unwrap();
            assert_timed_out(c.read(&mut [0; 256]).await);
            let now = Instant::now();
            assert!(now >= deadline, "read timed out {:?} early", deadline - now);
            assert!(now - deadline < LATE);
        }
    });
}

/// Go: TestReadFromTimeoutFluctuation.
#[test]
fn read_from_timeout_fluctuation() {
    run(async {
        let u = UdpSocket::bind("127.0.0.1:0").await.unwrap();
        for d in [1, 5, 10, 25, 50] {
            let deadline = Instant::now() + d * MS;
            u.set_read_deadline(Some(deadline)).unwrap();
            assert_timed_out(u.recv_from(&mut [0; 256]).await);
            assert!(Instant::now() >= deadline);
        }
    });
}

/// Go: TestWriteTimeoutFluctuation.
#[test]
fn write_timeout_fluctuation() {
    run(async {
        let (c, _s) = pair().await;
        let chunk = vec![2u8; 64 * 1024];
        for d in [1, 5, 10, 25, 50] {
            let deadline = Instant::now() + d * MS;
            c.set_write_deadline(Some(deadline)).unwrap();
            loop {
                match c.write(&chunk).await {
                    Ok(_) => continue,
                    Err(e) => {
                        assert_eq!(e.kind(), ErrorKind::TimedOut);
                        break;
                    }
                }
            }
            assert!(Instant::now() >= deadline);
        }
    });
}

/// Go: testVariousDeadlines, shared by the next three tests: a client copies a never-ending
/// stream until its deadline (1 ns to 100 ms ahead) ends the copy with a timeout.
async fn various_deadlines() {
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    gort::spawn(async move {
        while let Ok((s, _)) = l.accept().await {
            gort::spawn(async move {
                let chunk = vec![b'x'; 16 * 1024];
                while s.write_all(&chunk).await.is_ok() {}
            });
        }
    });
    let timeouts = [
        1, 2, 5, 50, 100, 200, 500, 750, 1_000, 5_000, 25_000, 250_000,
    ];
    let timeouts = timeouts
        .into_iter()
        .map(Duration::from_nanos)
        .chain([MS, 5 * MS, 100 * MS]);
    for timeout in timeouts {
        for _ in 0..3 {
            let c = TcpStream::connect(addr).await.unwrap();
            let t0 = Instant::now();
            c.set_deadline(Some(t0 + timeout)).unwrap();
            let mut buf = vec![0; 32 * 1024];
            let err = loop {
                if let Err(e) = c.read(&mut buf).await {
                    break e;
                }
            };
            assert_eq!(err.kind(), ErrorKind::TimedOut, "{timeout:?}: {err}");
            assert!(t0.elapsed() >= timeout);
        }
    }
}

/// Go: TestVariousDeadlines.
#[test]
fn various_deadlines_default_procs() {
    run(various_deadlines());
}

/// Go: TestVariousDeadlines1Proc.
#[test]
fn various_deadlines_1_proc() {
    run_procs(1, various_deadlines());
}

/// Go: TestVariousDeadlines4Proc.
#[test]
fn various_deadlines_4_procs() {
    run_procs(4, various_deadlines());
}

/// Go: TestReadWriteProlongedTimeout. A reader and a writer on one connection each push
/// their deadline an hour ahead before every operation while the peer talks to them.
#[test]
fn read_write_prolonged_timeout() {
    run(async {
        let (c, s) = pair().await;
        let s = Arc::new(s);
        let reader = {
            let s = s.clone();
            gort::spawn(async move {
                let mut b = [0; 1];
                loop {
                    s.set_read_deadline(after(Duration::from_secs(3600)))
                        .unwrap();
                    match s.read(&mut b).await {
                        Ok(0) | Err(_) => return,
                        Ok(_) => {}
                    }
                }
            })
        };
        let writer = {
            let s = s.clone();
            gort::spawn(async move {
                loop {
                    s.set_write_deadline(after(Duration::from_secs(3600)))
                        .unwrap();
                    if s.write(b"w").await.is_err() {
                        return;
                    }
                }
            })
        };
        let mut b = [0; 1];
        for _ in 0..1000 {
            c.write_all(b"c").await.unwrap();
            c.read_exact(&mut b).await.unwrap();
        }
        drop(c);
        reader.await.unwrap();
        writer.await.unwrap();
    });
}

/// Go: TestReadWriteDeadlineRace. Deadlines 2 µs ahead, set over and over while a reader
/// and a writer run on the same connection: nothing hangs or panics.
#[test]
fn read_write_deadline_race() {
    run(async {
        let (c, _s) = pair().await;
        let c = Arc::new(c);
        const N: usize = 1000;
        let setter = {
            let c = c.clone();
            gort::spawn(async move {
                for _ in 0..N {
                    c.set_read_deadline(after(Duration::from_micros(2)))
                        .unwrap();
                    c.set_write_deadline(after(Duration::from_micros(2)))
                        .unwrap();
                    gort::time::sleep(Duration::from_micros(2)).await;
                }
            })
        };
        let reader = {
            let c = c.clone();
            gort::spawn(async move {
                let mut b = [0; 1];
                for _ in 0..N {
                    let _ = c.read(&mut b).await;
                }
            })
        };
        let writer = {
            let c = c.clone();
            gort::spawn(async move {
                for _ in 0..N {
                    let _ = c.write(b"x").await;
                }
            })
        };
        setter.await.unwrap();
        // The last deadlines have passed: the reader and writer finish.
        c.set_deadline(past()).unwrap();
        reader.await.unwrap();
        writer.await.unwrap();
    });
}

/// Go: TestConcurrentSetDeadline. Eight tasks move the deadlines of ten connections
/// steadily earlier (re-arming timers across Ps) at once.
#[test]
fn concurrent_set_deadline() {
    run(async {
        let mut conns = Vec::new();
        for _ in 0..10 {
            conns.push(pair().await);
        }
        let conns = Arc::new(conns);
        let now = Instant::now();
        let tasks: Vec<_> = (0..8u64)
            .map(|i| {
                let conns = conns.clone();
                gort::spawn(async move {
                    for j in (1..=100u64).rev() {
                        for (k, (c, _)) in conns.iter().enumerate() {
                            let extra = Duration::from_secs(i * j * k as u64);
                            let hour = Duration::from_secs(3600);
                            c.set_read_deadline(Some(now + 2 * hour + extra)).unwrap();
                            c.set_write_deadline(Some(now + hour + extra)).unwrap();
                        }
                    }
                })
            })
            .collect();
        for t in tasks {
            t.await.unwrap();
        }
    });
}
