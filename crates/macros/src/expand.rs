//! The expansion of both attributes, on `proc_macro2` tokens so that unit tests can run it.
//!
//! `async fn name() -> R { body }` becomes
//!
//! ```text
//! fn name() -> R {
//!     async fn __gort_body() -> R { body }
//!     Builder::new().procs(N).start_paused(B).drop_timeout(1 s, main only)
//!         .build().expect(..).block_on(__gort_body())
//!     // a test: the block_on under catch_unwind; on a panic, shutdown_timeout(1 s), then
//!     // the panic resumed; on an `Err` returned, shutdown_timeout(1 s), then the `Err`
//! }
//! ```
//!
//! The body moves into an inner `async fn` with the same return type, so `?`, `return` and
//! `impl Trait` returns type-check exactly as in the original function (an `async` block
//! would need its error type spelled out).

use proc_macro2::{Span, TokenStream as TokenStream2};
use quote::{quote, quote_spanned};
use syn::parse::Parser;
use syn::punctuated::Punctuated;
use syn::spanned::Spanned;
use syn::{Expr, ExprLit, ItemFn, Lit, LitBool, LitInt, LitStr, Meta, MetaNameValue, Token};

/// Which attribute is expanded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    Main,
    Test,
}

/// Expands `#[gort::main(attr)]` / `#[gort::test(attr)]` on `item`; any error becomes a
/// `compile_error!` spanned on the offending tokens.
pub(crate) fn expand(attr: TokenStream2, item: TokenStream2, kind: Kind) -> TokenStream2 {
    match try_expand(attr, item.clone(), kind) {
        Ok(ts) => ts,
        Err(e) => {
            let error = e.to_compile_error();
            let stand_in = stand_in(item, kind);
            quote! { #error #stand_in }
        }
    }
}

/// What stands for a `main` the attribute could not expand: a plain function of the same
/// name and return type, so that the attribute's error comes alone, without rustc's "`main`
/// function not found" after it. Tests need none.
fn stand_in(item: TokenStream2, kind: Kind) -> Option<TokenStream2> {
    let func: ItemFn = syn::parse2(item).ok().filter(|_| kind == Kind::Main)?;
    let (vis, ident, output) = (&func.vis, &func.sig.ident, &func.sig.output);
    Some(quote! { #vis fn #ident() #output { ::core::unreachable!() } })
}

fn try_expand(attr: TokenStream2, item: TokenStream2, kind: Kind) -> syn::Result<TokenStream2> {
    let Args {
        procs,
        start_paused,
        krate,
    } = parse_args(attr)?;
    // The crate's path: `::gort` unless `crate = "..."` names another (a renamed dependency,
    // a re-export), as Tokio's `crate` argument does.
    let krate = krate.map_or_else(|| quote! { ::gort }, |path| quote! { #path });
    let mut func: ItemFn = syn::parse2(item)?;
    check_signature(&func, kind)?;
    func.sig.asyncness = None;
    // A program ends when `main` returns, as a Go program does: its runtime's drop waits at
    // most a second for threads still busy (a blocking closure, a task in `block_in_place`)
    // and abandons them (`Builder::drop_timeout`). A test's drop waits for everything,
    // unless the test panicked (see `run`).
    let exit =
        (kind == Kind::Main).then(|| quote! { .drop_timeout(::std::time::Duration::from_secs(1)) });
    let paused = start_paused.map(|b| quote_spanned! {b.span()=> .start_paused(#b) });
    let builder = match &procs {
        Some(n) => {
            quote_spanned! {n.span()=> #krate::Builder::new().procs(#n) #paused #exit .build() }
        }
        None => quote! { #krate::Builder::new() #paused #exit .build() },
    };
    let max_check = procs.as_ref().map(|n| {
        quote_spanned! {n.span()=>
            const _: () = ::core::assert!(
                #n <= #krate::MAX_PROCS,
                "gort: `procs` must be in 1..=gort::MAX_PROCS",
            );
        }
    });
    let output = &func.sig.output;
    let body = &func.block;
    let run = match kind {
        Kind::Main => quote! { __gort_rt.block_on(__gort_body()) },
        // A test that fails must fail, not hang: its runtime's drop would wait for every
        // busy thread (a blocking closure or a task that never yields, waiting for an end
        // of the body that the panic, or the `?` that returned an `Err`, skipped). A
        // passing test's drop still waits for all.
        Kind::Test => quote! {
            match ::std::panic::catch_unwind(::std::panic::AssertUnwindSafe(|| {
                __gort_rt.block_on(__gort_body())
            })) {
                ::core::result::Result::Ok(__gort_out) => {
                    #[allow(unused_imports)]
                    use #krate::__macro_support::{FailedResult as _, NotAResult as _};
                    if (&#krate::__macro_support::TestOutput(&__gort_out)).gort_failed() {
                        __gort_rt.shutdown_timeout(::std::time::Duration::from_secs(1));
                    } else {
                        ::core::mem::drop(__gort_rt);
                    }
                    __gort_out
                }
                ::core::result::Result::Err(__gort_panic) => {
                    __gort_rt.shutdown_timeout(::std::time::Duration::from_secs(1));
                    ::std::panic::resume_unwind(__gort_panic)
                }
            }
        },
    };
    func.block = syn::parse_quote! {{
        #max_check
        async fn __gort_body() #output #body
        let __gort_rt = #builder.expect("gort: failed to build the runtime");
        #run
    }};
    let test_attr = match kind {
        Kind::Test => quote! { #[::core::prelude::v1::test] },
        Kind::Main => quote! {},
    };
    Ok(quote! { #test_attr #func })
}

/// The macro's arguments.
#[derive(Default)]
struct Args {
    /// `procs = N`: an integer literal `N >= 1`.
    procs: Option<LitInt>,
    /// `start_paused = true|false`.
    start_paused: Option<LitBool>,
    /// `crate = "path"`: where gort is, if not at `::gort`.
    krate: Option<syn::Path>,
}

/// Parses the arguments: any of `procs = N`, `start_paused = BOOL` and `crate = "PATH"`, each
/// at most once.
fn parse_args(attr: TokenStream2) -> syn::Result<Args> {
    let metas = Punctuated::<Meta, Token![,]>::parse_terminated.parse2(attr)?;
    let mut args = Args::default();
    for arg in metas {
        let Meta::NameValue(nv) = &arg else {
            return Err(unknown(arg.span(), &arg));
        };
        if nv.path.is_ident("procs") {
            once(&args.procs, nv)?;
            args.procs = Some(parse_procs(&nv.value)?);
        } else if nv.path.is_ident("start_paused") {
            once(&args.start_paused, nv)?;
            args.start_paused = Some(parse_bool(&nv.value)?);
        } else if nv.path.is_ident("crate") {
            once(&args.krate, nv)?;
            args.krate = Some(parse_crate(&nv.value)?);
        } else {
            return Err(unknown(nv.path.span(), &arg));
        }
    }
    Ok(args)
}

/// An argument may be given once.
fn once<T>(seen: &Option<T>, nv: &MetaNameValue) -> syn::Result<()> {
    match seen {
        Some(_) => Err(syn::Error::new_spanned(
            &nv.path,
            format!(
                "gort: `{}` is given twice",
                nv.path
                    .get_ident()
                    .map_or_else(String::new, |i| i.to_string())
            ),
        )),
        None => Ok(()),
    }
}

/// `procs`' value: an integer literal `>= 1`.
fn parse_procs(value: &Expr) -> syn::Result<LitInt> {
    let n = match value {
        Expr::Lit(l) => match &l.lit {
            Lit::Int(n) => n.clone(),
            other => return Err(not_an_integer(other.span())),
        },
        other => return Err(not_an_integer(other.span())),
    };
    if !matches!(n.suffix(), "" | "usize") {
        return Err(syn::Error::new(
            n.span(),
            format!(
                "gort: `procs` is a `usize`: `procs = {}`",
                n.base10_digits()
            ),
        ));
    }
    if n.base10_parse::<usize>()? == 0 {
        return Err(syn::Error::new(
            n.span(),
            "gort: `procs` must be in 1..=gort::MAX_PROCS, got 0",
        ));
    }
    Ok(n)
}

/// `start_paused`' value: `true` or `false`.
fn parse_bool(value: &Expr) -> syn::Result<LitBool> {
    match value {
        Expr::Lit(ExprLit {
            lit: Lit::Bool(b), ..
        }) => Ok(b.clone()),
        other => Err(syn::Error::new(
            other.span(),
            "gort: `start_paused` takes `true` or `false`",
        )),
    }
}

/// `crate`'s value: a string literal holding a path (`"gort1"`, `"::my_facade::gort"`).
fn parse_crate(value: &Expr) -> syn::Result<syn::Path> {
    match value {
        Expr::Lit(ExprLit {
            lit: Lit::Str(s), ..
        }) => s.parse::<syn::Path>().map_err(|_| not_a_path(s)),
        other => Err(syn::Error::new(
            other.span(),
            "gort: `crate` takes a path in a string, e.g. `crate = \"my_facade::gort\"`",
        )),
    }
}

fn not_a_path(s: &LitStr) -> syn::Error {
    syn::Error::new(
        s.span(),
        format!("gort: `crate = {:?}` is not a path", s.value()),
    )
}

fn unknown(span: Span, arg: &Meta) -> syn::Error {
    for name in ["procs", "start_paused", "crate"] {
        if arg.path().is_ident(name) {
            return syn::Error::new(
                span,
                format!("gort: `{name}` takes a value: `{name} = ...`"),
            );
        }
    }
    let ident = arg.path().get_ident().map(ToString::to_string);
    let name = match &ident {
        Some(id) => format!("`{id}`"),
        None => "argument".to_owned(),
    };
    // Tokio's arguments, which a program moving from Tokio brings along.
    let hint = match ident.as_deref() {
        Some("flavor") => " (gort has one scheduler: Tokio's `current_thread` is `procs = 1`)",
        Some("worker_threads") => " (Tokio's `worker_threads = N` is `procs = N`)",
        _ => "",
    };
    syn::Error::new(
        span,
        format!(
            "gort: unknown {name}; the arguments are `procs = N`, `start_paused = BOOL` and \
             `crate = \"PATH\"`{hint}"
        ),
    )
}

fn not_an_integer(span: Span) -> syn::Error {
    syn::Error::new(
        span,
        "gort: `procs` takes an integer literal, e.g. `procs = 4`",
    )
}

/// The function must be a plain `async fn` without parameters or generics.
fn check_signature(func: &ItemFn, kind: Kind) -> syn::Result<()> {
    let what = match kind {
        Kind::Main => "#[gort::main]",
        Kind::Test => "#[gort::test]",
    };
    let sig = &func.sig;
    if sig.asyncness.is_none() {
        return Err(syn::Error::new_spanned(
            sig.fn_token,
            format!("gort: {what} needs an `async fn`"),
        ));
    }
    if !sig.inputs.is_empty() {
        return Err(syn::Error::new_spanned(
            &sig.inputs,
            format!("gort: {what} takes a function without parameters"),
        ));
    }
    if !sig.generics.params.is_empty() || sig.generics.where_clause.is_some() {
        return Err(syn::Error::new_spanned(
            &sig.generics,
            format!("gort: {what} takes a function without generics"),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests;
