//! A TTL cache in Go's style: every entry owns an `after_func` timer that deletes it when its
//! time-to-live passes; a `get` touches the entry (`reset` moves its expiry), a `set` over an
//! existing key resets the same timer, a `delete` stops it. Many tasks get, set and delete at
//! once, while a checker compares the cache with what the TTL rules allow.
//!
//! Checked: no entry outlives its TTL by more than a generous margin, no entry is deleted
//! while touched within its TTL (a lost `reset`), a stopped timer never deletes a newer value
//! (the generation check Go code needs too), and at the end every timer has fired or been
//! stopped (the cache is empty after the last TTL).
//!
//! `cargo run --release --example ttl_cache`

use gort::time::{after_func, AfterFunc, Instant};
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

const TTL: Duration = Duration::from_millis(60);
const KEYS: u64 = 64;
const WORKERS: u64 = 16;
const OPS: u64 = 4_000;

struct Entry {
    value: u64,
    generation: u64,
    touched: Instant,
    timer: AfterFunc,
}

#[derive(Default)]
struct Stats {
    expired: AtomicU64,
    stale_fires: AtomicU64,
    late_expiry: AtomicU64,
}

#[derive(Clone)]
struct Cache {
    map: Arc<Mutex<HashMap<u64, Entry>>>,
    next_gen: Arc<AtomicU64>,
    stats: Arc<Stats>,
}

impl Cache {
    fn new() -> Cache {
        Cache {
            map: Arc::default(),
            next_gen: Arc::new(AtomicU64::new(1)),
            stats: Arc::default(),
        }
    }

    /// Sets `key`, (re)arming its expiry.
    fn set(&self, key: u64, value: u64) {
        let mut map = self.map.lock().unwrap();
        let now = Instant::now();
        if let Some(e) = map.get_mut(&key) {
            e.value = value;
            e.touched = now;
            e.timer.reset(TTL);
            return;
        }
        let generation = self.next_gen.fetch_add(1, Ordering::Relaxed);
        let me = self.clone();
        let timer = after_func(TTL, move || me.expire(key, generation));
        map.insert(
            key,
            Entry {
                value,
                generation,
                touched: now,
                timer,
            },
        );
    }

    /// Gets `key`, touching it: its TTL starts again.
    fn get(&self, key: u64) -> Option<u64> {
        let mut map = self.map.lock().unwrap();
        let e = map.get_mut(&key)?;
        e.touched = Instant::now();
        e.timer.reset(TTL);
        Some(e.value)
    }

    fn delete(&self, key: u64) -> bool {
        let removed = self.map.lock().unwrap().remove(&key);
        match removed {
            Some(e) => {
                e.timer.stop();
                true
            }
            None => false,
        }
    }

    /// The timer's callback: deletes the entry if it is still the generation that armed it
    /// and its TTL has really passed (a reset racing the firing may have moved it).
    fn expire(&self, key: u64, generation: u64) {
        let mut map = self.map.lock().unwrap();
        let Some(e) = map.get(&key) else {
            self.stats.stale_fires.fetch_add(1, Ordering::Relaxed);
            return;
        };
        if e.generation != generation {
            self.stats.stale_fires.fetch_add(1, Ordering::Relaxed);
            return;
        }
        let idle = e.touched.elapsed();
        if idle < TTL {
            // A touch won the race with this firing: Go's AfterFunc has the same window.
            self.stats.stale_fires.fetch_add(1, Ordering::Relaxed);
            return;
        }
        if idle > TTL + Duration::from_secs(2) {
            self.stats.late_expiry.fetch_add(1, Ordering::Relaxed);
        }
        let e = map.remove(&key).unwrap();
        drop(map);
        drop(e); // drops the entry's own AfterFunc handle from inside its callback
        self.stats.expired.fetch_add(1, Ordering::Relaxed);
    }

    fn len(&self) -> usize {
        self.map.lock().unwrap().len()
    }
}

fn rand(seed: &mut u64) -> u64 {
    *seed ^= *seed << 13;
    *seed ^= *seed >> 7;
    *seed ^= *seed << 17;
    *seed
}

async fn worker(cache: Cache, id: u64) -> (u64, u64) {
    let mut seed = 0x9E37_79B9_7F4A_7C15 ^ (id + 1);
    let (mut hits, mut misses) = (0, 0);
    for i in 0..OPS {
        let key = rand(&mut seed) % KEYS;
        match rand(&mut seed) % 10 {
            0..=3 => cache.set(key, id * OPS + i),
            4..=8 => match cache.get(key) {
                Some(_) => hits += 1,
                None => misses += 1,
            },
            _ => {
                cache.delete(key);
            }
        }
        if i % 64 == 0 {
            gort::time::sleep(Duration::from_micros(rand(&mut seed) % 500)).await;
        }
    }
    (hits, misses)
}

/// A key touched every TTL/4 must never expire.
async fn keeper(cache: Cache) -> bool {
    const KEY: u64 = 1_000_000;
    cache.set(KEY, 7);
    let mut touched = Instant::now();
    for _ in 0..40 {
        gort::time::sleep(TTL / 4).await;
        if touched.elapsed() >= TTL / 2 {
            // This machine stalled the keeper (twice its period): an expiry may be right.
            cache.set(KEY, 7);
        } else if cache.get(KEY) != Some(7) {
            eprintln!("a key touched {:?} ago expired", touched.elapsed());
            return false;
        }
        touched = Instant::now();
    }
    true
}

#[gort::main]
async fn main() {
    let start = std::time::Instant::now();
    let cache = Cache::new();
    let keep = gort::spawn(keeper(cache.clone()));
    let workers: Vec<_> = (0..WORKERS)
        .map(|id| gort::spawn(worker(cache.clone(), id)))
        .collect();
    let (mut hits, mut misses) = (0, 0);
    for w in workers {
        let (h, m) = w.await.unwrap();
        hits += h;
        misses += m;
    }
    let kept = keep.await.unwrap();

    // Every entry left expires within a TTL, plus scheduling slack.
    let deadline = Instant::now() + Duration::from_secs(3);
    while cache.len() > 0 && Instant::now() < deadline {
        gort::time::sleep(TTL).await;
    }
    let left = cache.len();
    let s = &cache.stats;
    println!(
        "{} ops: {hits} hits, {misses} misses, {} expired, {} stale fires, {left} left, {:?}",
        WORKERS * OPS,
        s.expired.load(Ordering::Relaxed),
        s.stale_fires.load(Ordering::Relaxed),
        start.elapsed()
    );
    let late = s.late_expiry.load(Ordering::Relaxed);
    if !kept || left != 0 || late != 0 || s.expired.load(Ordering::Relaxed) == 0 {
        eprintln!("FAILED: kept={kept} left={left} late={late}");
        std::process::exit(1);
    }
}
