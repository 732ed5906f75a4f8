use std::time::Duration;
use gort::time::{Instant, Ticker};
fn main() {
    let busy = std::env::args().nth(1).is_some();
    let rt = gort::Runtime::new().unwrap();
    rt.block_on(rt.spawn(async move {
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        if busy {
            for _ in 0..2 {
                let stop = stop.clone();
                gort::spawn(async move {
                    while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                        let end = std::time::Instant::now() + Duration::from_micros(50);
                        while std::time::Instant::now() < end {}
                        gort::yield_now().await;
                    }
                });
            }
        }
        let t0 = Instant::now();
        let tk = Ticker::new(Duration::from_millis(1));
        let mut prev = t0;
        let mut lates = vec![];
        let mut names = std::collections::HashMap::new();
        for i in 0..2000 {
            let due = tk.c().recv().await.unwrap();
            let now = Instant::now();
            let late = now - due;
            lates.push(late);
            *names.entry(std::thread::current().name().unwrap_or("?").to_string()).or_insert(0) += 1;
            if late > Duration::from_micros(300) {
                println!("tick {i}: due +{:?} got +{:?} late {:?} (gap since prev recv {:?})", due - t0, now - t0, late, now - prev);
            }
            prev = now;
        }
        lates.sort();
        println!("p50 {:?} p90 {:?} p99 {:?} max {:?} threads {:?}", lates[lates.len()/2], lates[lates.len()*9/10], lates[lates.len()*99/100], lates.last().unwrap(), names);
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
    })).unwrap();
}
