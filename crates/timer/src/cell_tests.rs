//! Unit tests of the cell's layout and counts (`cell.rs`); run under Miri too.

use super::*;
use std::mem::{align_of, offset_of, size_of};
use std::sync::atomic::{AtomicUsize as Count, Ordering::SeqCst};
use std::sync::Arc;

struct Nothing;

impl CellFire for Nothing {
    fn fire(_cell: CellRef<Self>, _when: Nanos) {}
}

/// A payload wider and more aligned than the timer.
#[repr(C, align(64))]
struct Wide {
    _bytes: [u8; 100],
}

/// What `header` and the reference tags rely on: the timer at the cell's address, the header
/// the same whatever the payload, and three free low bits in its address.
#[test]
fn the_header_is_the_same_whatever_the_payload() {
    assert_eq!(offset_of!(TimerCell<()>, header), 0);
    assert_eq!(offset_of!(TimerCell<Wide>, header), 0);
    assert_eq!(offset_of!(Header, timer), 0);
    assert!(offset_of!(TimerCell<u8>, payload) >= size_of::<Header>());
    assert!(offset_of!(TimerCell<Wide>, payload) >= size_of::<Header>());
    assert!(align_of::<Timer>() > crate::tref::TAGS);
    // The cell of a one-pointer payload with its counts: 88 bytes, a 96-byte glibc chunk
    // (104 and 112 with a 72-byte timer and a word per count).
    assert_eq!(size_of::<TimerCell<usize>>(), 88);
}

/// The counts of the cell behind `t`: (memory, holders).
fn counts(t: &CellTimer) -> (u64, u64) {
    // SAFETY: `t`'s holder reference keeps the cell.
    let h = unsafe { header(t.ptr.as_ptr()) };
    h.counts.load()
}

/// A cell reference adds to the memory count; the installed payload is a holder.
#[test]
fn cell_references_count_memory_and_the_payload_holds() {
    let t = CellTimer::new(Nothing);
    assert_eq!(counts(&t), (1, 1));
    let p = t.ptr.as_ptr().cast_const();
    let r = t.borrow_ref();
    assert!(r.is_cell());
    assert!(std::ptr::eq(r.as_ptr(), p));
    let weak = TimerRef::clone(&r);
    assert!(weak.is_cell());
    assert_eq!(counts(&t), (2, 1));
    let weak2 = weak.clone();
    assert_eq!(counts(&t), (3, 1));
    drop(weak);
    drop(weak2);
    assert_eq!(counts(&t), (1, 1));
    // SAFETY: `r` is a cell reference and `t` holds a holder meanwhile.
    let f = unsafe { r.cell_payload() };
    assert!(std::ptr::eq(f.as_ptr(), p));
    assert_eq!(counts(&t), (1, 2));
    drop(f);
    assert_eq!(counts(&t), (1, 1));
    assert!(TimerRef::clone(&r).into_arc().is_err());
}

/// Dropped once, by the last holder; the memory outlives it while a heap reference lives,
/// and the timer stays readable through that reference.
#[test]
fn the_last_holder_drops_the_callback_and_the_last_reference_frees() {
    struct Probe(Arc<Count>);
    impl CellFire for Probe {
        fn fire(cell: CellRef<Self>, _when: Nanos) {
            cell.payload().0.fetch_add(1, SeqCst);
        }
    }
    impl Drop for Probe {
        fn drop(&mut self) {
            self.0.fetch_add(100, SeqCst);
        }
    }
    let n = Arc::new(Count::new(0));
    let t = CellTimer::new(Probe(n.clone()));
    let heap = TimerRef::clone(&t.borrow_ref());
    // SAFETY: a cell reference, `t` holding meanwhile.
    let installed = unsafe { heap.cell_payload() };
    let kept = installed.clone();
    installed.fire(5);
    assert_eq!(n.load(SeqCst), 1);
    drop(t);
    assert_eq!(n.load(SeqCst), 1);
    drop(kept);
    assert_eq!(n.load(SeqCst), 101);
    assert_eq!(heap.status(), crate::Status::NoStatus);
    drop(heap);
    assert_eq!(Arc::strong_count(&n), 1);
}

/// A panicking drop of the callback still frees the cell once the references go.
#[test]
fn a_panicking_callback_drop_still_lets_go_of_the_memory() {
    struct Bomb;
    impl CellFire for Bomb {
        fn fire(_cell: CellRef<Self>, _when: Nanos) {}
    }
    impl Drop for Bomb {
        fn drop(&mut self) {
            panic!("drop");
        }
    }
    let t = CellTimer::new(Bomb);
    let heap = TimerRef::clone(&t.borrow_ref());
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(move || drop(t)));
    assert!(r.is_err());
    // SAFETY: the header is alive while `heap` is.
    assert_eq!(unsafe { header(heap.as_ptr()) }.counts.load().0, 1);
    drop(heap);
}

/// `into_raw` and `from_raw` keep the reference.
#[test]
fn a_cell_ref_round_trips_through_its_raw_pointer() {
    let t = CellTimer::new(Nothing);
    // SAFETY: a cell reference, `t` holding meanwhile.
    let h = unsafe { t.borrow_ref().cell_payload() };
    let p = ManuallyDrop::new(h).as_ptr();
    // SAFETY: adopts the holder just made.
    let r: CellRef<Nothing> = unsafe { CellRef::adopt(p) };
    let raw = CellRef::into_raw(r.clone());
    assert_eq!(counts(&t), (1, 3));
    // SAFETY: from `into_raw` of the same type.
    drop(unsafe { CellRef::<Nothing>::from_raw(raw) });
    drop(r);
    assert_eq!(counts(&t), (1, 1));
}

/// A heap entry keeps a cell reference's tag beside its own (bit 0, indexed): the timer,
/// a clone and the reference taken back are the cell's, whichever bits are set.
#[test]
fn entries_keep_the_cell_tag_beside_the_indexed_one() {
    use crate::entry::Entry;
    use gort_loom::atomic::Ordering::Relaxed;
    let t = CellTimer::new(Nothing);
    let p = t.ptr.as_ptr().cast_const();
    for promoted in [false, true] {
        if promoted {
            t.timer().index.store(0, Relaxed);
        }
        let e = Entry::new(7, TimerRef::clone(&t.borrow_ref()));
        assert_eq!(e.indexed(), promoted);
        assert!(std::ptr::eq(e.timer(), t.timer()));
        let c = e.clone_timer();
        assert!(c.is_cell() && std::ptr::eq(c.as_ptr(), p));
        assert_eq!(counts(&t), (3, 1));
        drop(c);
        let back = e.into_timer();
        assert!(back.is_cell() && std::ptr::eq(back.as_ptr(), p));
        drop(back);
        assert_eq!(counts(&t), (1, 1));
    }
}

/// The last holder drops the callback while another thread reads the timer through a heap's
/// reference and then lets go of the last one: the drop touches only the payload, so Miri
/// sees no conflict with the reads (with a std `Arc` cell, its drop's `&mut` of the whole
/// cell was one).
#[test]
fn the_last_holder_drops_while_a_heap_reads_the_timer() {
    let t = CellTimer::new(Box::new(5u8));
    let heap = TimerRef::clone(&t.borrow_ref());
    let reader = std::thread::spawn(move || {
        for _ in 0..20 {
            assert_eq!(heap.status(), crate::Status::NoStatus);
            std::thread::yield_now();
        }
        drop(heap);
    });
    std::thread::yield_now();
    drop(t);
    reader.join().unwrap();
}

impl CellFire for Box<u8> {
    fn fire(_cell: CellRef<Self>, _when: Nanos) {}
}

/// `add_cell` takes its plain-store path only for a cell its handle alone references, and
/// counts the installed payload and the heap's reference as `modify_cell` would; a cell that
/// a heap still holds is re-armed by `modify_cell` (pending, re-keyed lazily).
#[test]
fn add_cell_counts_like_modify_cell_and_falls_back_when_not_alone() {
    let timers = crate::Timers::new(0);
    let mut t = CellTimer::new(Nothing);
    assert!(t.is_alone());
    assert!(!crate::add_cell(&mut t, 10, 0, &timers, &|_| {}));
    assert_eq!(
        counts(&t),
        (2, 2),
        "the heap's reference and the installed payload"
    );
    assert_eq!(t.status(), crate::Status::Waiting);
    assert_eq!(timers.wake_time(), 10);
    assert!(!t.is_alone());
    // Held by the heap: re-armed lazily, as `modify_cell` does.
    assert!(crate::add_cell(&mut t, 5, 0, &timers, &|_| {}));
    assert_eq!(t.status(), crate::Status::ModifiedEarlier);
    assert_eq!(timers.check(5, true).ran, 1);
    // Fired and let go by the heap: alone again, and armed on the plain path.
    assert_eq!(counts(&t), (1, 1));
    assert!(!crate::add_cell(&mut t, 20, 0, &timers, &|_| {}));
    assert_eq!(counts(&t), (2, 2));
    assert!(t.stop());
    assert_eq!(counts(&t), (2, 1), "a stop drops the payload at once");
    assert_eq!(timers.check(20, true).ran, 0);
    assert_eq!(counts(&t), (1, 1), "the heap let go of the stopped timer");
    let stats = timers.stats();
    assert_eq!((stats.added, stats.stopped), (2, 1));
}
