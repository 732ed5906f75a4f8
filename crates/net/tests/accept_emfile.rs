//! Out of file descriptors, `accept` fails with `EMFILE` at once, as Go's does. A Go server
//! that logs the error and retries is still preempted, so the goroutine that closes a
//! connection gets to run; a gort task cannot be preempted, so `accept` yields before it
//! returns an error, and such a loop on one P must not starve the task that frees an fd.
//! One test per binary: it lowers the process's fd limit.

use gort::net::{TcpListener, TcpStream};
use std::time::{Duration, Instant};

fn open_fds() -> usize {
    std::fs::read_dir("/proc/self/fd").unwrap().count()
}

/// Sets the soft `RLIMIT_NOFILE`, returning the old one.
fn set_soft_nofile(soft: libc::rlim_t) -> libc::rlim_t {
    let mut r = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit and setrlimit on this process, with an initialised struct.
    unsafe {
        assert_eq!(libc::getrlimit(libc::RLIMIT_NOFILE, &mut r), 0);
        let old = r.rlim_cur;
        r.rlim_cur = soft.min(r.rlim_max);
        assert_eq!(libc::setrlimit(libc::RLIMIT_NOFILE, &r), 0);
        old
    }
}

#[test]
fn a_retrying_accept_loop_out_of_fds_lets_other_tasks_run_on_one_p() {
    const CLIENTS: usize = 40;
    let rt = gort::Builder::new().procs(1).build().unwrap();
    let server = rt.spawn(async {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        // The handshakes complete in the accept queue before anything is accepted.
        let mut clients = Vec::new();
        for _ in 0..CLIENTS {
            clients.push(TcpStream::connect(addr).await.unwrap());
        }
        let old = set_soft_nofile((open_fds() + 5) as libc::rlim_t);
        // A handler that finishes later and closes its connections (frees fds).
        gort::spawn(async move {
            gort::time::sleep(Duration::from_millis(20)).await;
            drop(clients);
        });
        let (mut accepted, mut errors) = (Vec::new(), 0u64);
        let start = Instant::now();
        while accepted.len() < CLIENTS {
            match listener.accept().await {
                Ok((conn, _)) => accepted.push(conn),
                Err(e) => {
                    assert_eq!(e.raw_os_error(), Some(libc::EMFILE), "{e}");
                    errors += 1;
                    // Before accept yielded, this loop held the only P forever.
                    assert!(
                        start.elapsed() < Duration::from_secs(20),
                        "the fd-freeing task never ran: {} accepted, {errors} EMFILEs",
                        accepted.len()
                    );
                }
            }
        }
        set_soft_nofile(old);
        errors
    });
    let errors = rt.block_on(server).unwrap();
    assert!(errors > 0, "the limit was never reached");
}
