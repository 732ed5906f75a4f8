//! hyper's runtime traits on gort, shared by the hyper examples and tests (each includes this
//! file with `#[path]`, so the code a test runs is the code an example shows):
//! - [`GortExec`], `hyper::rt::Executor` as `gort::spawn`: hyper's HTTP/2 connection task and
//!   its per-stream tasks, and hyper-util's pooled client's connection tasks, are gort tasks;
//! - [`GortTimer`], `hyper::rt::Timer` on `gort::time`: hyper's sleeps (HTTP/1 header read
//!   timeout, HTTP/2 keep-alive pings) are gort sleeps on the per-P timer heaps, and hyper's
//!   `reset` moves one in place (Go's `modtimer`) instead of making a new one.
#![allow(dead_code)] // each includer uses some of it

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

/// hyper's executor on gort: every future hyper hands over becomes a gort task.
#[derive(Clone, Copy, Debug, Default)]
pub struct GortExec;

impl<F> hyper::rt::Executor<F> for GortExec
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    fn execute(&self, fut: F) {
        // Detached, as hyper expects: the task ends with its connection or stream.
        drop(gort::spawn(fut));
    }
}

/// hyper's timer on `gort::time`.
#[derive(Clone, Copy, Debug, Default)]
pub struct GortTimer;

/// A `gort::time::Sleep` as hyper's `Sleep` (a foreign trait needs a local type).
struct GortSleep(gort::time::Sleep);

impl Future for GortSleep {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        Pin::new(&mut self.0).poll(cx)
    }
}

impl hyper::rt::Sleep for GortSleep {}

impl hyper::rt::Timer for GortTimer {
    fn sleep(&self, duration: Duration) -> Pin<Box<dyn hyper::rt::Sleep>> {
        Box::pin(GortSleep(gort::time::sleep(duration)))
    }

    fn sleep_until(&self, deadline: std::time::Instant) -> Pin<Box<dyn hyper::rt::Sleep>> {
        Box::pin(GortSleep(gort::time::sleep_until(deadline.into())))
    }

    fn reset(&self, sleep: &mut Pin<Box<dyn hyper::rt::Sleep>>, new_deadline: std::time::Instant) {
        match sleep.as_mut().downcast_mut_pin::<GortSleep>() {
            Some(mut ours) => Pin::new(&mut ours.0).reset(new_deadline.into()),
            None => *sleep = self.sleep_until(new_deadline),
        }
    }
}
