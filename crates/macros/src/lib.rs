//! `#[gort::main]` and `#[gort::test]`: run an `async fn` on a fresh gort runtime.
//!
//! Both accept an optional `procs = N` argument (the runtime's number of Ps).

use proc_macro::TokenStream;
use quote::quote;
use syn::parse::Parser;
use syn::punctuated::Punctuated;
use syn::{Expr, ItemFn, Lit, MetaNameValue, Token};

/// Runs `async fn main` on a gort runtime.
///
/// When `main` returns (or panics) the runtime is dropped, waiting at most one second for
/// threads still busy (a blocking closure, a task in `block_in_place`); those are abandoned
/// and end with the process, as goroutines do when a Go program's `main` returns.
///
/// ```ignore
/// #[gort::main]
/// async fn main() {
///     gort::time::sleep(std::time::Duration::from_millis(1)).await;
/// }
/// ```
#[proc_macro_attribute]
pub fn main(args: TokenStream, item: TokenStream) -> TokenStream {
    expand(args, item, false)
}

/// Runs an `async fn` test on a fresh gort runtime (dropped when the test ends).
///
/// ```ignore
/// #[gort::test(procs = 2)]
/// async fn adds() {
///     assert_eq!(gort::spawn(async { 1 + 1 }).await.unwrap(), 2);
/// }
/// ```
#[proc_macro_attribute]
pub fn test(args: TokenStream, item: TokenStream) -> TokenStream {
    expand(args, item, true)
}

fn expand(args: TokenStream, item: TokenStream, is_test: bool) -> TokenStream {
    match try_expand(args, item, is_test) {
        Ok(ts) => ts,
        Err(e) => e.to_compile_error().into(),
    }
}

fn try_expand(args: TokenStream, item: TokenStream, is_test: bool) -> syn::Result<TokenStream> {
    let mut func: ItemFn = syn::parse(item)?;
    let args = Punctuated::<MetaNameValue, Token![,]>::parse_terminated.parse(args)?;
    let mut procs = None;
    for arg in args {
        if !arg.path.is_ident("procs") {
            return Err(syn::Error::new_spanned(
                &arg.path,
                "gort: unknown argument; expected `procs = N`",
            ));
        }
        match &arg.value {
            Expr::Lit(l) if matches!(l.lit, Lit::Int(_)) => procs = Some(l.lit.clone()),
            other => {
                return Err(syn::Error::new_spanned(
                    other,
                    "gort: `procs` takes an integer literal",
                ))
            }
        }
    }
    if func.sig.asyncness.take().is_none() {
        return Err(syn::Error::new_spanned(
            func.sig.fn_token,
            "gort: the function must be `async fn`",
        ));
    }
    // A program ends when `main` returns, as a Go program does: its runtime's drop waits at
    // most a second for threads still busy (a blocking closure, a task in `block_in_place`)
    // and abandons them (`Builder::drop_timeout`). A test's drop waits for everything.
    let exit = (!is_test).then(|| quote! { .drop_timeout(::std::time::Duration::from_secs(1)) });
    let builder = match procs {
        Some(n) => quote! { ::gort::Builder::new().procs(#n) #exit .build() },
        None => quote! { ::gort::Builder::new() #exit .build() },
    };
    let body = &func.block;
    let ret = &func.sig.output;
    func.block = syn::parse_quote! {{
        let __gort_rt = #builder.expect("gort: failed to build the runtime");
        __gort_rt.block_on(async move #ret #body)
    }};
    let test_attr = if is_test {
        quote! { #[::core::prelude::v1::test] }
    } else {
        quote! {}
    };
    Ok(quote! { #test_attr #func }.into())
}
