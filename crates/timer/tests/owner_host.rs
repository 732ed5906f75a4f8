//! A timer left pending in a heap and moved earlier wakes the heap's owner when the caller's
//! host is another runtime's, and the caller's host otherwise (`OwnerHost`).

mod common;

use std::sync::{Arc, Mutex};

use common::quiet;
use gort_timer::{modify, Host, Nanos, OwnerHost, Timer, Timers};

/// A runtime's host: records its wake-ups, knows its key.
struct Runtime {
    key: usize,
    wakes: Mutex<Vec<Nanos>>,
}

impl Runtime {
    fn new(key: usize) -> Arc<Runtime> {
        Arc::new(Runtime {
            key,
            wakes: Mutex::new(Vec::new()),
        })
    }

    fn heap(self: &Arc<Runtime>, id: usize) -> Timers {
        let me: Arc<dyn Host + Send + Sync> = self.clone();
        Timers::with_owner(id, OwnerHost::new(self.key, Arc::downgrade(&me)))
    }

    fn take(&self) -> Vec<Nanos> {
        std::mem::take(&mut *self.wakes.lock().unwrap())
    }
}

impl Host for Runtime {
    fn wake_netpoller(&self, when: Nanos) {
        self.wakes.lock().unwrap().push(when);
    }

    fn key(&self) -> usize {
        self.key
    }
}

/// A timer pending in `heap` at 1,000 with a silent callback.
fn pending_in(heap: &Timers) -> Arc<Timer> {
    let t = Timer::new();
    t.set_fire(Arc::new(|_| {}));
    heap.add(&t, 1_000, 0, &quiet());
    t
}

#[test]
fn moved_earlier_by_another_runtime_it_wakes_the_heaps_runtime() {
    let (a, b) = (Runtime::new(1), Runtime::new(2));
    let (heap_a, heap_b) = (a.heap(0), b.heap(0));
    let t = pending_in(&heap_a);
    assert!(
        modify(&t, 100, 0, &heap_b, &*b),
        "pending, so re-keyed in place"
    );
    assert_eq!(
        a.take(),
        [100],
        "the owner is woken for the earlier deadline"
    );
    assert!(
        b.take().is_empty(),
        "the caller's runtime has nothing to wake for"
    );
    assert_eq!(
        heap_a.check(100, true).ran,
        1,
        "it stayed in the owner's heap"
    );
    assert_eq!(heap_b.check(100, true).ran, 0);
}

#[test]
fn moved_earlier_by_its_own_runtime_it_wakes_through_the_callers_host() {
    let a = Runtime::new(1);
    let heap_a = a.heap(0);
    let t = pending_in(&heap_a);
    let calls = Mutex::new(Vec::new());
    // The caller's host of the same runtime (same key), e.g. a host that knows its thread's P.
    struct Same<'a>(&'a Mutex<Vec<Nanos>>);
    impl Host for Same<'_> {
        fn wake_netpoller(&self, when: Nanos) {
            self.0.lock().unwrap().push(when);
        }
        fn key(&self) -> usize {
            1
        }
    }
    assert!(modify(&t, 100, 0, &heap_a, &Same(&calls)));
    assert_eq!(*calls.lock().unwrap(), [100]);
    assert!(a.take().is_empty(), "no detour through the owner handle");
}

#[test]
fn moved_later_it_wakes_nobody_and_a_gone_owner_is_nothing_to_wake() {
    let (a, b) = (Runtime::new(1), Runtime::new(2));
    let heap_a = a.heap(0);
    let heap_b = b.heap(0);
    let t = pending_in(&heap_a);
    assert!(modify(&t, 5_000, 0, &heap_b, &*b));
    assert!(a.take().is_empty() && b.take().is_empty());
    // The owner runtime's handle is gone (only the heap, which it would own, is left).
    let weak_only = Runtime::new(3);
    let heap_c = weak_only.heap(1);
    let u = pending_in(&heap_c);
    drop(weak_only);
    assert!(modify(&u, 10, 0, &heap_b, &*b));
    assert!(
        b.take().is_empty(),
        "a gone owner is not replaced by the caller"
    );
    assert_eq!(heap_c.check(10, true).ran, 1);
}

#[test]
#[should_panic(expected = "key 0 names no runtime")]
fn an_owner_needs_a_key() {
    let a = Runtime::new(1);
    let me: Arc<dyn Host + Send + Sync> = a;
    let _ = OwnerHost::new(0, Arc::downgrade(&me));
}
