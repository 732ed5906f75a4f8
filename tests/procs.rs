//! One rule for the number of Ps (issue 17, item 5): `Builder::procs` and `Runtime::set_procs`
//! both panic, with the same message naming the valid range, on 0 or above `MAX_PROCS`.
//! Before, `set_procs(0)` silently clamped to 1 (the `set_procs` tests failed without the fix).

use gort::{Builder, Runtime, MAX_PROCS};

fn panic_message(f: impl FnOnce()) -> String {
    let err = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).unwrap_err();
    match err.downcast::<String>() {
        Ok(s) => *s,
        Err(err) => err.downcast_ref::<&str>().unwrap().to_string(),
    }
}

fn range() -> String {
    format!("the number of Ps must be in 1..={MAX_PROCS} (MAX_PROCS)")
}

#[test]
fn builder_procs_zero_panics_naming_the_range() {
    let msg = panic_message(|| {
        Builder::new().procs(0);
    });
    assert!(msg.contains("gort: Builder::procs(0)"), "{msg}");
    assert!(msg.contains(&range()), "{msg}");
}

#[test]
fn set_procs_zero_panics_naming_the_range_and_keeps_the_procs() {
    let rt = Builder::new().procs(2).build().unwrap();
    let msg = panic_message(|| rt.set_procs(0));
    assert!(msg.contains("gort: Runtime::set_procs(0)"), "{msg}");
    assert!(msg.contains(&range()), "{msg}");
    assert_eq!(rt.procs(), 2, "a rejected set_procs changed nothing");
    assert_eq!(
        rt.block_on(async { gort::spawn(async { 5 }).await.unwrap() }),
        5
    );
}

#[test]
fn above_max_procs_panics_in_both() {
    let over = MAX_PROCS + 1;
    let msg = panic_message(|| {
        Builder::new().procs(over);
    });
    assert!(msg.contains(&range()), "{msg}");
    let rt = Runtime::new().unwrap();
    let before = rt.procs();
    let msg = panic_message(|| rt.set_procs(over));
    assert!(
        msg.contains(&format!("gort: Runtime::set_procs({over})")),
        "{msg}"
    );
    assert!(msg.contains(&range()), "{msg}");
    assert_eq!(rt.procs(), before);
}

#[test]
fn the_bounds_themselves_are_accepted() {
    let rt = Builder::new().procs(1).build().unwrap();
    rt.set_procs(MAX_PROCS);
    assert_eq!(rt.procs(), MAX_PROCS);
    rt.set_procs(1);
    assert_eq!(rt.procs(), 1);
}
