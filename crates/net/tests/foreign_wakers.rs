//! A waker is user code: a foreign executor's, polling a socket's read. One that panics when
//! woken must not cost the other tasks blocked on the same socket their wake-up: the panic
//! reaches whoever woke it (the deadline's setter, the timer's run, the poller), and every
//! other waiter released with it is still woken.

use std::future::Future;
use std::io::ErrorKind;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Wake, Waker};
use std::time::Duration;

use gort::net::UnixStream;
use gort::time::Instant;

const MS: Duration = Duration::from_millis(1);

fn panicking_waker() -> Waker {
    struct Panics;
    impl Wake for Panics {
        fn wake(self: Arc<Self>) {
            panic!("a foreign waker panics");
        }
    }
    Waker::from(Arc::new(Panics))
}

/// A read of `conn` parked with a panicking waker (first in the socket's waiter list), and a
/// task's read of it parked behind it; `release` then releases both.
fn with_a_foreign_reader_first(release: impl FnOnce(&UnixStream, &UnixStream) + Send + 'static) {
    let rt = gort::Builder::new().procs(2).build().unwrap();
    rt.block_on(async move {
        let (conn, peer) = UnixStream::pair().unwrap();
        let conn = Arc::new(conn);
        let mut buf = [0; 8];
        let mut foreign: Pin<Box<dyn Future<Output = _> + Send + '_>> =
            Box::pin(conn.read(&mut buf));
        let waker = panicking_waker();
        assert!(foreign
            .as_mut()
            .poll(&mut Context::from_waker(&waker))
            .is_pending());
        let task = gort::spawn({
            let conn = conn.clone();
            async move { conn.read(&mut [0; 8]).await.map_err(|e| e.kind()) }
        });
        gort::time::sleep(10 * MS).await; // the task parks behind the foreign read
        release(&conn, &peer);
        let read = gort::time::timeout(Duration::from_secs(10), task).await;
        let read = read.expect("the task is woken despite the panicking waker");
        assert!(matches!(read.unwrap(), Err(ErrorKind::TimedOut) | Ok(4)));
        drop(foreign);
    });
}

/// A passed deadline releases both; the panic reaches the setter.
#[test]
fn a_passed_deadline_wakes_the_task_behind_a_panicking_waker() {
    with_a_foreign_reader_first(|conn, _| {
        let set = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            conn.set_read_deadline(Some(Instant::now() - MS))
        }));
        assert!(
            set.is_err(),
            "the waker's panic reaches the deadline's setter"
        );
    });
}

/// The deadline's timer releases both (its run catches the panic).
#[test]
fn a_deadline_timer_wakes_the_task_behind_a_panicking_waker() {
    with_a_foreign_reader_first(|conn, _| {
        conn.set_read_deadline(Some(Instant::now() + 10 * MS))
            .unwrap();
    });
}

/// Data arriving releases both, through the poller: the M that polled wakes what the poll
/// readied, each waker under its own catch (a panic is counted in `Metrics::user_panics`).
#[test]
fn data_arriving_wakes_the_task_behind_a_panicking_waker() {
    with_a_foreign_reader_first(|_, peer| {
        use std::os::fd::AsRawFd;
        // SAFETY: writes 4 bytes from a live buffer to the peer's open descriptor.
        let n = unsafe { libc::write(peer.as_raw_fd(), b"data".as_ptr().cast(), 4) };
        assert_eq!(n, 4);
    });
}
