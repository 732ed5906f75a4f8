//! Adversarial probes of `gort::sync::singleflight::Group`: leaders gone, keys whose `Drop`
//! or payloads misbehave, forget during a run, callers on foreign executors.

mod support;

use gort::sync::singleflight::{CallError, Group};
use std::sync::atomic::{AtomicBool, Ordering::SeqCst};
use std::sync::Arc;
use std::time::Duration;
use support::within;

fn rt(procs: usize) -> gort::Runtime {
    gort::Builder::new().procs(procs).build().unwrap()
}

/// A key whose `Drop` panics: the pilot frees the key and the callers still get the value.
#[derive(Clone, Debug)]
struct BadDropKey(u32, Arc<AtomicBool>);

impl PartialEq for BadDropKey {
    fn eq(&self, other: &Self) -> bool {
        self.0 == other.0
    }
}
impl Eq for BadDropKey {}
impl std::hash::Hash for BadDropKey {
    fn hash<H: std::hash::Hasher>(&self, h: &mut H) {
        self.0.hash(h);
    }
}

impl Drop for BadDropKey {
    fn drop(&mut self) {
        if self.1.load(SeqCst) {
            self.1.store(false, SeqCst); // once: a second panic in a drop would abort
            panic!("key drop panics");
        }
    }
}

#[test]
fn a_key_whose_drop_panics_still_gives_the_callers_the_value() {
    within(|| {
        rt(2).block_on(async {
            let group: Group<BadDropKey, u32> = Group::new();
            let armed = Arc::new(AtomicBool::new(false));
            let (go, wait_go) = gort::chan::bounded::<()>(0);
            let key = BadDropKey(1, armed.clone());
            let first = group.call(key.clone(), move || async move {
                wait_go.recv().await;
                7
            });
            let second = group.call(key.clone(), || async { unreachable!("joins") });
            drop(key);
            // The map's copy and the pilot's are the last: arm the next drop.
            armed.store(true, SeqCst);
            drop(go);
            let f = gort::time::timeout(Duration::from_secs(10), first).await;
            let s = gort::time::timeout(Duration::from_secs(10), second).await;
            assert_eq!(f.expect("hung"), Ok((7, true)));
            assert_eq!(s.expect("hung"), Ok((7, true)));
            assert_eq!(group.in_flight(), 0);
        });
    });
}

/// A panic payload whose own `Drop` panics: the callers get `Panicked`, not a hang.
struct BadPayload;
impl Drop for BadPayload {
    fn drop(&mut self) {
        panic!("payload drop panics");
    }
}

#[test]
fn a_panic_payload_whose_drop_panics_reaches_the_callers_as_a_panic() {
    within(|| {
        rt(2).block_on(async {
            let group: Group<u8, u8> = Group::new();
            let res = group
                .call(1, || async { std::panic::panic_any(BadPayload) })
                .await;
            assert!(matches!(res, Err(CallError::Panicked(_))), "{res:?}");
            assert_eq!(group.call(1, || async { 2 }).await, Ok((2, false)));
        });
    });
}

/// Leaders dropped at once, by timeout and by abort while followers on another runtime and on
/// a plain thread wait: the followers get the value; `forget` in the middle starts a new run
/// that the old run's end does not free.
#[test]
fn leaders_gone_and_forget_mid_run_leave_followers_their_value() {
    within(|| {
        let (a, b) = (rt(2), rt(1));
        let group: Group<&'static str, u32> = Group::new();
        let (go, wait_go) = gort::chan::bounded::<()>(0);
        let (leader, follower_b, follower_thread) = a.block_on(async {
            let leader = gort::spawn(group.call("k", move || async move {
                wait_go.recv().await;
                1
            }));
            let follower_b = b.spawn(group.call("k", || async { unreachable!("joins") }));
            let timed_out =
                gort::time::timeout(Duration::from_millis(5), group.call("k", || async { 9 }))
                    .await;
            assert!(timed_out.is_err(), "the run is held open");
            let follower_thread = group.call("k", || async { unreachable!("joins") });
            (leader, follower_b, follower_thread)
        });
        let thread = std::thread::spawn(move || futures::executor::block_on(follower_thread));
        leader.abort();
        a.block_on(async {
            group.forget("k");
            let (go2, wait_go2) = gort::chan::bounded::<()>(0);
            let fresh = group.call("k", move || async move {
                wait_go2.recv().await;
                2
            });
            drop(go); // the old run ends now: it must not free the fresh run's key
            assert_eq!(follower_b.await.unwrap(), Ok((1, true)));
            assert_eq!(
                group.in_flight(),
                1,
                "the old run freed the fresh run's key"
            );
            let joined = group.call("k", || async { unreachable!("joins the fresh run") });
            drop(go2);
            assert_eq!(fresh.await, Ok((2, true)));
            assert_eq!(joined.await, Ok((2, true)));
        });
        assert_eq!(thread.join().unwrap(), Ok((1, true)));
    });
}

/// A work that calls its own key through another task, with a timeout: its inner call waits
/// for itself (Go's deadlock) until the timeout, then the run ends for everybody.
#[test]
fn a_work_reentering_its_key_through_another_task_ends_with_its_timeout() {
    within(|| {
        rt(2).block_on(async {
            let group: Group<u8, Result<u8, String>> = Group::new();
            let g = group.clone();
            let res = group
                .call(1, move || async move {
                    let inner = gort::spawn(g.call(1, || async { Ok(5) }));
                    match gort::time::timeout(Duration::from_millis(30), inner).await {
                        Err(_) => Err("re-entered its own key".to_string()),
                        Ok(v) => Ok(v.unwrap().unwrap().0.unwrap()),
                    }
                })
                .await;
            assert_eq!(res, Ok((Err("re-entered its own key".to_string()), true)));
            assert_eq!(group.in_flight(), 0);
        });
    });
}
