//! The `select!` macro: a `macro_rules!` muncher that parses the arms, then hands the futures
//! to [`Select`](crate::select::Select) and matches its output to run the chosen body.

/// Waits on several futures and runs the body of the first one ready (Go's `select`).
///
/// ```text
/// select! {
///     pattern = future => body,
///     ...
///     default => body,   // optional
/// }
/// ```
///
/// 1. Every arm's future expression is evaluated, in order, before anything is polled.
/// 2. The arms are polled in a new uniformly random order on every poll, as Go does: among
///    arms that are ready at the same time, each is chosen with equal probability, so none
///    starves.
/// 3. The first arm found ready wins: the other arms' futures are dropped, then its body
///    runs with `pattern` bound to the future's output. Bodies run in the enclosing async
///    context, so `return`, `?`, `break` and `.await` work in them.
/// 4. With `default`, if no arm is ready on the first poll, `default`'s body runs instead
///    (channel operations are only tried, never parked, as in Go).
///
/// Arms may be any futures. For gort's channel operations (also inside an arm's future, such
/// as an `async` block or a timeout around a receive) select is exact as in Go: **at most one
/// arm's operation takes effect**. Once a sender hands a value to one arm's receive, no other
/// arm can receive or send; a dropped arm's send has not sent, and a dropped arm's receive has
/// not consumed anything. If an arm's operation is completed by another task while the select
/// waits, that arm is the one chosen, even if it then still has work to do. A `select!` nested
/// inside an arm of another commits on its own.
///
/// Patterns must be irrefutable (bind the output and `match` in the body). `select! {}`
/// never completes, like Go's `select {}`. Any number of arms is accepted (up to the
/// macro recursion limit).
///
/// On its first poll, a `select!` without `default` looks at every arm twice, as Go's
/// `selectgo` does: once where channel operations only try (so a select with a ready arm
/// parks and allocates nothing), then once where they park. An arm's future may therefore be
/// polled twice in a row, which futures must tolerate anyway.
///
/// # Examples
///
/// ```
/// use gort_chan::{bounded, select};
///
/// futures::executor::block_on(async {
///     let (tx_a, rx_a) = bounded::<u32>(1);
///     let (_tx_b, rx_b) = bounded::<&str>(1);
///     tx_a.send(7).await.unwrap();
///
///     let got = select! {
///         v = rx_a.recv() => v.map(|n| n * 2),
///         s = rx_b.recv() => s.map(|s| s.len() as u32),
///     };
///     assert_eq!(got, Some(14));
///
///     // Nothing ready: `default` runs.
///     let got = select! {
///         v = rx_a.recv() => v,
///         default => None,
///     };
///     assert_eq!(got, None);
/// });
/// ```
///
/// Any future can be an arm, for example a send, a timer, or an `async` block:
///
/// ```
/// use gort_chan::{bounded, select};
///
/// futures::executor::block_on(async {
///     let (tx, rx) = bounded::<u8>(0);
///     let (_stop_tx, stop_rx) = bounded::<()>(0);
///     let reader = async {
///         select! {
///             r = tx.send(1) => r.is_ok(),
///             _ = stop_rx.recv() => false,
///         }
///     };
///     let (sent, got) = futures::join!(reader, rx.recv());
///     assert!(sent);
///     assert_eq!(got, Some(1));
/// });
/// ```
#[macro_export]
macro_rules! select {
    ($($tokens:tt)*) => {
        $crate::__select_parse!(@arms [] @default [] @rest $($tokens)*)
    };
}

#[doc(hidden)]
#[macro_export]
macro_rules! __select_parse {
    // Every arm parsed.
    (@arms [$($arms:tt)*] @default [$($default:tt)*] @rest) => {
        $crate::__select_expand!([$($default)*] $($arms)*)
    };
    (@arms $arms:tt @default [$($default:tt)+] @rest default $($rest:tt)*) => {
        ::core::compile_error!("select! takes at most one `default` arm")
    };
    (@arms $arms:tt @default [] @rest default => $body:block , $($rest:tt)*) => {
        $crate::__select_parse!(@arms $arms @default [$body] @rest $($rest)*)
    };
    (@arms $arms:tt @default [] @rest default => $body:block $($rest:tt)*) => {
        $crate::__select_parse!(@arms $arms @default [$body] @rest $($rest)*)
    };
    (@arms $arms:tt @default [] @rest default => $body:expr , $($rest:tt)*) => {
        $crate::__select_parse!(@arms $arms @default [$body] @rest $($rest)*)
    };
    (@arms $arms:tt @default [] @rest default => $body:expr) => {
        $crate::__select_parse!(@arms $arms @default [$body] @rest)
    };
    (@arms [$($arms:tt)*] @default $default:tt @rest
        $p:pat = $f:expr => $body:block , $($rest:tt)*) => {
        $crate::__select_parse!(@arms [$($arms)* [($p) ($f) ($body)]] @default $default
            @rest $($rest)*)
    };
    (@arms [$($arms:tt)*] @default $default:tt @rest
        $p:pat = $f:expr => $body:block $($rest:tt)*) => {
        $crate::__select_parse!(@arms [$($arms)* [($p) ($f) ($body)]] @default $default
            @rest $($rest)*)
    };
    (@arms [$($arms:tt)*] @default $default:tt @rest
        $p:pat = $f:expr => $body:expr , $($rest:tt)*) => {
        $crate::__select_parse!(@arms [$($arms)* [($p) ($f) ($body)]] @default $default
            @rest $($rest)*)
    };
    (@arms [$($arms:tt)*] @default $default:tt @rest $p:pat = $f:expr => $body:expr) => {
        $crate::__select_parse!(@arms [$($arms)* [($p) ($f) ($body)]] @default $default @rest)
    };
}

#[doc(hidden)]
#[macro_export]
macro_rules! __select_expand {
    ([$($default:tt)*] $([($p:pat) ($f:expr) ($($body:tt)*)])*) => {{
        // The arms' futures live in this inner block, so they are dropped before a body runs.
        let __gort_select_out = {
            let __gort_select_arms = $crate::__select_tuple!($($f,)*);
            let __gort_select_out = $crate::__private::select(
                __gort_select_arms,
                $crate::__select_has_default!($($default)*),
            )
            .await;
            __gort_select_out
        };
        match __gort_select_out {
            ::core::option::Option::Some(__gort_select_out) => {
                $crate::__select_dispatch!(__gort_select_out $([($p) ($($body)*)])*)
            }
            ::core::option::Option::None => $crate::__select_default!($($default)*),
        }
    }};
}

/// `(pin!(f0), (pin!(f1), ... ()))`, pinned in place on the caller's stack.
#[doc(hidden)]
#[macro_export]
macro_rules! __select_tuple {
    () => { () };
    ($f:expr, $($rest:expr,)*) => {
        (::core::pin::pin!($f), $crate::__select_tuple!($($rest,)*))
    };
}

#[doc(hidden)]
#[macro_export]
macro_rules! __select_dispatch {
    ($out:ident) => {
        match $out {}
    };
    ($out:ident [($p:pat) ($($body:tt)*)] $($rest:tt)*) => {
        match $out {
            $crate::__private::Either::Left($p) => { $($body)* }
            $crate::__private::Either::Right($out) => $crate::__select_dispatch!($out $($rest)*),
        }
    };
}

#[doc(hidden)]
#[macro_export]
macro_rules! __select_has_default {
    () => {
        false
    };
    ($($default:tt)+) => {
        true
    };
}

#[doc(hidden)]
#[macro_export]
macro_rules! __select_default {
    () => {
        ::core::unreachable!("select! without `default` returned no arm")
    };
    ($($default:tt)+) => {
        $($default)+
    };
}
