//! Tokio's `async_send_sync.rs` and `unwindsafe.rs`, ported to gort: the auto traits (`Send`,
//! `Sync`, `Unpin`, `UnwindSafe`, `RefUnwindSafe`) of gort's public types and of the futures
//! its async functions return, checked at compile time with Tokio's own macros: a type said to
//! be `Send` that is not fails to compile (`require_send`), and so does one said to be `!Send`
//! that is (`AmbiguousIfSend`: two impls apply). Where gort has Tokio's API the expectations are
//! Tokio's (its `TcpStream::connect` future is `Send & Sync & !Unpin`, so is gort's); gort's own
//! types (channels, `Timer`, `Ticker`, `context`, `sync`) hold the same rule: values and
//! futures are `Send` and `Sync` when what they carry is. gort's named futures (`Sleep`,
//! `RecvFuture`, `SendFuture`, `Timeout` of an `Unpin` future) are `Unpin`, where Tokio's
//! `Sleep` is not: gort's sleep keeps its timer behind a pointer, so moving it after a poll
//! is safe, and the checks below say so.
//!
//! Skipped (gort has no such API): `fs`, `process`, `io` utilities (gort's sockets implement
//! tokio's traits under `tokio-io`; the `io` futures are Tokio's own), `sync` (gort runs
//! `tokio::sync` unchanged; its channels are checked here instead), `LocalSet`, `LocalKey`,
//! `LocalRuntime`, `AsyncFd`, `TcpSocket`, readiness (`readable`, `ready`, `writable`) and
//! `peek` (gort's sockets are Go's: deadlines instead of readiness).
#![allow(clippy::type_complexity, clippy::diverging_sub_expression, dead_code)]

use std::cell::Cell;
use std::net::SocketAddr;
use std::panic::{RefUnwindSafe, UnwindSafe};
use std::rc::Rc;
use std::time::Duration;

use gort::time::Instant;

// Send: Yes, Sync: Yes
#[derive(Clone)]
struct YY {}

// Send: Yes, Sync: No
#[derive(Clone)]
struct YN {
    _value: Cell<u8>,
}

// Send: No, Sync: No
#[derive(Clone)]
struct NN {
    _value: Rc<u8>,
}

type BoxFutureSync<T> = std::pin::Pin<Box<dyn std::future::Future<Output = T> + Send + Sync>>;
type BoxFutureSend<T> = std::pin::Pin<Box<dyn std::future::Future<Output = T> + Send>>;
type BoxFuture<T> = std::pin::Pin<Box<dyn std::future::Future<Output = T>>>;

fn require_send<T: Send>(_t: &T) {}
fn require_sync<T: Sync>(_t: &T) {}
fn require_unpin<T: Unpin>(_t: &T) {}

struct Invalid;

trait AmbiguousIfSend<A> {
    fn some_item(&self) {}
}
impl<T: ?Sized> AmbiguousIfSend<()> for T {}
impl<T: ?Sized + Send> AmbiguousIfSend<Invalid> for T {}

trait AmbiguousIfSync<A> {
    fn some_item(&self) {}
}
impl<T: ?Sized> AmbiguousIfSync<()> for T {}
impl<T: ?Sized + Sync> AmbiguousIfSync<Invalid> for T {}

trait AmbiguousIfUnpin<A> {
    fn some_item(&self) {}
}
impl<T: ?Sized> AmbiguousIfUnpin<()> for T {}
impl<T: ?Sized + Unpin> AmbiguousIfUnpin<Invalid> for T {}

macro_rules! into_todo {
    ($typ:ty) => {{
        let x: $typ = todo!();
        x
    }};
}

macro_rules! async_assert_fn_send {
    (Send & $(!)?Sync & $(!)?Unpin, $value:expr) => {
        require_send(&$value);
    };
    (!Send & $(!)?Sync & $(!)?Unpin, $value:expr) => {
        AmbiguousIfSend::some_item(&$value);
    };
}
macro_rules! async_assert_fn_sync {
    ($(!)?Send & Sync & $(!)?Unpin, $value:expr) => {
        require_sync(&$value);
    };
    ($(!)?Send & !Sync & $(!)?Unpin, $value:expr) => {
        AmbiguousIfSync::some_item(&$value);
    };
}
macro_rules! async_assert_fn_unpin {
    ($(!)?Send & $(!)?Sync & Unpin, $value:expr) => {
        require_unpin(&$value);
    };
    ($(!)?Send & $(!)?Sync & !Unpin, $value:expr) => {
        AmbiguousIfUnpin::some_item(&$value);
    };
}

/// The future (or value) `f(args)` returns has the listed traits.
macro_rules! async_assert_fn {
    ($($f:ident $(< $($generic:ty),* > )? )::+($($arg:ty),*): $($tok:tt)*) => {
        #[allow(unreachable_code)]
        #[allow(unused_variables)]
        const _: fn() = || {
            let f = $($f $(::<$($generic),*>)? )::+( $( into_todo!($arg) ),* );
            async_assert_fn_send!($($tok)*, f);
            async_assert_fn_sync!($($tok)*, f);
            async_assert_fn_unpin!($($tok)*, f);
        };
    };
}

/// A value of `$type` has the listed traits.
macro_rules! assert_value {
    ($type:ty: $($tok:tt)*) => {
        #[allow(unreachable_code)]
        #[allow(unused_variables)]
        const _: fn() = || {
            let f: $type = todo!();
            async_assert_fn_send!($($tok)*, f);
            async_assert_fn_sync!($($tok)*, f);
            async_assert_fn_unpin!($($tok)*, f);
        };
    };
}

mod net {
    use super::*;
    use gort::net::*;

    assert_value!(TcpListener: Send & Sync & Unpin);
    assert_value!(TcpStream: Send & Sync & Unpin);
    assert_value!(OwnedReadHalf: Send & Sync & Unpin);
    assert_value!(OwnedWriteHalf: Send & Sync & Unpin);
    assert_value!(ReadHalf<'_>: Send & Sync & Unpin);
    assert_value!(WriteHalf<'_>: Send & Sync & Unpin);
    assert_value!(ReuniteError: Send & Sync & Unpin);
    async_assert_fn!(TcpListener::bind(SocketAddr): Send & Sync & !Unpin);
    async_assert_fn!(TcpListener::bind(&'static str): Send & Sync & !Unpin);
    async_assert_fn!(TcpListener::accept(_): Send & Sync & !Unpin);
    async_assert_fn!(TcpStream::connect(SocketAddr): Send & Sync & !Unpin);
    async_assert_fn!(TcpStream::read(_, &mut [u8]): Send & Sync & !Unpin);
    async_assert_fn!(TcpStream::read_exact(_, &mut [u8]): Send & Sync & !Unpin);
    async_assert_fn!(TcpStream::write(_, &[u8]): Send & Sync & !Unpin);
    async_assert_fn!(TcpStream::write_all(_, &[u8]): Send & Sync & !Unpin);
    async_assert_fn!(OwnedReadHalf<TcpStream>::read(_, &mut [u8]): Send & Sync & !Unpin);
    async_assert_fn!(OwnedReadHalf<TcpStream>::read_exact(_, &mut [u8]): Send & Sync & !Unpin);
    async_assert_fn!(OwnedWriteHalf<TcpStream>::write(_, &[u8]): Send & Sync & !Unpin);
    async_assert_fn!(OwnedWriteHalf<TcpStream>::write_all(_, &[u8]): Send & Sync & !Unpin);
    async_assert_fn!(read_half_read(&ReadHalf<'static>, &mut [u8]): Send & Sync & !Unpin);
    async_assert_fn!(write_half_write_all(&WriteHalf<'static>, &[u8]): Send & Sync & !Unpin);

    async fn read_half_read(h: &ReadHalf<'_>, buf: &mut [u8]) -> std::io::Result<usize> {
        h.read(buf).await
    }

    async fn write_half_write_all(h: &WriteHalf<'_>, buf: &[u8]) -> std::io::Result<()> {
        h.write_all(buf).await
    }

    assert_value!(UdpSocket: Send & Sync & Unpin);
    async_assert_fn!(UdpSocket::bind(SocketAddr): Send & Sync & !Unpin);
    async_assert_fn!(UdpSocket::connect(_, SocketAddr): Send & Sync & !Unpin);
    async_assert_fn!(UdpSocket::recv(_, &mut [u8]): Send & Sync & !Unpin);
    async_assert_fn!(UdpSocket::recv_from(_, &mut [u8]): Send & Sync & !Unpin);
    async_assert_fn!(UdpSocket::send(_, &[u8]): Send & Sync & !Unpin);
    async_assert_fn!(UdpSocket::send_to(_, &[u8], SocketAddr): Send & Sync & !Unpin);

    assert_value!(UnixDatagram: Send & Sync & Unpin);
    assert_value!(UnixListener: Send & Sync & Unpin);
    assert_value!(UnixStream: Send & Sync & Unpin);
    assert_value!(OwnedReadHalf<UnixStream>: Send & Sync & Unpin);
    assert_value!(OwnedWriteHalf<UnixStream>: Send & Sync & Unpin);
    assert_value!(ReadHalf<'_, UnixStream>: Send & Sync & Unpin);
    assert_value!(WriteHalf<'_, UnixStream>: Send & Sync & Unpin);
    assert_value!(ReuniteError<UnixStream>: Send & Sync & Unpin);
    async_assert_fn!(UnixDatagram::recv(_, &mut [u8]): Send & Sync & !Unpin);
    async_assert_fn!(UnixDatagram::recv_from(_, &mut [u8]): Send & Sync & !Unpin);
    async_assert_fn!(UnixDatagram::send(_, &[u8]): Send & Sync & !Unpin);
    async_assert_fn!(UnixDatagram::send_to(_, &[u8], &str): Send & Sync & !Unpin);
    async_assert_fn!(UnixListener::accept(_): Send & Sync & !Unpin);
    async_assert_fn!(UnixStream::connect(&str): Send & Sync & !Unpin);
    async_assert_fn!(UnixStream::read(_, &mut [u8]): Send & Sync & !Unpin);
    async_assert_fn!(UnixStream::write_all(_, &[u8]): Send & Sync & !Unpin);
}

mod signal {
    use super::*;

    assert_value!(gort::signal::Signal: Send & Sync & Unpin);
    async_assert_fn!(gort::signal::ctrl_c(): Send & Sync & !Unpin);
    async_assert_fn!(gort::signal::notify(&[gort::signal::Signal]): Send & Sync & Unpin);
}

mod task {
    use super::*;
    use gort::task::*;

    assert_value!(JoinError: Send & Sync & Unpin);
    // A `JoinHandle<T>` (and a `JoinSet<T>`) exists only for a `T: Send` output (`spawn`
    // asks for one), so it is `Send + Sync` whatever `T` (gort-sched's `join.rs` says so),
    // where Tokio's follows `T`: gort's `JoinHandle<NN>` cannot be made, yet is `Send`.
    assert_value!(JoinHandle<NN>: Send & Sync & Unpin);
    assert_value!(JoinHandle<YN>: Send & Sync & Unpin);
    assert_value!(JoinHandle<YY>: Send & Sync & Unpin);
    assert_value!(JoinSet<NN>: Send & Sync & Unpin);
    assert_value!(JoinSet<YN>: Send & Sync & Unpin);
    assert_value!(JoinSet<YY>: Send & Sync & Unpin);
    assert_value!(AbortHandle: Send & Sync & Unpin);
    assert_value!(Id: Send & Sync & Unpin);
    async_assert_fn!(JoinSet<Cell<u32>>::join_next(_): Send & Sync & !Unpin);
    async_assert_fn!(JoinSet<Cell<u32>>::shutdown(_): Send & Sync & !Unpin);
    async_assert_fn!(JoinSet<Rc<u32>>::join_next(_): Send & Sync & !Unpin);
    async_assert_fn!(JoinSet<Rc<u32>>::shutdown(_): Send & Sync & !Unpin);
    async_assert_fn!(JoinSet<u32>::join_next(_): Send & Sync & !Unpin);
    async_assert_fn!(JoinSet<u32>::shutdown(_): Send & Sync & !Unpin);
    async_assert_fn!(JoinSet<u32>::join_all(_): Send & Sync & !Unpin);
    async_assert_fn!(unconstrained(BoxFuture<()>): !Send & !Sync & Unpin);
    async_assert_fn!(unconstrained(BoxFutureSend<()>): Send & !Sync & Unpin);
    async_assert_fn!(unconstrained(BoxFutureSync<()>): Send & Sync & Unpin);
    async_assert_fn!(yield_now(): Send & Sync & !Unpin);
    async_assert_fn!(consume_budget(): Send & Sync & !Unpin);
}

mod runtime {
    use super::*;
    use gort::runtime::*;

    assert_value!(Builder: Send & Sync & Unpin);
    assert_value!(EnterGuard<'_>: !Send & Sync & Unpin);
    assert_value!(Handle: Send & Sync & Unpin);
    assert_value!(Runtime: Send & Sync & Unpin);
    assert_value!(Metrics: Send & Sync & Unpin);
    assert_value!(TryCurrentError: Send & Sync & Unpin);
}

mod time {
    use super::*;
    use gort::time::*;

    assert_value!(Interval: Send & Sync & Unpin);
    assert_value!(Instant: Send & Sync & Unpin);
    assert_value!(Sleep: Send & Sync & Unpin);
    assert_value!(Timeout<BoxFutureSync<()>>: Send & Sync & Unpin);
    assert_value!(Timeout<BoxFutureSend<()>>: Send & !Sync & Unpin);
    assert_value!(Timeout<BoxFuture<()>>: !Send & !Sync & Unpin);
    assert_value!(Elapsed: Send & Sync & Unpin);
    assert_value!(Timer: Send & Sync & Unpin);
    assert_value!(Ticker: Send & Sync & Unpin);
    assert_value!(TickerError: Send & Sync & Unpin);
    assert_value!(AfterFunc: Send & Sync & Unpin);
    assert_value!(MissedTickBehavior: Send & Sync & Unpin);
    assert_value!(rate::Limiter: Send & Sync & Unpin);
    assert_value!(rate::Reservation<'_>: Send & Sync & Unpin);
    assert_value!(rate::WaitError: Send & Sync & Unpin);
    async_assert_fn!(advance(Duration): Send & Sync & !Unpin);
    async_assert_fn!(sleep(Duration): Send & Sync & Unpin);
    async_assert_fn!(sleep_until(Instant): Send & Sync & Unpin);
    async_assert_fn!(timeout(Duration, BoxFutureSync<()>): Send & Sync & Unpin);
    async_assert_fn!(timeout(Duration, BoxFutureSend<()>): Send & !Sync & Unpin);
    async_assert_fn!(timeout(Duration, BoxFuture<()>): !Send & !Sync & Unpin);
    async_assert_fn!(timeout_at(Instant, BoxFutureSync<()>): Send & Sync & Unpin);
    async_assert_fn!(timeout_at(Instant, BoxFutureSend<()>): Send & !Sync & Unpin);
    async_assert_fn!(timeout_at(Instant, BoxFuture<()>): !Send & !Sync & Unpin);
    async_assert_fn!(Interval::tick(_): Send & Sync & !Unpin);
    async_assert_fn!(rate::Limiter::wait(_): Send & Sync & !Unpin);
    async_assert_fn!(rate::Limiter::wait_n(_, u32): Send & Sync & !Unpin);
    async_assert_fn!(rate::Limiter::wait_deadline(_, u32, Instant): Send & Sync & !Unpin);
    async_assert_fn!(
        rate::Limiter::wait_ctx(_, &gort::context::Context, u32): Send & Sync & !Unpin
    );
}

mod chan {
    use super::*;
    use gort::chan::*;

    assert_value!(Receiver<NN>: !Send & !Sync & Unpin);
    assert_value!(Receiver<YN>: Send & Sync & Unpin);
    assert_value!(Receiver<YY>: Send & Sync & Unpin);
    assert_value!(Sender<NN>: !Send & !Sync & Unpin);
    assert_value!(Sender<YN>: Send & Sync & Unpin);
    assert_value!(Sender<YY>: Send & Sync & Unpin);
    assert_value!(SendError<YN>: Send & !Sync & Unpin);
    assert_value!(TrySendError<YY>: Send & Sync & Unpin);
    assert_value!(TryRecvError: Send & Sync & Unpin);
    async_assert_fn!(Receiver<NN>::recv(_): !Send & !Sync & Unpin);
    async_assert_fn!(Receiver<YN>::recv(_): Send & Sync & Unpin);
    async_assert_fn!(Receiver<YY>::recv(_): Send & Sync & Unpin);
    async_assert_fn!(Sender<NN>::send(_, NN): !Send & !Sync & Unpin);
    async_assert_fn!(Sender<YN>::send(_, YN): Send & !Sync & Unpin);
    async_assert_fn!(Sender<YY>::send(_, YY): Send & Sync & Unpin);
    async_assert_fn!(gort::time::Timer::new(Duration): Send & Sync & Unpin);
    async_assert_fn!(timer_recv(&gort::time::Timer): Send & Sync & Unpin);

    /// A timer's receive, as a `select!` arm or an `.await` takes it.
    fn timer_recv(timer: &gort::time::Timer) -> RecvFuture<'_, Instant> {
        timer.c().recv()
    }
}

mod context {
    use super::*;
    use gort::context::*;

    assert_value!(Context: Send & Sync & Unpin);
    assert_value!(CancelFn: Send & Sync & Unpin);
    assert_value!(CancelGuard: Send & Sync & Unpin);
    assert_value!(CancelCauseFn: Send & Sync & Unpin);
    assert_value!(AfterFunc: Send & Sync & Unpin);
    assert_value!(Error: Send & Sync & Unpin);
    async_assert_fn!(done_recv(&Context): Send & Sync & Unpin);

    fn done_recv(ctx: &Context) -> gort::chan::RecvFuture<'_, ()> {
        ctx.done().recv()
    }
}

mod sync {
    use super::*;
    use gort::sync::*;

    assert_value!(WaitGroup: Send & Sync & Unpin);
    assert_value!(ErrGroup<std::io::Error>: Send & Sync & Unpin);
    assert_value!(singleflight::Group<u32, YY>: Send & Sync & Unpin);
    assert_value!(singleflight::CallError: Send & Sync & Unpin);
    async_assert_fn!(WaitGroup::wait(_): Send & Sync & Unpin);
    async_assert_fn!(ErrGroup<std::io::Error>::wait(_): Send & Sync & !Unpin);
    async_assert_fn!(
        ErrGroup<std::io::Error>::spawn_limited(_, BoxFutureSend<std::io::Result<()>>): Send & !Sync & !Unpin
    );
    async_assert_fn!(singleflight_call(&singleflight::Group<u32, YY>): Send & Sync & !Unpin);

    fn singleflight_call(
        group: &singleflight::Group<u32, YY>,
    ) -> impl std::future::Future<Output = Result<(YY, bool), singleflight::CallError>> {
        group.call(1, || async { YY {} })
    }
}

fn is_unwind_safe<T: UnwindSafe + RefUnwindSafe>() {}

// unwindsafe.rs
#[test]
fn join_handle_is_unwind_safe() {
    is_unwind_safe::<gort::task::JoinHandle<()>>();
}

// unwindsafe.rs
#[test]
fn net_types_are_unwind_safe() {
    is_unwind_safe::<gort::net::TcpListener>();
    is_unwind_safe::<gort::net::TcpStream>();
    is_unwind_safe::<gort::net::UdpSocket>();
}

// unwindsafe.rs
#[test]
fn unix_net_types_are_unwind_safe() {
    is_unwind_safe::<gort::net::UnixDatagram>();
    is_unwind_safe::<gort::net::UnixListener>();
    is_unwind_safe::<gort::net::UnixStream>();
}

/// gort's runtime handles and channels, as Tokio's `Runtime`, `Handle`, `AbortHandle` and
/// `mpsc` channels are (Tokio implements the traits for them; `unwindsafe.rs` checks
/// `Notify`). Timers, contexts and `JoinSet` are not asserted yet.
#[test]
fn gort_types_are_unwind_safe() {
    is_unwind_safe::<gort::Runtime>();
    is_unwind_safe::<gort::Handle>();
    is_unwind_safe::<gort::task::AbortHandle>();
    is_unwind_safe::<gort::chan::Sender<()>>();
    is_unwind_safe::<gort::chan::Receiver<()>>();
    is_unwind_safe::<gort::sync::WaitGroup>();
}

/// What `JoinError: Sync` is for: `?` into the error types that ask for `Send + Sync`
/// (`Box<dyn Error + Send + Sync>`, anyhow's), as with Tokio's.
#[test]
fn join_error_converts_to_a_send_sync_error() {
    let rt = gort::Builder::new().procs(1).build().unwrap();
    let err: Box<dyn std::error::Error + Send + Sync> = rt.block_on(async {
        let h = gort::spawn(async { panic!("boom") });
        h.await.unwrap_err().into()
    });
    assert!(err.to_string().contains("boom"), "{err}");
}
