//! Unix domain datagram sockets: sends and receives between bound paths, an unbound sender,
//! a connected pair, and Go's deadlines on receives and on sends into a full queue.

#[path = "support/temp_dir.rs"]
mod temp_dir;

use gort::net::UnixDatagram;
use gort::time::Instant;
use std::io::ErrorKind;
use std::sync::Arc;
use std::time::Duration;
use temp_dir::TempDir;

const MS: Duration = Duration::from_millis(1);
const LATE: Duration = Duration::from_secs(5);

fn run<F: std::future::Future>(f: F) -> F::Output {
    gort::Runtime::new().unwrap().block_on(f)
}

/// Sends datagrams from `sender` to `to` until one would wait (the receiver's queue is
/// full), under a write deadline 20 ms away; returns how many went.
async fn fill(sender: &UnixDatagram, to: &std::path::Path) -> usize {
    sender
        .set_write_deadline(Some(Instant::now() + 20 * MS))
        .unwrap();
    let mut sent = 0;
    loop {
        match sender.send_to(&[0; 1024], to).await {
            Ok(_) => sent += 1,
            Err(e) => {
                assert_eq!(e.kind(), ErrorKind::TimedOut);
                sender.set_write_deadline(None).unwrap();
                return sent;
            }
        }
    }
}

/// A connected pair, the first end shared with the task the test spawns.
fn shared_pair() -> (Arc<UnixDatagram>, UnixDatagram) {
    let (a, b) = UnixDatagram::pair().unwrap();
    (Arc::new(a), b)
}

#[test]
fn datagrams_keep_their_boundaries_and_name_their_sender() {
    run(async {
        let dir = TempDir::new("dgram");
        let server = UnixDatagram::bind(dir.join("server")).unwrap();
        let client = UnixDatagram::bind(dir.join("client")).unwrap();
        client.send_to(b"one", dir.join("server")).await.unwrap();
        client.send_to(b"three", dir.join("server")).await.unwrap();
        let mut buf = [0; 64];
        let (n, from) = server.recv_from(&mut buf).await.unwrap();
        assert_eq!(
            (&buf[..n], from.as_pathname()),
            (&b"one"[..], Some(dir.join("client").as_path()))
        );
        let (n, _) = server.recv_from(&mut buf).await.unwrap();
        assert_eq!(&buf[..n], b"three");
        // A longer datagram than the buffer: the rest is lost, as in Go.
        client.send_to(&[9; 100], dir.join("server")).await.unwrap();
        assert_eq!(server.recv(&mut buf[..10]).await.unwrap(), 10);
        client.send_to(b"next", dir.join("server")).await.unwrap();
        assert_eq!(server.recv(&mut buf).await.unwrap(), 4);
    });
}

#[test]
fn an_unbound_socket_sends_to_a_connected_path_and_a_pair_talks_both_ways() {
    run(async {
        let dir = TempDir::new("dgram-unbound");
        let server = UnixDatagram::bind(dir.join("s")).unwrap();
        let client = UnixDatagram::unbound().unwrap();
        assert!(client.peer_addr().is_err());
        client.connect(dir.join("s")).unwrap();
        assert_eq!(
            client.peer_addr().unwrap().as_pathname(),
            Some(dir.join("s").as_path())
        );
        client.send(b"READY=1").await.unwrap();
        let mut buf = [0; 16];
        let (n, from) = server.recv_from(&mut buf).await.unwrap();
        assert_eq!(&buf[..n], b"READY=1");
        assert!(from.is_unnamed() && client.local_addr().unwrap().is_unnamed());

        let (a, b) = UnixDatagram::pair().unwrap();
        a.send(b"ping").await.unwrap();
        assert_eq!(b.recv(&mut buf).await.unwrap(), 4);
        b.send(b"pong!").await.unwrap();
        assert_eq!(a.recv(&mut buf).await.unwrap(), 5);
    });
}

#[test]
fn a_receive_times_out_at_its_deadline_and_not_after_it_is_cleared() {
    run(async {
        let (b, a) = shared_pair();
        let deadline = Instant::now() + 20 * MS;
        b.set_read_deadline(Some(deadline)).unwrap();
        let err = b.recv(&mut [0; 8]).await.unwrap_err();
        assert_eq!(err.kind(), ErrorKind::TimedOut);
        assert!(Instant::now() >= deadline);
        // Cleared while a receive is blocked: the receive waits on and gets the datagram.
        b.set_read_deadline(Some(Instant::now() + 50 * MS)).unwrap();
        let recv = {
            let b = b.clone();
            gort::spawn(async move { b.recv(&mut [0; 8]).await })
        };
        gort::time::sleep(10 * MS).await;
        b.set_read_deadline(None).unwrap();
        gort::time::sleep(100 * MS).await;
        a.send(b"late").await.unwrap();
        assert_eq!(recv.await.unwrap().unwrap(), 4);
    });
}

/// The CPU time the process has used (all its threads).
fn cpu_time() -> Duration {
    // SAFETY: `getrusage` writes the struct it is given, which is valid and zeroed.
    let usage = unsafe {
        let mut usage: libc::rusage = std::mem::zeroed();
        assert_eq!(libc::getrusage(libc::RUSAGE_SELF, &mut usage), 0);
        usage
    };
    let time = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
    time(usage.ru_utime) + time(usage.ru_stime)
}

/// A sender that filled the receiver's queue waits (a deadline ends the wait with
/// `TimedOut`, sending nothing), without spinning: Linux sends a write edge for every send
/// that fails on a full queue, and a send that waited for edges burned a CPU retrying (500
/// `sendto`s in 40 ms under strace). Once the receiver drains the queue, the blocked send
/// goes through.
#[test]
fn a_send_into_a_full_queue_times_out_or_waits_for_the_receiver() {
    run(async {
        let dir = TempDir::new("dgram-full");
        let receiver = UnixDatagram::bind(dir.join("r")).unwrap();
        let sender = Arc::new(UnixDatagram::unbound().unwrap());
        let queued = fill(&sender, &dir.join("r")).await;
        assert!(queued > 0);
        let blocked = {
            let (sender, to) = (sender.clone(), dir.join("r"));
            gort::spawn(async move { sender.send_to(b"last", to).await })
        };
        let cpu = cpu_time();
        gort::time::sleep(500 * MS).await;
        let burnt = cpu_time() - cpu;
        assert!(!blocked.is_finished(), "sent into a full queue");
        assert!(
            burnt < 150 * MS,
            "a blocked send spun: {burnt:?} of CPU in 500 ms"
        );
        let mut buf = [0; 2048];
        for _ in 0..queued {
            assert_eq!(receiver.recv(&mut buf).await.unwrap(), 1024);
        }
        let sent = gort::time::timeout(Duration::from_secs(10), blocked).await;
        assert_eq!(sent.expect("the send never woke").unwrap().unwrap(), 4);
        assert_eq!(receiver.recv(&mut buf).await.unwrap(), 4);
    });
}

/// A connected sender's write deadline set while its send is blocked on a full peer ends
/// that send at the deadline.
#[test]
fn a_write_deadline_set_while_a_send_is_blocked_ends_it() {
    run(async {
        let (a, _b) = shared_pair();
        let sender = {
            let a = a.clone();
            gort::spawn(async move {
                loop {
                    if let Err(e) = a.send(&[1; 1024]).await {
                        return (e.kind(), Instant::now());
                    }
                }
            })
        };
        gort::time::sleep(30 * MS).await;
        let deadline = Instant::now() + 20 * MS;
        a.set_write_deadline(Some(deadline)).unwrap();
        let (kind, at) = sender.await.unwrap();
        assert_eq!(kind, ErrorKind::TimedOut);
        assert!(at >= deadline && at - deadline < LATE);
    });
}
