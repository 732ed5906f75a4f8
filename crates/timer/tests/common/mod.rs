//! Helpers shared by the integration tests (not the loom ones).
#![allow(dead_code)]

use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::{Arc, Mutex};

use gort_timer::{Fire, Host, Nanos, Timer, Timers};

/// Records every firing as (timer id, deadline passed to the callback).
#[derive(Default)]
pub struct Log(pub Mutex<Vec<(usize, Nanos)>>);

impl Log {
    pub fn new() -> Arc<Log> {
        Arc::new(Log::default())
    }
    pub fn fire_for(self: &Arc<Log>, id: usize) -> Arc<dyn Fire> {
        let log = self.clone();
        Arc::new(move |when| log.0.lock().unwrap().push((id, when)))
    }
    pub fn take(&self) -> Vec<(usize, Nanos)> {
        std::mem::take(&mut *self.0.lock().unwrap())
    }
}

/// A `Host` that records each `wake_netpoller` deadline.
#[derive(Default)]
pub struct Wakes(pub Mutex<Vec<Nanos>>);

impl Host for Wakes {
    fn wake_netpoller(&self, when: Nanos) {
        self.0.lock().unwrap().push(when);
    }
}

impl Wakes {
    pub fn take(&self) -> Vec<Nanos> {
        std::mem::take(&mut *self.0.lock().unwrap())
    }
}

/// A host that ignores wake-ups.
pub fn quiet() -> impl Host {
    |_: Nanos| {}
}

/// A payload that counts its drops, to prove `del` frees it.
pub struct Counted(pub Arc<AtomicUsize>);

impl Fire for Counted {
    fn fire(self: std::sync::Arc<Self>, _when: Nanos) {}
}

impl Drop for Counted {
    fn drop(&mut self) {
        self.0.fetch_add(1, SeqCst);
    }
}

/// A fresh timer logging to `log` as `id`, added to `ts` at `when`.
pub fn armed(ts: &Timers, log: &Arc<Log>, id: usize, when: Nanos) -> gort_loom::Arc<Timer> {
    let t = Timer::new();
    t.set_fire(log.fire_for(id));
    ts.add(&t, when, 0, &quiet());
    t
}
