//! Go 1.23's lazy timer channels (issue 17, item 5): an unread channel timer is in no heap, so
//! it costs no CPU. Before, every armed channel timer stayed in a heap: an unread 1 ms ticker
//! cost ~46 ms of CPU per second, and an unread 1 ns ticker a whole core (this test failed).
//!
//! A file of its own with a single test, so that no other test runs while CPU is measured.

use std::time::Duration;

use gort_sched::Runtime;
use gort_time::{sleep, Instant, Ticker, Timer};

const MS: Duration = Duration::from_millis(1);

/// The CPU time all threads of this process have used so far (from each live thread's
/// `/proc/self/task/*/schedstat`, in nanoseconds; the runtime's threads outlive the test).
fn process_cpu() -> Duration {
    let mut total = 0u64;
    for task in std::fs::read_dir("/proc/self/task").unwrap() {
        let path = task.unwrap().path().join("schedstat");
        if let Ok(s) = std::fs::read_to_string(path) {
            total += s.split_whitespace().next().unwrap().parse::<u64>().unwrap();
        }
    }
    Duration::from_nanos(total)
}

#[test]
fn unread_tickers_cost_no_cpu() {
    let rt = Runtime::new().unwrap();
    rt.block_on(async {
        sleep(10 * MS).await; // let the runtime's threads start
                              // What the runtime itself costs in a second of sleeping (its monitor thread wakes
                              // up now and then): a few ms.
        let before = process_cpu();
        sleep(Duration::from_secs(1)).await;
        let idle = process_cpu() - before;
        eprintln!("idle runtime: {idle:?} of CPU in one second");
        for period in [MS, Duration::from_nanos(1)] {
            let ticker = Ticker::new(period);
            let timer = Timer::new(period);
            let before = process_cpu();
            sleep(Duration::from_secs(1)).await;
            let used = process_cpu() - before;
            // Generous: an unread ticker in a heap cost 46 ms more than idle (1 ms period) or
            // the whole second (1 ns).
            assert!(
                used < idle + Duration::from_millis(20),
                "an unread {period:?} ticker used {used:?} of CPU in one second"
            );
            eprintln!("unread {period:?} ticker: {used:?} of CPU in one second");
            // They still work once read.
            let v = ticker.c().recv().await.unwrap();
            assert!(v <= Instant::now());
            assert!(
                timer.c().try_recv().is_ok(),
                "a due timer is received at once"
            );
        }
    });
}
