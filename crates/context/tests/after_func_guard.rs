//! `AfterFunc::drop_guard` (Go's `stop := context.AfterFunc(ctx, f); defer stop()`): a
//! per-connection callback registered on a server's long-lived context is unregistered when
//! the handler returns or panics, so its captures (a socket) go with the handler instead of
//! staying registered until the server's shutdown.

use gort::context::{self, Context};
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::Arc;

#[test]
fn a_panicking_handler_releases_its_after_func() {
    let rt = gort::Builder::new().procs(2).build().unwrap();
    rt.block_on(async {
        let (server, shutdown) = context::with_cancel(&Context::background());
        let ran = Arc::new(AtomicUsize::new(0));
        let conn = Arc::new("a connection");
        let handler = {
            let (server, ran, conn) = (server.clone(), ran.clone(), conn.clone());
            gort::spawn(async move {
                let mine = conn.clone();
                let _stop = context::after_func(&server, move || {
                    ran.fetch_add(1, SeqCst);
                    drop(mine);
                })
                .drop_guard();
                gort::yield_now().await;
                panic!("handler bug");
            })
        };
        assert!(handler.await.unwrap_err().is_panic());
        // The registration went with the handler: the connection is no longer shared.
        assert_eq!(Arc::strong_count(&conn), 1);
        shutdown.cancel();
        gort::time::sleep(std::time::Duration::from_millis(10)).await;
        assert_eq!(ran.load(SeqCst), 0, "a stopped function ran");
    });
}

#[test]
fn a_disarmed_guard_leaves_the_function_registered() {
    let rt = gort::Builder::new().procs(1).build().unwrap();
    rt.block_on(async {
        let (ctx, cancel) = context::with_cancel(&Context::background());
        let (tx, rx) = gort::chan::bounded(1);
        let stop = context::after_func(&ctx, move || tx.try_send("ran").unwrap())
            .drop_guard()
            .disarm();
        cancel.cancel();
        assert_eq!(rx.recv().await, Some("ran"));
        assert!(!stop.stop(), "already started");
    });
}
