//! Go's deadline rules on Unix domain stream sockets: the cases of `support/conn_cases.rs`
//! (also run on TCP by `deadlines.rs`), and the listener's accept deadline.

#[path = "support/conn_cases.rs"]
#[macro_use]
mod conn_cases;
#[path = "support/temp_dir.rs"]
mod temp_dir;

use conn_cases::{assert_a_deadline_set_meanwhile_ends, run, MS};
use gort::net::{UnixListener, UnixStream};
use gort::time::Instant;
use std::io::ErrorKind;
use std::sync::Arc;
use std::time::Duration;
use temp_dir::TempDir;

conn_case_tests!(UnixStream);

/// A listener at `dir/s`, shared with the tasks that accept.
fn listen(dir: &TempDir) -> Arc<UnixListener> {
    Arc::new(UnixListener::bind(dir.join("s")).unwrap())
}

/// A passed accept deadline fails accept at once even with a connection queued; cleared,
/// the queued connection is accepted.
#[test]
fn a_passed_accept_deadline_fails_accept_at_once_and_clearing_it_accepts() {
    run(async {
        let dir = TempDir::new("accept-past");
        let listener = listen(&dir);
        let _client = UnixStream::connect(dir.join("s")).await.unwrap();
        listener.set_deadline(Some(Instant::now() - MS)).unwrap();
        let err = listener.accept().await.unwrap_err();
        assert_eq!(err.kind(), ErrorKind::TimedOut);
        listener.set_deadline(None).unwrap();
        listener.accept().await.unwrap();
    });
}

/// An accept blocked with no deadline ends at one set meanwhile, not before it; one
/// extended while blocked lets it go on and take the connection that comes later.
#[test]
fn an_accept_deadline_set_or_extended_while_blocked_applies_to_it() {
    run(async {
        let dir = TempDir::new("accept-blocked");
        let listener = listen(&dir);
        let l = listener.clone();
        let accept = gort::spawn(async move { (l.accept().await.map(|_| ()), Instant::now()) });
        assert_a_deadline_set_meanwhile_ends(accept, |d| listener.set_deadline(d)).await;

        listener
            .set_deadline(Some(Instant::now() + 50 * MS))
            .unwrap();
        let l = listener.clone();
        let accept = gort::spawn(async move { l.accept().await.map(|_| ()) });
        gort::time::sleep(10 * MS).await;
        listener
            .set_deadline(Some(Instant::now() + Duration::from_secs(30)))
            .unwrap();
        gort::time::sleep(100 * MS).await; // past the first deadline
        let _client = UnixStream::connect(dir.join("s")).await.unwrap();
        accept.await.unwrap().unwrap();
    });
}

/// A deadline set from a thread outside the runtime fails (no timer can be armed there) and
/// changes nothing: a later deadline set inside the runtime still ends a blocked read. (The
/// refused deadline used to be recorded without its timer; the later one, a move later,
/// then relied on that timer and never fired.)
#[test]
fn a_deadline_refused_outside_the_runtime_leaves_later_deadlines_working() {
    run(async {
        let (conn, _peer) = UnixStream::pair().unwrap();
        let conn = Arc::new(conn);
        let outside = conn.clone();
        let refused =
            std::thread::spawn(move || outside.set_read_deadline(Some(Instant::now() + 30 * MS)))
                .join()
                .unwrap();
        assert!(refused.is_err(), "no runtime on that thread: {refused:?}");
        conn.set_read_deadline(Some(Instant::now() + 60 * MS))
            .unwrap();
        let read = gort::time::timeout(Duration::from_secs(10), conn.read(&mut [0; 8])).await;
        let err = read.expect("the deadline ends the read").unwrap_err();
        assert_eq!(err.kind(), ErrorKind::TimedOut);
    });
}

/// From outside the runtime, a deadline that needs no timer works: a passed one ends a read
/// blocked in a task.
#[test]
fn a_passed_deadline_set_outside_the_runtime_ends_a_blocked_read() {
    run(async {
        let (conn, peer) = UnixStream::pair().unwrap();
        let conn = Arc::new(conn);
        let reader = gort::spawn({
            let conn = conn.clone();
            async move { conn.read(&mut [0; 8]).await }
        });
        gort::time::sleep(5 * MS).await;
        let outside = conn.clone();
        std::thread::spawn(move || {
            outside
                .set_read_deadline(Some(Instant::now() - MS))
                .unwrap();
        })
        .join()
        .unwrap();
        let err = reader.await.unwrap().unwrap_err();
        assert_eq!(err.kind(), ErrorKind::TimedOut);
        conn.set_read_deadline(None).unwrap();
        peer.write_all(b"x").await.unwrap();
        assert_eq!(conn.read(&mut [0; 8]).await.unwrap(), 1);
    });
}
