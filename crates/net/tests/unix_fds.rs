//! No file descriptor outlives its Unix socket: 2,000 connections through a listener
//! (some with deadlines armed, some dropped with a read pending), and as many pairs and
//! datagram sockets, leave the process's fd count where it was. One test per binary: other
//! tests would open fds meanwhile.

#[path = "support/temp_dir.rs"]
mod temp_dir;

use gort::net::{UnixDatagram, UnixListener, UnixStream};
use gort::time::Instant;
use std::time::Duration;
use temp_dir::TempDir;

fn open_fds() -> usize {
    std::fs::read_dir("/proc/self/fd").unwrap().count()
}

/// Uses the pair one of three ways, by `i`, and drops it.
async fn use_and_drop(i: usize, c: UnixStream, s: UnixStream) {
    match i % 3 {
        0 => {
            c.write_all(b"x").await.unwrap();
            s.read_exact(&mut [0; 1]).await.unwrap();
        }
        1 => c
            .set_deadline(Some(Instant::now() + Duration::from_secs(60)))
            .unwrap(),
        _ => {
            // Dropped with a read pending (a stale waker in the descriptor).
            let mut b = [0; 1];
            gort::select! {
                _ = c.read(&mut b) => panic!("nothing was sent"),
                _ = gort::time::sleep(Duration::from_micros(10)) => {}
            }
        }
    }
}

#[test]
fn two_thousand_unix_connections_opened_and_dropped_leave_no_fd() {
    gort::Runtime::new().unwrap().block_on(async {
        let dir = TempDir::new("fds");
        let l = UnixListener::bind(dir.join("s")).unwrap();
        // Warm up the runtime's lazily opened parts (the timers' and the poller's).
        drop(UnixStream::connect(dir.join("s")).await.unwrap());
        drop(l.accept().await.unwrap());
        gort::time::sleep(Duration::from_micros(1)).await;
        let baseline = open_fds();
        for round in 0..20 {
            for i in 0..100 {
                let c = UnixStream::connect(dir.join("s")).await.unwrap();
                let (s, _) = l.accept().await.unwrap();
                use_and_drop(i, c, s).await;
                let (a, b) = UnixStream::pair().unwrap();
                use_and_drop(i, a, b).await;
                let (a, b) = UnixDatagram::pair().unwrap();
                a.send(b"d").await.unwrap();
                b.recv(&mut [0; 1]).await.unwrap();
            }
            // At most the baseline: a leak only adds.
            let now = open_fds();
            assert!(
                now <= baseline,
                "fds leaked after round {round}: {now} > {baseline}"
            );
        }
    });
}
