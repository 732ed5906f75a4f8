//! Where real programs meet gort::net's streams: the tokio-io adapters polled from several
//! tasks at once through `&TcpStream` (two readers and a writer; hundreds of readers; trait
//! reads given up by 100,000 tasks on one idle socket), tokio `ReadBuf`s that arrive with
//! filled and initialized parts, reads and writes after a reset, owned halves dropped with
//! operations pending or reunited wrongly, gort sockets polled by a Tokio runtime and a
//! plain thread's executor, and streams whose reads stop short with bytes still queued (TCP
//! urgent data, a Unix stream's out-of-band byte, bytes that carried descriptors). Each must
//! end in the bytes sent or an error of the right kind, never a hang (a watchdog fails a
//! case after 30 s), a panic or a leaked fd. The cases run one at a time
//! (`serial`): some count the process's fds. `abuse_edges.rs` has `from_std`, name
//! resolution and socket options.
//!
//! Run: `cargo test -p gort-net --features tokio-io,futures-io --test abuse_compat`
#![cfg(all(feature = "tokio-io", feature = "futures-io"))]

#[allow(dead_code)] // not every helper is used by this binary
#[path = "support/watchdog.rs"]
mod watchdog;

#[allow(dead_code)] // not every helper is used by this binary
#[path = "support/tcp.rs"]
mod tcp;

use gort::time::Instant;
use std::io::{self, ErrorKind};
use std::net::Shutdown;
use std::os::fd::AsRawFd;
use std::sync::Arc;
use std::time::Duration;
use tcp::{linger_zero, tcp_pair};
use tokio::io::{AsyncReadExt, AsyncWriteExt, ReadBuf};
use watchdog::{open_fds, serial};

fn run<F: std::future::Future>(f: F) -> F::Output {
    gort::Builder::new().procs(2).build().unwrap().block_on(f)
}

/// Two tasks read one stream through `&TcpStream`'s tokio `AsyncRead` while a third writes
/// back through its `AsyncWrite`: every byte the peer sent is read once, by one reader or
/// the other, and neither reader is left waiting once the peer closes (each slot in the
/// direction's waiter list is woken).
#[test]
fn two_trait_readers_and_a_trait_writer_share_one_stream() {
    serial(|| {
        run(async {
            const TOTAL: usize = 4 << 20;
            let (c, s) = tcp_pair().await;
            let s = Arc::new(s);
            let readers: Vec<_> = (0..2)
                .map(|_| {
                    let s = s.clone();
                    gort::spawn(async move {
                        let (mut n, mut sum) = (0usize, 0u64);
                        let mut buf = vec![0; 1 << 14];
                        loop {
                            let got = AsyncReadExt::read(&mut &*s, &mut buf).await.unwrap();
                            if got == 0 {
                                return (n, sum);
                            }
                            n += got;
                            sum += buf[..got].iter().map(|&b| u64::from(b)).sum::<u64>();
                        }
                    })
                })
                .collect();
            let writer = {
                let s = s.clone();
                gort::spawn(async move {
                    AsyncWriteExt::write_all(&mut &*s, &vec![7; TOTAL])
                        .await
                        .unwrap()
                })
            };
            let peer = gort::spawn(async move {
                let data: Vec<u8> = (0..TOTAL).map(|i| (i % 251) as u8).collect();
                let mut back = vec![0; TOTAL];
                let (r, w) = c.split();
                let send = async {
                    w.write_all(&data).await.unwrap();
                    w.close_write().unwrap();
                };
                let recv = async { r.read_exact(&mut back).await.unwrap() };
                futures::join!(send, recv);
                assert!(back.iter().all(|&b| b == 7));
                data.iter().map(|&b| u64::from(b)).sum::<u64>()
            });
            let sent_sum = peer.await.unwrap();
            writer.await.unwrap();
            let (mut n, mut sum) = (0, 0);
            for r in readers {
                let (rn, rs) = r.await.unwrap();
                n += rn;
                sum += rs;
            }
            assert_eq!((n, sum), (TOTAL, sent_sum));
        })
    });
}

/// A tokio `ReadBuf` that arrives with a filled part and an initialized part beyond it:
/// the read appends after the filled part, keeps what was filled, and the initialized
/// count never shrinks (tokio's contract, which hyper's and tokio-util's buffers rely on).
#[test]
fn a_read_buf_with_filled_and_initialized_parts_is_appended_to() {
    serial(|| {
        run(async {
            let (c, s) = tcp_pair().await;
            c.write_all(b"world").await.unwrap();
            let mut storage = [std::mem::MaybeUninit::<u8>::uninit(); 64];
            let mut buf = ReadBuf::uninit(&mut storage);
            buf.put_slice(b"hello ");
            // Initialized past the filled part, as a reused buffer is.
            buf.initialize_unfilled_to(20);
            buf.set_filled(6);
            let mut s = &s;
            std::future::poll_fn(|cx| {
                tokio::io::AsyncRead::poll_read(std::pin::Pin::new(&mut s), cx, &mut buf)
            })
            .await
            .unwrap();
            assert_eq!(buf.filled(), b"hello world");
            assert_eq!(buf.initialized().len(), 26);
            // A buffer with no room reads nothing (`Ok` with nothing filled), at once.
            let mut full = [0u8; 3];
            let mut buf = ReadBuf::new(&mut full);
            buf.set_filled(3);
            std::future::poll_fn(|cx| {
                tokio::io::AsyncRead::poll_read(std::pin::Pin::new(&mut s), cx, &mut buf)
            })
            .await
            .unwrap();
            assert_eq!(buf.filled().len(), 3);
        })
    });
}

/// After the peer resets the connection, a trait read fails with `ConnectionReset` (or sees
/// the end of stream, if the reset raced the read) and every later one returns at once:
/// an error or `Ok(0)`, never a wait. A trait write after the reset fails (no `SIGPIPE`).
#[test]
fn trait_reads_and_writes_after_a_reset_fail_at_once() {
    serial(|| {
        run(async {
            let (c, s) = tcp_pair().await;
            let reader = gort::spawn(async move {
                let mut s = &s;
                let mut buf = [0; 16];
                // Waits for the reset (nothing arrives before it).
                let first = AsyncReadExt::read(&mut s, &mut buf).await;
                let second = AsyncReadExt::read(&mut s, &mut buf).await;
                (first.map_err(|e| e.kind()), second.map_err(|e| e.kind()))
            });
            gort::time::sleep(Duration::from_millis(50)).await;
            linger_zero(&c);
            drop(c);
            let (first, second) = reader.await.unwrap();
            assert!(
                matches!(first, Err(ErrorKind::ConnectionReset) | Ok(0)),
                "{first:?}"
            );
            assert!(matches!(second, Err(_) | Ok(0)), "{second:?}");
        });
        run(async {
            let (c, s) = tcp_pair().await;
            linger_zero(&c);
            drop(c);
            gort::time::sleep(Duration::from_millis(50)).await;
            let mut s = &s;
            let mut failed = None;
            for _ in 0..4 {
                if let Err(e) = AsyncWriteExt::write_all(&mut s, &[1; 1024]).await {
                    failed = Some(e.kind());
                    break;
                }
            }
            assert!(
                matches!(
                    failed,
                    Some(ErrorKind::ConnectionReset | ErrorKind::BrokenPipe)
                ),
                "{failed:?}"
            );
            assert!(AsyncWriteExt::flush(&mut s).await.is_ok());
        });
    });
}

/// Owned halves with an operation pending on the other: the write half dropped while the
/// read half waits (the read still gets what the peer sends later), the read half dropped
/// while a large write waits for room (the write completes as the peer reads). A reunite of
/// halves of two streams gives both back, still working.
#[test]
fn owned_halves_dropped_with_operations_pending() {
    serial(|| {
        run(async {
            let (c, s) = tcp_pair().await;
            let (r, w) = s.into_split();
            let reader = gort::spawn(async move {
                let mut buf = [0; 5];
                r.read_exact(&mut buf).await.map(|()| buf)
            });
            gort::time::sleep(Duration::from_millis(20)).await;
            drop(w); // shuts writing down; the peer reads end of stream
            let mut eof = [0; 1];
            assert_eq!(c.read(&mut eof).await.unwrap(), 0);
            c.write_all(b"later").await.unwrap();
            assert_eq!(&reader.await.unwrap().unwrap(), b"later");
        });
        run(async {
            const BIG: usize = 16 << 20;
            let (c, s) = tcp_pair().await;
            let (r, w) = s.into_split();
            let writer = gort::spawn(async move { w.write_all(&vec![3; BIG]).await });
            gort::time::sleep(Duration::from_millis(20)).await;
            drop(r);
            let mut all = vec![0; BIG];
            c.read_exact(&mut all).await.unwrap();
            writer.await.unwrap().unwrap();
            assert!(all.iter().all(|&b| b == 3));
        });
        run(async {
            let (a, _pa) = tcp_pair().await;
            let (b, pb) = tcp_pair().await;
            let (ar, _aw) = a.into_split();
            let (_br, bw) = b.into_split();
            let gort::net::ReuniteError(ar, bw) = ar.reunite(bw).unwrap_err();
            bw.write_all(b"ok").await.unwrap();
            let mut buf = [0; 2];
            pb.read_exact(&mut buf).await.unwrap();
            assert_eq!(&buf, b"ok");
            ar.set_read_deadline(Some(Instant::now())).unwrap();
            assert_eq!(
                ar.read(&mut buf).await.unwrap_err().kind(),
                ErrorKind::TimedOut
            );
        });
    });
}

fn rss_mib() -> usize {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let kib: usize = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap();
    kib / 1024
}

/// The trait reads of `reads_given_up_by_many_tasks_on_an_idle_socket_keep_no_memory`
/// (`abuse_fds.rs`): 30,000 distinct tasks each give up a tokio `AsyncReadExt::read` on
/// one shared, idle `&TcpStream` under a `timeout`. A trait poll has no future of its own
/// to take its waker back when dropped: until the waiter list capped such slots, each task
/// left one, keeping its memory (82 MiB after 20,000 tasks), and each registration scanned
/// them all under the descriptor's lock (quadratic: 4.3 s for 20,000 in debug; this case
/// hit the 30 s watchdog). With the cap (256 slots): 4 MiB. Batches of 200 stay below the
/// cap, so the slots a batch finds are the finished tasks' (evicted one by one); batches of
/// 500 live readers, past the cap, woke each other until their timeouts (the spin the cap
/// trades for, `wakers.rs`), which made this case take 10-14 s and once hit the watchdog.
#[test]
fn trait_reads_given_up_by_many_tasks_on_an_idle_socket_keep_no_memory() {
    serial(|| {
        run(async {
            let (c, _s) = tcp_pair().await;
            let c = Arc::new(c);
            let before = rss_mib();
            for _ in 0..150 {
                let batch: Vec<_> = (0..200)
                    .map(|_| {
                        let c = c.clone();
                        gort::spawn(async move {
                            let mut buf = [0u8; 4096];
                            let limit = Duration::from_micros(200);
                            let mut r = &*c;
                            let read = AsyncReadExt::read(&mut r, &mut buf);
                            let _ = gort::time::timeout(limit, read).await;
                            std::hint::black_box(&buf);
                        })
                    })
                    .collect();
                for t in batch {
                    t.await.unwrap();
                }
            }
            let grown = rss_mib().saturating_sub(before);
            assert!(grown < 64, "{grown} MiB kept by given-up trait reads");
        })
    });
}

/// Many tasks wait in one `&TcpStream` trait read at once, fewer than the cap on trait-poll
/// slots (256) and more: past the cap each new registration wakes an older one, which polls
/// again; none may be lost. When the peer sends one byte per reader and closes, every
/// reader ends.
#[test]
fn many_trait_readers_are_all_woken() {
    serial(|| {
        run(readers_each_get_a_byte::<100>());
        run(readers_each_get_a_byte::<300>());
    });
}

async fn readers_each_get_a_byte<const READERS: usize>() {
    let (c, s) = tcp_pair().await;
    let s = Arc::new(s);
    let readers: Vec<_> = (0..READERS)
        .map(|_| {
            let s = s.clone();
            gort::spawn(async move {
                let mut r = &*s;
                let mut n = 0;
                let mut buf = [0; 1];
                while AsyncReadExt::read(&mut r, &mut buf).await.unwrap() == 1 {
                    n += 1;
                }
                n
            })
        })
        .collect();
    gort::time::sleep(Duration::from_millis(20)).await;
    c.write_all(&[1; READERS]).await.unwrap();
    c.shutdown(Shutdown::Write).unwrap();
    let mut total = 0;
    for r in readers {
        total += r.await.unwrap();
    }
    assert_eq!(total, READERS);
}

/// A gort socket read and written through the traits by other executors (a program that
/// keeps a Tokio runtime for a library, or a plain thread's `futures::executor::block_on`):
/// the socket stays registered with its gort runtime, whose poller wakes the foreign
/// wakers; no gort budget applies there. A deadline still to come cannot be set from those
/// threads (its timer needs a gort runtime: an error, nothing else changes); a passed one
/// can, and ends a foreign executor's pending read.
#[test]
fn gort_sockets_polled_by_tokio_and_by_a_plain_thread() {
    serial(|| {
        let rt = gort::Builder::new().procs(2).build().unwrap();
        let (c, s) = rt.block_on(tcp_pair());
        let (c, s) = (Arc::new(c), Arc::new(s));
        let tokio_rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        // Tokio echoes what the gort task sends.
        let echo = {
            let s = s.clone();
            tokio_rt.spawn(async move {
                let mut buf = vec![0; 1 << 16];
                let (mut r, mut w) = (&*s, &*s);
                loop {
                    let n = AsyncReadExt::read(&mut r, &mut buf).await.unwrap();
                    if n == 0 {
                        return;
                    }
                    AsyncWriteExt::write_all(&mut w, &buf[..n]).await.unwrap();
                }
            })
        };
        let data: Vec<u8> = (0..1 << 20).map(|i| (i % 253) as u8).collect();
        let back = {
            let c = c.clone();
            let data = data.clone();
            rt.block_on(async move {
                let writer = {
                    let c = c.clone();
                    gort::spawn(async move {
                        c.write_all(&data).await.unwrap();
                        c.shutdown(Shutdown::Write).unwrap();
                    })
                };
                let mut back = vec![0; 1 << 20];
                c.read_exact(&mut back).await.unwrap();
                writer.await.unwrap();
                back
            })
        };
        assert!(back == data);
        tokio_rt.block_on(echo).unwrap();

        // A plain thread's executor, its read ended by a passed deadline set from yet
        // another plain thread.
        let future_deadline = Some(Instant::now() + Duration::from_secs(5));
        assert!(s.set_read_deadline(future_deadline).is_err());
        let reader = {
            let c = c.clone();
            std::thread::spawn(move || {
                futures::executor::block_on(async {
                    let mut r = &*c;
                    let mut buf = [0; 8];
                    let n = AsyncReadExt::read(&mut r, &mut buf).await.unwrap();
                    assert_eq!(&buf[..n], b"hi");
                    AsyncReadExt::read(&mut r, &mut buf).await
                })
            })
        };
        std::thread::sleep(Duration::from_millis(50));
        rt.block_on(s.write_all(b"hi")).unwrap();
        std::thread::sleep(Duration::from_millis(50));
        c.set_read_deadline(Some(Instant::now())).unwrap();
        let err = reader.join().unwrap().unwrap_err();
        assert_eq!(err.kind(), ErrorKind::TimedOut);
    });
}

/// TCP urgent data (`MSG_OOB`: telnet's Synch, FTP's ABOR) in the middle of a stream: a
/// read stops at the urgent mark, shorter than asked although more bytes are queued behind
/// the mark. Every byte but the urgent one (out of band, `SO_OOBINLINE` off) must still be
/// read without the peer sending anything more.
#[test]
fn urgent_data_in_the_middle_of_a_stream() {
    serial(|| {
        run(async {
            let (c, s) = tcp_pair().await;
            let send = |buf: &[u8], flags| {
                // SAFETY: `buf` is valid for reads of its length for the call.
                let n = unsafe { libc::send(c.as_raw_fd(), buf.as_ptr().cast(), buf.len(), flags) };
                assert_eq!(n, buf.len() as isize, "{}", io::Error::last_os_error());
            };
            send(b"abc", 0);
            send(b"X", libc::MSG_OOB);
            send(b"def", 0);
            gort::time::sleep(Duration::from_millis(50)).await;
            let mut got = Vec::new();
            let mut buf = [0; 64];
            while got.len() < 6 {
                let n = s.read(&mut buf).await.unwrap();
                assert!(n > 0);
                got.extend_from_slice(&buf[..n]);
            }
            assert_eq!(got, b"abcdef");
            // The same through the tokio-io trait.
            send(b"ghi", 0);
            send(b"Y", libc::MSG_OOB);
            send(b"jkl", 0);
            gort::time::sleep(Duration::from_millis(50)).await;
            let mut got = Vec::new();
            let mut r = &s;
            while got.len() < 6 {
                let n = AsyncReadExt::read(&mut r, &mut buf).await.unwrap();
                assert!(n > 0);
                got.extend_from_slice(&buf[..n]);
            }
            assert_eq!(got, b"ghijkl");
            drop(c);
        })
    });
}

/// A Unix stream's out-of-band byte (Linux 5.15 and later) stops a read the same way as
/// TCP's urgent data.
#[test]
fn out_of_band_data_in_the_middle_of_a_unix_stream() {
    serial(|| {
        run(async {
            let mut buf = [0; 64];
            let (a, b) = gort::net::UnixStream::pair().unwrap();
            a.write_all(b"abc").await.unwrap();
            // SAFETY: the byte is valid for reads for the call.
            let oob = unsafe { libc::send(a.as_raw_fd(), b"Z".as_ptr().cast(), 1, libc::MSG_OOB) };
            if oob != 1 {
                eprintln!(
                    "no MSG_OOB on Unix streams here: {}",
                    io::Error::last_os_error()
                );
                return;
            }
            a.write_all(b"def").await.unwrap();
            gort::time::sleep(Duration::from_millis(50)).await;
            let mut got = Vec::new();
            while got.len() < 6 {
                let n = b.read(&mut buf).await.unwrap();
                assert!(n > 0);
                got.extend_from_slice(&buf[..n]);
            }
            assert_eq!(got, b"abcdef");
        })
    });
}

/// Sends `data` on `fd` with one descriptor (`pass`) attached (`SCM_RIGHTS`).
fn send_with_fd(fd: std::os::fd::RawFd, data: &[u8], pass: std::os::fd::RawFd) {
    let mut iov = libc::iovec {
        iov_base: data.as_ptr() as *mut libc::c_void,
        iov_len: data.len(),
    };
    // SAFETY: CMSG_SPACE only computes a size.
    let space = unsafe { libc::CMSG_SPACE(std::mem::size_of::<libc::c_int>() as u32) } as usize;
    let mut control = vec![0u8; space];
    // SAFETY: an all-zero `msghdr` is valid; the pointers set below outlive the call.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.as_mut_ptr().cast();
    msg.msg_controllen = space as _;
    // SAFETY: `msg` has a control buffer of `space` bytes, room for one header with one int.
    unsafe {
        let cmsg = libc::CMSG_FIRSTHDR(&msg);
        (*cmsg).cmsg_level = libc::SOL_SOCKET;
        (*cmsg).cmsg_type = libc::SCM_RIGHTS;
        (*cmsg).cmsg_len = libc::CMSG_LEN(std::mem::size_of::<libc::c_int>() as u32) as _;
        std::ptr::write_unaligned(libc::CMSG_DATA(cmsg).cast::<libc::c_int>(), pass);
    }
    // SAFETY: `msg` and what it points to are valid for the call.
    let n = unsafe { libc::sendmsg(fd, &msg, 0) };
    assert_eq!(n, data.len() as isize, "{}", io::Error::last_os_error());
}

/// A Unix stream peer that passes a descriptor with some of its bytes (`SCM_RIGHTS`), then
/// sends more: a read stops after the bytes that carried the descriptor, shorter than asked
/// while the next bytes are queued. Every byte must still be read without the peer
/// sending anything more: before, a read stopped there was taken for an empty queue, and
/// the next waited for an edge that the queued bytes never bring (it hung).
#[test]
fn a_unix_stream_read_past_bytes_that_carried_a_descriptor() {
    serial(|| {
        let before = open_fds();
        run(async {
            let (a, b) = gort::net::UnixStream::pair().unwrap();
            let passed = std::fs::File::open("/dev/null").unwrap();
            let mut buf = [0; 64];
            for trait_read in [false, true] {
                send_with_fd(a.as_raw_fd(), b"abc", passed.as_raw_fd());
                a.write_all(b"def").await.unwrap();
                send_with_fd(a.as_raw_fd(), b"ghi", passed.as_raw_fd());
                gort::time::sleep(Duration::from_millis(50)).await;
                let mut got = Vec::new();
                while got.len() < 9 {
                    let n = if trait_read {
                        AsyncReadExt::read(&mut &b, &mut buf).await.unwrap()
                    } else {
                        b.read(&mut buf).await.unwrap()
                    };
                    assert!(n > 0);
                    got.extend_from_slice(&buf[..n]);
                }
                assert_eq!(got, b"abcdefghi");
            }
            drop(passed);
        });
        // The passed descriptors were closed on receipt, as a `read(2)` closes them.
        assert_eq!(open_fds(), before);
    });
}
