//! No file descriptor outlives its socket: 10,000 connections opened, used and dropped
//! (some with deadlines armed, some with a read pending when dropped) leave the process's
//! fd count where it was. One test per binary: other tests would open fds meanwhile.

use gort::net::{TcpListener, TcpStream};
use gort::time::Instant;
use std::time::Duration;

fn open_fds() -> usize {
    std::fs::read_dir("/proc/self/fd").unwrap().count()
}

#[test]
fn ten_thousand_connections_opened_and_dropped_leave_no_fd() {
    gort::Runtime::new().unwrap().block_on(async {
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = l.local_addr().unwrap();
        // Warm up the blocking pool and the runtime's lazily opened parts.
        drop(TcpStream::connect(addr).await.unwrap());
        drop(l.accept().await.unwrap());
        let baseline = open_fds();
        for round in 0..100 {
            let conns: Vec<_> = (0..100)
                .map(|_| gort::spawn(async move { TcpStream::connect(addr).await.unwrap() }))
                .collect();
            // Accepts come in the kernel's order, not the connects': pair them by address.
            let mut accepted = std::collections::HashMap::new();
            for _ in 0..conns.len() {
                let (s, peer) = l.accept().await.unwrap();
                accepted.insert(peer, s);
            }
            let mut pairs = Vec::new();
            for c in conns {
                let c = c.await.unwrap();
                let s = accepted.remove(&c.local_addr().unwrap()).unwrap();
                pairs.push((c, s));
            }
            for (i, (c, s)) in pairs.into_iter().enumerate() {
                match i % 3 {
                    0 => {
                        c.write_all(b"x").await.unwrap();
                        s.read_exact(&mut [0; 1]).await.unwrap();
                    }
                    1 => {
                        let far = Instant::now() + Duration::from_secs(60);
                        c.set_deadline(Some(far)).unwrap();
                    }
                    _ => {
                        // Dropped with a read pending (a stale waker in the descriptor).
                        let mut b = [0; 1];
                        gort::select! {
                            _ = c.read(&mut b) => panic!("nothing was sent"),
                            _ = gort::time::sleep(Duration::from_micros(10)) => {}
                        }
                    }
                }
                drop((c, s));
            }
            // At most the baseline: an fd that was open in passing when the baseline was taken
            // (seen once under CI: 11 after, 12 before) may be gone; a leak only adds.
            let now = open_fds();
            assert!(
                now <= baseline,
                "fds leaked after round {round}: {now} > {baseline}"
            );
        }
    });
}
