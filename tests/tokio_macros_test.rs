//! Tokio's `macros_test.rs` and `macros_rename_test.rs`, ported to `#[gort::test]` and
//! `#[gort::main]`: the attributes used through a `use`, under shadowing names, inside a
//! `macro_rules!`, with a `!` or `Result` return, under `clippy::semicolon_if_nothing_returned`
//! and `unused_braces` (this file denies every warning, as CI's clippy does), and with the
//! crate reached by another path (`crate = "..."`).
//!
//! Skipped, where gort deliberately differs: `trait_method` (`#[gort::main]` on a method taking
//! `self`: the attribute takes a function without parameters, `gort::main`'s docs), the
//! `name = ...` argument (gort's runtimes have no name) and `unhandled_panic` (unstable in
//! Tokio; gort's tasks' panics go to their `JoinHandle`).
#![deny(warnings)]

use gort::test;

#[test]
async fn test_macro_can_be_used_via_use() {
    gort::spawn(async {}).await.unwrap();
}

#[gort::test]
async fn test_macro_is_resilient_to_shadowing() {
    gort::spawn(async {}).await.unwrap();
}

// https://github.com/tokio-rs/tokio/issues/3403
#[rustfmt::skip] // unused_braces does not warn if the block contains a newline.
#[gort::main]
pub async fn unused_braces_main() { println!("hello") }

#[rustfmt::skip] // unused_braces does not warn if the block contains a newline.
#[gort::test]
async fn unused_braces_test() { assert_eq!(1 + 1, 2) }

// https://github.com/tokio-rs/tokio/issues/4175
#[gort::main]
pub async fn issue_4175_main_1() -> ! {
    panic!();
}

#[gort::main]
pub async fn issue_4175_main_2() -> std::io::Result<()> {
    panic!();
}

#[allow(unreachable_code)]
#[gort::test]
pub async fn issue_4175_test() -> std::io::Result<()> {
    return Ok(());
    panic!();
}

/// The `main`s above, run: they are plain functions once expanded.
#[std::prelude::v1::test]
fn the_mains_run() {
    unused_braces_main();
    for main in [
        (|| {
            issue_4175_main_1();
        }) as fn(),
        || drop(issue_4175_main_2()),
        clippy_semicolon_if_nothing_returned::semi,
    ] {
        assert!(std::panic::catch_unwind(main).is_err());
    }
    clippy_semicolon_if_nothing_returned::local();
    clippy_semicolon_if_nothing_returned::item();
    clippy_semicolon_if_nothing_returned::empty();
}

// https://github.com/tokio-rs/tokio/issues/4175
#[allow(clippy::let_unit_value)]
pub mod clippy_semicolon_if_nothing_returned {
    #![deny(clippy::semicolon_if_nothing_returned)]

    #[gort::main]
    pub async fn local() {
        let _x = ();
    }
    #[gort::main]
    pub async fn item() {
        fn _f() {}
    }
    #[gort::main]
    pub async fn semi() {
        panic!();
    }
    #[gort::main]
    pub async fn empty() {
        // To trigger clippy::semicolon_if_nothing_returned lint, the block needs to contain newline.
    }
}

// https://github.com/tokio-rs/tokio/issues/5243
pub mod issue_5243 {
    macro_rules! mac {
        (async fn $name:ident() $b:block) => {
            #[::gort::test]
            async fn $name() {
                $b
            }
        };
    }
    mac!(
        async fn foo() {}
    );
}

/// macros_rename_test.rs: gort reached by other names, and a `gort` that is not gort.
mod rename {
    #[allow(unused_imports)]
    use std as gort;

    use ::gort as gort1;

    mod test {
        pub use ::gort;
    }

    async fn compute() -> usize {
        let join = gort1::spawn(async { 1 });
        join.await.unwrap()
    }

    #[gort1::main(crate = "gort1")]
    async fn compute_main() -> usize {
        compute().await
    }

    #[test]
    fn crate_rename_main() {
        assert_eq!(1, compute_main());
    }

    #[gort1::test(crate = "gort1")]
    async fn crate_rename_test() {
        assert_eq!(1, compute().await);
    }

    #[test::gort::test(crate = "test::gort")]
    async fn crate_path_test() {
        assert_eq!(1, compute().await);
    }
}
