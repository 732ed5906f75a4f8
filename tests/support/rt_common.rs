//! What the two halves of Tokio's `rt_common.rs` port share (`tokio_rt_common.rs`,
//! `tokio_rt_common_shutdown.rs`).
#![allow(dead_code)]

use crate::support::within;
use gort::net::TcpStream;
use gort::Runtime;
use std::future::poll_fn;
use std::sync::Arc;
use std::task::Poll;

/// The runtimes each test runs on: 1, 2 and 4 Ps.
pub const PROCS: [usize; 3] = [1, 2, 4];

pub fn rt_of(procs: usize) -> Arc<Runtime> {
    Arc::new(gort::Builder::new().procs(procs).build().unwrap())
}

/// Runs `f` on a fresh runtime of each size in [`PROCS`], under the watchdog.
pub fn each(f: impl Fn(Arc<Runtime>) + Send + Sync + 'static) {
    within(move || {
        for procs in PROCS {
            f(rt_of(procs));
        }
    })
}

/// Tokio's `yield_once`: pending once, waking itself.
pub async fn yield_once() {
    let mut yielded = false;
    poll_fn(|cx| {
        if yielded {
            Poll::Ready(())
        } else {
            yielded = true;
            cx.waker().wake_by_ref();
            Poll::Pending
        }
    })
    .await
}

/// Reads until end of stream.
pub async fn read_to_end(s: &TcpStream) -> Vec<u8> {
    let mut out = Vec::new();
    let mut buf = [0u8; 64];
    loop {
        let n = s.read(&mut buf).await.unwrap();
        if n == 0 {
            return out;
        }
        out.extend_from_slice(&buf[..n]);
    }
}
