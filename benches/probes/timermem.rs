//! The heap memory one timer holds, per kind: a channel `Timer` never received on, one whose
//! channel a receive has waited on (T9 with channel timers), an `AfterFunc`, and a `Sleep`
//! that has registered. A counting allocator reports the bytes asked for and the glibc chunks
//! they take (size + 8 rounded up to 16, at least 32), live per timer over 10,000 of them.
//!
//! `cargo run --release --example timermem` (design/PERFORMANCE-LOG.md).

use std::alloc::{GlobalAlloc, Layout, System};
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicIsize, Ordering::Relaxed};
use std::task::{Context, Poll};
use std::time::Duration;

/// Counts live bytes (asked for, and as glibc chunks) and live allocations.
struct Counting;

static BYTES: AtomicIsize = AtomicIsize::new(0);
static CHUNKS: AtomicIsize = AtomicIsize::new(0);
static ALLOCS: AtomicIsize = AtomicIsize::new(0);
/// While set, the sizes of allocations are printed (for one timer, to name its parts).
static TRACE: AtomicBool = AtomicBool::new(false);

fn chunk(size: usize) -> isize {
    ((size + 8).div_ceil(16) * 16).max(32) as isize
}

// SAFETY: every call forwards to `System` with the caller's own arguments; the counters are
// only bookkeeping.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        BYTES.fetch_add(l.size() as isize, Relaxed);
        CHUNKS.fetch_add(chunk(l.size()), Relaxed);
        ALLOCS.fetch_add(1, Relaxed);
        if TRACE.load(Relaxed) {
            TRACE.store(false, Relaxed); // printing allocates
            eprint!(" {}", l.size());
            TRACE.store(true, Relaxed);
        }
        // SAFETY: the caller's contract for `alloc` is `System::alloc`'s.
        unsafe { System.alloc(l) }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        BYTES.fetch_sub(l.size() as isize, Relaxed);
        CHUNKS.fetch_sub(chunk(l.size()), Relaxed);
        ALLOCS.fetch_sub(1, Relaxed);
        // SAFETY: the caller's contract for `dealloc` is `System::dealloc`'s.
        unsafe { System.dealloc(p, l) }
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;

const COUNT: usize = 10_000;
const HOUR: Duration = Duration::from_secs(3600);

fn snapshot() -> [isize; 3] {
    [
        BYTES.load(Relaxed),
        CHUNKS.load(Relaxed),
        ALLOCS.load(Relaxed),
    ]
}

/// A value `per_item` only holds (a future it must not mistake for one to await).
struct Held<T>(#[allow(dead_code)] T);

/// Polls `fut` once, whatever it returns.
async fn poll_once<F: Future + ?Sized>(mut fut: Pin<&mut F>) {
    std::future::poll_fn(move |cx: &mut Context<'_>| {
        let _ = fut.as_mut().poll(cx);
        Poll::Ready(())
    })
    .await
}

/// Live memory per item while `make` has built COUNT of them (the Vec of handles excluded).
async fn per_item<T, F: Future<Output = T>>(what: &str, mut make: impl FnMut() -> F) {
    let mut items = Vec::with_capacity(COUNT);
    let before = snapshot();
    for _ in 0..COUNT {
        items.push(make().await);
    }
    let after = snapshot();
    let per = |i: usize| (after[i] - before[i]) as f64 / COUNT as f64;
    println!(
        "{what:<28} {:6.1} B asked  {:6.1} B in chunks  {:4.2} allocations",
        per(0),
        per(1),
        per(2)
    );
    drop(items);
}

fn main() {
    let rt = gort::Builder::new()
        .procs(1)
        .build()
        .expect("build the gort runtime");
    rt.block_on(async {
        eprint!("allocation sizes of one channel Timer:");
        TRACE.store(true, Relaxed);
        let t = gort::time::Timer::new(HOUR);
        TRACE.store(false, Relaxed);
        eprint!("; of its first receive that waits:");
        t.reset(Duration::from_micros(1));
        TRACE.store(true, Relaxed);
        t.c().recv().await.expect("the timer's value");
        TRACE.store(false, Relaxed);
        eprintln!();
        drop(t);
        per_item("channel Timer", || async { gort::time::Timer::new(HOUR) }).await;
        per_item("channel Timer, received on", || async {
            // A receive that waits (and so takes a slot of the channel), then the value.
            let t = gort::time::Timer::new(Duration::from_micros(1));
            t.c().recv().await.expect("the timer's value");
            t.reset(HOUR);
            t
        })
        .await;
        per_item("after_func", || async {
            gort::time::after_func(HOUR, || {})
        })
        .await;
        per_item("Sleep, registered", || async {
            let mut s = Box::pin(gort::time::sleep(HOUR));
            poll_once(s.as_mut()).await;
            // Kept as an opaque value: it is held, never awaited.
            Held(s)
        })
        .await;
    });
    println!(
        "sizes: Timer handle {} B, Sleep {} B",
        std::mem::size_of::<gort::time::Timer>(),
        std::mem::size_of::<gort::time::Sleep>()
    );
}
