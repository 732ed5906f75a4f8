//! Tokio's `tests/macros_select.rs`, ported to `gort::select!`: each test keeps its Tokio name
//! and a comment naming its file, and runs under a watchdog (a `#[tokio::test]` body is a task
//! on a gort runtime of 1 P; `tokio_test::task::spawn` is the hand-polled `mock`). Tokio's
//! `oneshot` futures are used as arms where Tokio's tests use them: gort's `select!` takes any
//! future.
//!
//! gort-specific cases (losers dropped, a timer arm in a loop, `default`) are in
//! tests/tokio_macros_select_more.rs.
//!
//! Skipped, where gort deliberately differs (rustdoc of `gort::select!`):
//! - `struct_size_*`: the size of a select's future is not part of gort's contract;
//! - `deterministic_select_*` (`tokio_unstable` RNG seeds): gort's order is Go's, random;
//! - the `mut` and `ref mut` cases of `mut_ref_patterns` (`Some(mut foo)`, `Some(ref mut
//!   foo)` of a `String`): gort matches a shared reference to the output first, so a `mut`
//!   binding of a non-`Copy` value in a refutable pattern does not compile (documented), nor
//!   does `ref mut` (Tokio strips `mut`/`ref` from the pattern with a proc macro); its `ref`
//!   case is ported;
//! - `temporary_lifetime_extension` (Tokio #6721, `() = &mut std::future::ready(())`): a
//!   temporary an arm's expression borrows ends before gort's select waits (documented on
//!   `gort::select!`; extending it cost 4% per select, design/CHANNELS.md);
//! - `default_numeric_fallback` (a clippy lint check, no behaviour).

#[path = "support/mock_task.rs"]
mod mock_task;
mod support;

use gort::select;
use mock_task::mock;
use std::future::poll_fn;
use std::pin::pin;
use std::task::Poll::{self, Ready};
use std::time::Duration;
// A `#[tokio::test]` body: a task on a runtime of 1 P, under the watchdog.
use support::{task_on_one_p as rt, within};
use tokio::sync::oneshot;

async fn one() -> usize {
    1
}
async fn require_mutable(_: &mut i32) {}
async fn async_noop() {}
async fn async_never() -> ! {
    futures::future::pending().await
}

// macros_select.rs
#[test]
fn sync_one_lit_expr_comma() {
    rt(|| async {
        let foo = select! {
            foo = async { 1 } => foo,
        };
        assert_eq!(foo, 1);
    });
}

// macros_select.rs
#[test]
fn no_branch_else_only() {
    rt(|| async {
        let foo = select! {
            else => 1,
        };
        assert_eq!(foo, 1);
    });
}

// macros_select.rs
#[test]
fn no_branch_else_only_biased() {
    rt(|| async {
        let foo = select! {
            biased;
            else => 1,
        };
        assert_eq!(foo, 1);
    });
}

// macros_select.rs
#[test]
fn nested_one() {
    rt(|| async {
        let foo = select! {
            foo = async { 1 } => select! {
                bar = async { foo } => bar,
            },
        };
        assert_eq!(foo, 1);
    });
}

// macros_select.rs
#[test]
fn sync_one_lit_expr_no_comma() {
    rt(|| async {
        let foo = select! {
            foo = async { 1 } => foo
        };
        assert_eq!(foo, 1);
    });
}

// macros_select.rs
#[test]
fn sync_one_lit_expr_block() {
    rt(|| async {
        let foo = select! {
            foo = async { 1 } => { foo }
        };
        assert_eq!(foo, 1);
    });
}

// macros_select.rs
#[test]
fn sync_one_await() {
    rt(|| async {
        let foo = select! {
            foo = one() => foo,
        };
        assert_eq!(foo, 1);
    });
}

// macros_select.rs
#[test]
fn sync_one_ident() {
    rt(|| async {
        let one = one();
        let foo = select! {
            foo = one => foo,
        };
        assert_eq!(foo, 1);
    });
}

// macros_select.rs (the arms borrow a `Cell`: the select runs in `block_on`, off the task)
#[test]
fn sync_two() {
    use std::cell::Cell;
    within(|| {
        futures::executor::block_on(async {
            let cnt = Cell::new(0);
            let res = select! {
                foo = async {
                    cnt.set(cnt.get() + 1);
                    1
                } => foo,
                bar = async {
                    cnt.set(cnt.get() + 1);
                    2
                } => bar,
            };
            assert_eq!(1, cnt.get());
            assert!(res == 1 || res == 2);
        })
    });
}

// macros_select.rs
#[test]
fn drop_in_fut() {
    rt(|| async {
        let s = "hello".to_string();
        let res = select! {
            foo = async {
                let v = one().await;
                drop(s);
                v
            } => foo
        };
        assert_eq!(res, 1);
    });
}

// macros_select.rs
#[test]
fn one_ready() {
    rt(|| async {
        let (tx1, rx1) = oneshot::channel::<i32>();
        let (_tx2, rx2) = oneshot::channel::<i32>();
        tx1.send(1).unwrap();
        let v = select! {
            res = rx1 => res.unwrap(),
            _ = rx2 => unreachable!(),
        };
        assert_eq!(1, v);
    });
}

// macros_select.rs (with gort channels: `Some(x) = rx.recv()` disables a closed channel's arm)
#[test]
fn select_streams() {
    rt(|| async {
        let (tx1, rx1) = gort::chan::unbounded::<i32>();
        let (tx2, rx2) = gort::chan::unbounded::<i32>();
        gort::spawn(async move {
            tx2.try_send(1).unwrap();
            gort::task::yield_now().await;
            tx1.try_send(2).unwrap();
            gort::task::yield_now().await;
            tx2.try_send(3).unwrap();
            gort::task::yield_now().await;
            drop((tx1, tx2));
        });
        let mut rem = true;
        let mut msgs = vec![];
        while rem {
            select! {
                Some(x) = rx1.recv() => msgs.push(x),
                Some(y) = rx2.recv() => msgs.push(y),
                else => rem = false,
            }
        }
        msgs.sort_unstable();
        assert_eq!(&msgs[..], &[1, 2, 3]);
    });
}

// macros_select.rs
#[test]
fn move_uncompleted_futures() {
    rt(|| async {
        let (tx1, mut rx1) = oneshot::channel::<i32>();
        let (tx2, mut rx2) = oneshot::channel::<i32>();
        tx1.send(1).unwrap();
        tx2.send(2).unwrap();
        let ran;
        select! {
            res = &mut rx1 => {
                assert_eq!(1, res.unwrap());
                assert_eq!(2, rx2.await.unwrap());
                ran = true;
            },
            res = &mut rx2 => {
                assert_eq!(2, res.unwrap());
                assert_eq!(1, rx1.await.unwrap());
                ran = true;
            },
        }
        assert!(ran);
    });
}

// macros_select.rs
#[test]
fn nested() {
    rt(|| async {
        let res = select! {
            x = async { 1 } => {
                select! {
                    y = async { 2 } => x + y,
                }
            }
        };
        assert_eq!(res, 3);
    });
}

// macros_select.rs
#[test]
fn mutable_borrowing_future_with_same_borrow_in_block() {
    rt(|| async {
        let mut value = 234;
        select! {
            _ = require_mutable(&mut value) => { },
            _ = async_noop() => {
                value += 5;
            },
        }
        assert!(value >= 234);
    });
}

// macros_select.rs
#[test]
fn mutable_borrowing_future_with_same_borrow_in_block_and_else() {
    rt(|| async {
        let mut value = 234;
        select! {
            _ = require_mutable(&mut value) => { },
            _ = async_noop() => {
                value += 5;
            },
            else => {
                value += 27;
            },
        }
        assert!(value >= 234);
    });
}

// macros_select.rs
#[test]
fn future_panics_after_poll() {
    within(|| {
        let (tx, rx) = oneshot::channel();
        let mut polled = false;
        let f = poll_fn(|_| {
            assert!(!polled);
            polled = true;
            Ready(None::<()>)
        });
        let mut f = mock(async {
            select! {
                Some(_) = f => unreachable!(),
                ret = rx => ret.unwrap(),
            }
        });
        assert!(f.poll().is_pending());
        assert!(f.poll().is_pending());
        tx.send(1).unwrap();
        assert_eq!(f.poll(), Ready(1));
    });
}

// macros_select.rs
#[test]
fn disable_with_if() {
    within(|| {
        let f = poll_fn(|_| -> Poll<()> { panic!() });
        let (tx, rx) = oneshot::channel();
        let mut f = mock(async {
            select! {
                _ = f, if false => unreachable!(),
                _ = rx => (),
            }
        });
        assert!(f.poll().is_pending());
        tx.send(()).unwrap();
        assert!(f.is_woken());
        assert!(f.poll().is_ready());
    });
}

// macros_select.rs
#[test]
fn join_with_select() {
    within(|| {
        let (tx1, mut rx1) = oneshot::channel();
        let (tx2, mut rx2) = oneshot::channel();
        let mut f = mock(async {
            let mut a = None;
            let mut b = None;
            while a.is_none() || b.is_none() {
                select! {
                    v1 = &mut rx1, if a.is_none() => a = Some(v1.unwrap()),
                    v2 = &mut rx2, if b.is_none() => b = Some(v2.unwrap())
                }
            }
            (a.unwrap(), b.unwrap())
        });
        assert!(f.poll().is_pending());
        tx1.send(123).unwrap();
        assert!(f.is_woken());
        assert!(f.poll().is_pending());
        tx2.send(456).unwrap();
        assert!(f.is_woken());
        assert_eq!(f.poll(), Ready((123, 456)));
    });
}

// macros_select.rs
#[test]
fn use_future_in_if_condition() {
    rt(|| async {
        select! {
            _ = gort::time::sleep(Duration::from_millis(10)), if false => {
                panic!("if condition ignored")
            }
            _ = async { 1u32 } => {}
        }
    });
}

// macros_select.rs
#[test]
fn use_future_in_if_condition_biased() {
    rt(|| async {
        select! {
            biased;
            _ = gort::time::sleep(Duration::from_millis(10)), if false => {
                panic!("if condition ignored")
            }
            _ = async { 1u32 } => {}
        }
    });
}

// macros_select.rs
#[test]
fn many_branches() {
    rt(|| async {
        let num = select! {
            x = async { 1 } => x, x = async { 1 } => x, x = async { 1 } => x,
            x = async { 1 } => x, x = async { 1 } => x, x = async { 1 } => x,
            x = async { 1 } => x, x = async { 1 } => x, x = async { 1 } => x,
            x = async { 1 } => x, x = async { 1 } => x, x = async { 1 } => x,
            x = async { 1 } => x, x = async { 1 } => x, x = async { 1 } => x,
            x = async { 1 } => x, x = async { 1 } => x, x = async { 1 } => x,
            x = async { 1 } => x, x = async { 1 } => x, x = async { 1 } => x,
            x = async { 1 } => x, x = async { 1 } => x, x = async { 1 } => x,
            x = async { 1 } => x, x = async { 1 } => x, x = async { 1 } => x,
            x = async { 1 } => x, x = async { 1 } => x, x = async { 1 } => x,
            x = async { 1 } => x, x = async { 1 } => x, x = async { 1 } => x,
            x = async { 1 } => x, x = async { 1 } => x, x = async { 1 } => x,
            x = async { 1 } => x, x = async { 1 } => x, x = async { 1 } => x,
            x = async { 1 } => x, x = async { 1 } => x, x = async { 1 } => x,
            x = async { 1 } => x, x = async { 1 } => x, x = async { 1 } => x,
            x = async { 1 } => x, x = async { 1 } => x, x = async { 1 } => x,
            x = async { 1 } => x, x = async { 1 } => x, x = async { 1 } => x,
            x = async { 1 } => x, x = async { 1 } => x, x = async { 1 } => x,
            x = async { 1 } => x, x = async { 1 } => x, x = async { 1 } => x,
            x = async { 1 } => x, x = async { 1 } => x, x = async { 1 } => x,
            x = async { 1 } => x,
        };
        assert_eq!(1, num);
    });
}

// macros_select.rs
#[test]
fn never_branch_no_warnings() {
    rt(|| async {
        let t = select! {
            _ = async_never() => 0,
            one_async_ready = one() => one_async_ready,
        };
        assert_eq!(t, 1);
    });
}

// macros_select.rs
#[test]
fn mut_on_left_hand_side() {
    rt(|| async {
        let v = async move {
            let mut ok = pin!(async { 1 });
            select! {
                mut a = &mut ok => {
                    a += 1;
                    a
                }
            }
        }
        .await;
        assert_eq!(v, 2);
    });
}

// macros_select.rs
#[test]
fn biased_one_not_ready() {
    rt(|| async {
        let (_tx1, rx1) = oneshot::channel::<i32>();
        let (tx2, rx2) = oneshot::channel::<i32>();
        let (tx3, rx3) = oneshot::channel::<i32>();
        tx2.send(2).unwrap();
        tx3.send(3).unwrap();
        let v = select! {
            biased;
            _ = rx1 => unreachable!(),
            res = rx2 => res.unwrap(),
            _ = rx3 => panic!("`rx2` is polled before `rx3` under `biased;`"),
        };
        assert_eq!(2, v);
    });
}

// macros_select.rs
#[test]
fn biased_eventually_ready() {
    rt(|| async {
        use gort::task::yield_now;
        let mut one = pin!(async {});
        let mut two = pin!(async { yield_now().await });
        let mut three = pin!(async { yield_now().await });
        let mut count = 0u8;
        loop {
            select! {
                biased;
                _ = &mut two, if count < 2 => {
                    count += 1;
                    assert_eq!(count, 2);
                }
                _ = &mut three, if count < 3 => {
                    count += 1;
                    assert_eq!(count, 3);
                }
                _ = &mut one, if count < 1 => {
                    count += 1;
                    assert_eq!(count, 1);
                }
                else => break,
            }
        }
        assert_eq!(count, 3);
    });
}

// macros_select.rs (the `ref` case; see the module comment for `mut` and `ref mut`)
#[test]
fn mut_ref_patterns() {
    rt(|| async {
        select! {
            Some(ref foo) = async { Some("1".to_string()) } => {
                assert_eq!(*foo, "1");
            },
        };
    });
}

// macros_select.rs
#[test]
fn select_into_future() {
    struct NotAFuture;
    impl std::future::IntoFuture for NotAFuture {
        type Output = ();
        type IntoFuture = std::future::Ready<()>;
        fn into_future(self) -> Self::IntoFuture {
            std::future::ready(())
        }
    }
    rt(|| async {
        select! {
            () = NotAFuture => {},
        }
    });
}

// macros_select.rs
#[test]
fn select_is_budget_aware() {
    rt(|| async {
        const BUDGET: usize = 128;
        let task = || {
            Box::pin(async move {
                select! {
                    biased;
                    () = gort::task::consume_budget() => {},
                    () = std::future::ready(()) => {}
                }
            })
        };
        let mut ready = 0;
        while futures::poll!(&mut task()).is_ready() {
            ready += 1;
            assert!(ready <= BUDGET, "the budget never ran out");
        }
        assert_eq!(ready, BUDGET);
    });
}
