//! The `select!` macro: a `macro_rules!` muncher that parses the arms, then hands the futures
//! to [`Select`](crate::select::Select) and matches its output to run the chosen body.

/// Waits on several futures and runs the body of the first one ready (Go's `select`).
///
/// ```text
/// select! {
///     biased;                               // optional, first: poll arms in order
///     pattern = expression => body,
///     pattern = expression, if guard => body,
///     ...
///     default => body,                      // optional: nothing ready now
///     else => body,                         // optional: every arm disabled
/// }
/// ```
///
/// 1. For each arm in order, its `guard` (if any) is evaluated, then its expression. An arm
///    whose guard is false is *disabled*: its future is dropped unpolled (its expression is
///    still evaluated, as in Tokio).
/// 2. The arms are polled in a new uniformly random order on every poll, as Go does: among
///    arms that are ready at the same time, each is chosen with equal probability, so none
///    starves. With `biased;` they are polled in the order written instead (Tokio's
///    `biased;`): earlier arms win, and may starve later ones.
/// 3. The first arm found ready whose output matches its `pattern` wins: the other arms'
///    futures are dropped, then its body runs with `pattern` bound to the output. Bodies run
///    in the enclosing async context, so `return`, `?`, `break` and `.await` work in them.
/// 4. A refutable pattern that does not match the output *disables* the arm (Tokio's rule):
///    the output and the arm's future are dropped, and the select goes on with the other
///    arms. (So `Some(v) = rx.recv()` stops listening to a closed channel. A value that an
///    arm received and its pattern rejected has been consumed and is dropped.)
/// 5. With `default`, if no arm is ready on the first poll, `default`'s body runs instead
///    (channel operations are only tried, never parked, as in Go). As in Go, `default`
///    means that at one moment no arm's channel operation was ready: a select that looked
///    at several channels polls its arms a second time to make sure (CHANNELS.md).
///
/// Under gort's scheduler a select that completes spends at least one unit of the task's
/// cooperative budget, as a completed channel operation does, whatever completed it (an arm
/// that spends nothing, such as a timer past its deadline, or `default`, or `else`): a loop
/// polling a full channel with `default`, or racing a deadline that has passed, yields every
/// 128 rounds instead of holding its thread (Go preempts such a loop).
/// 6. Once every arm is disabled, `else`'s body runs; without `else` (and without
///    `default`), the select panics with "all branches are disabled and there is no else
///    branch", as Tokio's does. `select! {}` never completes, like Go's `select {}`.
///
/// An arm's expression is a future, or an `Option<&Receiver<T>>` (Go's nil-channel idiom):
/// `Some(rx)` receives as `rx.recv()` does (the arm's output is an `Option<T>`, `None` once
/// the channel is closed and drained), and `None` is never ready, like a receive from a nil
/// channel in Go's `select`. A `None` arm is not disabled: a select whose arms are all `None`
/// waits forever, as in Go.
///
/// Arms may be any futures. For gort's channel operations (also inside an arm's future, such
/// as an `async` block or a timeout around a receive) select is exact as in Go: **at most one
/// arm's operation takes effect**. Once a sender hands a value to one arm's receive, no other
/// arm can receive or send; a dropped arm's send has not sent, and a dropped arm's receive has
/// not consumed anything. If an arm's operation is completed by another task while the select
/// waits, that arm is the one chosen, even if it then still has work to do (unless its
/// pattern rejects the output: rule 4). A `select!` nested inside an arm of another commits
/// on its own.
///
/// Patterns are matched against a reference to the output first (as in Tokio), so a `mut`
/// binding of a non-`Copy` value inside a refutable pattern does not compile: bind without
/// `mut` and rebind in the body (`ref mut` does not compile either). Up to 64 arms (Tokio's
/// limit) fit the default `recursion_limit`; more need a higher one. An arm's expression may
/// be any `IntoFuture`. A temporary it borrows ends before the select waits (Tokio's lives
/// as long as the select): bind it with `let` first (`let mut f = ready(()); ... = &mut f`).
///
/// On its first poll, a `select!` without `default` looks at every arm twice, as Go's
/// `selectgo` does: once where channel operations only try (so a select with a ready arm
/// parks and allocates nothing), then once where they park. An arm's future may therefore be
/// polled twice in a row, which futures must tolerate anyway.
///
/// # Examples
///
/// ```
/// use gort::chan::{bounded, select};
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
/// use gort::chan::{bounded, select};
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
/// Guards, `biased;`, refutable patterns, `else`, and a nil-channel arm:
///
/// ```
/// use gort::chan::{select, unbounded, Receiver};
///
/// futures::executor::block_on(async {
///     let (tx_a, rx_a) = unbounded::<u32>();
///     let (tx_b, rx_b) = unbounded::<u32>();
///     tx_a.try_send(1).unwrap();
///     tx_b.try_send(2).unwrap();
///     drop((tx_a, tx_b)); // both close once drained
///
///     // Go's merge loop: a drained channel is turned off by setting it to None.
///     let (mut a, mut b): (Option<&Receiver<u32>>, Option<&Receiver<u32>>) =
///         (Some(&rx_a), Some(&rx_b));
///     let mut sum = 0;
///     while a.is_some() || b.is_some() {
///         select! {
///             v = a => match v { Some(v) => sum += v, None => a = None },
///             v = b => match v { Some(v) => sum += v, None => b = None },
///         }
///     }
///     assert_eq!(sum, 3);
///
///     // Refutable patterns disable closed channels' arms; `else` runs when none is left.
///     let budget = 0;
///     let got = select! {
///         biased;
///         Some(v) = rx_a.recv() => v,
///         Some(v) = rx_b.recv(), if budget > 0 => v,
///         else => 0,
///     };
///     assert_eq!(got, 0);
/// });
/// ```
///
/// A malformed select is a compile error that says what was expected; `biased;` must come
/// first:
///
/// ```compile_fail
/// # futures::executor::block_on(async {
/// let (_tx, rx) = gort::chan::unbounded::<u32>();
/// gort::select! {
///     v = rx.recv() => drop(v),
///     biased; // error: `biased;` must come before the first arm
/// }
/// # });
/// ```
///
/// ```compile_fail
/// # futures::executor::block_on(async {
/// let (_tx, rx) = gort::chan::unbounded::<u32>();
/// gort::select! {
///     rx.recv() => {} // error: an arm is `pattern = future => body`
/// }
/// # });
/// ```
#[macro_export]
macro_rules! select {
    (biased; $($tokens:tt)*) => {
        $crate::__select_parse!(@biased [true] @arms [] @default [] @else [] @rest $($tokens)*)
    };
    ($($tokens:tt)*) => {
        $crate::__select_parse!(@biased [false] @arms [] @default [] @else [] @rest $($tokens)*)
    };
}

/// Parses the arms into `[(pattern) (expression) (guard) (body)]` groups, `default` and
/// `else` into their own lists, then hands everything to `__select_expand!`.
#[doc(hidden)]
#[macro_export]
macro_rules! __select_parse {
    // Every arm parsed.
    (@biased $b:tt @arms [$($arms:tt)*] @default $d:tt @else $e:tt @rest) => {
        $crate::__select_expand!($b $d $e $($arms)*)
    };
    // `default`
    (@biased $b:tt @arms $a:tt @default [$($d:tt)+] @else $e:tt @rest default $($rest:tt)*) => {
        ::core::compile_error!("select! takes at most one `default` arm")
    };
    (@biased $b:tt @arms $a:tt @default [] @else $e:tt @rest
        default => $body:block $(, $($rest:tt)*)?) => {
        $crate::__select_parse!(@biased $b @arms $a @default [$body] @else $e
            @rest $($($rest)*)?)
    };
    (@biased $b:tt @arms $a:tt @default [] @else $e:tt @rest
        default => $body:expr $(, $($rest:tt)*)?) => {
        $crate::__select_parse!(@biased $b @arms $a @default [$body] @else $e
            @rest $($($rest)*)?)
    };
    // `else`
    (@biased $b:tt @arms $a:tt @default $d:tt @else [$($e:tt)+] @rest else $($rest:tt)*) => {
        ::core::compile_error!("select! takes at most one `else` arm")
    };
    (@biased $b:tt @arms $a:tt @default $d:tt @else [] @rest
        else => $body:block $(, $($rest:tt)*)?) => {
        $crate::__select_parse!(@biased $b @arms $a @default $d @else [$body]
            @rest $($($rest)*)?)
    };
    (@biased $b:tt @arms $a:tt @default $d:tt @else [] @rest
        else => $body:expr $(, $($rest:tt)*)?) => {
        $crate::__select_parse!(@biased $b @arms $a @default $d @else [$body]
            @rest $($($rest)*)?)
    };
    // `biased;` anywhere but first
    (@biased $b:tt @arms $a:tt @default $d:tt @else $e:tt @rest biased ; $($rest:tt)*) => {
        ::core::compile_error!("select!: `biased;` must come before the first arm")
    };
    // `pattern = expression, if guard => body`
    (@biased $b:tt @arms [$($arms:tt)*] @default $d:tt @else $e:tt @rest
        $p:pat = $f:expr, if $c:expr => $body:block $(, $($rest:tt)*)?) => {
        $crate::__select_parse!(@biased $b @arms [$($arms)* [($p) ($f) ($c) ($body)]]
            @default $d @else $e @rest $($($rest)*)?)
    };
    (@biased $b:tt @arms [$($arms:tt)*] @default $d:tt @else $e:tt @rest
        $p:pat = $f:expr, if $c:expr => $body:block $($rest:tt)*) => {
        $crate::__select_parse!(@biased $b @arms [$($arms)* [($p) ($f) ($c) ($body)]]
            @default $d @else $e @rest $($rest)*)
    };
    (@biased $b:tt @arms [$($arms:tt)*] @default $d:tt @else $e:tt @rest
        $p:pat = $f:expr, if $c:expr => $body:expr $(, $($rest:tt)*)?) => {
        $crate::__select_parse!(@biased $b @arms [$($arms)* [($p) ($f) ($c) ($body)]]
            @default $d @else $e @rest $($($rest)*)?)
    };
    // `pattern = expression => body`
    (@biased $b:tt @arms [$($arms:tt)*] @default $d:tt @else $e:tt @rest
        $p:pat = $f:expr => $body:block $(, $($rest:tt)*)?) => {
        $crate::__select_parse!(@biased $b @arms [$($arms)* [($p) ($f) (true) ($body)]]
            @default $d @else $e @rest $($($rest)*)?)
    };
    (@biased $b:tt @arms [$($arms:tt)*] @default $d:tt @else $e:tt @rest
        $p:pat = $f:expr => $body:block $($rest:tt)*) => {
        $crate::__select_parse!(@biased $b @arms [$($arms)* [($p) ($f) (true) ($body)]]
            @default $d @else $e @rest $($rest)*)
    };
    (@biased $b:tt @arms [$($arms:tt)*] @default $d:tt @else $e:tt @rest
        $p:pat = $f:expr => $body:expr $(, $($rest:tt)*)?) => {
        $crate::__select_parse!(@biased $b @arms [$($arms)* [($p) ($f) (true) ($body)]]
            @default $d @else $e @rest $($($rest)*)?)
    };
    // Anything else.
    (@biased $b:tt @arms $a:tt @default $d:tt @else $e:tt @rest $($rest:tt)+) => {
        ::core::compile_error!(
            "select!: expected `pattern = future => body` (with an optional `, if guard` \
             before the `=>`), `default => body` or `else => body`, arms separated by commas"
        )
    };
}

#[doc(hidden)]
#[macro_export]
macro_rules! __select_expand {
    ([$biased:expr] [$($default:tt)*] [$($else:tt)*]
        $([($p:pat) ($f:expr) ($c:expr) ($($body:tt)*)])*) => {{
        // The arms' futures live in this inner block, so they are dropped before a body runs.
        // A temporary that an arm's expression borrows ends with the `let` below (Tokio's
        // lets it live as long as the select): making it live longer cost 4% per select
        // (design/PERFORMANCE-LOG.md, "select! arms").
        let __gort_select_out = {
            #[allow(unused_imports)]
            use $crate::__private::{ArmViaFuture as _, ArmViaOption as _};
            let __gort_select_futs = $crate::__select_tuple!($(($c) ($f),)*);
            let __gort_select_arms = $crate::__select_arms!(__gort_select_futs; $(($p))*);
            let __gort_select_out = $crate::__private::select(
                __gort_select_arms,
                $crate::__private::Flags {
                    default: $crate::__select_has!($($default)*),
                    has_else: $crate::__select_has!($($else)*),
                    biased: $biased,
                },
            )
            .await;
            __gort_select_out
        };
        match __gort_select_out {
            $crate::__private::Out::Arm(__gort_select_out) => {
                $crate::__select_dispatch!(__gort_select_out $([($p) ($($body)*)])*)
            }
            $crate::__private::Out::Default => $crate::__select_body!(default $($default)*),
            $crate::__private::Out::Else => $crate::__select_body!(else $($else)*),
        }
    }};
}

/// `(pin!(guard(c0, f0)), (pin!(guard(c1, f1)), ... ()))`, pinned in place on the caller's
/// stack; each guard is evaluated just before its arm's expression.
#[doc(hidden)]
#[macro_export]
macro_rules! __select_tuple {
    () => { () };
    // Two arms per step (the same tuple as two single steps): halves the expansion depth, so
    // that Tokio's 64 arms fit the default recursion limit.
    (($c1:expr) ($f1:expr), ($c2:expr) ($f2:expr), $($rest:tt)*) => {
        (
            ::core::pin::pin!($crate::__private::guard(
                $c1,
                $crate::__private::ArmWrap::new($f1).__gort_select_arm(),
            )),
            (
                ::core::pin::pin!($crate::__private::guard(
                    $c2,
                    $crate::__private::ArmWrap::new($f2).__gort_select_arm(),
                )),
                $crate::__select_tuple!($($rest)*),
            ),
        )
    };
    (($c:expr) ($f:expr), $($rest:tt)*) => {
        (
            ::core::pin::pin!($crate::__private::guard(
                $c,
                $crate::__private::ArmWrap::new($f).__gort_select_arm(),
            )),
            $crate::__select_tuple!($($rest)*),
        )
    };
}

/// Pairs each pinned future with its pattern as a predicate (`match` on a reference to the
/// output, as Tokio does, so the output is not moved).
#[doc(hidden)]
#[macro_export]
macro_rules! __select_arms {
    ($futs:expr;) => { () };
    // Two arms per step (the same pairs as two single steps): halves the expansion depth.
    ($futs:expr; ($p1:pat) ($p2:pat) $($rest:tt)*) => {{
        let (__gort_fut, __gort_rest) = $futs;
        (
            $crate::__private::Arm::new(__gort_fut, |__gort_out| {
                #[allow(unused_variables, unused_mut, unreachable_patterns)]
                let __gort_accept = match __gort_out {
                    $p1 => true,
                    _ => false,
                };
                __gort_accept
            }),
            {
                let (__gort_fut, __gort_rest) = __gort_rest;
                (
                    $crate::__private::Arm::new(__gort_fut, |__gort_out| {
                        #[allow(unused_variables, unused_mut, unreachable_patterns)]
                        let __gort_accept = match __gort_out {
                            $p2 => true,
                            _ => false,
                        };
                        __gort_accept
                    }),
                    $crate::__select_arms!(__gort_rest; $($rest)*),
                )
            },
        )
    }};
    ($futs:expr; ($p:pat) $($rest:tt)*) => {{
        let (__gort_fut, __gort_rest) = $futs;
        (
            $crate::__private::Arm::new(__gort_fut, |__gort_out| {
                #[allow(unused_variables, unused_mut, unreachable_patterns)]
                let __gort_accept = match __gort_out {
                    $p => true,
                    _ => false,
                };
                __gort_accept
            }),
            $crate::__select_arms!(__gort_rest; $($rest)*),
        )
    }};
}

#[doc(hidden)]
#[macro_export]
macro_rules! __select_dispatch {
    ($out:ident) => {
        match $out {}
    };
    // Two arms per step (the same match as two single steps): halves the expansion depth.
    ($out:ident [($p1:pat) ($($body1:tt)*)] [($p2:pat) ($($body2:tt)*)] $($rest:tt)*) => {
        match $out {
            $crate::__private::Either::Left($p1) => { $($body1)* }
            #[allow(unreachable_patterns)]
            $crate::__private::Either::Left(_) => {
                ::core::unreachable!("select! chose an arm whose pattern did not match")
            }
            $crate::__private::Either::Right($crate::__private::Either::Left($p2)) => {
                $($body2)*
            }
            #[allow(unreachable_patterns)]
            $crate::__private::Either::Right($crate::__private::Either::Left(_)) => {
                ::core::unreachable!("select! chose an arm whose pattern did not match")
            }
            $crate::__private::Either::Right($crate::__private::Either::Right($out)) => {
                $crate::__select_dispatch!($out $($rest)*)
            }
        }
    };
    ($out:ident [($p:pat) ($($body:tt)*)] $($rest:tt)*) => {
        match $out {
            $crate::__private::Either::Left($p) => { $($body)* }
            #[allow(unreachable_patterns)]
            $crate::__private::Either::Left(_) => {
                ::core::unreachable!("select! chose an arm whose pattern did not match")
            }
            $crate::__private::Either::Right($out) => $crate::__select_dispatch!($out $($rest)*),
        }
    };
}

#[doc(hidden)]
#[macro_export]
macro_rules! __select_has {
    () => {
        false
    };
    ($($tokens:tt)+) => {
        true
    };
}

#[doc(hidden)]
#[macro_export]
macro_rules! __select_body {
    ($kind:tt) => {
        ::core::unreachable!(::core::concat!("select! without `", ::core::stringify!($kind), "` resolved to it"))
    };
    ($kind:tt $($body:tt)+) => {
        $($body)+
    };
}
