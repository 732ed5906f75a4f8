//! The expansion's error messages (compile-fail cases) and its shape. The compile-pass cases
//! (every return type, `#[should_panic]`, `#[ignore]`) are real uses in `tests/macros.rs`.

use quote::quote;

use super::{expand, try_expand, Kind};

fn expand_main(attr: proc_macro2::TokenStream, item: proc_macro2::TokenStream) -> String {
    expand(attr, item, Kind::Main).to_string()
}

/// Asserts that the expansion is exactly one `compile_error!` containing `msg`.
#[track_caller]
fn assert_error(out: &str, msg: &str) {
    assert!(out.contains("compile_error"), "not an error: {out}");
    assert!(out.contains(msg), "expected {msg:?} in {out}");
    assert!(!out.contains("block_on"), "an error also expanded: {out}");
}

#[test]
fn unknown_argument_is_named() {
    let out = expand_main(
        quote!(flavor = "x"),
        quote!(
            async fn main() {}
        ),
    );
    assert_error(
        &out,
        // (the expansion prints the message's quotes escaped)
        "gort: unknown `flavor`; the arguments are `procs = N`, `start_paused = BOOL` and \
         `crate = ",
    );
    let out = expand_main(
        quote!(multi_thread),
        quote!(
            async fn main() {}
        ),
    );
    assert_error(&out, "gort: unknown `multi_thread`");
    let out = expand_main(
        quote!(procs(2)),
        quote!(
            async fn main() {}
        ),
    );
    assert_error(&out, "gort: `procs` takes a value: `procs = ...`");
}

/// Tokio's arguments get a hint of gort's; a typed `procs` literal other than `usize` is
/// refused by the attribute (not by two type errors in its expansion).
#[test]
fn tokios_arguments_and_typed_literals_get_a_hint() {
    let item = quote!(
        async fn t() {}
    );
    let out = expand(quote!(flavor = "multi_thread"), item.clone(), Kind::Test).to_string();
    assert_error(&out, "Tokio's `current_thread` is `procs = 1`");
    let out = expand(quote!(worker_threads = 4), item.clone(), Kind::Test).to_string();
    assert_error(&out, "Tokio's `worker_threads = N` is `procs = N`");
    let out = expand(quote!(procs = 2u8), item.clone(), Kind::Test).to_string();
    assert_error(&out, "gort: `procs` is a `usize`: `procs = 2`");
    let out = expand(quote!(procs = 2usize), item, Kind::Test).to_string();
    assert!(!out.contains("compile_error"), "{out}");
}

#[test]
fn a_main_that_fails_to_expand_leaves_a_stand_in() {
    // Without it rustc adds "`main` function not found" to the attribute's error.
    let out = expand_main(
        quote!(flavor = "current_thread"),
        quote!(
            async fn main() -> Result<(), String> {
                Ok(())
            }
        ),
    );
    assert_error(&out, "gort: unknown `flavor`");
    let stand_in = quote!(
        fn main() -> Result<(), String> {
            ::core::unreachable!()
        }
    )
    .to_string();
    assert!(out.contains(&stand_in), "no stand-in main: {out}");
    let out = expand(
        quote!(procs = 0),
        quote!(
            async fn t() {}
        ),
        Kind::Test,
    )
    .to_string();
    assert!(!out.contains("fn t"), "a test needs no stand-in: {out}");
}

#[test]
fn procs_zero_is_rejected() {
    let out = expand_main(
        quote!(procs = 0),
        quote!(
            async fn main() {}
        ),
    );
    assert_error(&out, "gort: `procs` must be in 1..=gort::MAX_PROCS, got 0");
}

#[test]
fn procs_must_be_an_integer_literal() {
    for attr in [quote!(procs = "x"), quote!(procs = 1.5), quote!(procs = N)] {
        let out = expand_main(
            attr,
            quote!(
                async fn main() {}
            ),
        );
        assert_error(&out, "gort: `procs` takes an integer literal");
    }
}

#[test]
fn procs_twice_is_rejected() {
    let out = expand_main(
        quote!(procs = 1, procs = 2),
        quote!(
            async fn main() {}
        ),
    );
    assert_error(&out, "gort: `procs` is given twice");
}

#[test]
fn procs_over_max_is_a_const_assert() {
    // The macro cannot see gort::MAX_PROCS; the expansion asserts it at compile time.
    let out = expand_main(
        quote!(procs = 100000),
        quote!(
            async fn main() {}
        ),
    );
    assert!(out.contains(":: gort :: MAX_PROCS"), "{out}");
    assert!(out.contains("assert"), "{out}");
}

#[test]
fn non_async_fn_is_rejected() {
    let out = expand_main(
        quote!(),
        quote!(
            fn main() {}
        ),
    );
    assert_error(&out, "gort: #[gort::main] needs an `async fn`");
    let out = expand(
        quote!(),
        quote!(
            fn t() {}
        ),
        Kind::Test,
    )
    .to_string();
    assert_error(&out, "gort: #[gort::test] needs an `async fn`");
}

#[test]
fn parameters_and_generics_are_rejected() {
    let out = expand_main(
        quote!(),
        quote!(
            async fn main(n: u32) {}
        ),
    );
    assert_error(
        &out,
        "gort: #[gort::main] takes a function without parameters",
    );
    let out = expand(
        quote!(),
        quote!(
            async fn t<T>() {}
        ),
        Kind::Test,
    )
    .to_string();
    assert_error(
        &out,
        "gort: #[gort::test] takes a function without generics",
    );
}

#[test]
fn not_a_function_is_a_parse_error() {
    let out = expand_main(
        quote!(),
        quote!(
            struct S;
        ),
    );
    assert!(out.contains("compile_error"), "{out}");
}

#[test]
fn return_type_and_attributes_are_kept() {
    let out = expand(
        quote!(procs = 2),
        quote!(
            #[should_panic(expected = "boom")]
            async fn t() -> Result<(), String> {
                Ok(())
            }
        ),
        Kind::Test,
    )
    .to_string();
    assert!(!out.contains("compile_error"), "{out}");
    assert!(
        out.contains("# [should_panic (expected = \"boom\")]"),
        "{out}"
    );
    assert!(out.contains("fn t () -> Result < () , String >"), "{out}");
    assert!(
        out.contains("async fn __gort_body () -> Result < () , String >"),
        "{out}"
    );
    assert!(out.contains("procs (2)"), "{out}");
    assert!(out.contains(":: core :: prelude :: v1 :: test"), "{out}");
    assert!(!out.starts_with("async"), "{out}");
}

/// A test's panic bounds its runtime's shutdown (it fails rather than hang on busy threads);
/// a `main`'s drop is bounded by `drop_timeout` instead, panic or not.
#[test]
fn only_a_tests_panic_bounds_the_shutdown() {
    let item = quote!(
        async fn t() {}
    );
    let test = expand(quote!(), item.clone(), Kind::Test).to_string();
    assert!(test.contains("catch_unwind"), "{test}");
    assert!(test.contains("shutdown_timeout"), "{test}");
    assert!(test.contains("resume_unwind"), "{test}");
    assert!(
        test.contains("gort_failed"),
        "an Err returned bounds it too: {test}"
    );
    assert!(!test.contains("drop_timeout"), "{test}");
    let main = expand(quote!(), item, Kind::Main).to_string();
    assert!(!main.contains("catch_unwind"), "{main}");
    assert!(main.contains("drop_timeout"), "{main}");
}

/// Where an error points: (line, column) of its span, for source given as text.
fn error_at(attr: &str, item: &str, kind: Kind) -> (String, usize, usize) {
    let e = try_expand(attr.parse().unwrap(), item.parse().unwrap(), kind).unwrap_err();
    let start = e.span().start();
    (e.to_string(), start.line, start.column)
}

#[test]
fn errors_point_at_the_offending_tokens() {
    // Each source below is parsed on its own, so line 1, column = offset in the string.
    let (msg, _, col) = error_at("procs = 2, flavor = 1", "async fn main() {}", Kind::Main);
    assert_eq!(
        (msg.as_str(), col),
        (
            "gort: unknown `flavor`; the arguments are `procs = N`, `start_paused = BOOL` and \
             `crate = \"PATH\"` (gort has one scheduler: Tokio's `current_thread` is \
             `procs = 1`)",
            11
        )
    );
    let (_, _, col) = error_at("procs = 0", "async fn main() {}", Kind::Main);
    assert_eq!(col, 8, "at the 0");
    let (_, _, col) = error_at("procs = \"x\"", "async fn main() {}", Kind::Main);
    assert_eq!(col, 8, "at the string");
    let (_, _, col) = error_at("", "pub fn main() {}", Kind::Main);
    assert_eq!(col, 4, "at `fn`");
    let (_, _, col) = error_at("", "async fn t(a: u8, b: u8) {}", Kind::Test);
    assert_eq!(col, 11, "at the parameters");
}

#[test]
fn start_paused_sets_the_builder_option() {
    let out = expand_main(
        quote!(procs = 2, start_paused = true),
        quote!(
            async fn main() {}
        ),
    );
    assert!(out.contains("start_paused (true)"), "{out}");
    let out = expand_main(
        quote!(start_paused = 1),
        quote!(
            async fn main() {}
        ),
    );
    assert_error(&out, "gort: `start_paused` takes `true` or `false`");
    let out = expand_main(
        quote!(start_paused = true, start_paused = false),
        quote!(
            async fn main() {}
        ),
    );
    assert_error(&out, "gort: `start_paused` is given twice");
}

/// `crate = "PATH"` (Tokio's `crate` argument): every path of the expansion goes through it,
/// so a renamed dependency or a re-export works where `::gort` does not exist.
#[test]
fn crate_names_the_path_to_gort() {
    let item = quote!(
        async fn t() {}
    );
    for kind in [Kind::Main, Kind::Test] {
        let attr = quote!(procs = 2, crate = "my_facade::rt");
        let out = expand(attr, item.clone(), kind).to_string();
        assert!(!out.contains("compile_error"), "{out}");
        assert!(
            !out.contains(":: gort ::"),
            "a path still names ::gort: {out}"
        );
        assert!(
            out.contains("my_facade :: rt :: Builder :: new ()"),
            "{out}"
        );
    }
    let out = expand(quote!(crate = 1), item.clone(), Kind::Main).to_string();
    assert_error(&out, "gort: `crate` takes a path in a string");
    let out = expand(quote!(crate = "a b"), item.clone(), Kind::Main).to_string();
    assert_error(&out, "is not a path");
    let out = expand(quote!(crate = "a", crate = "b"), item, Kind::Main).to_string();
    assert_error(&out, "gort: `crate` is given twice");
}
