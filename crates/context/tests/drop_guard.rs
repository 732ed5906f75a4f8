//! `CancelFn::drop_guard` (Go's `defer cancel()`): per-request contexts derived from a
//! long-lived one release their registration and their deadline timer when the guard drops.

use gort::context::{self, Context, Error};
use std::time::Duration;

#[test]
fn per_request_contexts_end_with_their_guards() {
    let rt = gort::Builder::new().procs(2).build().unwrap();
    let handle = rt.handle().clone();
    rt.block_on(async move {
        let (server, stop) = context::with_cancel(&Context::background());
        let mut last = None;
        for _ in 0..1_000 {
            let (request, cancel) = context::with_timeout(&server, Duration::from_secs(3600));
            let _cancel = cancel.drop_guard();
            let (step, step_cancel) = context::with_cancel(&request);
            let _step_cancel = step_cancel.drop_guard();
            last = Some((request.clone(), step.clone()));
        }
        let (request, step) = last.unwrap();
        assert_eq!(request.err(), Some(Error::Canceled));
        assert_eq!(step.err(), Some(Error::Canceled));
        assert_eq!(server.err(), None);
        // No hour-long deadline is left armed: each request's timer stopped with its guard.
        assert_eq!(handle.metrics().timers_pending, 0);
        let (kept, cancel) = context::with_timeout(&server, Duration::from_secs(3600));
        let cancel = cancel.drop_guard().disarm();
        assert_eq!(kept.err(), None);
        assert_eq!(handle.metrics().timers_pending, 1);
        stop.cancel();
        assert_eq!(kept.err(), Some(Error::Canceled));
        drop(cancel);
    });
}
